// This file holds the marks on the forward path: a module's published port
// (a host port Docker DNATs to its container) opened where forwarded
// traffic is decided, keyed on what survives the container's recreation.

package firewall

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"adoption/config"
)

// forwardMarkExprs is the accept for a published host port: a new
// connection that was DNATed and whose original destination port (the one
// the client used) is port. Neither the container's address nor its port
// appears, so the rule still matches after the container is recreated with
// a new address. In an iptables-nft table it is written as iptables writes
// "-p tcp -m conntrack --ctstate DNAT --ctorigdstport N -j ACCEPT" (so
// iptables-save and ufw read it); in a native table as nft writes "meta
// l4proto tcp ct status dnat ct original proto-dst N accept".
func forwardMarkExprs(t *Table, port uint16, proto string) []expr.Any {
	p := l4num(proto)
	ex := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
	if isIptablesTable(t) {
		info := &xt.ConntrackMtinfo3{}
		info.MatchFlags = uint16(xt.ConntrackState | xt.ConntrackOrigDstPort)
		info.StateMask = xtCtStateDNAT
		info.OrigDstPort, info.OrigDstPortHigh = port, port // rev 3: a host-order range
		ex = append(ex, &expr.Match{Name: "conntrack", Rev: 3, Info: info})
	} else {
		ex = append(ex, ctBits(expr.CtKeySTATUS, ipsDstNAT, expr.VerdictAccept)...)
		ex = ex[:len(ex)-1]
		ex = append(ex,
			&expr.Ct{Key: expr.CtKeyPROTODST, Register: 1, Direction: 0},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)})
	}
	return append(ex, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept})
}

