package briefing

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"adoption/activities"
	"adoption/config"
	"adoption/containers"
	"adoption/custody"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
	"adoption/keyfile"
	"adoption/sockets"
	"adoption/workflows"
)

// A control node whose registry port is held by the predecessor's registry
// (a genesis collision), a module with a conflicting key, an uncertain
// opening, a port that would close, and a file whose content is a secret.
func fixture() (config.Plan, *workflows.State) {
	plan := config.Plan{
		Node: "ctl", Role: "control",
		ManagementPorts: []config.Port{{Num: 22, Proto: "tcp"}},
		Foundation:      []config.NamedPort{{Name: "registry", Port: config.Port{Num: 5000, Proto: "tcp"}}},
		Modules: []config.ModulePlan{{
			Name: "mail", Ports: []config.Port{{Num: 25, Proto: "tcp"}},
			Container: &config.Container{Name: "mail", Image: "mesh/mail"},
			Files:     []config.FilePlan{{Path: "/etc/mail/relay.env", SHA256: strings.Repeat("ab", 32), Keep: []string{"RELAY_HOST"}, Format: "env"}},
		}},
	}
	probe := &activities.ProbeReport{
		Node: "ctl",
		Firewall: eval.Report{Kind: "iptables-nft",
			Tables: []eval.TableSummary{{Family: "ip", Name: "filter", Chains: []eval.ChainSummary{{Name: "ufw-user-input", Rules: 4}}}},
			Open: []firewall.Opening{
				{Port: 22, Proto: "tcp", Direction: "input", Family: "ip"},
				{Port: 25, Proto: "tcp", Direction: "input", Family: "ip"},
				{Port: 6000, PortEnd: 6010, Proto: "tcp", Direction: "input", Family: "ip", Uncertain: true},
			}},
		Sockets: []sockets.Listener{{Proto: "tcp", Addr: "0.0.0.0", Port: 5000, PID: 42, Exe: "registry"}},
		Containers: containers.Report{Available: true, Containers: []containers.Info{{Name: "mail", Image: "old/mail", State: "running",
			Mounts: []containers.Mount{{Type: "volume", Name: "maildata", Destination: "/var/mail"}, {Type: "bind", Source: "/srv/mail/conf", Destination: "/conf"}}}}},
	}
	state := &workflows.State{
		Node: "ctl", Phase: workflows.PhaseAdopted, Plan: plan, Probe: probe,
		Genesis: workflows.StepState{State: "failed", Error: "registry port 5000/tcp is held by registry (pid 42)"},
		Custody: []custody.Record{{Found: true, FileState: custody.FileState{Path: "/etc/mail/relay.env", Exists: true, SHA256: "0123456789abcdef" + strings.Repeat("0", 48), Mode: "0600"}}},
		Modules: []workflows.ModuleState{{Name: "mail", State: workflows.ModulePending,
			Conflicts: []workflows.FileConflict{{Path: "/etc/mail/relay.env", Key: "RELAY_HOST", Why: "changed on the node since custody; the mesh sets another value"}}}},
		LastPreview: &flip.Preview{Reasons: []string{"25/tcp would close: module mail is not migrated yet"},
			Fates: []flip.Fate{{Opening: firewall.Opening{Port: 25, Proto: "tcp", Direction: "input", Family: "ip"}, Fate: "closing"}},
			NodeFiles: []keyfile.FileMerge{{Path: "/etc/ssh/sshd_config.d/10-mesh.conf", Format: "spaced", Kept: []string{"port"},
				Conflicts: []keyfile.FileConflict{{Path: "/etc/ssh/sshd_config.d/10-mesh.conf", Key: "passwordauthentication", Why: "changed on the node since custody"}}}}},
		Drift: []activities.DriftItem{{Kind: "file", Path: "/etc/hosts", What: "changed since custody"}},
	}
	return plan, state
}

