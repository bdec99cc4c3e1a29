// Package steer points a node's published host ports at a container of the
// mesh's choosing, for the overlap cutover: a DNAT rule per port in a table
// of its own (ip adoption_steer), ahead of the engine's, replaced in one
// netlink transaction, so new connections go to the new container the
// moment the batch commits while established ones keep the address
// conntrack gave them. It never writes the found firewall's or the engine's
// tables. docs/firewall.md ("The overlap's steering") says how it works.
package steer

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"adoption/firewall/nft"
)

// Table is the table the steering lives in.
const Table = "adoption_steer"

// priority runs the steering before the engine's DNAT (dstnat, -100): the
// first NAT chain that binds a connection decides it.
var priority = nftables.ChainPriorityRef(*nftables.ChainPriorityNATDest - 10)

// owner is what may name a steering: a container name (Docker's rule).
var owner = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

// Target is one host port and where its new connections go.
type Target struct {
	HostPort uint16
	Addr     netip.Addr // the container's IPv4 address
	Port     uint16     // the container's port
	// Loopback, when set, is the port the engine publishes the container
	// on at 127.0.0.1: a connect from the node to 127.0.0.1:HostPort goes
	// there (a DNAT to the container's address would leave loopback).
	Loopback uint16
}

// Steer steers ports in the network namespace at netns ("" for the caller's).
type Steer struct {
	netns string
	node  string
}

// New steers ports of node in the namespace at netnsPath.
func New(netnsPath, node string) *Steer { return &Steer{netns: netnsPath, node: node} }

// Comment is the comment of the rule steering port for owner.
func Comment(node, owner string, port uint16) string {
	return fmt.Sprintf("adoption-steer:%s:%s:%d/tcp", node, owner, port)
}

func chains(t *nftables.Table, who string) (pre, out *nftables.Chain) {
	accept := nftables.ChainPolicyAccept
	pre = &nftables.Chain{Name: "pre-" + who, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: priority, Policy: &accept}
	out = &nftables.Chain{Name: "out-" + who, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: priority, Policy: &accept}
	return pre, out
}

// Point makes new TCP connections to each target's host port, on any of
// the node's own addresses (from outside, and from the node but for
// loopback), go to the target, replacing whatever who's rules pointed at
// before, in one transaction.
func (s *Steer) Point(who string, targets []Target) error {
	if !owner.MatchString(who) {
		return fmt.Errorf("steer: owner %q is not a container name", who)
	}
	for _, tg := range targets {
		if !tg.Addr.Is4() || tg.HostPort == 0 || tg.Port == 0 {
			return fmt.Errorf("steer ports of %s: target %d -> %s:%d is not an IPv4 address and two ports", who, tg.HostPort, tg.Addr, tg.Port)
		}
	}
	c, closeNS, err := nft.Dial(s.netns)
	if err != nil {
		return err
	}
	defer closeNS()
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: Table})
	pre, out := chains(t, who)
	c.AddChain(pre)
	c.AddChain(out)
	c.FlushChain(pre)
	c.FlushChain(out)
	for _, tg := range targets {
		ud := userdata.AppendString(nil, userdata.TypeComment, Comment(s.node, who, tg.HostPort))
		c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: dnatExprs(tg, false), UserData: ud})
		c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: dnatExprs(tg, true), UserData: ud})
		if tg.Loopback != 0 {
			c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: loopbackExprs(tg), UserData: ud})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("steer ports of %s in table ip %s: %w", who, Table, err)
	}
	return nil
}

// dnatExprs: meta l4proto tcp tcp dport P fib daddr type local [ip daddr
// != 127.0.0.0/8] dnat to A:Q.
func dnatExprs(tg Target, local bool) []expr.Any {
	es := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(tg.HostPort)},
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
	if local {
		es = append(es,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{127}})
	}
	a := tg.Addr.As4()
	return append(es,
		&expr.Immediate{Register: 1, Data: a[:]},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(tg.Port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true})
}

// loopbackExprs: meta l4proto tcp tcp dport P ip daddr 127.0.0.0/8 dnat
// to 127.0.0.1:L.
func loopbackExprs(tg Target) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(tg.HostPort)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127}},
		&expr.Immediate{Register: 1, Data: []byte{127, 0, 0, 1}},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(tg.Loopback)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// Remove removes who's steering, and the table with the last one. With
// nothing steered it does nothing.
func (s *Steer) Remove(who string) error {
	if !owner.MatchString(who) {
		return fmt.Errorf("steer: owner %q is not a container name", who)
	}
	c, closeNS, err := nft.Dial(s.netns)
	if err != nil {
		return err
	}
	defer closeNS()
	all, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("list chains: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: Table}
	pre, out := chains(t, who)
	mine, others := 0, 0
	for _, ch := range all {
		if ch.Table == nil || ch.Table.Name != Table {
			continue
		}
		if ch.Name == pre.Name || ch.Name == out.Name {
			mine++
			c.FlushChain(&nftables.Chain{Name: ch.Name, Table: t})
			c.DelChain(&nftables.Chain{Name: ch.Name, Table: t})
		} else {
			others++
		}
	}
	if mine == 0 && others > 0 {
		return nil
	}
	if others == 0 {
		if mine == 0 {
			if tt, err := c.ListTableOfFamily(Table, nftables.TableFamilyIPv4); err != nil || tt == nil {
				return nil
			}
		}
		c.DelTable(t)
	}
	if err := c.Flush(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the steering of %s from table ip %s: %w", who, Table, err)
	}
	return nil
}
