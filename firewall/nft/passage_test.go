package nft

import (
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"adoption/firewall"
)

// A rule of a family the evaluator does not run is read for what it does:
// its verdict and its writes; an expression not known counts as a write.
func TestOtherFamilyRuleVerdictsAndWrites(t *testing.T) {
	ether := []expr.Any{&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(0x0800)}}
	with := func(es ...expr.Any) []expr.Any { return append(append([]expr.Any{}, ether...), es...) }
	for _, c := range []struct {
		name   string
		exprs  []expr.Any
		kind   firewall.VerdictKind
		target string
		writes string
	}{
		{"counter", with(&expr.Counter{}), firewall.VerdictContinue, "", ""},
		{"accept", with(&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept}), firewall.VerdictAccept, "", ""},
		{"drop", with(&expr.Verdict{Kind: expr.VerdictDrop}), firewall.VerdictDrop, "", ""},
		{"reject", with(&expr.Reject{}), firewall.VerdictReject, "", ""},
		{"jump", with(&expr.Verdict{Kind: expr.VerdictJump, Chain: "c"}), firewall.VerdictJump, "c", ""},
		{"queue", with(&expr.Queue{Num: 1}), firewall.VerdictUnknown, "queue", ""},
		{"vmap", with(&expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: "m"}), firewall.VerdictUnknown, "verdict map m", ""},
		{"meta mark set", with(&expr.Immediate{Register: 1, Data: le32(1)}, &expr.Meta{Key: expr.MetaKeyMARK, Register: 1, SourceRegister: true}), firewall.VerdictContinue, "", "meta mark set"},
		{"ether write", with(&expr.Immediate{Register: 1, Data: make([]byte, 6)}, &expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: expr.PayloadBaseLLHeader, Len: 6}), firewall.VerdictContinue, "", "payload write"},
		{"ebtables dnat", with(&expr.Target{Name: "dnat", Info: &xt.Unknown{}}), firewall.VerdictContinue, "", "xt target dnat"},
		{"ebtables log", with(&expr.Target{Name: "log", Info: &xt.Unknown{}}), firewall.VerdictContinue, "", ""},
		{"unknown expression", with(&expr.FlowOffload{Name: "f"}), firewall.VerdictContinue, "", "not read"},
		{"nat", with(&expr.NAT{Type: expr.NATTypeDestNAT}), firewall.VerdictContinue, "", "nat"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := otherFamilyRule(&nftables.Rule{Handle: 4, Exprs: c.exprs}, "bridge")
			if r.Verdict.Kind != c.kind || r.Verdict.Target != c.target {
				t.Errorf("verdict %+v, want %s %q", r.Verdict, c.kind, c.target)
			}
			got := strings.Join(r.Writes, "; ")
			if (c.writes == "") != (got == "") || !strings.Contains(got, c.writes) {
				t.Errorf("writes %q, want %q", got, c.writes)
			}
			if r.Handle != 4 || len(r.Unknown) == 0 {
				t.Errorf("rule %+v: want handle 4 and a note that its family is not decoded", r)
			}
		})
	}
}

// The IP decoder records writes too (an ingress chain is read by it).
func TestDecodeRecordsWrites(t *testing.T) {
	r := decodeOne(t, firewall.FamilyInet, nil, &expr.Immediate{Register: 1, Data: le32(1)},
		&expr.Ct{Key: expr.CtKeyMARK, Register: 1, SourceRegister: true})
	if strings.Join(r.Writes, ",") != "ct mark set" {
		t.Errorf("writes %q, want ct mark set", r.Writes)
	}
	r = decodeOne(t, firewall.FamilyIP, nil, &expr.Target{Name: "LOG", Info: &xt.Unknown{}})
	if len(r.Writes) != 0 {
		t.Errorf("LOG writes %q, want none", r.Writes)
	}
}

func rule(h uint64, k firewall.VerdictKind, writes ...string) firewall.Rule {
	return firewall.Rule{Handle: h, Verdict: firewall.Verdict{Kind: k}, Writes: writes}
}

func base(name, hook, policy string, rules ...firewall.Rule) firewall.Chain {
	return firewall.Chain{Name: name, Hook: hook, Policy: policy, Type: "filter", Rules: rules}
}

