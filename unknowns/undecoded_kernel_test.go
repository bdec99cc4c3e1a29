package unknowns

import (
	"strings"
	"testing"

	"adoption/config"
	"adoption/containers"
	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/internal/fwtest"
)

// TestKernelUndecodedRuleNamedAndRefused: a native input chain drops ssh
// for transparent sockets (an expression google/nftables drops when it lists the rule)
// before accepting it. The preview names that rule (its chain, its handle
// as the kernel listed it, the expression) and refuses, even with 22/tcp
// declared in flip.widen: what the rule lets through cannot be known, so
// it never approves by default. The LOG-only rule beside it decides
// nothing and is not named. Rewritten without the expression, the same
// node approves.
func TestKernelUndecodedRuleNamedAndRefused(t *testing.T) {
	n := fwtest.NewNamedNet(t, "ud-", "ud", "5d")
	n.Nft(t, `
table inet host {
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname "lo" accept
		socket transparent 1 log prefix "tproxy "
		socket transparent 1 tcp dport 22 drop
		tcp dport 22 accept
	}
}`)
	rs := n.List(t)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	var handle uint64
	for _, tb := range rs.Tables {
		for _, ch := range tb.Chains {
			for _, r := range ch.Rules {
				if r.Verdict.Kind == firewall.VerdictDrop {
					handle = r.Handle
				}
			}
		}
	}
	if handle == 0 {
		t.Fatalf("the drop rule was not listed: %s", n.Listing(t))
	}
	spec := flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: flip.OwnerManagement}},
		Widen: []config.Port{{Num: 22, Proto: "tcp"}}}
	pv := flip.PreviewFlipOn(rs, node, spec)
	more := Preview(rs, node, containers.Report{}, config.Plan{Node: "n1"}, spec, &pv)
	if len(more) > 0 {
		pv.Approved = false
		pv.Reasons = append(pv.Reasons, more...)
	}
	if pv.Approved {
		t.Fatalf("the preview approved a flip over a rule it cannot decode:\n%s", strings.Join(pv.Reasons, "\n"))
	}
	if len(pv.Undecoded) != 1 {
		t.Fatalf("undecoded = %+v; want the one drop rule (the log rule decides nothing)", pv.Undecoded)
	}
	u := pv.Undecoded[0]
	if u.Family != "inet" || u.Table != "host" || u.Chain != "input" || u.Handle != handle || !strings.Contains(u.What, "no decoded expression loaded") {
		t.Errorf("undecoded = %+v; want inet host input handle %d naming the expression google/nftables dropped", u, handle)
	}
	want := u.Text()
	if !strings.Contains(strings.Join(more, "\n"), "not decoded: "+want) {
		t.Errorf("no refusal names %q; reasons:\n%s", want, strings.Join(pv.Reasons, "\n"))
	}

	n.Nft(t, `
delete table inet host
table inet host {
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname "lo" accept
		tcp dport 22 accept
	}
}`)
	rs = n.List(t)
	pv = flip.PreviewFlipOn(rs, node, spec)
	if more := Preview(rs, node, containers.Report{}, config.Plan{Node: "n1"}, spec, &pv); len(more) > 0 || !pv.Approved || len(pv.Undecoded) != 0 {
		t.Errorf("rewritten without the expression, the preview should approve: approved %v, undecoded %+v, reasons:\n%s", pv.Approved, pv.Undecoded, strings.Join(append(pv.Reasons, more...), "\n"))
	}
}
