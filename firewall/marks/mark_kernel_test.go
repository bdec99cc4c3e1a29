package marks

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
	"adoption/vocab"
)

// Root tests of marked rules: the node namespace of newTestNet gets a found
// firewall, the Marker opens ports through it, the peer namespace checks
// with real connections, and the found firewall's own tools read the result.

func marker(n *fwtest.TestNet, t *testing.T) *Marker { return NewMarker(n.Path(n.Node)) }

func markCount(s, comment string) int {
	return strings.Count(s, `--comment "`+comment+`"`) + strings.Count(s, `--comment `+comment+"\n")
}

// controlNode makes the node namespace a ufw default-deny node shaped like
// a real control node: `ufw status` lists 54 incoming rules and 52
// forwarding rules (27 and 26 port rules, each for IPv4 and IPv6). Rules
// are added while ufw is disabled (it only writes its files then) and
// loaded by one enable, which keeps the setup to a few seconds.
func controlNode(t *testing.T, n *fwtest.TestNet) (allowed []vocab.Port) {
	t.Helper()
	testenv.NeedTools(t, "ufw")
	cmds := [][]string{{"--force", "reset"}, {"default", "deny", "incoming"}, {"default", "deny", "routed"}}
	for i := 0; i < 27; i++ {
		p := vocab.Port{Num: uint16(30000 + i), Proto: "tcp"}
		switch {
		case i == 0:
			p.Num = 22
		case i%3 == 2:
			p.Proto = "udp"
		}
		allowed = append(allowed, p)
		cmds = append(cmds, []string{"allow", p.String()})
	}
	for i := 0; i < 26; i++ {
		proto := "tcp"
		if i%4 == 3 {
			proto = "udp"
		}
		cmds = append(cmds, []string{"route", "allow", "proto", proto, "to", "any", "port", fmt.Sprint(31000 + i)})
	}
	cmds = append(cmds, []string{"--force", "enable"})
	n.Ufw(t, cmds...)
	status := n.Quiet(t, "ufw", "status", "verbose")
	if in, fwd := strings.Count(status, "ALLOW IN"), strings.Count(status, "ALLOW FWD"); in != 54 || fwd != 52 {
		t.Fatalf("ufw status lists %d incoming and %d forwarding rules, want 54 and 52:\n%s", in, fwd, status)
	}
	return allowed
}