// A table or hook the evaluator does not run is refused when it can drop or
// write, naming the table, its family, the chain, the hook and the rule;
// one that only passes packets on is taken.
func TestUnspokenUnevaluatedTables(t *testing.T) {
	inet := func(chains ...firewall.Chain) firewall.Table {
		return firewall.Table{Family: firewall.FamilyInet, Name: "host", Chains: chains}
	}
	tbl := func(fam, name string, chains ...firewall.Chain) firewall.Table {
		return firewall.Table{Family: fam, Name: name, Chains: chains}
	}
	jump := firewall.Rule{Handle: 3, Verdict: firewall.Verdict{Kind: firewall.VerdictJump, Target: "sub"}}
	for _, c := range []struct {
		name   string
		tables []firewall.Table
		want   []string // empty: taken
	}{
		{"bridge drop", []firewall.Table{tbl("bridge", "filt", base("in", "input", "accept", rule(4, firewall.VerdictDrop)))},
			[]string{"table bridge filt, chain in hooked at input", "rule handle 4 drops", "a bridge table", "nft delete table bridge filt", "not supported"}},
		{"bridge drop policy", []firewall.Table{tbl("bridge", "filt", base("fwd", "forward", "drop"))},
			[]string{"table bridge filt, chain fwd hooked at forward", "its policy is drop"}},
		{"bridge drop behind a jump", []firewall.Table{tbl("bridge", "filt", base("in", "input", "accept", rule(2, firewall.VerdictContinue), jump),
			firewall.Chain{Name: "sub", Rules: []firewall.Rule{rule(8, firewall.VerdictReject)}})},
			[]string{"chain in hooked at input", "rule handle 8 rejects"}},
		{"bridge writes", []firewall.Table{tbl("bridge", "filt", base("pre", "prerouting", "accept", rule(5, firewall.VerdictContinue, "meta mark set")))},
			[]string{"hooked at prerouting", "rule handle 5 writes (meta mark set)"}},
		{"bridge rules not listed", []firewall.Table{tbl("bridge", "filt", firewall.Chain{Name: "in", Hook: "input", Policy: "accept", Unknown: "boom"})},
			[]string{"its rules could not be listed (boom)"}},
		{"arp drop", []firewall.Table{tbl("arp", "a", base("in", "input", "accept", rule(9, firewall.VerdictDrop)))},
			[]string{"table arp a, chain in hooked at input", "rule handle 9 drops", "an arp table filters ARP"}},
		{"netdev egress drop", []firewall.Table{tbl("netdev", "edge", base("out", "egress", "accept", rule(6, firewall.VerdictDrop)))},
			[]string{"table netdev edge, chain out hooked at egress", "an egress chain", "nft delete table netdev edge"}},
		{"netdev ingress queue", []firewall.Table{tbl("netdev", "edge", base("in", "ingress", "accept", firewall.Rule{Handle: 2, Verdict: firewall.Verdict{Kind: firewall.VerdictUnknown, Target: "queue"}}))},
			[]string{"hooked at ingress", "rule handle 2 ends in queue"}},
		{"inet ingress drop", []firewall.Table{inet(base("early", "ingress", "accept", rule(7, firewall.VerdictDrop)), base("input", "input", "drop"))},
			[]string{"table inet host, chain early hooked at ingress", "an ingress chain", "nft delete chain inet host early"}},
		{"bridge counting", []firewall.Table{tbl("bridge", "count", base("in", "input", "accept", rule(1, firewall.VerdictContinue), rule(2, firewall.VerdictAccept), jump),
			firewall.Chain{Name: "sub", Rules: []firewall.Rule{rule(8, firewall.VerdictReturn)}})}, nil},
		{"arp accept", []firewall.Table{tbl("arp", "a", base("in", "input", "accept", rule(1, firewall.VerdictAccept)))}, nil},
		{"netdev empty ingress", []firewall.Table{tbl("netdev", "edge", base("in", "ingress", "accept"))}, nil},
		{"inet ingress counting", []firewall.Table{inet(base("early", "ingress", "accept", rule(1, firewall.VerdictContinue)))}, nil},
		{"bridge regular chain only", []firewall.Table{tbl("bridge", "b", firewall.Chain{Name: "sub", Rules: []firewall.Rule{rule(1, firewall.VerdictDrop)}})}, nil},
		{"ip input drop is evaluated", []firewall.Table{inet(base("input", "input", "drop", rule(1, firewall.VerdictDrop)))}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Unspoken(&firewall.Ruleset{Tables: c.tables})
			if len(c.want) == 0 {
				if got != "" {
					t.Fatalf("refused %q; want it taken", got)
				}
				return
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("refusal %q lacks %q", got, w)
				}
			}
			if _, err := Kind(&firewall.Ruleset{Tables: c.tables}, nil); err == nil || !strings.Contains(err.Error(), "nothing was changed") {
				t.Errorf("Kind error %v; want the refusal, saying nothing was changed", err)
			}
		})
	}
}
