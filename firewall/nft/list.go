// This file holds the listing: it reads tables, chains, sets and rules
// through netlink and hands each rule to the decoder (decode_expr.go).

package nft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// List reads the whole ruleset through c and decodes it into the model. It
// only reads: a decoded rule is never written back, because google/nftables
// silently drops expressions it cannot decode and a rewrite would change the
// rule.
func List(c *nftables.Conn) (*firewall.Ruleset, error) { return listSome(c, nil, nil) }

// listSome is List reading the rules, and the sets they look up, only of
// the chains wants selects (nil: every chain) and of the chains those jump
// or go to, transitively. wants sees each table with all its chains, none
// of them with rules yet. A chain left out has no rules in the result, so
// the result serves only a plan that reads the chains it selected: a
// mark's, listed in one round trip per chain it may go to (and per chain
// reached from it) instead of one per chain in the ruleset.
//
// The whole ruleset (wants nil, a connection to a kernel) is read one dump
// per table, between two readings of the ruleset generation: a listing
// during which the ruleset changed is read again (after a short wait, a
// few times), so what is returned is one ruleset the kernel had in force,
// never a mix of two.
//
// With kept given, a listing is answered from the one kept there when the
// namespace's ruleset is still that one (Kept.match), and a whole listing
// that can be is kept there.
func listSome(c *nftables.Conn, wants func(t *firewall.Table, ch *firewall.Chain) bool, kept *Kept) (*firewall.Ruleset, error) {
	if c.TestDial != nil || wants != nil {
		var ipsets map[uint16]*IPSet // unread (nil), a match on an ipset stays undecidable
		if c.TestDial == nil {
			ipsets, _ = IPSets(c.NetNS)
		}
		rs, _, err := listOnce(c, nil, wants, ipsets)
		return rs, err
	}
	nc, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: c.NetNS})
	if err != nil {
		return nil, fmt.Errorf("opening netlink: %w", err)
	}
	// Closed off the caller's path, as a session's raw socket is
	// (Session.dropRaw): a netfilter socket's release may wait for the
	// kernel to reclaim rules a batch just deleted.
	defer func() { go nc.Close() }()
	ns, nsErr := netnsCookie(nc)
	// A burst of writes (an engine starting containers commits once per
	// rule) is waited out: 5 attempts, 5 to 40 ms apart, 75 ms at most.
	const attempts = 5
	for i := range attempts {
		if i > 0 {
			time.Sleep(5 * time.Millisecond << (i - 1))
		}
		before, err := Generation(nc)
		if err != nil {
			return nil, err
		}
		ipsets, ipsetsErr := ipsetsOn(nc, nsFDPath(c.NetNS))
		at := listedAt{ns: ns, gen: before, ipsets: ipsets}
		keepable := kept != nil && nsErr == nil && ipsetsErr == nil
		if keepable {
			if rs := kept.match(at); rs != nil {
				return rs, nil
			}
		}
		rs, static, err := listOnce(c, nc, nil, ipsets)
		if errors.Is(err, errDumpInterrupted) {
			continue
		}
		if err != nil {
			return nil, err
		}
		after, err := Generation(nc)
		if err != nil {
			return nil, err
		}
		if after == before {
			if keepable && static {
				kept.keep(at, rs)
			}
			return rs, nil
		}
	}
	return nil, fmt.Errorf("listing nftables: the ruleset changed during each of %d listings; list again once nothing is writing to it: %w", attempts, ErrRulesetChanged)
}

// listOnce is one listing: the rules of every chain wanted through c, one
// request per chain, or when nc is given every table's in one dump through
// it (wants is then nil), decoded with the namespace's ipsets (nil: unread,
// a match on one stays undecidable). static reports whether the listing
// holds only what a commit changes (kernelChanges): none of the kernel's
// own changes between commits, and nothing left unlisted by an error.
func listOnce(c *nftables.Conn, nc *netlink.Conn, wants func(t *firewall.Table, ch *firewall.Chain) bool, ipsets map[uint16]*IPSet) (rs *firewall.Ruleset, static bool, err error) {
	tables, err := c.ListTables()
	if err != nil {
		return nil, false, fmt.Errorf("listing nftables tables: %w", err)
	}
	chains, err := c.ListChains()
	if err != nil {
		return nil, false, fmt.Errorf("listing nftables chains: %w", err)
	}
	rs, static = &firewall.Ruleset{}, true
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
				static = static && !kernelChanges(s)
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
		var dumped map[string][]*nftables.Rule
		var dumpErr error
		if nc != nil {
			if dumped, dumpErr = tableRules(nc, t); errors.Is(dumpErr, errDumpInterrupted) {
				return nil, false, dumpErr
			}
		}
		listed := make([]bool, len(tbl.Chains))
		for more := true; more; {
			more = false
			for i, ch := range tchains {
				if !want[i] || listed[i] {
					continue
				}
				listed[i] = true
				var rules []*nftables.Rule
				var err error
				if nc != nil {
					rules, err = dumped[ch.Name], dumpErr
				} else {
					rules, err = chainRules(c, t, ch)
				}
				static = static && !slices.ContainsFunc(rules, updatesSet)
				decodeRules(rules, err, tbl.Family, &tbl.Chains[i], sets, setsKnown, ipsets)
				static = static && tbl.Chains[i].Unknown == ""
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
		static = static && len(tbl.Unknown) == 0
		rs.Tables = append(rs.Tables, tbl)
	}
	return rs, static, nil
}

// decodeRules decodes the rules listed of one chain (of family) into mc,
// or says in mc why they were not listed.
func decodeRules(rules []*nftables.Rule, err error, family string, mc *firewall.Chain, sets map[string]*firewall.Set, setsKnown bool, ipsets map[uint16]*IPSet) {
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

// nsFDPath is the path of the namespace whose fd is fd (0: "", the
// caller's own).
func nsFDPath(fd int) string {
	if fd > 0 {
		return "/proc/self/fd/" + strconv.Itoa(fd)
	}
	return ""
}
