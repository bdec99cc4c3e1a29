package firewall

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"adoption/config"
)

// MeshTable is the mesh's own table, "table inet adoption", written by Flip.
const MeshTable = "adoption"

// Owners the derived ruleset names besides modules.
const (
	OwnerManagement = "management" // the ports the node is managed through (ssh, ...)
	OwnerFoundation = "foundation"
	OwnerMesh       = "mesh"       // established/related, invalid, loopback, ICMP
	OwnerContainers = "containers" // traffic from container bridges (their egress)
)

// Allow is one port the mesh keeps open, with who keeps it.
type Allow struct {
	Port  config.Port `json:"port"`
	Owner string      `json:"owner"`
}

// MeshSpec is what the mesh's own ruleset for one node is derived from.
type MeshSpec struct {
	Node string `json:"node"`
	// Input ports are open to new connections: management ports (owner
	// "management"), the foundation's, every migrated module's.
	Input []Allow `json:"input"`
	// Forward ports are host ports published by migrated modules'
	// containers: forwarded (DNATed) traffic to them is accepted.
	Forward []Allow `json:"forward"`
	// Drop lists the ports the operator deliberately drops at the flip; the
	// preview only reads it.
	Drop []config.Port `json:"drop"`
}

// Derived is the mesh's own ruleset for one node: the model the evaluator
// reads, and the rules Flip writes. Both come from one list of rules, so
// what is previewed is what is written.
type Derived struct {
	Spec MeshSpec `json:"spec"`
	// Ruleset holds the one table inet adoption, as List would decode it
	// once written (handles 0).
	Ruleset *Ruleset `json:"ruleset"`
	rules   []derivedRule
}

type derivedRule struct {
	chain   string
	exprs   []expr.Any
	comment string
	text    string // nft syntax, without the comment
	model   *Rule  // set where the evaluator's model differs from decoding exprs
}