func TestBriefNamesEveryItem(t *testing.T) {
	plan, state := fixture()
	b := Build(plan, nil, state, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	var md, page bytes.Buffer
	if err := Markdown(&md, b); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&page, b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"iptables-nft", "ufw-user-input", "6000-6010/tcp", "cannot decide", // firewall, uncertain opening
		"maildata", "/srv/mail/conf", // containers and their mounts
		"/etc/mail/relay.env", "0123456789ab", "RELAY", // custody, keep keys
		"registry", "5000/tcp", "genesis will refuse", // the foundation's collision
		"conflict in /etc/mail/relay.env", "adopt resolve ctl", // the module's conflict and how to decide
		"would close at a flip", "not migrated yet", // the flip's fates
		"10-mesh.conf (spaced, per key)", "keeps the node's port", "CONFLICT on passwordauthentication", // a node file's fates
		"/etc/hosts", "drift accept", // drift
	} {
		plain := strings.NewReplacer(`\_`, "_", `\*`, "*").Replace(md.String())
		if !strings.Contains(plain, want) {
			t.Errorf("markdown lacks %q", want)
		}
		if !strings.Contains(html.UnescapeString(page.String()), want) {
			t.Errorf("html lacks %q", want)
		}
	}
	// The full custody hash is shortened; the file's value was never there.
	if strings.Contains(md.String(), state.Custody[0].SHA256) {
		t.Error("markdown carries the full hash")
	}
}

// Every Markdown table row has as many cells as its header: values with
// pipes or line breaks from the node cannot break the table.
func TestMarkdownTablesStayWellFormed(t *testing.T) {
	plan, state := fixture()
	state.Modules[0].LastError = "bad | value\nwith a line break"
	state.Modules[0].State = workflows.ModuleFailed
	var md bytes.Buffer
	if err := Markdown(&md, Build(plan, nil, state, time.Now())); err != nil {
		t.Fatal(err)
	}
	cols := -1
	for _, line := range strings.Split(md.String(), "\n") {
		if !strings.HasPrefix(line, "|") {
			cols = -1
			continue
		}
		n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|")
		if cols == -1 {
			cols = n
		} else if n != cols {
			t.Fatalf("row has %d separators, header %d: %q", n, cols, line)
		}
	}
}

