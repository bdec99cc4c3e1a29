package activities

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adoption/activities/fake"
	"adoption/config"
	"adoption/containers"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/unknowns"
)

// loadDNATNode is a ruleset listed on a real ufw-docker namespace (the
// firewall package's fixture): Docker's chains, published ports 18080,
// 18081, 18082, 18083/tcp, 18053/udp and 19100 DNATed to 172.17.0.2
// (and [fd00:17::2]) on docker0; and the node's interfaces as read there.
func loadDNATNode(t *testing.T) fake.NodeFirewall {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "fwtest", "testdata", "dnat", "ufw-docker.json"))
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
	return fake.NodeFirewall{Firewall: fake.Firewall{Report: eval.Report{Kind: "iptables-nft", Node: f.Node}, Rules: f.Ruleset}, Links: f.Node}
}

// theContainer is the fixture's container as the engine reports it.
func theContainer(addrs ...string) containers.Info {
	c := containers.Info{Name: "svc", State: "running", Networks: []containers.Attachment{{Network: "bridge", Addrs: addrs}}}
	for _, p := range []uint16{18080, 18081, 18082, 18083, 19100} {
		c.Ports = append(c.Ports, containers.Published{HostPort: p, ContainerPort: p - 10000, Proto: "tcp"})
	}
	return c
}

// previewOn previews the flip of a node with management port 22/tcp only
// and flip.drop drop, on the fixture, with the engine answering report.
func previewOn(t *testing.T, report containers.Report, drop ...string) (*flip.Preview, *recorder) {
	t.Helper()
	a, root := newActs(t)
	debianBoot(t, root, true)
	rec := &recorder{}
	a.Firewall, a.Engine, a.Marks, a.Flipper = loadDNATNode(t), fake.Engine{Containers: report}, rec, rec
	plan := withPlan(a, config.Plan{Node: "n1", ManagementPorts: config.MustPorts([]string{"22/tcp"}), Drop: config.MustPorts(drop)})
	pv, err := a.Preview(context.Background(), PreviewInput{Plan: plan.Ref(), Spec: specOf(plan)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.changes) != 0 {
		t.Fatalf("the preview changed the node: %v", rec.changes)
	}
	return pv, rec
}

func reasonWith(reasons []string, parts ...string) string {
	for _, r := range reasons {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(r, p)
		}
		if all {
			return r
		}
	}
	return ""
}

// Every published port of the fixture, and the container ports clients
// route to directly (ufw's route rules, ufw-docker's private sources),
// which close at the flip; dropped, the preview has nothing else to refuse
// on.
var fixtureDrop = []string{"18080/tcp", "18081/tcp", "18082/tcp", "18083/tcp", "18053/udp", "19100/tcp",
	"8080/tcp", "8081/tcp", "8082/tcp", "8083/tcp", "9100/tcp", "8053/udp"}

// TestPreviewNamesAnUnreachableEngine: Docker's chains are in the ruleset
// and the engine does not answer: the preview refuses naming it (even
// with every published port dropped: the engine's containers may publish
// more when they run), and changes nothing.
func TestPreviewNamesAnUnreachableEngine(t *testing.T) {
	down := containers.Report{Error: "docker engine unavailable at unix:///run/n1/docker.sock: connection refused"}
	pv, _ := previewOn(t, down, fixtureDrop...)
	if pv.Approved || reasonWith(pv.Reasons, "Docker engine cannot be reached", "unix:///run/n1/docker.sock") == "" {
		t.Fatalf("an unreachable engine must refuse the preview, named: approved %v, %q", pv.Approved, pv.Reasons)
	}
	// Reachable, with the container where Docker DNATs: nothing to name.
	up := containers.Report{Available: true, Containers: []containers.Info{theContainer("172.17.0.2/16", "fd00:17::2/64")}}
	if pv, _ := previewOn(t, up, fixtureDrop...); !pv.Approved {
		t.Fatalf("with the engine up and every published port dropped the preview should approve: %q", pv.Reasons)
	}
}

// TestPreviewNamesAStrayDNAT: the ruleset DNATs published ports to
// 172.17.0.2, on docker0, where no running container of the engine is:
// each such port not dropped is named by host port and target.
func TestPreviewNamesAStrayDNAT(t *testing.T) {
	elsewhere := containers.Report{Available: true, Containers: []containers.Info{theContainer("172.17.0.3/16")}}
	pv, _ := previewOn(t, elsewhere, "18081/tcp", "18082/tcp", "18083/tcp", "18053/udp", "19100/tcp")
	r := reasonWith(pv.Reasons, "18080/tcp (forward, ip, to 172.17.0.2:8080", "no running container of the node's engine")
	if pv.Approved || r == "" {
		t.Fatalf("a DNAT to an address no container holds must be named: approved %v, %q", pv.Approved, pv.Reasons)
	}
	if reasonWith(pv.Reasons, "18081/tcp", "no running container") != "" {
		t.Errorf("a dropped port is named: %q", pv.Reasons)
	}
}