// Derive builds the mesh's ruleset for spec: table inet adoption with base
// chains input and forward (filter hook, priority filter, policy drop).
// Input accepts established/related, loopback, the ICMP and ICMPv6 that
// must pass (neighbour discovery and router adverts keep IPv6 working), and
// one rule per Input port; forward accepts established/related, traffic from
// container bridges (docker0, br-*) so containers keep their egress, and
// DNATed connections whose original destination port is a Forward port.
// Every rule's comment names its owner: "adoption:<node>:<owner>:<port>/<proto>"
// for ports, "adoption:<node>:mesh:<what>" for the rest.
func Derive(spec MeshSpec) (*Derived, error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	node := spec.Node
	base := func(what string) string { return fmt.Sprintf("%s%s:%s:%s", markPrefix, node, OwnerMesh, what) }
	var rules []derivedRule
	for _, ch := range []string{HookInput, HookForward} {
		rules = append(rules,
			derivedRule{chain: ch, exprs: ctBits(expr.CtKeySTATE, ctStateEstablished|ctStateRelated, expr.VerdictAccept),
				comment: base("established"), text: "ct state established,related accept"},
			derivedRule{chain: ch, exprs: ctBits(expr.CtKeySTATE, ctStateInvalid, expr.VerdictDrop),
				comment: base("invalid"), text: "ct state invalid drop"},
		)
	}
	rules = append(rules, derivedRule{chain: HookInput, exprs: iifname("lo", expr.VerdictAccept), comment: base("loopback"), text: `iifname "lo" accept`})
	for _, ic := range []struct {
		nfproto, l4 byte
		name        string
		types       []string
		nums        []byte
	}{
		{unix.NFPROTO_IPV4, unix.IPPROTO_ICMP, "icmp",
			[]string{"echo-request", "destination-unreachable", "time-exceeded", "parameter-problem"},
			[]byte{8, 3, 11, 12}},
		{unix.NFPROTO_IPV6, unix.IPPROTO_ICMPV6, "icmpv6",
			[]string{"echo-request", "destination-unreachable", "packet-too-big", "time-exceeded", "parameter-problem",
				"nd-router-advert", "nd-neighbor-solicit", "nd-neighbor-advert"},
			[]byte{128, 1, 2, 3, 4, 134, 135, 136}},
	} {
		for i, typ := range ic.types {
			rules = append(rules, derivedRule{chain: HookInput, comment: base(ic.name), text: ic.name + " type " + typ + " accept",
				exprs: []expr.Any{
					&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ic.nfproto}},
					&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ic.l4}},
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ic.nums[i]}},
					&expr.Verdict{Kind: expr.VerdictAccept},
				}})
		}
	}
	for _, a := range dedupe(spec.Input) {
		mk := Mark{Node: node, Owner: a.Owner, Port: a.Port.Num, Proto: a.Port.Proto}
		rules = append(rules, derivedRule{chain: HookInput, exprs: markExprs(a.Port.Num, a.Port.Proto), comment: mk.Comment(),
			text: fmt.Sprintf("meta l4proto %s th dport %d counter accept", a.Port.Proto, a.Port.Num)})
	}
	egress := fmt.Sprintf("%s%s:%s:egress", markPrefix, node, OwnerContainers)
	rules = append(rules,
		derivedRule{chain: HookForward, exprs: iifname("docker0", expr.VerdictAccept), comment: egress, text: `iifname "docker0" accept`},
		derivedRule{chain: HookForward, exprs: iifname("br-*", expr.VerdictAccept), comment: egress, text: `iifname "br-*" accept`},
	)
	for _, a := range dedupe(spec.Forward) {
		mk := Mark{Node: node, Owner: a.Owner, Port: a.Port.Num, Proto: a.Port.Proto}
		p := l4num(a.Port.Proto)
		ex := ctBits(expr.CtKeySTATUS, ipsDstNAT, expr.VerdictAccept)
		ex = append(ex[:len(ex)-1],
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
			&expr.Ct{Key: expr.CtKeyPROTODST, Register: 1, Direction: 0},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(a.Port.Num)},
			&expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictAccept},
		)
		// The evaluator's forward packet is the connection as the client
		// addressed it, and it does not model NAT: "ct status dnat ct
		// original proto-dst N" is read as "dport N" (decoded as is, both
		// would be undecidable and every published port uncertain).
		model := Rule{Comment: mk.Comment(), Verdict: Verdict{Kind: VerdictAccept}, Conds: []Cond{
			{Kind: CondL4Proto, Protos: []int{int(p)}},
			{Kind: CondDport, Ports: []PortRange{{a.Port.Num, a.Port.Num}}},
		}}
		rules = append(rules, derivedRule{chain: HookForward, exprs: ex, comment: mk.Comment(), model: &model,
			text: fmt.Sprintf("ct status dnat meta l4proto %s ct original proto-dst %d counter accept", a.Port.Proto, a.Port.Num)})
	}
	for _, r := range rules {
		if len(r.comment) > maxCommentLen {
			return nil, fmt.Errorf("rule comment %q is %d bytes, longer than the %d a rule comment holds", r.comment, len(r.comment), maxCommentLen)
		}
	}
	d := &Derived{Spec: spec, rules: rules}
	d.Ruleset = d.model()
	return d, nil
}

// IPS_DST_NAT in ct status.
const ipsDstNAT = 1 << 5

