// This file holds finding the marks: one dump of every rule in the
// namespace, of which only the family, table, chain, handle and comment are
// read. Nothing is decoded, so a rule google/nftables cannot decode hides no
// mark, and removing the marks costs one round trip, not one per chain.

package marks

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/nft"
)

// findMarks returns the marked rules whose mark keep selects, in listing
// order (table, chain, position), through nc. The mesh's own table (after a
// flip) carries the same comments on its port rules, but they are its
// ruleset, not marks in a found one: they are left out. A dump the kernel
// marks as interrupted (the ruleset changed while it was read) is an
// ErrRulesetChanged: it may have missed a mark.
func findMarks(nc *netlink.Conn, keep func(Mark) bool) ([]MarkedRule, error) {
	msgs, err := nc.Execute(netlink.Message{
		Header: netlink.Header{Type: nft.NftMsg(unix.NFT_MSG_GETRULE), Flags: netlink.Request | netlink.Dump},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return nil, fmt.Errorf("listing the rules: %w", err)
	}
	var out []MarkedRule
	for _, msg := range msgs {
		if msg.Header.Flags&netlink.DumpInterrupted != 0 {
			return nil, fmt.Errorf("listing the rules: %w (the dump was interrupted)", nft.ErrRulesetChanged)
		}
		if msg.Header.Type != nft.NftMsg(unix.NFT_MSG_NEWRULE) {
			continue
		}
		e, ok := nft.ParseEcho(msg)
		if !ok {
			return nil, fmt.Errorf("listing the rules: a rule message could not be read")
		}
		if !firewall.IsIPFamily(e.Family) || firewall.TableOwner(&firewall.Table{Family: e.Family, Name: e.Table}).Owner == firewall.OwnedByMesh {
			continue
		}
		if mk, ok := ParseMark(e.Comment); ok && keep(mk) {
			out = append(out, MarkedRule{Mark: mk, Family: e.Family, Table: e.Table, Chain: e.Chain, Handle: e.Handle})
		}
	}
	return out, nil
}

// marks reads the generation and then the selected marked rules, so a
// batch planned on them is refused if anything changed since.
func sessionMarks(s *nft.Session, keep func(Mark) bool) (uint32, []MarkedRule, error) {
	nc, err := s.Raw()
	if err != nil {
		return 0, nil, err
	}
	gen, err := nft.Generation(nc)
	if err != nil {
		return 0, nil, err
	}
	rules, err := findMarks(nc, keep)
	if err != nil {
		return 0, nil, err
	}
	return gen, rules, nil
}
