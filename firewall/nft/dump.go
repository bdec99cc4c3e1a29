// This file holds the rule dumps: every rule of a table in one netlink
// dump (google/nftables asks for one chain at a time, a round trip per
// chain), and the rewrite that lets google/nftables read the ct direction
// the kernel sends as a u8.

package nft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

// errDumpInterrupted is returned when the kernel flagged a dump as
// inconsistent: the ruleset changed while it was dumped.
var errDumpInterrupted = errors.New("the ruleset changed while it was dumped")

// dumpRules lists the rules of table t through nc, a netfilter socket in
// the namespace listed: of chain ch, or of every chain of t in one dump
// when ch is nil. The request goes through a google/nftables connection
// that forwards it to nc (without the chain when ch is nil), so the
// library still decodes each rule and names its chain. widen rewrites
// every ct direction in the answer (widenCtDirection).
func dumpRules(nc *netlink.Conn, t *nftables.Table, ch *nftables.Chain, widen bool) ([]*nftables.Rule, error) {
	interrupted := false
	proxy, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if len(req) != 1 {
			return nil, nil
		}
		out := req[0]
		out.Header.Sequence, out.Header.PID = 0, 0 // the real socket numbers it
		if ch == nil {
			attrs, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_RULE_TABLE, Data: []byte(t.Name + "\x00")}})
			if err != nil {
				return nil, err
			}
			out.Data = append(out.Data[:4:4], attrs...)
		}
		msgs, err := nc.Execute(out)
		if err != nil {
			return nil, err
		}
		for i := range msgs {
			interrupted = interrupted || msgs[i].Header.Flags&netlink.DumpInterrupted != 0
			if widen && len(msgs[i].Data) > 4 {
				msgs[i].Data = append(msgs[i].Data[:4:4], widenCtDirection(msgs[i].Data[4:], 0)...)
			}
			msgs[i].Header.Sequence, msgs[i].Header.PID = req[0].Header.Sequence, nltest.PID
		}
		// The real socket dropped the dump's "done"; nltest hands out a
		// multi-part answer without its last message, taking it for that.
		done := netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi,
			Sequence: req[0].Header.Sequence, PID: nltest.PID}, Data: make([]byte, 4)}
		return append(msgs, done), nil
	}))
	if err != nil {
		return nil, err
	}
	asked := ch
	if asked == nil {
		asked = &nftables.Chain{} // the proxy leaves the chain out
	}
	rules, err := proxy.GetRules(t, asked)
	if interrupted {
		return nil, errDumpInterrupted
	}
	return rules, err
}

// tableRules is every rule of table t by chain name, from one dump through
// nc (a second, rewritten, when google/nftables refuses a ct direction).
func tableRules(nc *netlink.Conn, t *nftables.Table) (map[string][]*nftables.Rule, error) {
	rules, err := dumpRules(nc, t, nil, false)
	if ctDirectionRefused(err) {
		rules, err = dumpRules(nc, t, nil, true)
	}
	if err != nil {
		return nil, err
	}
	byChain := map[string][]*nftables.Rule{}
	for _, r := range rules {
		if r.Chain != nil {
			byChain[r.Chain.Name] = append(byChain[r.Chain.Name], r)
		}
	}
	return byChain, nil
}

// chainRules lists the rules of chain ch of table t through c, one
// request, listing again rewritten when google/nftables refuses a ct
// direction.
func chainRules(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain) ([]*nftables.Rule, error) {
	rules, err := c.GetRules(t, ch)
	if !ctDirectionRefused(err) {
		return rules, err
	}
	if c.TestDial != nil {
		return nil, fmt.Errorf("rules of chain %s not listed (a test connection)", ch.Name)
	}
	nc, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: c.NetNS})
	if err != nil {
		return nil, fmt.Errorf("opening netlink: %w", err)
	}
	defer nc.Close()
	return dumpRules(nc, t, ch, true)
}

// ctDirectionRefused tells google/nftables v0.3.0's refusal of a ct
// direction: it reads the u8 the kernel dumps for "ct original proto-dst"
// as a u32 and refuses the whole dump.
func ctDirectionRefused(err error) bool {
	return err != nil && strings.Contains(err.Error(), "is not a uint32; length: 1")
}

// widenCtDirection rewrites netlink attributes b at nesting level depth:
// 0 rule, 1 expression list, 2 expression, 3 ct expression data.
func widenCtDirection(b []byte, depth int) []byte {
	var out []byte
	ct := false
	if depth == 2 {
		// Whether this expression is "ct" decides how its data is read.
		for r := b; len(r) >= 4; {
			l := int(binary.NativeEndian.Uint16(r[0:2]))
			if l < 4 || l > len(r) {
				break
			}
			if binary.NativeEndian.Uint16(r[2:4])&^unix.NLA_F_NESTED == unix.NFTA_EXPR_NAME {
				ct = string(bytes.TrimRight(r[4:l], "\x00")) == "ct"
			}
			r = r[min((l+3)&^3, len(r)):]
		}
	}
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		raw := binary.NativeEndian.Uint16(b[2:4])
		typ := raw &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < 4 || l > len(b) {
			return append(out, b...)
		}
		payload := b[4:l]
		switch {
		case depth == 0 && typ == unix.NFTA_RULE_EXPRESSIONS,
			depth == 1 && typ == unix.NFTA_LIST_ELEM,
			depth == 2 && ct && typ == unix.NFTA_EXPR_DATA:
			payload = widenCtDirection(payload, depth+1)
		case depth == 3 && typ == unix.NFTA_CT_DIRECTION && len(payload) == 1:
			payload = []byte{0, 0, 0, payload[0]}
		}
		hdr := make([]byte, 4)
		binary.NativeEndian.PutUint16(hdr[0:2], uint16(4+len(payload)))
		binary.NativeEndian.PutUint16(hdr[2:4], raw)
		out = append(out, hdr...)
		out = append(out, payload...)
		for len(out)%4 != 0 {
			out = append(out, 0)
		}
		next := (l + 3) &^ 3
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	return out
}
