package unknowns

import (
	"testing"

	"adoption/containers"
	"adoption/firewall"
)

// The probe names the container behind a published port by the address
// its DNAT targets; a target no running container holds is not named
// (Probe names it instead), nor is a stopped container's.
func TestBehindNamesTheContainer(t *testing.T) {
	open := []firewall.Opening{
		{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8080"},
		{Port: 18081, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP6, Via: "[fd00:17::2]:8081"},
		{Port: 18082, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.9:8082"},
		{Port: 18083, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.3:8083"},
		{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP},
	}
	cr := containers.Report{Available: true, Containers: []containers.Info{
		{Name: "web", State: "running", Networks: []containers.Attachment{{Network: "bridge", Addrs: []string{"172.17.0.2/16", "fd00:17::2/64"}}}},
		{Name: "old", State: "exited", Networks: []containers.Attachment{{Network: "bridge", Addrs: []string{"172.17.0.3/16"}}}},
	}}
	got := Behind(open, cr)
	want := map[string]string{"172.17.0.2:8080": "web", "[fd00:17::2]:8081": "web"}
	if len(got) != len(want) {
		t.Errorf("behind = %v, want %v", got, want)
	}
	for via, name := range want {
		if got[via] != name {
			t.Errorf("behind[%s] = %q, want %q (all: %v)", via, got[via], name, got)
		}
	}
}

// TestUndecodedSkipsAJumpThatDecidesNothing: ufw's ufw-not-local jumps,
// under a rate limit, to ufw-logging-deny, which only logs and returns: the
// limit decides nothing, so it is no reason to refuse. The same limit on a
// jump to a chain that drops is named.
func TestUndecodedSkipsAJumpThatDecidesNothing(t *testing.T) {
	limit := firewall.Cond{Kind: firewall.CondUndecidable, Reason: "limit rate 3/60s"}
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: "ip", Name: "filter", Chains: []firewall.Chain{
		{Name: "ufw-not-local", Rules: []firewall.Rule{
			{Handle: 94, Conds: []firewall.Cond{limit}, Verdict: firewall.Verdict{Kind: firewall.VerdictJump, Target: "ufw-logging-deny"}},
			{Handle: 95, Conds: []firewall.Cond{limit}, Verdict: firewall.Verdict{Kind: firewall.VerdictJump, Target: "limited-drop"}},
			{Handle: 96, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}},
		}},
		{Name: "ufw-logging-deny", Rules: []firewall.Rule{
			{Handle: 10, Conds: []firewall.Cond{limit}, Verdict: firewall.Verdict{Kind: firewall.VerdictReturn}},
			{Handle: 11, Conds: []firewall.Cond{limit}, Verdict: firewall.Verdict{Kind: firewall.VerdictContinue}},
		}},
		{Name: "limited-drop", Rules: []firewall.Rule{
			{Handle: 20, Verdict: firewall.Verdict{Kind: firewall.VerdictJump, Target: "ufw-logging-deny"}},
			{Handle: 21, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}},
		}},
	}}}}
	got := Undecoded(rs)
	if len(got) != 1 || got[0].Handle != 95 {
		t.Fatalf("undecoded %+v; want only handle 95 (a limited jump to a chain that drops): not 94 (to a chain that only logs and returns) nor 10 (a return in that chain)", got)
	}
}
