package flip

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// TestKernelDNATIntoAnUnknownAddress: a native nat table DNATs two host
// ports to 10.50.0.9, on none of the node's networks (it has no route
// there). The evaluator, on the listed ruleset and the node as read,
// names 18099 uncertain with the target (the forward chain may accept it,
// and where the kernel routes it is not known) and does not call 18098
// open (the forward chain drops it whatever the route, which the kernel
// confirms: a client's connection does not get through). The preview
// refuses naming 18099 and why, approves once it is dropped (the mesh
// drops it whatever the route), and neither changes the node's ruleset.
func TestKernelDNATIntoAnUnknownAddress(t *testing.T) {
	n := fwtest.NewNamedNet(t, "du-", "du", "1e")
	fwtest.RequireTools(t, "sysctl")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	n.Nft(t, `
table inet host {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		fib daddr type local tcp dport 18099 dnat ip to 10.50.0.9:80
		fib daddr type local tcp dport 18098 dnat ip to 10.50.0.9:81
	}
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname "lo" accept
		tcp dport 22 accept
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		ct status dnat meta l4proto tcp ct original proto-dst 18099 accept
	}
}`)
	n.Serve(t, []uint16{22})
	rs := n.List(t)
	before := firewall.Fingerprint(rs)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	open := eval.OpenPortsOn(rs, node)
	got := fwtest.Find(open, firewall.HookForward, firewall.FamilyIP, "tcp", 18099)
	if len(got) == 0 {
		t.Fatalf("18099/tcp: no opening; want it uncertain naming 10.50.0.9: %+v", open)
	}
	for _, o := range got {
		if !o.Uncertain || !strings.Contains(o.Reason, "10.50.0.9 is on none of the node's networks") {
			t.Errorf("18099/tcp: %+v; want uncertain naming the unknown target", o)
		}
	}
	if o := fwtest.Find(open, firewall.HookForward, firewall.FamilyIP, "tcp", 18098); len(o) != 0 {
		t.Errorf("18098/tcp: the forward chain drops it whatever the route, yet %+v", o)
	}
	if reached := n.Reach(t, []fwtest.Probe{{Proto: "tcp", Src: fwtest.PeerV4a, Port: 18098}}); reached[fwtest.Probe{Proto: "tcp", Src: fwtest.PeerV4a, Port: 18098}] {
		t.Error("the kernel let a client through on 18098: the test's premise is wrong")
	}

	spec := MeshSpec{Node: "n1", Input: []Allow{{Port: vocab.Port{Num: 22, Proto: "tcp"}, Owner: OwnerManagement}}}
	p := PreviewFlipOn(rs, node, spec)
	reasons := strings.Join(p.Reasons, "\n")
	if p.Approved || !strings.Contains(reasons, "18099/tcp (forward, ip, to 10.50.0.9:80, uncertain) is open now and would close (uncertain now: DNAT target 10.50.0.9 is on none of the node's networks") {
		t.Errorf("the preview must refuse naming 18099 and its unknown target; reasons:\n%s", reasons)
	}
	spec.Drop = []vocab.Port{{Num: 18099, Proto: "tcp"}}
	if p = PreviewFlipOn(rs, node, spec); !p.Approved {
		t.Errorf("with 18099 dropped the preview should approve:\n%s", strings.Join(p.Reasons, "\n"))
	}
	if after := firewall.Fingerprint(n.List(t)); after != before {
		t.Error("evaluating and previewing changed the node's ruleset")
	}
}
