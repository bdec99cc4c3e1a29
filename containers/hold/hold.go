// This file holds Hold: the hold table and its per-owner chains, written
// and removed in one batch each, idempotent, so a resumed swap holds again
// and a rollback releases.

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
	// holdqueue.go); an owner without one is held by a plain drop.
	queues map[string]*nfq
}

// NewHold holds ports of node in the namespace at netnsPath.
func NewHold(netnsPath, node string) *Hold {
	return &Hold{netns: netnsPath, node: node, queues: map[string]*nfq{}}
}

// Queued says whether owner's hold queues SYNs (released at once) rather
// than drops them (released by the client's retransmission).
func (h *Hold) Queued(owner string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queues[owner] != nil
}

func holdChainName(owner string) string { return "hold-" + owner }

// HoldComment is the comment of the rule holding port for owner.
func HoldComment(node, owner string, port uint16) string {
	return fmt.Sprintf("adoption-hold:%s:%s:%d/tcp", node, owner, port)
}

// Hold drops new TCP connections (SYN without ACK) to ports, for owner,
// replacing any hold owner had.
func (h *Hold) Hold(owner string, ports []uint16) error {
	if !holdOwner.MatchString(owner) {
		return fmt.Errorf("hold: owner %q is not a container name", owner)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[owner]
	if q == nil {
		// No queue (the kernel or the socket refuses): a plain drop.
		if nq, err := openQueue(h.netns, queueNum(owner)); err == nil {
			q = nq
		}
	}
	err := h.write(owner, ports, q)
	if err != nil && q != nil {
		// The kernel may lack the NFQUEUE target: hold by dropping.
		q.close()
		q = nil
		err = h.write(owner, ports, nil)
	}
	if q != nil {
		h.queues[owner] = q
	} else {
		delete(h.queues, owner)
	}
	return err
}

// write replaces owner's hold rules in one batch: each SYN to ports queued
// to q, or dropped when q is nil.
func (h *Hold) write(owner string, ports []uint16, q *nfq) error {
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
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(holdExprs(p), verdict),
			UserData: userdata.AppendString(nil, userdata.TypeComment, HoldComment(h.node, owner, p))})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("hold ports %v for %s in table inet %s: %w", ports, owner, HoldTable, err)
	}
	return nil
}

// holdExprs: meta l4proto tcp tcp dport P tcp flags & (syn|ack) == syn
// meta mark != HoldBypassMark; the verdict follows.
func holdExprs(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
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
	if q := h.queues[owner]; mine == nil && q != nil {
		_ = q.acceptAll()
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
	if q := h.queues[owner]; q != nil {
		// No new SYN is queued once the rules are gone; the queued ones
		// are let go at once, before the chain goes (its removal would
		// drop them).
		c.FlushChain(mine)
		if err := c.Flush(); err != nil {
			return fmt.Errorf("release the hold of %s in table inet %s: %w", owner, HoldTable, err)
		}
		err := q.drain()
		q.close()
		delete(h.queues, owner)
		if err != nil {
			return fmt.Errorf("let the held connections of %s go: %w", owner, err)
		}
	}
	c.FlushChain(mine)
	c.DelChain(mine)
	if others == 0 {
		c.DelTable(t)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("release the hold of %s in table inet %s: %w", owner, HoldTable, err)
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