func l4num(proto string) byte {
	if proto == "udp" {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

// ctBits is "ct <key> & bits != 0 <verdict>" as nft writes it.
func ctBits(key expr.CtKey, bits uint32, v expr.VerdictKind) []expr.Any {
	return []expr.Any{
		&expr.Ct{Key: key, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: v},
	}
}

// iifname is `iifname "name" verdict`; a trailing '*' is a prefix match.
func iifname(name string, v expr.VerdictKind) []expr.Any {
	data := []byte(strings.TrimSuffix(name, "*"))
	if !strings.HasSuffix(name, "*") {
		data = append(data, make([]byte, unix.IFNAMSIZ-len(data))...)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data},
		&expr.Verdict{Kind: v},
	}
}

func dedupe(as []Allow) []Allow {
	seen := map[config.Port]bool{}
	var out []Allow
	for _, a := range as {
		if !seen[a.Port] {
			seen[a.Port] = true
			out = append(out, a)
		}
	}
	return out
}

func validateSpec(spec MeshSpec) error {
	var errs []error
	if !config.ValidName(spec.Node) {
		errs = append(errs, fmt.Errorf("node name %q is not valid (%s)", spec.Node, config.NameRule))
	}
	check := func(where string, p config.Port) {
		if p.Num == 0 {
			errs = append(errs, fmt.Errorf("%s: port %s: 0 is not a port, want 1-65535", where, p))
		}
		if p.Proto != "tcp" && p.Proto != "udp" {
			errs = append(errs, fmt.Errorf("%s: port %s: protocol %q is not tcp or udp", where, p, p.Proto))
		}
	}
	for _, l := range []struct {
		where string
		as    []Allow
	}{{"input", spec.Input}, {"forward", spec.Forward}} {
		for _, a := range l.as {
			if !config.ValidName(a.Owner) {
				errs = append(errs, fmt.Errorf("%s: port %s: owner name %q is not valid (%s)", l.where, a.Port, a.Owner, config.NameRule))
			}
			check(l.where, a.Port)
		}
	}
	for _, p := range spec.Drop {
		check("drop", p)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the mesh ruleset for node %q cannot be derived: %w", spec.Node, err)
	}
	return nil
}

func (d *Derived) model() *Ruleset {
	t := Table{Family: FamilyInet, Name: MeshTable}
	for _, hook := range []string{HookInput, HookForward} {
		ch := Chain{Name: hook, Hook: hook, Priority: 0, Policy: "drop", Type: "filter", Rules: []Rule{}}
		dec := decoder{family: FamilyInet, sets: map[string]*Set{}, setsKnown: true}
		for _, r := range d.rules {
			if r.chain != hook {
				continue
			}
			if r.model != nil {
				ch.Rules = append(ch.Rules, *r.model)
				continue
			}
			ch.Rules = append(ch.Rules, dec.rule(&nftables.Rule{Exprs: r.exprs, UserData: commentData(r.comment)}))
		}
		t.Chains = append(t.Chains, ch)
	}
	return &Ruleset{Tables: []Table{t}}
}

// Text is the derived table in nft syntax, for "nft -f": what an operator
// reads, and what a naive replacement would load.
func (d *Derived) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", MeshTable)
	for i, hook := range []string{HookInput, HookForward} {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook %s priority filter; policy drop;\n", hook, hook)
		for _, r := range d.rules {
			if r.chain == hook {
				fmt.Fprintf(&b, "\t\t%s comment %q\n", r.text, r.comment)
			}
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// queue adds the table, its chains and rules to a batch.
func (d *Derived) queue(c *nftables.Conn) {
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: MeshTable})
	drop := nftables.ChainPolicyDrop
	chains := map[string]*nftables.Chain{}
	for _, hook := range []struct {
		name string
		num  *nftables.ChainHook
	}{{HookInput, nftables.ChainHookInput}, {HookForward, nftables.ChainHookForward}} {
		chains[hook.name] = c.AddChain(&nftables.Chain{Name: hook.name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: hook.num, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	}
	for _, r := range d.rules {
		c.AddRule(&nftables.Rule{Table: t, Chain: chains[r.chain], Exprs: r.exprs, UserData: commentData(r.comment)})
	}
}

// ownerOf reads the owner from a comment "adoption:<node>:<owner>:...".
func ownerOf(comment string) string {
	rest, ok := strings.CutPrefix(comment, markPrefix)
	if !ok {
		return ""
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[1]
}

// Fate is what the flip does to one port the found firewall opens now.
type Fate struct {
	Opening Opening `json:"opening"`
	// Fate is "kept" or "closing".
	Fate string `json:"fate"`
	// By names who keeps a kept port: "management", "foundation", a
	// module, "containers" (traffic from a container bridge).
	By string `json:"by,omitempty"`
	// Dropped: closing, and in spec.Drop.
	Dropped bool `json:"dropped,omitempty"`
}

// Fates.
const (
	FateKept    = "kept"
	FateClosing = "closing"
)

// Preview says what a flip would do and whether it may go ahead.
type Preview struct {
	Approved           bool     `json:"approved"`
	Reasons            []string `json:"reasons,omitempty"`
	Fates              []Fate   `json:"fates"`
	FoundFingerprint   string   `json:"found_fingerprint"`
	DerivedFingerprint string   `json:"derived_fingerprint"`
}

// PreviewFlip gives every port the found firewall opens now (OpenPorts,
// uncertain openings counted as open) a fate: kept when the ruleset as it
// would be after the flip (the predecessor neutralised exactly as Flip does
// it, foreign chains as they are, the derived table added) still opens it
// for that direction, family and source, with By naming the derived rule's
// owner; else closing. A found range partly kept is split. It approves only
// if every closing port is in spec.Drop, no management port would close or
// is in spec.Drop, and Flip could neutralise the predecessor; each reason
// names the port or the obstacle.
func PreviewFlip(found *Ruleset, spec MeshSpec) Preview {
	p := Preview{Fates: []Fate{}, FoundFingerprint: Fingerprint(found)}
	d, err := Derive(spec)
	if err != nil {
		p.Reasons = []string{err.Error()}
		return p
	}
	return previewFlip(found, d.Ruleset, spec)
}

// previewFlip compares found with derived (a model of table inet adoption);
// tests pass a derived ruleset that Derive would never make.
func previewFlip(found, derived *Ruleset, spec MeshSpec) Preview {
	p := Preview{Fates: []Fate{}, FoundFingerprint: Fingerprint(found), DerivedFingerprint: Fingerprint(derived)}
	after, err := afterFlip(found, derived, spec.Node)
	if err != nil {
		p.Reasons = append(p.Reasons, err.Error())
		return p
	}
	afterOpen := OpenPorts(after)
	dropped := map[config.Port]bool{}
	for _, d := range spec.Drop {
		dropped[d] = true
	}
	mgmt := map[config.Port]bool{}
	for _, a := range spec.Input {
		if a.Owner == OwnerManagement {
			mgmt[a.Port] = true
			if dropped[a.Port] {
				p.Reasons = append(p.Reasons, fmt.Sprintf("%s is a management port and is in flip.drop: the node would be cut off from its operator; remove it from flip.drop", a.Port))
			}
		}
	}
	for _, o := range OpenPorts(found) {
		// Boundaries where the fate, owner or drop can change inside o.
		end := portEnd(o)
		cuts := map[int]bool{int(o.Port): true}
		add := func(x int) {
			if x > int(o.Port) && x <= int(end) {
				cuts[x] = true
			}
		}
		for _, a := range afterOpen {
			add(int(a.Port))
			add(int(portEnd(a)) + 1)
		}
		for _, l := range [][]Allow{spec.Input, spec.Forward} {
			for _, a := range l {
				add(int(a.Port.Num))
				add(int(a.Port.Num) + 1)
			}
		}
		for _, d := range spec.Drop {
			add(int(d.Num))
			add(int(d.Num) + 1)
		}
		starts := make([]int, 0, len(cuts))
		for x := range cuts {
			starts = append(starts, x)
		}
		sort.Ints(starts)
		var segs []Fate
		for i, s := range starts {
			e := int(end)
			if i+1 < len(starts) {
				e = starts[i+1] - 1
			}
			f := Fate{Opening: o, Fate: FateClosing}
			f.Opening.Port, f.Opening.PortEnd = uint16(s), 0
			if e != s {
				f.Opening.PortEnd = uint16(e)
			}
			if stillOpen(afterOpen, o, uint16(s)) {
				f.Fate = FateKept
				f.By = keeper(derived, o.Direction, o.Family, o.Proto, uint16(s))
			} else {
				f.Dropped = dropped[config.Port{Num: uint16(s), Proto: o.Proto}] && (s == e || allDropped(dropped, o.Proto, s, e))
			}
			if n := len(segs); n > 0 && segs[n-1].Fate == f.Fate && segs[n-1].By == f.By && segs[n-1].Dropped == f.Dropped {
				segs[n-1].Opening.PortEnd = uint16(e)
				continue
			}
			segs = append(segs, f)
		}
		for _, f := range segs {
			p.Fates = append(p.Fates, f)
			if f.Fate != FateClosing {
				continue
			}
			for x := int(f.Opening.Port); x <= int(portEnd(f.Opening)); x++ {
				if mgmt[config.Port{Num: uint16(x), Proto: o.Proto}] && o.Direction == HookInput {
					p.Reasons = append(p.Reasons, fmt.Sprintf("management port %d/%s (%s) is open now and would close: the node would be cut off from its operator", x, o.Proto, describeOpening(f.Opening)))
				}
			}
			if !f.Dropped {
				p.Reasons = append(p.Reasons, fmt.Sprintf("%s (%s) is open now and would close: declare it in a module or add it to flip.drop", portSpec(f.Opening), describeOpening(f.Opening)))
			}
		}
	}
	// A management port must be open after the flip, whether or not it is
	// open now.
	for _, a := range spec.Input {
		if a.Owner != OwnerManagement {
			continue
		}
		for _, fam := range []string{FamilyIP, FamilyIP6} {
			if !stillOpen(afterOpen, Opening{Direction: HookInput, Family: fam, Proto: a.Port.Proto}, a.Port.Num) {
				p.Reasons = append(p.Reasons, fmt.Sprintf("management port %s (input, %s) would not be open after the flip", a.Port, fam))
			}
		}
	}
	p.Approved = len(p.Reasons) == 0
	return p
}

func allDropped(dropped map[config.Port]bool, proto string, from, to int) bool {
	for x := from; x <= to; x++ {
		if !dropped[config.Port{Num: uint16(x), Proto: proto}] {
			return false
		}
	}
	return true
}

func portEnd(o Opening) uint16 {
	if o.PortEnd != 0 {
		return o.PortEnd
	}
	return o.Port
}

func portSpec(o Opening) string {
	if o.PortEnd != 0 && o.PortEnd != o.Port {
		return fmt.Sprintf("%d-%d/%s", o.Port, o.PortEnd, o.Proto)
	}
	return fmt.Sprintf("%d/%s", o.Port, o.Proto)
}

func describeOpening(o Opening) string {
	s := o.Direction + ", " + o.Family
	if o.From != "" {
		s += ", from " + o.From
	}
	if o.Uncertain {
		s += ", uncertain"
	}
	return s
}

// stillOpen reports whether after opens port for o's direction, family,
// proto and source. An opening that is only uncertain after the flip keeps
// an opening that was uncertain before (the same undecidable condition, such
// as "came in on a container bridge"), not a sure one.
func stillOpen(after []Opening, o Opening, port uint16) bool {
	for _, a := range after {
		if a.Direction != o.Direction || a.Family != o.Family || a.Proto != o.Proto || port < a.Port || port > portEnd(a) {
			continue
		}
		if a.From != "" {
			ap, err1 := netip.ParsePrefix(a.From)
			op, err2 := netip.ParsePrefix(o.From)
			if o.From == "" || err1 != nil || err2 != nil || op.Bits() < ap.Bits() || !ap.Contains(op.Addr()) {
				continue
			}
		}
		if a.Uncertain && !o.Uncertain {
			continue
		}
		return true
	}
	return false
}

// keeper names the owner of the derived rule that accepts a new connection
// to (proto, port): the first rule that surely matches, else the first that
// may.
func keeper(derived *Ruleset, hook, fam, proto string, port uint16) string {
	pkt := packet{hook: hook, family: fam, proto: l4num(proto), port: port, src: atom{other: true}}
	maybe := ""
	for _, t := range derived.Tables {
		for _, ch := range t.Chains {
			if ch.Hook != hook {
				continue
			}
			for _, r := range ch.Rules {
				if r.Verdict.Kind != VerdictAccept || r.VMap != nil {
					continue
				}
				m := triTrue
				for i := range r.Conds {
					switch pkt.cond(&r.Conds[i]) {
					case triFalse:
						m = triFalse
					case triUnknown:
						if m == triTrue {
							m = triUnknown
						}
					}
				}
				switch {
				case m == triTrue:
					return ownerOf(r.Comment)
				case m == triUnknown && maybe == "":
					maybe = ownerOf(r.Comment)
				}
			}
		}
	}
	return maybe
}

// Fingerprint is a sha256 over a canonical form of rs: tables, chains,
// policies, every rule's decoded conditions, verdict and comment in order,
// and set elements; handles are left out (and counters are never in the
// model). Two listings of an unchanged ruleset give the same value; a rule
// added, removed or changed by hand changes it, as far as the decoder sees
// the change (an undecoded part, such as a LOG prefix, is represented by
// its kind only).
func Fingerprint(rs *Ruleset) string {
	if rs == nil {
		rs = &Ruleset{}
	}
	c := Ruleset{Tables: make([]Table, len(rs.Tables))}
	for i, t := range rs.Tables {
		ct := t
		ct.Chains = make([]Chain, len(t.Chains))
		for j, ch := range t.Chains {
			cc := ch
			cc.Rules = make([]Rule, len(ch.Rules))
			for k, r := range ch.Rules {
				r.Handle = 0
				cc.Rules[k] = r
			}
			ct.Chains[j] = cc
		}
		sort.Slice(ct.Chains, func(a, b int) bool { return ct.Chains[a].Name < ct.Chains[b].Name })
		ct.Sets = make([]Set, len(t.Sets))
		for j, s := range t.Sets {
			cs := s
			cs.Elements = append([]SetElement(nil), s.Elements...)
			sort.Slice(cs.Elements, func(a, b int) bool {
				x, _ := json.Marshal(cs.Elements[a])
				y, _ := json.Marshal(cs.Elements[b])
				return string(x) < string(y)
			})
			ct.Sets[j] = cs
		}
		sort.Slice(ct.Sets, func(a, b int) bool { return ct.Sets[a].Name < ct.Sets[b].Name })
		c.Tables[i] = ct
	}
	sort.SliceStable(c.Tables, func(a, b int) bool {
		if c.Tables[a].Family != c.Tables[b].Family {
			return c.Tables[a].Family < c.Tables[b].Family
		}
		return c.Tables[a].Name < c.Tables[b].Name
	})
	b, err := json.Marshal(c)
	if err != nil {
		// The model holds only strings, numbers, slices and prefixes.
		panic(fmt.Sprintf("firewall: marshalling the ruleset model: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Render writes rs in an nft-like text: tables, chains with hook, priority
// and policy, each rule's decoded conditions, verdict, comment and handle,
// and what could not be decoded as a "# not decoded:" note. It is a record
// for people, not input for nft.
func Render(rs *Ruleset) string {
	var b strings.Builder
	for i, t := range rs.Tables {
		if i > 0 {
			b.WriteString("\n")
		}
		renderTable(&b, &t, nil)
	}
	return b.String()
}

// renderTable writes t; keep, when set, selects the chains to write and,
// per chain, the index of the first rule to write.
func renderTable(b *strings.Builder, t *Table, keep map[string]int) {
	fmt.Fprintf(b, "table %s %s {\n", t.Family, t.Name)
	for _, u := range t.Unknown {
		fmt.Fprintf(b, "\t# not listed: %s\n", u)
	}
	if keep == nil {
		for _, s := range t.Sets {
			fmt.Fprintf(b, "\tset %s { # %d elements", s.Name, len(s.Elements))
			if s.Anonymous {
				b.WriteString(", anonymous")
			}
			b.WriteString(" }\n")
		}
	}
	for _, ch := range t.Chains {
		from := 0
		if keep != nil {
			f, ok := keep[ch.Name]
			if !ok {
				continue
			}
			from = f
		}
		fmt.Fprintf(b, "\tchain %s {\n", ch.Name)
		if ch.Hook != "" {
			fmt.Fprintf(b, "\t\ttype %s hook %s priority %d; policy %s;\n", orFilter(ch.Type), ch.Hook, ch.Priority, ch.Policy)
		}
		if ch.Unknown != "" {
			fmt.Fprintf(b, "\t\t# not listed: %s\n", ch.Unknown)
		}
		if from > 0 {
			fmt.Fprintf(b, "\t\t# (%d rules before these are not part of this record)\n", from)
		}
		for _, r := range ch.Rules[min(from, len(ch.Rules)):] {
			fmt.Fprintf(b, "\t\t%s\n", renderRule(&r))
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
}

func orFilter(s string) string {
	if s == "" {
		return "filter"
	}
	return s
}

func renderRule(r *Rule) string {
	var parts []string
	for _, c := range r.Conds {
		if c.Kind == CondUndecidable {
			continue // in r.Unknown
		}
		parts = append(parts, renderCond(&c))
	}
	if r.VMap != nil {
		var es []string
		for _, e := range r.VMap {
			es = append(es, renderCond(&e.Cond)+" : "+renderVerdict(e.Verdict))
		}
		parts = append(parts, "vmap { "+strings.Join(es, ", ")+" }")
	} else if r.Verdict.Kind != VerdictContinue {
		parts = append(parts, renderVerdict(r.Verdict))
	}
	if r.Comment != "" {
		parts = append(parts, fmt.Sprintf("comment %q", r.Comment))
	}
	parts = append(parts, fmt.Sprintf("# handle %d", r.Handle))
	if len(r.Unknown) > 0 {
		parts = append(parts, "# not decoded: "+strings.Join(r.Unknown, "; "))
	}
	return strings.Join(parts, " ")
}

func renderVerdict(v Verdict) string {
	if v.Target != "" {
		return string(v.Kind) + " " + v.Target
	}
	return string(v.Kind)
}

func renderCond(c *Cond) string {
	op := " "
	if c.Negate {
		op = " != "
	}
	list := func(xs []string) string {
		if len(xs) == 1 {
			return xs[0]
		}
		return "{ " + strings.Join(xs, ", ") + " }"
	}
	var xs []string
	switch c.Kind {
	case CondNFProto:
		return "meta nfproto" + op + c.Family
	case CondL4Proto:
		for _, p := range c.Protos {
			switch p {
			case unix.IPPROTO_TCP:
				xs = append(xs, "tcp")
			case unix.IPPROTO_UDP:
				xs = append(xs, "udp")
			default:
				xs = append(xs, fmt.Sprint(p))
			}
		}
		return "meta l4proto" + op + list(xs)
	case CondDport, CondSport:
		for _, p := range c.Ports {
			if p.From == p.To {
				xs = append(xs, fmt.Sprint(p.From))
			} else {
				xs = append(xs, fmt.Sprintf("%d-%d", p.From, p.To))
			}
		}
		return "th " + string(c.Kind) + op + list(xs)
	case CondSaddr, CondDaddr:
		for _, p := range c.Prefixes {
			xs = append(xs, p.String())
		}
		return string(c.Kind) + op + list(xs)
	case CondIifname, CondOifname:
		for _, n := range c.Names {
			xs = append(xs, fmt.Sprintf("%q", n))
		}
		return string(c.Kind) + op + list(xs)
	case CondCtState:
		return fmt.Sprintf("ct state%s%#x", op, c.Bits)
	case CondAddrType:
		return fmt.Sprintf("fib %s type%s%#x", c.Addr, op, c.Bits)
	case CondPktType:
		return fmt.Sprintf("meta pkttype%s%#x", op, c.Bits)
	case CondTCPFlags:
		eq := "=="
		if c.Negate {
			eq = "!="
		}
		return fmt.Sprintf("tcp flags & %#x %s %#x", c.Mask, eq, c.Value)
	case CondNever:
		return "# never: " + c.Reason
	}
	return "# " + string(c.Kind) + ": " + c.Reason
}
