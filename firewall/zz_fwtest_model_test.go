package firewall

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func tcp() Cond { return Cond{Kind: CondL4Proto, Protos: []int{6}} }

func udp() Cond { return Cond{Kind: CondL4Proto, Protos: []int{17}} }

func dport(ps ...uint16) Cond {
	c := Cond{Kind: CondDport}
	for _, p := range ps {
		c.Ports = append(c.Ports, PortRange{p, p})
	}
	return c
}

func dportRange(a, b uint16) Cond { return Cond{Kind: CondDport, Ports: []PortRange{{a, b}}} }

func saddr(ps ...string) Cond {
	c := Cond{Kind: CondSaddr}
	for _, p := range ps {
		c.Prefixes = append(c.Prefixes, netip.MustParsePrefix(p))
	}
	return c
}

func ctEstablished() Cond { return Cond{Kind: CondCtState, Bits: ctStateEstablished | ctStateRelated} }

func limit() Cond { return Cond{Kind: CondUndecidable, Reason: "limit rate 3/min"} }

func accept(c ...Cond) Rule { return Rule{Conds: c, Verdict: Verdict{Kind: VerdictAccept}} }

func drop(c ...Cond) Rule { return Rule{Conds: c, Verdict: Verdict{Kind: VerdictDrop}} }

func reject(c ...Cond) Rule { return Rule{Conds: c, Verdict: Verdict{Kind: VerdictReject}} }

func ret(c ...Cond) Rule { return Rule{Conds: c, Verdict: Verdict{Kind: VerdictReturn}} }

func log(c ...Cond) Rule { return Rule{Conds: c, Verdict: Verdict{Kind: VerdictContinue}} }

func jump(to string, c ...Cond) Rule {
	return Rule{Conds: c, Verdict: Verdict{Kind: VerdictJump, Target: to}}
}

func goTo(to string, c ...Cond) Rule {
	return Rule{Conds: c, Verdict: Verdict{Kind: VerdictGoto, Target: to}}
}

func base(name, hook string, prio int, policy string, rules ...Rule) Chain {
	return Chain{Name: name, Hook: hook, Priority: prio, Policy: policy, Type: "filter", Rules: rules}
}

func regular(name string, rules ...Rule) Chain { return Chain{Name: name, Rules: rules} }

func loadFixture(t testing.TB, name string) (*Ruleset, Node) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "dnat", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Ruleset *Ruleset `json:"ruleset"`
		Node    Node     `json:"node"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Ruleset, f.Node
}

func find(open []Opening, dir, fam, proto string, port uint16) []Opening {
	var out []Opening
	for _, o := range open {
		if o.Direction == dir && o.Family == fam && o.Proto == proto && o.Port <= port && port <= portEnd(o) {
			out = append(out, o)
		}
	}
	return out
}
