// This file holds the listing: it reads tables, chains, sets and rules
// through netlink and hands each rule to the decoder (decode_expr.go).

package nft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// List reads the whole ruleset through c and decodes it into the model. It
// only reads: a decoded rule is never written back, because google/nftables
// silently drops expressions it cannot decode and a rewrite would change the
// rule.
func List(c *nftables.Conn) (*firewall.Ruleset, error) { return listSome(c, nil) }

// listSome is List reading the rules, and the sets they look up, only of
// the chains wants selects (nil: every chain) and of the chains those jump
// or go to, transitively. wants sees each table with all its chains, none
// of them with rules yet. A chain left out has no rules in the result, so
// the result serves only a plan that reads the chains it selected: a
// mark's, listed in one round trip per chain it may go to (and per chain
// reached from it) instead of one per chain in the ruleset.
func listSome(c *nftables.Conn, wants func(t *firewall.Table, ch *firewall.Chain) bool) (*firewall.Ruleset, error) {
	tables, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("listing nftables tables: %w", err)
	}
	chains, err := c.ListChains()
	if err != nil {
		return nil, fmt.Errorf("listing nftables chains: %w", err)
	}
	rs := &firewall.Ruleset{}
	var ipsets map[uint16]*IPSet
	if c.TestDial == nil {
		// Unread (nil), a match on an ipset stays undecidable.
		ipsets, _ = IPSets(c.NetNS)
	}
	for _, t := range tables {
		tbl := firewall.Table{Family: familyName(t.Family), Name: t.Name}
		var tchains []*nftables.Chain
		for _, ch := range chains {
			if ch.Table == nil || ch.Table.Name != t.Name || ch.Table.Family != t.Family {
				continue
			}
			mc := firewall.Chain{Name: ch.Name, Type: string(ch.Type)}
			if ch.Hooknum != nil {
				mc.Hook = hookName(tbl.Family, *ch.Hooknum)
				if ch.Priority != nil {
					mc.Priority = int(*ch.Priority)
				}
				mc.Policy = "accept"
				if ch.Policy != nil && *ch.Policy == nftables.ChainPolicyDrop {
					mc.Policy = "drop"
				}
			}
			tbl.Chains = append(tbl.Chains, mc)
			tchains = append(tchains, ch)
		}
		want := make([]bool, len(tbl.Chains))
		anyWanted := false
		for i := range tbl.Chains {
			want[i] = wants == nil || wants(&tbl, &tbl.Chains[i])
			anyWanted = anyWanted || want[i]
		}
		sets := map[string]*firewall.Set{}
		if firewall.IsIPFamily(tbl.Family) && (wants == nil || anyWanted) {
			nsets, err := c.GetSets(t)
			if err != nil {
				// One set of a type google/nftables does not know makes the
				// whole dump fail; lookups into this table's sets then stay
				// undecidable instead of failing the listing.
				tbl.Unknown = append(tbl.Unknown, fmt.Sprintf("sets not listed: %v", err))
			}
			for _, s := range nsets {
				ms := firewall.Set{
					Name: s.Name, Anonymous: s.Anonymous, Interval: s.Interval,
					Concat: s.Concatenation, IsMap: s.IsMap, KeyLen: int(s.KeyType.Bytes),
				}
				elems, err := c.GetSetElements(s)
				if err != nil {
					tbl.Unknown = append(tbl.Unknown, fmt.Sprintf("elements of set %s not listed: %v", s.Name, err))
					continue
				}
				for _, e := range elems {
					me := firewall.SetElement{Key: e.Key, IntervalEnd: e.IntervalEnd}
					if e.VerdictData != nil {
						v := verdictOf(e.VerdictData)
						me.Verdict = &v
					} else if s.IsMap && len(e.Val) >= 4 && !e.IntervalEnd {
						// google/nftables keeps verdict map data as raw bytes.
						if v, ok := rawVerdict(e.Val); ok {
							me.Verdict = &v
						}
					}
					ms.Elements = append(ms.Elements, me)
				}
				tbl.Sets = append(tbl.Sets, ms)
			}
			for i := range tbl.Sets {
				sets[tbl.Sets[i].Name] = &tbl.Sets[i]
			}
		}
		setsKnown := len(tbl.Unknown) == 0
		listed := make([]bool, len(tbl.Chains))
		for more := true; more; {
			more = false
			for i, ch := range tchains {
				if !want[i] || listed[i] {
					continue
				}
				listed[i] = true
				listRules(c, t, ch, tbl.Family, &tbl.Chains[i], sets, setsKnown, ipsets)
				// What a selected chain jumps to decides with it (a jump
				// into a chain of source denies is one): list it too.
				for ri := range tbl.Chains[i].Rules {
					for _, name := range firewall.Targets(&tbl.Chains[i].Rules[ri]) {
						for j := range tbl.Chains {
							if tbl.Chains[j].Name == name && !want[j] {
								want[j], more = true, true
							}
						}
					}
				}
			}
		}
		rs.Tables = append(rs.Tables, tbl)
	}
	return rs, nil
}

