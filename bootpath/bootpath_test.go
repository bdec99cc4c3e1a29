package bootpath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adoption/custody"
	"adoption/firewall"
	"adoption/firewall/flip"
)

func TestUfwDisabled(t *testing.T) {
	for in, want := range map[string]string{
		"ENABLED=yes\n":               "ENABLED=no\n",
		"a=1\n  ENABLED = yes\nb=2\n": "a=1\nENABLED=no\nb=2\n",
		"LOGLEVEL=low":                "LOGLEVEL=low\nENABLED=no\n",
	} {
		if got := string(UfwDisabled([]byte(in))); got != want {
			t.Errorf("UfwDisabled(%q) = %q, want %q", in, got, want)
		}
	}
}

// Check reads the boot path under node.root: it refuses (a Refusal,
// naming what to do) when nftables.service is missing, or not enabled
// and EnableService is off; with EnableService, ApplyUnits enables it
// (the link in custody) and writes the drop-in.
func TestCheckAndApplyUnits(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	n := Node{Name: "n1", Root: root, Files: custody.New(root, state),
		Ruleset: func() (*firewall.Ruleset, error) { return &firewall.Ruleset{}, nil }}
	refused := func(want string) {
		t.Helper()
		var r *Refusal
		if _, err := n.Check(&flip.RevertPlan{}); !errors.As(err, &r) || r.NoMesh || !strings.Contains(r.Msg, want) {
			t.Fatalf("Check: %v, want a refusal with %q", err, want)
		}
	}
	refused("nftables.service is not installed")
	unit := filepath.Join(root, "lib/systemd/system/nftables.service")
	if err := os.MkdirAll(filepath.Dir(unit), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unit, []byte("[Service]\nExecStop=/usr/sbin/nft flush ruleset\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused("flip.enable_boot_service: true")
	n.EnableService = true
	p, err := n.Check(&flip.RevertPlan{})
	if err != nil {
		t.Fatal(err)
	}
	var done []string
	if err := n.ApplyUnits(p, func(s string) { done = append(done, s) }); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "etc/systemd/system/sysinit.target.wants/nftables.service")
	if target, err := os.Readlink(link); err != nil || target != "/lib/systemd/system/nftables.service" || len(done) != 2 {
		t.Fatalf("enabling link %q %v; done %q", target, err, done)
	}
	if b, err := os.ReadFile(filepath.Join(root, DropIn)); err != nil || !strings.Contains(string(b), "[Service]\nExecStop=\n") {
		t.Fatalf("drop-in %q %v", b, err)
	}
	if p, err := n.Check(&flip.RevertPlan{}); err != nil || p.enable != "" {
		t.Fatalf("Check once enabled: %+v %v", p, err)
	}
}
