package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPlanHashSurvivesJSONAndOrder: the plan a workflow carries went
// through JSON, and a set written in another order is the same plan.
func TestPlanHashSurvivesJSONAndOrder(t *testing.T) {
	c, err := Load(nodeExample(t))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Plan()
	var back Plan
	if err := json.Unmarshal([]byte(toJSON(t, p)), &back); err != nil {
		t.Fatal(err)
	}
	if back.Hash() != p.Hash() || Diff(p, back) != nil {
		t.Fatalf("a JSON round trip changed the plan's hash: %v", Diff(p, back))
	}
	back.ManagementPorts = append([]Port{{Num: 2222, Proto: "tcp"}}, back.ManagementPorts...)
	reordered := back
	reordered.ManagementPorts = []Port{back.ManagementPorts[1], back.ManagementPorts[0]}
	if back.Hash() != reordered.Hash() {
		t.Fatal("the order of a set changed the hash")
	}
	if d := Diff(back, p); d == nil || d.Key != "management_ports[2222/tcp]" || d.A != "2222/tcp" || d.B != "absent" {
		t.Fatalf("diff of an added management port: %+v", d)
	}
}

// TestDiffNamesTheFirstDifference: each kind of change a hostile request
// could make is named by its key, the way the file spells it.
func TestDiffNamesTheFirstDifference(t *testing.T) {
	c, err := Load(nodeExample(t))
	if err != nil {
		t.Fatal(err)
	}
	base := c.Plan()
	cases := []struct {
		name   string
		change func(p *Plan)
		key    string
	}{
		{"image", func(p *Plan) { p.Modules[0].Container.Image = "evil:1" }, "modules[mail].container.image"},
		{"port", func(p *Plan) { p.Modules[0].Ports = append(p.Modules[0].Ports, Port{Num: 2375, Proto: "tcp"}) }, "modules[mail].ports[2375/tcp]"},
		{"mode", func(p *Plan) { p.Modules[0].Files[0].Mode = "4755" }, "modules[mail].files[/etc/mail/relay.conf].mode"},
		{"path", func(p *Plan) { p.NodeFiles[0].Path = "/etc/shadow" }, "node_files[/etc/hosts]"},
		{"timeout", func(p *Plan) { p.ConfirmTimeout = 100 * 365 * 24 * time.Hour }, "confirm_timeout"},
		{"health", func(p *Plan) { p.Modules[0].Health.TCP = "10.0.0.1:25" }, "modules[mail].health.tcp"},
		{"node", func(p *Plan) { p.Node = "n2" }, "node"},
	}
	for _, tc := range cases {
		var p Plan
		if err := json.Unmarshal([]byte(toJSON(t, base)), &p); err != nil {
			t.Fatal(err)
		}
		tc.change(&p)
		d := Diff(p, base)
		if d == nil || !strings.HasPrefix(d.Key, tc.key) {
			t.Errorf("%s: diff %+v, want key %s", tc.name, d, tc.key)
		}
	}
	var p Plan
	_ = json.Unmarshal([]byte(toJSON(t, base)), &p)
	p.ConfirmTimeout = 100 * 365 * 24 * time.Hour
	if d := Diff(p, base); d == nil || d.A != "876000h0m0s" || d.B != "2m0s" {
		t.Errorf("durations must read as durations: %+v", d)
	}
}

func TestParseModeKeepsSpecialBits(t *testing.T) {
	for in, want := range map[string]os.FileMode{
		"0644": 0o644, "644": 0o644, "4755": 0o755 | os.ModeSetuid, "04755": 0o755 | os.ModeSetuid,
		"2750": 0o750 | os.ModeSetgid, "1777": 0o777 | os.ModeSticky, "7777": 0o777 | os.ModeSetuid | os.ModeSetgid | os.ModeSticky,
	} {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := ParseMode(FormatMode(got)); err != nil || back != got {
			t.Errorf("FormatMode(%v) = %s does not read back: %v, %v", got, FormatMode(got), back, err)
		}
	}
	if FormatMode(0o755|os.ModeSetuid) != "4755" || FormatMode(0o644) != "0644" {
		t.Errorf("FormatMode: %s %s", FormatMode(0o755|os.ModeSetuid), FormatMode(0o644))
	}
	for _, bad := range []string{"", "40000755", "10000", "0o644", "8", "64", "-644", "+644", "0x1ff", " 644", "77777", "000644"} {
		if m, err := ParseMode(bad); err == nil {
			t.Errorf("ParseMode(%q) accepted as %v", bad, m)
		}
	}
}

func TestValidFlipID(t *testing.T) {
	for _, ok := range []string{"n1-1", "e2e_flip-node-12"} {
		if !ValidFlipID(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "n1", "../../etc/x-1", "n1-1/../x", "N1-1", "n1-1 ", "n1-", "-1x", strings.Repeat("a", 70) + "-1"} {
		if ValidFlipID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestLimitsInTheFile: a setuid mode is kept, a mode string that would turn
// into type bits, a confirm timeout past the maximum and a state_dir inside
// a declared path are refused by key.
func TestLimitsInTheFile(t *testing.T) {
	root := t.TempDir()
	c, err := Load(write(t, `
node: {name: n1, root: `+root+`, state_dir: /var/lib/adoption}
modules:
  - name: tool
    ports: ["8080/tcp"]
    files: [{path: /usr/local/bin/tool, content: x, mode: "4755"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := ParseMode(c.Plan().Modules[0].Files[0].Mode); m&os.ModeSetuid == 0 {
		t.Fatal("4755 lost its setuid bit")
	}
	_, err = Load(write(t, `
node: {name: n1, root: /, state_dir: /etc/adoption/state}
modules:
  - name: tool
    ports: ["8080/tcp"]
    files: [{path: /usr/local/bin/tool, content: x, mode: "40000755"}]
node_files:
  - {path: /etc/adoption, content: x}
flip: {confirm_timeout: 876000h}
`))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, want := range []string{
		`modules[0].files[0].mode: "40000755" is invalid`,
		`flip.confirm_timeout: "876000h0m0s" is invalid: at most flip.max_confirm_timeout (30m0s)`,
		`node.state_dir: "/etc/adoption/state" is invalid: must not be inside or around the declared path /etc/adoption`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	_, err = Load(write(t, "node: {name: n1}\nflip: {max_confirm_timeout: 48h}\n"))
	if err == nil || !strings.Contains(err.Error(), `flip.max_confirm_timeout: "48h0m0s" is invalid`) {
		t.Errorf("a maximum past the hard limit: %v", err)
	}
}

// TestTLSServerNameAloneEnablesTLS and the fleet's temporal section is
// validated like a node's.
func TestTLSServerNameAloneEnablesTLS(t *testing.T) {
	if !(TLS{ServerName: "temporal.example"}).Enabled() {
		t.Fatal("server_name alone must enable TLS")
	}
	if (TLS{}).Enabled() {
		t.Fatal("no TLS key set: TLS must stay off")
	}
	dir := t.TempDir()
	node := filepath.Join(dir, "n1.yaml")
	if err := os.WriteFile(node, []byte("node: {name: n1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleet, []byte("name: f1\nnodes: [n1.yaml]\ntemporal:\n  address: nohostport\n  tls: {key: relative.key}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFleet(fleet)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, want := range []string{`temporal.address: "nohostport" is invalid`, `temporal.tls.key: "relative.key" is invalid: an absolute path`, `temporal.tls.cert: "" is invalid: set temporal.tls.cert and temporal.tls.key together`} {
		if !strings.Contains(msg, want) {
			t.Errorf("fleet error lacks %q:\n%s", want, msg)
		}
	}
}
