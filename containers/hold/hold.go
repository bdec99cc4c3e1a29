// This file holds Hold: the hold table and its per-owner chains and sets,
// written and removed in one batch each, idempotent, so a resumed swap
// holds again and a rollback releases. A held port is an element of the
// owner's set with a timeout: the kernel lets go of it by itself at the
// bound, whatever becomes of the worker.

package hold

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"

	"adoption/firewall/nft"
	"adoption/netns"
)

// HoldTable is the table the holds live in.
const HoldTable = "adoption_hold"

// HoldBypassMark is the packet mark (SO_MARK) the hold lets through.
const HoldBypassMark = 0x41444f50 // "ADOP"

// holdOwner is what may name a chain: a container name (Docker's rule).
var holdOwner = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

// Hold holds ports in the network namespace at netns ("" for the caller's).
type Hold struct {
	netns string
	node  string
	mu    sync.Mutex
	// queues are the owners' SYN queues this process listens on (see
	// holdqueue.go); an owner without one is held by a plain drop, for
	// the reason in dropping.
	queues   map[string]*nfq
	dropping map[string]error
	nodeAddr string // NodeAddr's answer, once found
}

// NewHold holds ports of node in the namespace at netnsPath.
func NewHold(netnsPath, node string) *Hold {
	return &Hold{netns: netnsPath, node: node, queues: map[string]*nfq{}, dropping: map[string]error{}}
}

// Queued says whether owner's hold queues SYNs (released at once) rather
// than drops them (released by the client's retransmission).
func (h *Hold) Queued(owner string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queues[owner] != nil
}

// Dropping says why owner's hold drops SYNs instead of queueing them (the
// queue could not be bound, or the kernel refused the NFQUEUE rule); nil
// while it queues, or holds nothing.
func (h *Hold) Dropping(owner string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropping[owner]
}

// HoldCommentUDP is the comment of the rule holding UDP port for owner.
func HoldCommentUDP(node, owner string, port uint16) string {
	return fmt.Sprintf("adoption-hold:%s:%s:%d/udp", node, owner, port)
}

func holdChainName(owner string) string { return "hold-" + owner }

// HoldComment is the comment of the rule holding port for owner.
func HoldComment(node, owner string, port uint16) string {
	return fmt.Sprintf("adoption-hold:%s:%s:%d/tcp", node, owner, port)
}

// Hold holds new TCP connections (SYN without ACK) to ports, for owner,
// for at most bound (the kernel lets go by itself then), replacing any
// hold owner had. It queues them while this process listens; when the
// queue cannot be had it drops them, and Dropping says why.
func (h *Hold) Hold(owner string, ports []uint16, bound time.Duration) error {
	return h.HoldProto(owner, ports, nil, bound)
}

// HoldProto is Hold for TCP ports tcp and, besides, every datagram to the
// UDP ports udp: a UDP service has no handshake, so each datagram waits
// in the same queue (or is dropped, as a SYN is) until the release.
func (h *Hold) HoldProto(owner string, ports, udp []uint16, bound time.Duration) error {
	if !holdOwner.MatchString(owner) {
		return fmt.Errorf("hold: owner %q is not a container name", owner)
	}
	if bound < time.Second {
		return fmt.Errorf("hold ports of %s: bound %s is under a second", owner, bound)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[owner]
	var why error
	if q == nil {
		nq, err := openQueue(h.netns, queueNum(owner))
		if err != nil {
			why = fmt.Errorf("open SYN queue %d: %w", queueNum(owner), err)
		}
		q = nq
	}
	err := h.write(owner, ports, udp, bound, q)
	if err != nil && q != nil {
		// The kernel may lack the NFQUEUE target: hold by dropping.
		why = fmt.Errorf("write the NFQUEUE rule: %w", err)
		q.close()
		q = nil
		err = h.write(owner, ports, udp, bound, nil)
	}
	if q != nil {
		h.queues[owner] = q
		delete(h.dropping, owner)
	} else {
		delete(h.queues, owner)
		h.dropping[owner] = why
	}
	return err
}

func holdSet(t *nftables.Table, owner string) *nftables.Set {
	return &nftables.Set{Table: t, Name: holdChainName(owner), KeyType: nftables.TypeInetService, HasTimeout: true}
}

// write replaces owner's hold rules and set in one batch: each SYN to
// ports and each datagram to udp queued to q, or dropped when q is nil,
// until bound. The set holds every held port (of either protocol) with its
// timeout; each rule names its protocol and port itself.
func (h *Hold) write(owner string, ports, udp []uint16, bound time.Duration, q *nfq) error {
	c, closeNS, err := nft.Dial(h.netns)
	if err != nil {
		return err
	}
	defer closeNS()
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: HoldTable})
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: holdChainName(owner), Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw, Policy: &accept})
	c.FlushChain(ch)
	set := holdSet(t, owner)
	var elems []nftables.SetElement
	inSet := map[uint16]bool{}
	for _, p := range append(append([]uint16(nil), ports...), udp...) {
		if !inSet[p] {
			inSet[p] = true
			elems = append(elems, nftables.SetElement{Key: binaryutil.BigEndian.PutUint16(p), Timeout: bound})
		}
	}
	if err := c.AddSet(set, nil); err != nil {
		return fmt.Errorf("hold ports of %s: set: %w", owner, err)
	}
	c.FlushSet(set)
	if err := c.SetAddElements(set, elems); err != nil {
		return fmt.Errorf("hold ports of %s: set elements: %w", owner, err)
	}
	var verdict expr.Any = &expr.Verdict{Kind: expr.VerdictDrop}
	if q != nil {
		// xt_NFQ_info_v1: queue number, queues total (native endian); no
		// bypass flag, so with no listener the kernel drops.
		info := make(xt.Unknown, 4)
		binary.NativeEndian.PutUint16(info[0:], q.num)
		binary.NativeEndian.PutUint16(info[2:], 1)
		verdict = &expr.Target{Name: "NFQUEUE", Rev: 1, Info: &info}
	}
	for _, p := range ports {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(holdExprs(p, set), verdict),
			UserData: userdata.AppendString(nil, userdata.TypeComment, HoldComment(h.node, owner, p))})
	}
	for _, p := range udp {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(datagramExprs(p, set), verdict),
			UserData: userdata.AppendString(nil, userdata.TypeComment, HoldCommentUDP(h.node, owner, p))})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("hold ports %v/tcp %v/udp for %s in table inet %s: %w", ports, udp, owner, HoldTable, err)
	}
	return nil
}

