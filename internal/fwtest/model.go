// This file holds builders of the model for unit tests (conditions, rules,
// chains) and the DNAT fixtures: rulesets and nodes listed from real
// namespaces, kept in testdata/dnat.

package fwtest

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"adoption/firewall"
)

func Tcp() firewall.Cond { return firewall.Cond{Kind: firewall.CondL4Proto, Protos: []int{6}} }

func Udp() firewall.Cond { return firewall.Cond{Kind: firewall.CondL4Proto, Protos: []int{17}} }

func Dport(ps ...uint16) firewall.Cond {
	c := firewall.Cond{Kind: firewall.CondDport}
	for _, p := range ps {
		c.Ports = append(c.Ports, firewall.PortRange{From: p, To: p})
	}
	return c
}

func DportRange(a, b uint16) firewall.Cond {
	return firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: a, To: b}}}
}

func Saddr(ps ...string) firewall.Cond {
	c := firewall.Cond{Kind: firewall.CondSaddr}
	for _, p := range ps {
		c.Prefixes = append(c.Prefixes, netip.MustParsePrefix(p))
	}
	return c
}

func Daddr(ps ...string) firewall.Cond {
	c := Saddr(ps...)
	c.Kind = firewall.CondDaddr
	return c
}

func CtEstablished() firewall.Cond {
	return firewall.Cond{Kind: firewall.CondCtState, Bits: firewall.CtStateEstablished | firewall.CtStateRelated}
}

func Limit() firewall.Cond {
	return firewall.Cond{Kind: firewall.CondUndecidable, Reason: "limit rate 3/min"}
}

func Accept(c ...firewall.Cond) firewall.Rule {
	return firewall.Rule{Conds: c, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}
}

func Drop(c ...firewall.Cond) firewall.Rule {
	return firewall.Rule{Conds: c, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}}
}

func Reject(c ...firewall.Cond) firewall.Rule {
	return firewall.Rule{Conds: c, Verdict: firewall.Verdict{Kind: firewall.VerdictReject}}
}

func Ret(c ...firewall.Cond) firewall.Rule {
	return firewall.Rule{Conds: c, Verdict: firewall.Verdict{Kind: firewall.VerdictReturn}}
}

func Log(c ...firewall.Cond) firewall.Rule {
	return firewall.Rule{Conds: c, Verdict: firewall.Verdict{Kind: firewall.VerdictContinue}}
}

func Jump(to string, c ...firewall.Cond) firewall.Rule {
	return firewall.Rule{Conds: c, Verdict: firewall.Verdict{Kind: firewall.VerdictJump, Target: to}}
}

func GoTo(to string, c ...firewall.Cond) firewall.Rule {
	return firewall.Rule{Conds: c, Verdict: firewall.Verdict{Kind: firewall.VerdictGoto, Target: to}}
}

func Base(name, hook string, prio int, policy string, rules ...firewall.Rule) firewall.Chain {
	return firewall.Chain{Name: name, Hook: hook, Priority: prio, Policy: policy, Type: "filter", Rules: rules}
}

func Regular(name string, rules ...firewall.Rule) firewall.Chain {
	return firewall.Chain{Name: name, Rules: rules}
}

func LoadFixture(t testing.TB, name string) (*firewall.Ruleset, firewall.Node) {
	t.Helper()
	return LoadFixtureFile(t, FixturePath(name))
}

// LoadFixtureFile is LoadFixture of a fixture file anywhere (the bench's
// -probe-fixture writes them).
func LoadFixtureFile(t testing.TB, file string) (*firewall.Ruleset, firewall.Node) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Ruleset *firewall.Ruleset `json:"ruleset"`
		Node    firewall.Node     `json:"node"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Ruleset, f.Node
}

func Find(open []firewall.Opening, dir, fam, proto string, port uint16) []firewall.Opening {
	var out []firewall.Opening
	for _, o := range open {
		if o.Direction == dir && o.Family == fam && o.Proto == proto && o.Port <= port && port <= firewall.PortEnd(o) {
			out = append(out, o)
		}
	}
	return out
}

// FixturePath is where the fixture called name is kept: fwtest's own
// testdata/dnat, whichever package's test asks.
func FixturePath(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "dnat", name+".json")
}