// forwardPlacements says where a forward mark for (proto, port) takes
// effect, per iptables-nft filter table (ip and ip6) and native table:
//
//   - ufw's ufw-user-forward (ufw6-user-forward), where its routed rules live
//     and where the ufw-docker arrangement sends DOCKER-USER;
//   - else Docker's DOCKER-USER, the hook Docker leaves to the operator;
//   - else the FORWARD base chain, and in a native table each filter base
//     chain at the forward hook that could drop the connection.
//
// In the chain chosen the mark goes after the last of the found firewall's
// source denies (a drop, reject or jump that names sources: "ufw route deny
// from ...", a blocklist set), so a denied source stays denied, and, in a
// base chain, before the first rule that could drop the connection. A
// chain that could not be listed is an error: where the mark would go
// cannot be decided.
func forwardPlacements(rs *Ruleset, proto string, port uint16) ([]placement, error) {
	var out []placement
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		chains := forwardChains(t)
		for _, ch := range chains {
			if ch.Unknown != "" {
				return nil, fmt.Errorf("chain %s %s %s could not be listed (%s): cannot tell where a forward mark would take effect", t.Family, t.Name, ch.Name, ch.Unknown)
			}
			p := placement{table: t, chain: ch}
			from := 0
			for i := range ch.Rules {
				if sourceDeny(&ch.Rules[i]) {
					from = i + 1
				}
			}
			at := -1
			if ch.Hook != "" {
				for i := from; i < len(ch.Rules); i++ {
					if couldDropForward(t.Family, &ch.Rules[i], proto, port) {
						at = i
						break
					}
				}
				if at < 0 && ch.Policy != "drop" {
					continue // this base chain never drops the connection
				}
			} else if from < len(ch.Rules) {
				at = from
			}
			switch {
			case at >= 0:
				p.before = ch.Rules[at].Handle
			case from == 0 && len(ch.Rules) == 0, from >= len(ch.Rules):
				p.append = true
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// forwardChains are the chains of t where a forward mark may go (see
// forwardPlacements); forwardPlacements reads the rules of these only.
func forwardChains(t *Table) []*Chain {
	if !isIPFamily(t.Family) || TableOwner(t).Owner == OwnedByForeign || isMeshTable(t) {
		return nil
	}
	if isIptablesTable(t) {
		if t.Name != "filter" {
			return nil
		}
		for _, name := range []string{"ufw-user-forward", "ufw6-user-forward", "DOCKER-USER"} {
			if ch := chainNamed(t, name); ch != nil {
				return []*Chain{ch}
			}
		}
	}
	var chains []*Chain
	for ci := range t.Chains {
		ch := &t.Chains[ci]
		if ch.Hook == HookForward && isFilter(ch) && ChainOwner(t, ch).Owner != OwnedByForeign {
			chains = append(chains, ch)
		}
	}
	return chains
}

func chainNamed(t *Table, name string) *Chain {
	for ci := range t.Chains {
		if t.Chains[ci].Name == name {
			return &t.Chains[ci]
		}
	}
	return nil
}

// sourceDeny reports whether r denies by source: a drop-like verdict on a
// condition that names source addresses.
func sourceDeny(r *Rule) bool {
	if !dropLike(r.Verdict.Kind) && r.VMap == nil {
		return false
	}
	for _, c := range r.Conds {
		if c.Kind == CondSaddr {
			return true
		}
	}
	return false
}

// couldDropForward is couldDrop for a DNATed connection to host port port:
// its destination address, port and output interface after the DNAT are
// whatever Docker gives the container, so conditions on them are never
// ruled out.
func couldDropForward(family string, r *Rule, proto string, port uint16) bool {
	fams := []string{family}
	if family == FamilyInet {
		fams = []string{FamilyIP, FamilyIP6}
	}
	for _, fam := range fams {
		pkt := packet{hook: HookForward, family: fam, proto: l4num(proto), origPort: port, dnat: true, src: atom{other: true}}
		hold := func(conds []Cond) bool {
			for i := range conds {
				switch conds[i].Kind {
				case CondSaddr, CondDport, CondDaddr, CondOifname:
					continue
				}
				if pkt.cond(&conds[i]) == triFalse {
					return false
				}
			}
			return true
		}
		if !hold(r.Conds) {
			continue
		}
		if r.VMap == nil {
			if dropLike(r.Verdict.Kind) {
				return true
			}
			continue
		}
		for i := range r.VMap {
			if dropLike(r.VMap[i].Verdict.Kind) && hold([]Cond{r.VMap[i].Cond}) {
				return true
			}
		}
	}
	return false
}

// OpenForward makes every published host port in ports reachable for owner
// through the found firewall's forward path: one marked accept per port in
// every chain where it takes effect (forwardPlacements), IPv4 and IPv6.
// The mark is the same adoption:<node>:<owner>:<port>/<proto> comment as an
// input mark, so Close and Release remove both. Marks already there are
// reported as present. One batch, applied only at the listed generation;
// nothing is changed on any error.
func (m *Marker) OpenForward(node, owner string, ports []config.Port) (added, present []MarkedRule, err error) {
	return m.openOn(forwardPath, node, owner, ports)
}

var forwardPath = markPath{
	what:       "published ports",
	chains:     func(t *Table, ch *Chain) bool { return slices.Contains(forwardChains(t), ch) },
	placements: forwardPlacements,
	exprs:      func(in insertion) []expr.Any { return forwardMarkExprs(in.at.table, in.mark.Port, in.mark.Proto) },
}

// checkMarks validates names and ports and returns one mark per distinct
// port, in order.
func checkMarks(node, owner string, ports []config.Port) ([]Mark, error) {
	errs := []error{validNames(node, owner)}
	if owner == "" {
		errs = append(errs, fmt.Errorf("owner name is empty"))
	}
	var marks []Mark
	seen := map[Mark]bool{}
	for _, p := range ports {
		mk := Mark{Node: node, Owner: owner, Port: p.Num, Proto: p.Proto}
		switch {
		case p.Num == 0:
			errs = append(errs, fmt.Errorf("port %s: 0 is not a port, want 1-65535", p))
		case p.Proto != "tcp" && p.Proto != "udp":
			errs = append(errs, fmt.Errorf("port %s: protocol %q is not tcp or udp", p, p.Proto))
		case errs[0] == nil && len(mk.Comment()) > maxCommentLen:
			errs = append(errs, fmt.Errorf("port %s: comment %q is longer than the %d bytes a rule comment holds", p, mk.Comment(), maxCommentLen))
		case !seen[mk]:
			seen[mk] = true
			marks = append(marks, mk)
		}
	}
	return marks, errors.Join(errs...)
}