// holdExprs: meta l4proto tcp tcp dport P tcp dport @set tcp flags &
// (syn|ack) == syn meta mark != HoldBypassMark; the verdict follows. The
// set's element for P times out at the hold's bound.
func holdExprs(port uint16, set *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(HoldBypassMark)},
	}
}

// datagramExprs: meta l4proto udp udp dport P udp dport @set meta mark !=
// HoldBypassMark; the verdict follows.
func datagramExprs(port uint16, set *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(HoldBypassMark)},
	}
}

// Release removes owner's hold, and the table once no hold is left. With
// nothing held it does nothing.
func (h *Hold) Release(owner string) error {
	if !holdOwner.MatchString(owner) {
		return fmt.Errorf("release hold: owner %q is not a container name", owner)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c, closeNS, err := nft.Dial(h.netns)
	if err != nil {
		return err
	}
	defer closeNS()
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("list chains: %w", err)
	}
	var mine *nftables.Chain
	others := 0
	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name != HoldTable {
			continue
		}
		if ch.Name == holdChainName(owner) {
			mine = ch
		} else {
			others++
		}
	}
	delete(h.dropping, owner)
	if q := h.queues[owner]; mine == nil && q != nil {
		_ = q.release()
		q.close()
		delete(h.queues, owner)
	}
	if mine == nil && others > 0 {
		return nil
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: HoldTable}
	if mine == nil {
		// Perhaps an empty table left behind: remove it if it is there.
		if tt, err := c.ListTableOfFamily(HoldTable, nftables.TableFamilyINet); err != nil || tt == nil {
			return nil
		}
		c.DelTable(t)
		if err := c.Flush(); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove table inet %s: %w", HoldTable, err)
		}
		return nil
	}
	mine.Table = t
	q := h.queues[owner]
	var qerr error
	if q != nil {
		// The queued SYNs are let go first, and each one queued until the
		// rules are gone as it arrives.
		qerr = q.release()
	}
	c.FlushChain(mine)
	c.DelChain(mine)
	c.DelSet(holdSet(t, owner))
	if others == 0 {
		c.DelTable(t)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("release the hold of %s in table inet %s: %w", owner, HoldTable, err)
	}
	if q != nil {
		if err := q.drain(); err != nil && qerr == nil {
			qerr = err
		}
		q.close()
		delete(h.queues, owner)
		if qerr != nil {
			return fmt.Errorf("let the held connections of %s go: %w", owner, qerr)
		}
	}
	return nil
}

// Dial connects to addr (TCP) from the hold's network namespace, with the
// bypass mark: it is the node's own view of whether the port answers.
func (h *Hold) Dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, HoldBypassMark)
		}); err != nil {
			return err
		}
		return serr
	}}
	if h.netns == "" {
		return d.DialContext(ctx, "tcp", addr)
	}
	return netns.Dial(ctx, h.netns, &d, addr)
}

// NodeAddr is the first IPv4 address of the namespace's own that is not
// loopback (a global unicast one): a connect from the node to a published
// port there goes through the engine's DNAT, as a client's from outside
// does. "" when the namespace has none.
func (h *Hold) NodeAddr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nodeAddr != "" {
		return h.nodeAddr
	}
	_ = netns.Do(h.netns, func() error {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				h.nodeAddr = ipn.IP.String()
				return nil
			}
		}
		return nil
	})
	return h.nodeAddr
}