func TestMarkUfwControlNode(t *testing.T) {
	n := fwtest.NewTestNet(t)
	allowed := controlNode(t, n)
	open := fwtest.Ports("9500/tcp", "9501/udp")
	sample := []vocab.Port{allowed[0], allowed[1], allowed[2]} // 22/tcp, 30001/tcp, 30002/udp
	n.Serve(t, []uint16{22, 30001, 30002, 9500, 9501})
	before := n.Listing(t)
	n.ExpectReach(t, "before opening", false, open...)
	n.ExpectReach(t, "before opening", true, sample...)

	m := marker(n, t)
	added, present, err := m.Open("cn1", "foundation", open)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 4 || len(present) != 0 {
		t.Fatalf("Open added %v, present %v; want 4 added (2 ports x ip, ip6)", added, present)
	}
	for _, r := range added {
		want := map[string]string{firewall.FamilyIP: "ufw-user-input", firewall.FamilyIP6: "ufw6-user-input"}[r.Family]
		if r.Table != "filter" || r.Chain != want || r.Handle == 0 {
			t.Errorf("added %v, want table filter chain %s with a handle", r, want)
		}
	}
	n.ExpectReach(t, "after opening", true, open...)
	n.ExpectReach(t, "after opening", true, sample...)

	save4 := n.Quiet(t, "iptables-save")
	save6 := n.Quiet(t, "ip6tables-save")
	for _, w := range []struct{ save, chain, rule string }{
		{save4, "ufw-user-input", `-p tcp -m tcp --dport 9500 -m comment --comment "adoption:cn1:foundation:9500/tcp" -j ACCEPT`},
		{save4, "ufw-user-input", `-p udp -m udp --dport 9501 -m comment --comment "adoption:cn1:foundation:9501/udp" -j ACCEPT`},
		{save6, "ufw6-user-input", `-p tcp -m tcp --dport 9500 -m comment --comment "adoption:cn1:foundation:9500/tcp" -j ACCEPT`},
		{save6, "ufw6-user-input", `-p udp -m udp --dport 9501 -m comment --comment "adoption:cn1:foundation:9501/udp" -j ACCEPT`},
	} {
		if !strings.Contains(w.save, "-A "+w.chain+" "+w.rule+"\n") {
			t.Errorf("save lacks %q in %s:\n%s", w.rule, w.chain, w.save)
		}
	}
	for _, s := range []string{save4, save6} {
		if strings.Contains(s, "unsupported") || strings.Contains(s, "incompatible") {
			t.Errorf("save reports a rule it cannot read:\n%s", s)
		}
	}
	raw := n.Quiet(t, "ufw", "show", "raw")
	status := n.Quiet(t, "ufw", "status", "verbose")
	if !strings.Contains(raw, "adoption:cn1:foundation:9500/tcp") {
		t.Errorf("ufw show raw lacks the mark:\n%s", raw)
	}
	t.Logf("iptables-save (marked rules):\n%s", fwtest.GrepLines(save4, "adoption:"))
	t.Logf("ip6tables-save (marked rules):\n%s", fwtest.GrepLines(save6, "adoption:"))
	t.Logf("ufw show raw (marked rules):\n%s", fwtest.GrepLines(raw, "adoption:"))
	t.Logf("ufw status verbose runs clean (%d lines; it lists ufw's own configured rules)", strings.Count(status, "\n"))

	// Open again: nothing added, one rule per family and port.
	added, present, err = m.Open("cn1", "foundation", open)
	if err != nil || len(added) != 0 || len(present) != 4 {
		t.Fatalf("second Open: added %v present %v err %v; want 0 added, 4 present", added, present, err)
	}
	if c := markCount(n.Quiet(t, "iptables-save"), "adoption:cn1:foundation:9500/tcp"); c != 1 {
		t.Errorf("after a second Open iptables-save shows the 9500/tcp mark %d times, want 1", c)
	}

	removed, err := m.Release("cn1")
	if err != nil || len(removed) != 4 {
		t.Fatalf("Release removed %v, %v; want the 4 marks", removed, err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("after Release the ruleset differs from before opening:\n%s", fwtest.Diff(before, after))
	}
	n.ExpectReach(t, "after release", false, open...)
	n.ExpectReach(t, "after release", true, sample...)
}

func TestMarkIdempotentAndOwnRulesOnly(t *testing.T) {
	n := fwtest.NewTestNet(t)
	fwtest.RestoreUfw(t, n)
	before := n.Listing(t)
	m := marker(n, t)
	const port = "9600"
	// The predecessor's own rules, identical to a mark but for the comment.
	for _, cmd := range []string{"iptables", "ip6tables"} {
		chain := map[string]string{"iptables": "ufw-user-input", "ip6tables": "ufw6-user-input"}[cmd]
		fwtest.Run(t, "", "ip", "netns", "exec", n.Node, cmd, "-I", chain, "-p", "tcp", "--dport", port, "-j", "ACCEPT", "-m", "comment", "--comment", "not-ours")
		fwtest.Run(t, "", "ip", "netns", "exec", n.Node, cmd, "-I", chain, "-p", "tcp", "--dport", port, "-j", "ACCEPT")
	}
	withTheirs := n.Listing(t)

	if _, _, err := m.Open("n1", "alpha", fwtest.Ports(port+"/tcp", "9601/udp")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Open("n1", "beta", fwtest.Ports(port+"/tcp", "9602/tcp")); err != nil {
		t.Fatal(err)
	}
	added, present, err := m.Open("n1", "alpha", fwtest.Ports(port+"/tcp", "9601/udp"))
	if err != nil || len(added) != 0 || len(present) != 4 {
		t.Fatalf("Open twice: added %v present %v err %v; want 0 added, 4 present", added, present, err)
	}
	save := n.Quiet(t, "iptables-save")
	if c := markCount(save, "adoption:n1:alpha:9600/tcp"); c != 1 {
		t.Errorf("mark alpha 9600/tcp appears %d times in iptables-save, want 1:\n%s", c, save)
	}

	// A marked rule deleted by hand is put back by the next Open.
	list, err := m.List("n1")
	if err != nil || len(list) != 8 {
		t.Fatalf("List: %v, %v; want 8 marks", list, err)
	}
	var victim MarkedRule
	for _, r := range list {
		if r.Mark.Owner == "alpha" && r.Mark.Port == 9601 && r.Family == firewall.FamilyIP6 {
			victim = r
		}
	}
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "nft", "delete", "rule", victim.Family, victim.Table, victim.Chain, "handle", fmt.Sprint(victim.Handle))
	added, present, err = m.Open("n1", "alpha", fwtest.Ports(port+"/tcp", "9601/udp"))
	if err != nil || len(added) != 1 || len(present) != 3 || added[0].Mark != victim.Mark || added[0].Family != firewall.FamilyIP6 {
		t.Fatalf("Open after a hand deletion: added %v present %v err %v; want %v put back", added, present, err, victim)
	}

	// Close(alpha) leaves beta's marks and the predecessor's rules.
	closed, err := m.Close("n1", "alpha")
	if err != nil || len(closed) != 4 {
		t.Fatalf("Close(alpha): %v, %v; want 4 removed", closed, err)
	}
	list, err = m.List("n1")
	if err != nil || len(list) != 4 {
		t.Fatalf("after Close(alpha) List: %v, %v; want beta's 4", list, err)
	}
	for _, r := range list {
		if r.Mark.Owner != "beta" {
			t.Errorf("after Close(alpha) found %v", r)
		}
	}
	// Close of an owner with nothing open changes nothing.
	if r, err := m.Close("n1", "alpha"); err != nil || len(r) != 0 {
		t.Errorf("second Close(alpha): %v, %v", r, err)
	}

	// Release removes beta's, never the identical unmarked rules.
	if _, err := m.Release("n1"); err != nil {
		t.Fatal(err)
	}
	if after := n.Listing(t); after != withTheirs {
		t.Errorf("after Release the ruleset differs from the found one:\n%s", fwtest.Diff(withTheirs, after))
	}
	save = n.Quiet(t, "iptables-save")
	if !strings.Contains(save, "-A ufw-user-input -p tcp -m tcp --dport 9600 -j ACCEPT\n") ||
		!strings.Contains(save, `-A ufw-user-input -p tcp -m tcp --dport 9600 -m comment --comment not-ours -j ACCEPT`) {
		t.Errorf("the predecessor's own rules did not survive Release:\n%s", save)
	}
	if before == withTheirs {
		t.Error("the unmarked rules were never added")
	}
}

func TestMarkNativeInet(t *testing.T) {
	n := fwtest.NewTestNet(t)
	n.Nft(t, `
table inet host {
	set allowed { type inet_service; elements = { 22, 8080 } }
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		ct state invalid drop
		iifname "lo" accept
		tcp dport @allowed accept
		udp dport 6000 counter accept
	}
	chain output {
		type filter hook output priority filter; policy accept;
	}
}`)
	open := fwtest.Ports("9700/tcp", "9701/udp")
	n.Serve(t, []uint16{22, 8080, 6000, 9700, 9701})
	before := n.Listing(t)
	n.ExpectReach(t, "before opening", false, open...)
	m := marker(n, t)
	added, _, err := m.Open("n1", "mod-a", open)
	if err != nil || len(added) != 2 {
		t.Fatalf("Open: %v, %v; want one rule per port in inet host input", added, err)
	}
	rs := n.List(t)
	ch := rs.Tables[0].Chains[0]
	if ch.Name != "input" {
		ch = rs.Tables[0].Chains[1]
	}
	invalid, mark := -1, -1
	for i, r := range ch.Rules {
		for _, c := range r.Conds {
			if c.Kind == firewall.CondCtState && c.Bits == firewall.CtStateInvalid && r.Verdict.Kind == firewall.VerdictDrop {
				invalid = i
			}
		}
		if r.Comment == "adoption:n1:mod-a:9700/tcp" && mark < 0 {
			mark = i
		}
	}
	if invalid < 0 || mark < invalid {
		t.Errorf("mark at rule %d, ct state invalid drop at %d: the mark must come after the ct rules", mark, invalid)
	}
	t.Logf("after Open:\n%s", n.Listing(t))
	n.ExpectReach(t, "after opening", true, open...)
	n.ExpectReach(t, "after opening", true, fwtest.Ports("22/tcp", "8080/tcp", "6000/udp")...)
	if _, err := m.Release("n1"); err != nil {
		t.Fatal(err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("after Release the ruleset differs:\n%s", fwtest.Diff(before, after))
	}
	n.ExpectReach(t, "after release", false, open...)
}

// A native chain that drops the port with a rule goes before that rule; a
// jump that might drop counts as one; a chain that accepts by policy and
// never drops the port gets nothing.
func TestMarkNativeBeforeFirstDrop(t *testing.T) {
	n := fwtest.NewTestNet(t)
	n.Nft(t, `
table ip early {
	chain screen {
		tcp dport 9800 drop
	}
	chain input {
		type filter hook input priority -10; policy accept;
		ct state invalid drop
		tcp dport 22 accept
		jump screen
	}
}
table ip6 other {
	chain input {
		type filter hook input priority 0; policy accept;
		tcp dport 9800 reject
	}
}
table inet late {
	chain input {
		type filter hook input priority 10; policy accept;
		udp dport 53 drop
	}
}`)
	n.Serve(t, []uint16{9800})
	before := n.Listing(t)
	n.ExpectReach(t, "before", false, fwtest.Ports("9800/tcp")...)
	m := marker(n, t)
	added, _, err := m.Open("n1", "mod-b", fwtest.Ports("9800/tcp"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range added {
		got[r.Family+" "+r.Table+" "+r.Chain] = true
	}
	if len(added) != 2 || !got["ip early input"] || !got["ip6 other input"] {
		t.Fatalf("added %v; want ip early input and ip6 other input only", added)
	}
	rs := n.List(t)
	for _, tb := range rs.Tables {
		for _, ch := range tb.Chains {
			for i, r := range ch.Rules {
				if r.Comment != "" {
					prev := ch.Rules[i+1]
					if prev.Verdict.Kind != firewall.VerdictJump && prev.Verdict.Kind != firewall.VerdictReject {
						t.Errorf("%s %s: the mark comes before a %s rule, want the jump or the reject", tb.Name, ch.Name, prev.Verdict.Kind)
					}
				}
			}
		}
	}
	n.ExpectReach(t, "after opening", true, fwtest.Ports("9800/tcp")...)
	if _, err := m.Release("n1"); err != nil {
		t.Fatal(err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("after Release the ruleset differs:\n%s", fwtest.Diff(before, after))
	}
}

func TestMarkPlainIptablesNft(t *testing.T) {
	n := fwtest.NewTestNet(t)
	rules := `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:svc - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -p tcp -m multiport --dports 9100,9200:9202 -j ACCEPT
-A INPUT -j svc
-A svc -p tcp --dport 22 -m comment --comment "ssh" -j ACCEPT
COMMIT
`
	fwtest.Run(t, rules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.Run(t, rules, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
	n.Serve(t, []uint16{9900})
	before := n.Listing(t)
	n.ExpectReach(t, "before", false, fwtest.Ports("9900/tcp")...)
	m := marker(n, t)
	added, _, err := m.Open("n1", "mod-c", fwtest.Ports("9900/tcp"))
	if err != nil || len(added) != 2 {
		t.Fatalf("Open: %v, %v; want INPUT of ip and ip6 filter", added, err)
	}
	save := n.Quiet(t, "iptables-save")
	want := "-A INPUT -m conntrack --ctstate INVALID -j DROP\n-A INPUT -p tcp -m multiport --dports 9100,9200:9202 -j ACCEPT\n" +
		`-A INPUT -p tcp -m tcp --dport 9900 -m comment --comment "adoption:n1:mod-c:9900/tcp" -j ACCEPT` + "\n-A INPUT -j svc\n"
	if !strings.Contains(save, want) {
		t.Errorf("iptables-save lacks the mark just before the jump:\n%s", save)
	}
	n.Quiet(t, "ip6tables-save")
	n.ExpectReach(t, "after opening", true, fwtest.Ports("9900/tcp")...)
	if _, err := m.Release("n1"); err != nil {
		t.Fatal(err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("after Release the ruleset differs:\n%s", fwtest.Diff(before, after))
	}
}

func TestMarkRefusesFirewalld(t *testing.T) {
	n := fwtest.NewTestNet(t)
	n.Nft(t, `
table inet firewalld {
	chain filter_INPUT {
		type filter hook input priority filter + 10; policy accept;
		ct state invalid drop
		reject with icmpx admin-prohibited
	}
}`)
	before := n.Listing(t)
	_, _, err := marker(n, t).Open("n1", "foundation", fwtest.Ports("9500/tcp"))
	if err == nil || !strings.Contains(err.Error(), "firewalld") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("Open on a firewalld node: %v; want a refusal naming firewalld", err)
	}
	t.Logf("refused: %v", err)
	if after := n.Listing(t); after != before {
		t.Errorf("the refusal changed the ruleset:\n%s", fwtest.Diff(before, after))
	}
}

// A ruleset changed after the listing a batch was planned on: the kernel
// refuses the batch as a whole (NFNL_BATCH_GENID) and nothing is written.
func TestMarkRulesetChangedBetweenListAndWrite(t *testing.T) {
	n := fwtest.NewTestNet(t)
	fwtest.RestoreUfw(t, n)
	c, closeNS, err := nft.Dial(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	defer closeNS()
	s, err := nft.OpenSession("", c)
	if err != nil {
		t.Fatal(err)
	}
	gen, _, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables", "-I", "ufw-user-input", "-p", "tcp", "--dport", "1", "-j", "DROP")
	changed := n.Listing(t)
	mk := Mark{Node: "n1", Owner: "x", Port: 9500, Proto: "tcp"}
	_, err = s.Commit(gen, func(c *nftables.Conn) {
		c.InsertRule(&nftables.Rule{
			Table: &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"}, Chain: &nftables.Chain{Name: "ufw-user-input"},
			Exprs: MarkExprs(mk.Port, mk.Proto), UserData: markUserData(mk),
		})
	})
	if !errors.Is(err, nft.ErrRulesetChanged) {
		t.Fatalf("commit at a stale generation: %v; want ErrRulesetChanged", err)
	}
	t.Logf("refused: %v", err)
	if after := n.Listing(t); after != changed {
		t.Errorf("a refused batch changed the ruleset:\n%s", fwtest.Diff(changed, after))
	}
	// At the current generation the same batch goes through.
	gen, _, err = s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	echoes, err := s.Commit(gen, func(c *nftables.Conn) {
		c.InsertRule(&nftables.Rule{
			Table: &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"}, Chain: &nftables.Chain{Name: "ufw-user-input"},
			Exprs: MarkExprs(mk.Port, mk.Proto), UserData: markUserData(mk),
		})
	})
	if err != nil || len(echoes) != 1 || echoes[0].Handle == 0 || echoes[0].Comment != mk.Comment() {
		t.Fatalf("commit at the current generation: %v, %v", echoes, err)
	}
}

// A batch asks the kernel to acknowledge only its last message: an error
// in any other message still comes back, the batch is refused as a whole,
// and a good batch after it goes through. This is the kernel behaviour the
// commit relies on (nfnetlink reports every error, acknowledges on request).
func TestMarkBatchRefusedByAnyMessage(t *testing.T) {
	n := fwtest.NewTestNet(t)
	fwtest.RestoreUfw(t, n)
	m := marker(n, t)
	added, _, err := m.Open("n1", "alpha", fwtest.Ports("9700/tcp", "9701/tcp", "9702/tcp"))
	if err != nil || len(added) != 6 {
		t.Fatalf("Open: %v, %v; want 6 marks", added, err)
	}
	opened := n.Listing(t)
	del := func(handles ...uint64) func(c *nftables.Conn) {
		return func(c *nftables.Conn) {
			for _, h := range handles {
				_ = c.DelRule(&nftables.Rule{
					Table: &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"}, Chain: &nftables.Chain{Name: "ufw-user-input"},
					Handle: h,
				})
			}
		}
	}
	var h []uint64
	for _, r := range added {
		if r.Family == firewall.FamilyIP {
			h = append(h, r.Handle)
		}
	}
	const gone = 1 << 40 // no rule has it
	s, err := m.Session()
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]uint64{{h[0], gone, h[2]}, {h[0], h[1], gone}, {gone, h[1], h[2]}} {
		gen, _, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Commit(gen, del(batch...))
		if !errors.Is(err, unix.ENOENT) {
			t.Errorf("deleting handles %v: %v; want the kernel's ENOENT", batch, err)
		}
		if after := n.Listing(t); after != opened {
			t.Fatalf("a refused batch (handles %v) changed the ruleset:\n%s", batch, fwtest.Diff(opened, after))
		}
	}
	gen, _, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(gen, del(h...)); err != nil {
		t.Fatalf("deleting the IPv4 marks: %v", err)
	}
	s.Close()
	list, err := m.List("n1")
	if err != nil || len(list) != 3 {
		t.Fatalf("List after deleting the IPv4 marks: %v, %v; want the 3 IPv6 marks", list, err)
	}
	for _, r := range list {
		if r.Family != firewall.FamilyIP6 {
			t.Errorf("still listed: %v", r)
		}
	}
}
