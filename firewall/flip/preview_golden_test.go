package flip

// The preview's recorded results: on fwtest's four fixtures, under the
// specs below, PreviewFlipOn's fates, reasons and approval, the derived
// table's text and the probe's regions (eval.ClassOpenings) must be what
// they were when the goldens were written, line by line. A change meant to
// change them rewrites them and its diff is read:
// FW_SAVE_GOLDEN=1 go test -run TestPreviewGolden ./firewall/flip.
// ADOPT_PREVIEW_FIXTURE (a fixture file, as go run ./bench -probe-fixture
// writes) with ADOPT_PREVIEW_GOLDEN (a file, written when missing) checks
// one more node, too large to keep in the tree (the bench's at 10 times).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// goldenSpecs are the specs each fixture is previewed under: the bench's
// (the management port alone), and one that declares ports and regions to
// drop and to widen.
func goldenSpecs() map[string]MeshSpec {
	return map[string]MeshSpec{
		"management": {Node: "bnprobe", Input: allow(OwnerManagement, "22/tcp")},
		"declared": {Node: "golden",
			Input:        append(allow(OwnerManagement, "22/tcp"), allow("dns", "5353/udp", "53/udp")...),
			Forward:      append(allow("mail", "18025/tcp"), allow("admin", "18090/tcp")...),
			Drop:         vocab.MustPorts([]string{"18080/tcp", "8443/tcp", "9090/tcp", "1900/udp"}),
			Widen:        vocab.MustPorts([]string{"80/tcp", "443/tcp"}),
			DropClasses:  []string{"echo-request/icmp", "ip udp to 239.255.255.250 dport 1900"},
			WidenClasses: []string{"echo-request/icmpv6", "ip6 udp to ff00::/8 dport 5353"},
		},
	}
}

// goldenLines are the preview of found on node under spec, the derived
// table and found's regions, one fact a line.
func goldenLines(t *testing.T, found *firewall.Ruleset, node firewall.Node, spec MeshSpec) string {
	t.Helper()
	var b strings.Builder
	line := func(kind string, v any) {
		s, ok := v.(string)
		if !ok {
			j, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			s = string(j)
		}
		b.WriteString(kind + " " + s + "\n")
	}
	p := PreviewFlipOn(found, node, spec)
	line("approved", p.Approved)
	line("found", p.FoundFingerprint)
	line("derived", p.DerivedFingerprint)
	for _, f := range p.Fates {
		line("fate", f)
	}
	for _, r := range p.Reasons {
		line("reason", r)
	}
	if d, err := DeriveFor(found, spec); err != nil {
		line("derive-error", err.Error())
	} else {
		for _, l := range strings.Split(d.Text(), "\n") {
			line("table", l)
		}
	}
	for _, o := range eval.ClassOpenings(found, node) {
		line("region", o)
	}
	return b.String()
}

// checkGolden compares got with the golden file (writing it when save).
func checkGolden(t *testing.T, file, got string, save bool) {
	t.Helper()
	if save {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (FW_SAVE_GOLDEN=1 writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s: the preview differs from the golden (%d and %d lines):\n%s", file,
			strings.Count(string(want), "\n"), strings.Count(got, "\n"), fwtest.Diff(string(want), got))
	}
}

func TestPreviewGolden(t *testing.T) {
	save := os.Getenv("FW_SAVE_GOLDEN") == "1"
	for _, name := range []string{"ufw-docker", "control-node", "docker28", "reference-node"} {
		found, node := fwtest.LoadFixture(t, name)
		for sname, spec := range goldenSpecs() {
			t.Run(name+"/"+sname, func(t *testing.T) {
				checkGolden(t, filepath.Join("testdata", "preview", name+"-"+sname+".txt"), goldenLines(t, found, node, spec), save)
			})
		}
	}
	if file := os.Getenv("ADOPT_PREVIEW_FIXTURE"); file != "" {
		golden := os.Getenv("ADOPT_PREVIEW_GOLDEN")
		if golden == "" {
			t.Fatal("ADOPT_PREVIEW_FIXTURE needs ADOPT_PREVIEW_GOLDEN: the file its preview is compared with")
		}
		found, node := fwtest.LoadFixtureFile(t, file)
		for sname, spec := range goldenSpecs() {
			g := golden + "-" + sname
			_, err := os.Stat(g)
			checkGolden(t, g, goldenLines(t, found, node, spec), save || os.IsNotExist(err))
		}
	}
}
