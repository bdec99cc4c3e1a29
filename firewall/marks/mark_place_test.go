package marks

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// Unit tests of where a mark goes (mark_place.go), on decoded rules: the
// kernel tests in mark_deny_kernel_test.go check the same with packets.

// handled numbers rules from 10 on, in order, as a listing gives them.
func handled(rules ...firewall.Rule) []firewall.Rule {
	for i := range rules {
		rules[i].Handle = uint64(10 + i)
	}
	return rules
}

func ipsetMatch() firewall.Cond {
	return firewall.Cond{Kind: firewall.CondUndecidable, Reason: "xt match set rev 7"}
}

// In ufw's input chain the mark goes after the last rule that could be a
// source deny ("ufw deny from", an ipset blocklist, a verdict map on the
// source, "ufw deny in on"), not at the head; a source deny that cannot
// match the port does not move it.
func TestPlaceInputAfterSourceDenies(t *testing.T) {
	for _, c := range []struct {
		name   string
		rules  []firewall.Rule
		before uint64 // 0: at the head
		append bool
	}{
		{name: "no source deny: at the head", rules: handled(fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)), fwtest.Drop(fwtest.Tcp(), fwtest.Dport(9000)))},
		{name: "ufw deny from", rules: handled(fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)), fwtest.Drop(fwtest.Saddr("198.18.0.3/32")), fwtest.Accept(fwtest.Tcp(), fwtest.Dport(80))), before: 12},
		{name: "ipset blocklist (undecidable) after ufw deny from", rules: handled(fwtest.Drop(fwtest.Saddr("198.18.0.3/32")), fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)), fwtest.Drop(ipsetMatch())), append: true},
		{name: "reject from a prefix", rules: handled(fwtest.Reject(fwtest.Saddr("203.0.113.0/24")), fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22))), before: 11},
		{name: "logged deny: a jump on the source", rules: handled(fwtest.Jump("ufw-user-logging-input", fwtest.Saddr("198.18.0.3/32")), fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22))), before: 11},
		{name: "deny in on an interface", rules: handled(fwtest.Drop(firewall.Cond{Kind: firewall.CondIifname, Names: []string{"eth1"}}), fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22))), before: 11},
		{name: "verdict map on the source", rules: handled(firewall.Rule{VMap: []firewall.VMapEntry{{Cond: fwtest.Saddr("192.0.2.7/32"), Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}}}}, fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22))), before: 11},
		{name: "source deny of another port", rules: handled(fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)), fwtest.Drop(fwtest.Saddr("198.18.0.3/32"), fwtest.Tcp(), fwtest.Dport(22)), fwtest.Drop(fwtest.Saddr("198.18.0.4/32"), fwtest.Udp()))},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := &firewall.Table{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{
				{Name: "INPUT", Hook: firewall.HookInput, Policy: "drop", Rules: handled(fwtest.Jump("ufw-before-input"))},
				{Name: "ufw-user-input", Rules: c.rules},
			}}
			ps, err := placements(&firewall.Ruleset{Tables: []firewall.Table{*tb}}, "tcp", 9750)
			if err != nil || len(ps) != 1 {
				t.Fatalf("placements: %v, %v; want one", ps, err)
			}
			p := ps[0]
			if p.chain.Name != "ufw-user-input" || p.before != c.before || p.append != c.append || len(p.notes) != 0 {
				t.Errorf("placed in %s before %d append %v notes %q; want before %d append %v, no notes", p.chain.Name, p.before, p.append, p.notes, c.before, c.append)
			}
		})
	}
}

// A rule that drops the port whatever the source, before the last source
// deny, keeps the mark (which goes after the deny) from taking effect:
// that is said, naming the rule, and the mark still goes after the deny.
func TestPlaceNotesWhatCannotBeDecided(t *testing.T) {
	tb := firewall.Table{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{
		{Name: "ufw-user-input", Rules: handled(fwtest.Drop(fwtest.Tcp(), fwtest.Dport(9750)), fwtest.Drop(fwtest.Saddr("198.18.0.3/32")))},
	}}
	rs := &firewall.Ruleset{Tables: []firewall.Table{tb}}
	ps, err := placements(rs, "tcp", 9750)
	if err != nil || len(ps) != 1 {
		t.Fatalf("placements: %v, %v", ps, err)
	}
	if !ps[0].append || len(ps[0].notes) != 1 || !strings.Contains(ps[0].notes[0], "rule handle 10") || !strings.Contains(ps[0].notes[0], "may not take effect") {
		t.Errorf("append %v notes %q; want appended after the deny, with a note naming handle 10", ps[0].append, ps[0].notes)
	}
	// Another port is not dropped by handle 10: nothing to say.
	if ps, _ := placements(rs, "tcp", 9751); len(ps) != 1 || len(ps[0].notes) != 0 {
		t.Errorf("9751/tcp: %+v; want no notes", ps)
	}

	// A mark an earlier version put at the head, before the deny: present,
	// and said to let the denied source through.
	mk := Mark{Node: "n1", Owner: "web", Port: 9751, Proto: "tcp"}
	ch := &rs.Tables[0].Chains[0]
	ch.Rules = append([]firewall.Rule{{Handle: 5, Comment: mk.Comment(), Conds: []firewall.Cond{fwtest.Tcp(), fwtest.Dport(9751)}, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}}, ch.Rules...)
	todo, present, err := plan([]Mark{mk}, func(mk Mark) ([]placement, error) { return placements(rs, mk.Proto, mk.Port) })
	if err != nil || len(todo) != 0 || len(present) != 1 {
		t.Fatalf("plan: todo %v present %v, %v; want the mark present", todo, present, err)
	}
	if n := present[0].Placement; !strings.Contains(n, "handle 5") || !strings.Contains(n, "handle 11") {
		t.Errorf("present mark's placement %q; want it said to be before the deny at handle 11", n)
	}
}

