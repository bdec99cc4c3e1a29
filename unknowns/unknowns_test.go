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