// TestPreviewNamesAnUnmappedNetwork: a container publishes ports on a
// network none of the node's interfaces holds (a macvlan, another
// namespace's bridge): named, unless all its ports are dropped.
func TestPreviewNamesAnUnmappedNetwork(t *testing.T) {
	mac := containers.Info{Name: "mac", State: "running", Networks: []containers.Attachment{{Network: "macnet", Addrs: []string{"10.99.0.5/24"}}},
		Ports: []containers.Published{{HostPort: 18090, ContainerPort: 80, Proto: "tcp"}}}
	report := containers.Report{Available: true, Containers: []containers.Info{theContainer("172.17.0.2/16", "fd00:17::2/64"), mac}}
	pv, _ := previewOn(t, report, fixtureDrop...)
	if pv.Approved || reasonWith(pv.Reasons, "container mac", "18090/tcp", "network macnet (10.99.0.5/24)", "on none of the node's interfaces") == "" {
		t.Fatalf("an unmapped container network must be named: approved %v, %q", pv.Approved, pv.Reasons)
	}
	if pv, _ := previewOn(t, report, append(fixtureDrop, "18090/tcp")...); !pv.Approved {
		t.Fatalf("with the unmapped container's ports dropped the preview should approve: %q", pv.Reasons)
	}
}

// TestProbeNamesUnknowns: the probe lists each thing it cannot judge,
// named, and nothing when all is mapped.
func TestProbeNamesUnknowns(t *testing.T) {
	f := loadDNATNode(t)
	open := eval.OpenPortsOn(f.Rules, f.Links)
	tables := []eval.TableSummary{{Family: "ip", Name: "nat", Ownership: firewall.Ownership{Owner: firewall.OwnedShared},
		Chains: []eval.ChainSummary{{Name: "DOCKER", Ownership: firewall.Ownership{Owner: firewall.OwnedByForeign, Tool: "docker"}}}}}
	// An opening the evaluator could not follow (a DNAT to an address on
	// none of the node's networks).
	open = append(open, firewall.Opening{Port: 18099, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP,
		Uncertain: true, Reason: "DNAT target 10.50.0.9 is on none of the node's networks: where it is routed is not known"})
	probe := func(cr containers.Report, tables []eval.TableSummary, plan config.Plan) []string {
		return unknowns.Probe(eval.Report{Tables: tables, Open: open, Node: f.Links}, cr, plan)
	}
	mac := containers.Info{Name: "mac", State: "running", Networks: []containers.Attachment{{Network: "macnet", Addrs: []string{"10.99.0.5/24"}}},
		Ports: []containers.Published{{HostPort: 18090, ContainerPort: 80, Proto: "tcp"}}}
	got := probe(containers.Report{Available: true, Containers: []containers.Info{theContainer("172.17.0.3/16"), mac}}, tables, config.Plan{})
	for _, want := range [][]string{
		{"18099/tcp (forward, ip)", "uncertain", "10.50.0.9 is on none of the node's networks"},
		{"container mac", "network macnet (10.99.0.5/24)"},
		{"18080/tcp (forward, ip, to 172.17.0.2:8080)", "no running container"},
	} {
		if reasonWith(got, want...) == "" {
			t.Errorf("the probe does not name %q: %q", want, got)
		}
	}
	down := containers.Report{Error: "docker engine unavailable at unix:///x.sock"}
	if reasonWith(probe(down, tables, config.Plan{}), "Docker engine cannot be reached", "unix:///x.sock") == "" {
		t.Errorf("an unreachable engine with Docker's chains in the ruleset is not named")
	}
	withContainer := config.Plan{Modules: []config.ModulePlan{{Name: "app", Container: &config.Container{Name: "app"}}}}
	if reasonWith(probe(down, nil, withContainer), "Docker engine cannot be reached") == "" {
		t.Errorf("an unreachable engine with a module's container in the plan is not named")
	}
	// No Docker anywhere: an absent engine is no unknown (the containers
	// line says it), and a mapped container is not named.
	if got := probe(down, nil, config.Plan{}); reasonWith(got, "Docker engine") != "" {
		t.Errorf("a node without Docker has its absent engine named as an unknown: %q", got)
	}
	// Containers of an engine that does not manage this firewall (no
	// Docker chains in it: the node's containers run elsewhere) are not
	// behind it: their networks are not the evaluator's to map.
	if got := probe(containers.Report{Available: true, Containers: []containers.Info{mac}}, nil, config.Plan{}); reasonWith(got, "container mac") != "" {
		t.Errorf("a container of an engine that does not manage this firewall is named: %q", got)
	}
	ok := probe(containers.Report{Available: true, Containers: []containers.Info{theContainer("172.17.0.2/16", "fd00:17::2/64")}}, tables, config.Plan{})
	for _, u := range ok {
		if !strings.Contains(u, "18099/tcp") {
			t.Errorf("named although mapped: %q", u)
		}
	}
}