// In a native base chain, a jump into a chain of source denies is one: the
// mark goes after it, not before it as before the first rule that could
// drop; a jump into a chain that only drops by port stays the first such.
func TestPlaceNativeAfterAJumpIntoABlocklist(t *testing.T) {
	for _, c := range []struct {
		name   string
		screen []firewall.Rule
		before uint64
		append bool
	}{
		{name: "blocklist chain", screen: handled(fwtest.Drop(fwtest.Saddr("198.18.0.3/32", "198.18.0.4/32"))), append: true},
		{name: "blocklist chain reached by a goto", screen: handled(fwtest.GoTo("bl", fwtest.Tcp())), append: true},
		{name: "port screen", screen: handled(fwtest.Drop(fwtest.Tcp(), fwtest.Dport(9750))), before: 11},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := firewall.Table{Family: firewall.FamilyInet, Name: "host", Chains: []firewall.Chain{
				{Name: "input", Hook: firewall.HookInput, Policy: "drop", Rules: handled(fwtest.Accept(fwtest.CtEstablished()), fwtest.Jump("screen"), fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)))},
				{Name: "screen", Rules: c.screen},
				{Name: "bl", Rules: []firewall.Rule{fwtest.Drop(fwtest.Saddr("203.0.113.0/24"))}},
			}}
			ps, err := placements(&firewall.Ruleset{Tables: []firewall.Table{tb}}, "tcp", 9750)
			if err != nil || len(ps) != 1 {
				t.Fatalf("placements: %v, %v", ps, err)
			}
			if p := ps[0]; p.before != c.before || p.append != c.append {
				t.Errorf("before %d append %v; want before %d append %v", p.before, p.append, c.before, c.append)
			}
		})
	}
}

// On the forward path the same rule: after an ipset blocklist drop (which
// decodes as undecidable) in ufw-user-forward; a source deny in
// DOCKER-USER after its jump to ufw-user-forward, which the mark skips, is
// said.
func TestPlaceForwardAfterBlocklistsAndNotesLaterDenies(t *testing.T) {
	rs, _ := fwtest.LoadFixture(t, "ufw-docker")
	var docker *firewall.Chain
	for ti := range rs.Tables {
		tb := &rs.Tables[ti]
		if tb.Family != firewall.FamilyIP || tb.Name != "filter" {
			continue
		}
		fwd := ChainNamed(tb, "ufw-user-forward")
		fwd.Rules = append(fwd.Rules, firewall.Rule{Handle: 900, Conds: []firewall.Cond{ipsetMatch()}, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}, Unknown: []string{"xt match set rev 7"}})
		docker = ChainNamed(tb, "DOCKER-USER")
	}
	ps, err := forwardPlacements(rs, "tcp", 18082)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.table.Family == firewall.FamilyIP && (!p.append || len(p.notes) != 0) {
			t.Errorf("ip %s: before %d append %v notes %q; want appended after the blocklist, no notes", p.chain.Name, p.before, p.append, p.notes)
		}
	}

	// "iptables -I DOCKER-USER 2 -s 198.18.0.4 -j DROP": after the jump.
	docker.Rules = append(docker.Rules[:1], append([]firewall.Rule{{Handle: 901, Conds: []firewall.Cond{fwtest.Saddr("198.18.0.4/32")}, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}}}, docker.Rules[1:]...)...)
	// After DOCKER-USER's final unconditional return: never reached.
	docker.Rules = append(docker.Rules, firewall.Rule{Handle: 902, Conds: []firewall.Cond{fwtest.Saddr("198.18.0.5/32")}, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}})
	ps, err = forwardPlacements(rs, "tcp", 18082)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.table.Family != firewall.FamilyIP {
			continue
		}
		if n := strings.Join(p.notes, "; "); !strings.Contains(n, "DOCKER-USER rule handle 901") || strings.Contains(n, "902") {
			t.Errorf("notes %q; want one naming DOCKER-USER's handle 901 (and not the unreachable 902)", n)
		}
	}
}
