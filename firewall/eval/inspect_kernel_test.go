package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
)

// TestKernelInspectorListsAsDial: Inspector.Ruleset lists over one lasting
// netlink socket, the rules one dump per table; what it reads must be what
// a listing of one request per chain reads, on a ruleset with iptables-nft
// chains, named and anonymous sets, a verdict map and a ct original
// proto-dst (the dump google/nftables refuses until the listing widens its
// direction), twice in a row.
func TestKernelInspectorListsAsDial(t *testing.T) {
	n := fwtest.NewTestNet(t)
	testenv.NeedTools(t, "iptables-nft-restore")
	fwtest.Run(t, `*filter
:INPUT DROP [0:0]
:svc - [0:0]
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp -m multiport --dports 9100,9200:9202 -j ACCEPT
-A INPUT -s 198.18.0.3/32 -j svc
-A svc -p tcp --dport 22 -j ACCEPT
COMMIT
`, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	n.Nft(t, `table inet f {
	set allowed { type ipv4_addr; flags interval; elements = { 198.18.0.0/24, 10.0.0.0/8 } }
	chain ports {
		tcp dport 8080 accept
	}
	chain input {
		type filter hook input priority filter; policy drop;
		ip saddr @allowed tcp dport { 22, 443 } accept
		tcp dport vmap { 8080 : jump ports, 25 : drop }
		ct status dnat meta l4proto tcp ct original proto-dst { 18080, 18082 } accept
	}
}`)
	s, err := nft.OpenSession(n.Path(n.Node), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, byChain, err := s.SnapshotSome(func(*firewall.Table, *firewall.Chain) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(byChain)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		rs, err := Inspector{Netns: n.Path(n.Node)}.Ruleset()
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("listing %d over a lasting socket differs:\n got %s\nwant %s", i, got, want)
		}
	}
	var rs firewall.Ruleset
	json.Unmarshal(want, &rs)
	for _, tb := range rs.Tables {
		for _, ch := range tb.Chains {
			if ch.Unknown != "" {
				t.Errorf("chain %s %s not listed: %s", tb.Name, ch.Name, ch.Unknown)
			}
		}
	}
}

// TestKernelListingIsOneRuleset: a listing is one ruleset the kernel had
// in force, never a mix of two. A writer puts the same comment on a rule
// in each of two tables, one batch at a time, a new one each time, while
// the node is listed again and again: every listing that returns must
// show the two rules with the same comment (a listing during which the
// ruleset kept changing may be refused, never mixed).
func TestKernelListingIsOneRuleset(t *testing.T) {
	n := fwtest.NewTestNet(t)
	n.Nft(t, "table inet a {\n\tchain c {\n\t}\n}\ntable inet b {\n\tchain c {\n\t}\n}\n")
	w, closeNS, err := nft.Dial(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	defer closeNS()
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		for k := 0; ; k++ {
			select {
			case <-stop:
				stopped <- nil
				return
			default:
			}
			for _, name := range []string{"a", "b"} {
				tb := &nftables.Table{Family: nftables.TableFamilyINet, Name: name}
				ch := &nftables.Chain{Table: tb, Name: "c"}
				w.FlushChain(ch)
				w.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}},
					UserData: userdata.AppendString(nil, userdata.TypeComment, fmt.Sprintf("write %d", k))})
			}
			if err := w.Flush(); err != nil {
				stopped <- err
				return
			}
			time.Sleep(200 * time.Microsecond) // the writer's pace, so that some listings fall between writes
		}
	}()
	listed, refused := 0, 0
	for range 400 {
		rs, err := Inspector{Netns: n.Path(n.Node)}.Ruleset()
		if errors.Is(err, nft.ErrRulesetChanged) {
			refused++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		listed++
		comments := map[string]string{}
		for _, tb := range rs.Tables {
			for _, ch := range tb.Chains {
				for _, r := range ch.Rules {
					comments[tb.Name] = r.Comment
				}
			}
		}
		if comments["a"] != comments["b"] {
			t.Fatalf("listing %d mixes two rulesets: table a has %q, table b %q", listed, comments["a"], comments["b"])
		}
	}
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if listed < 100 {
		t.Fatalf("only %d of 400 listings returned (%d refused as the ruleset kept changing): too few to tell", listed, refused)
	}
	t.Logf("%d listings, each one ruleset; %d refused", listed, refused)
}