// listRules lists the rules of chain ch of table t (of family) and decodes
// them into mc.
func listRules(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain, family string, mc *firewall.Chain, sets map[string]*firewall.Set, setsKnown bool, ipsets map[uint16]*IPSet) {
	rules, err := c.GetRules(t, ch)
	if err != nil && strings.Contains(err.Error(), "is not a uint32; length: 1") {
		// google/nftables v0.3.0 reads ct's direction (a u8 the
		// kernel dumps for "ct original proto-dst") as a u32 and
		// refuses the whole chain: list it again with the
		// attribute widened.
		rules, err = rulesWidened(c, t, ch)
	}
	if err != nil {
		mc.Unknown = fmt.Sprintf("rules not listed: %v", err)
	}
	if firewall.IsIPFamily(family) {
		d := Decoder{Family: family, Sets: sets, SetsKnown: setsKnown, IPSets: ipsets}
		for _, r := range rules {
			mc.Rules = append(mc.Rules, d.Rule(r))
		}
		return
	}
	for _, r := range rules {
		mc.Rules = append(mc.Rules, otherFamilyRule(r, family))
	}
}

func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return firewall.FamilyIP
	case nftables.TableFamilyIPv6:
		return firewall.FamilyIP6
	case nftables.TableFamilyINet:
		return firewall.FamilyInet
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprintf("family%d", f)
}

func hookName(family string, h nftables.ChainHook) string {
	if family == "arp" {
		// NF_ARP_IN, NF_ARP_OUT, NF_ARP_FORWARD
		switch h {
		case 0:
			return firewall.HookInput
		case 1:
			return "output"
		case 2:
			return firewall.HookForward
		}
		return fmt.Sprintf("hook%d", h)
	}
	if family == "netdev" {
		switch h {
		case *nftables.ChainHookIngress:
			return "ingress"
		case *nftables.ChainHookEgress:
			return "egress"
		}
		return fmt.Sprintf("hook%d", h)
	}
	switch h {
	case *nftables.ChainHookPrerouting:
		return "prerouting"
	case *nftables.ChainHookInput:
		return firewall.HookInput
	case *nftables.ChainHookForward:
		return firewall.HookForward
	case *nftables.ChainHookOutput:
		return "output"
	case *nftables.ChainHookPostrouting:
		return "postrouting"
	case 5:
		return "ingress" // inet ingress (NF_INET_INGRESS)
	}
	return fmt.Sprintf("hook%d", h)
}

func verdictOf(v *expr.Verdict) firewall.Verdict {
	switch v.Kind {
	case expr.VerdictAccept:
		return firewall.Verdict{Kind: firewall.VerdictAccept}
	case expr.VerdictDrop:
		return firewall.Verdict{Kind: firewall.VerdictDrop}
	case expr.VerdictReturn:
		return firewall.Verdict{Kind: firewall.VerdictReturn}
	case expr.VerdictJump:
		return firewall.Verdict{Kind: firewall.VerdictJump, Target: v.Chain}
	case expr.VerdictGoto:
		return firewall.Verdict{Kind: firewall.VerdictGoto, Target: v.Chain}
	case expr.VerdictContinue, expr.VerdictBreak:
		return firewall.Verdict{Kind: firewall.VerdictContinue}
	}
	return firewall.Verdict{Kind: firewall.VerdictUnknown, Target: fmt.Sprintf("verdict %d", v.Kind)}
}

// rawVerdict decodes a verdict map element's value: google/nftables hands
// over the nested attributes of NFTA_DATA_VERDICT (NFTA_VERDICT_CODE, big
// endian, and NFTA_VERDICT_CHAIN) undecoded.
func rawVerdict(b []byte) (firewall.Verdict, bool) {
	var code int32
	var chain string
	found := false
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < 4 || l > len(b) {
			return firewall.Verdict{}, false
		}
		payload := b[4:l]
		switch typ {
		case unix.NFTA_VERDICT_CODE:
			if len(payload) == 4 {
				code = int32(binary.BigEndian.Uint32(payload))
				found = true
			}
		case unix.NFTA_VERDICT_CHAIN:
			chain = string(bytes.TrimRight(payload, "\x00"))
		}
		next := (l + 3) &^ 3
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	if !found {
		return firewall.Verdict{}, false
	}
	return verdictOf(&expr.Verdict{Kind: expr.VerdictKind(code), Chain: chain}), true
}

// rulesWidened lists a chain's rules through a connection that forwards the
// dump to the kernel and widens every NFTA_CT_DIRECTION in the answer from
// the u8 the kernel sends to the u32 google/nftables reads.
func rulesWidened(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain) ([]*nftables.Rule, error) {
	if c.TestDial != nil {
		return nil, fmt.Errorf("rules of chain %s not listed (a test connection)", ch.Name)
	}
	nc, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: c.NetNS})
	if err != nil {
		return nil, fmt.Errorf("opening netlink: %w", err)
	}
	defer nc.Close()
	proxy, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if len(req) != 1 {
			return nil, nil
		}
		out := req[0]
		out.Header.Sequence, out.Header.PID = 0, 0 // the real socket numbers it
		msgs, err := nc.Execute(out)
		if err != nil {
			return nil, err
		}
		for i := range msgs {
			if len(msgs[i].Data) > 4 {
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
	return proxy.GetRules(t, ch)
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