// The HTML page parses, has one title, and no script or outside resource.
func TestHTMLIsStandalone(t *testing.T) {
	plan, state := fixture()
	state.Modules[0].LastError = `<script>alert(1)</script>`
	state.Modules[0].State = workflows.ModuleFailed
	var page bytes.Buffer
	if err := HTML(&page, Build(plan, nil, state, time.Now())); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(page.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(*html.Node)
	titles := 0
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "link", "img", "iframe":
				t.Errorf("standalone page has <%s>", n.Data)
			case "title":
				titles++
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if titles != 1 {
		t.Fatalf("%d titles", titles)
	}
}

// Before adopt start there is no workflow: the brief comes from a local
// probe and the plan, and says the node is not started.
func TestBriefBeforeStart(t *testing.T) {
	plan, state := fixture()
	b := Build(plan, state.Probe, nil, time.Now())
	if b.Phase != "not started" || b.Source != "a probe on the node" || len(b.Fates) != 0 {
		t.Fatalf("%+v", b)
	}
	if !strings.Contains(strings.Join(b.Risks, "\n"), "5000/tcp (registry) is held by pid 42 (registry)") {
		t.Fatalf("risks %v", b.Risks)
	}
}

// The briefing says who owns a table and a chain as the probe does (the
// one ownership model in firewall/owners.go), not a guess of its own: the
// nat table of an iptables-nft node is shared, Docker's chains in it are
// Docker's, and a native table of the predecessor's is the predecessor's.
func TestBriefOwnersAreTheProbes(t *testing.T) {
	plan, state := fixture()
	rs := &firewall.Ruleset{Tables: []firewall.Table{
		{Family: "ip", Name: "nat", Chains: []firewall.Chain{{Name: "POSTROUTING", Hook: "postrouting", Type: "nat"}, {Name: "DOCKER"}}},
		{Family: "ip", Name: "filter", Chains: []firewall.Chain{{Name: "INPUT", Hook: "input", Policy: "drop"}, {Name: "ufw-user-input"}, {Name: "DOCKER-USER"}}},
		{Family: "inet", Name: "host", Chains: []firewall.Chain{{Name: "input", Hook: "input", Policy: "drop"}}},
	}}
	state.Probe.Firewall.Tables = eval.Summarise(rs)
	b := Build(plan, nil, state, time.Now())
	got := map[string]Table{}
	for _, tb := range b.Tables {
		got[tb.Family+" "+tb.Name] = tb
	}
	for name, want := range map[string]struct{ owner, chains string }{
		"ip nat":    {"shared", "POSTROUTING (0 rules, hook postrouting), DOCKER (0 rules, foreign (docker))"},
		"ip filter": {"shared", "INPUT (0 rules, hook input policy drop), ufw-user-input (0 rules, predecessor), DOCKER-USER (0 rules, foreign (docker))"},
		"inet host": {"predecessor", "input (0 rules, hook input policy drop)"},
	} {
		tb := got[name]
		if tb.Owner != want.owner || tb.Chains != want.chains {
			t.Errorf("%s: owner %q, chains %q; want %q, %q", name, tb.Owner, tb.Chains, want.owner, want.chains)
		}
	}
}

// A mark whose place could not be decided (its Placement, from the
// firewall's placement rule) is a risk the briefing names.
func TestBriefNamesUndecidedMarkPlacement(t *testing.T) {
	plan, state := fixture()
	mk := marks.Mark{Node: "ctl", Owner: "foundation", Port: 5000, Proto: "tcp"}
	state.Marks = []marks.MarkedRule{
		{Mark: mk, Family: "ip", Table: "filter", Chain: "ufw-user-forward", Handle: 40,
			Placement: "ip filter DOCKER-USER rule handle 31 (saddr 198.18.0.9/32 drop) could deny sources after its jump to ufw-user-forward: the mark in ufw-user-forward lets them through"},
		{Mark: mk, Family: "ip6", Table: "filter", Chain: "ufw6-user-forward", Handle: 41},
	}
	b := Build(plan, nil, state, time.Now())
	n := 0
	for _, r := range b.Risks {
		if strings.HasPrefix(r, "marked rule adoption:ctl:foundation:5000/tcp in ip filter ufw-user-forward: ip filter DOCKER-USER rule handle 31") {
			n++
		}
		if strings.Contains(r, "ufw6-user-forward") {
			t.Errorf("a mark placed without a doubt is a risk: %q", r)
		}
	}
	if n != 1 {
		t.Errorf("risks %q; want the undecided placement named once", b.Risks)
	}
}

// A control node's briefing states the predecessor's pipeline freeze, in
// Markdown and HTML; a member's does not.
func TestBriefStatesPipelineFreeze(t *testing.T) {
	plan, state := fixture()
	plan.Role = "control"
	b := Build(plan, state.Probe, nil, time.Now())
	var md, h bytes.Buffer
	if err := Markdown(&md, b); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&h, b); err != nil {
		t.Fatal(err)
	}
	want := "the predecessor's pipeline is frozen for every node it manages while control node " + plan.Node + " migrates"
	if !strings.Contains(md.String(), want) || !strings.Contains(html.UnescapeString(h.String()), want) {
		t.Fatalf("the control node's briefing does not state the freeze:\n%s", md.String())
	}
	plan.Role = "member"
	if b := Build(plan, state.Probe, nil, time.Now()); b.Frozen != "" {
		t.Fatalf("a member's briefing states a freeze: %q", b.Frozen)
	}
}

// The briefing's time is written as every time is (package timefmt): UTC
// with Z, to the second; with Local the host's zone and its offset.
func TestBriefTimeIsUTCWithZ(t *testing.T) {
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = time.FixedZone("CET", 3600)
	plan, state := fixture()
	b := Build(plan, nil, state, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for local, want := range map[bool]string{false: "Generated 2026-01-02 03:04:05Z from", true: "Generated 2026-01-02 04:04:05+01:00 from"} {
		b.Local = local
		var md, page strings.Builder
		if Markdown(&md, b) != nil || HTML(&page, b) != nil || !strings.Contains(md.String(), want) || !strings.Contains(page.String(), strings.Replace(want, "+", "&#43;", 1)) && !strings.Contains(page.String(), want) {
			t.Errorf("local=%v: want %q in:\n%s\n%s", local, want, md.String(), page.String())
		}
	}
}
