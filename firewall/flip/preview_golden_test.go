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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
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

// goldenRandom is how many generated rulesets TestPreviewGoldenRandom
// previews.
const goldenRandom = 300

// TestPreviewGoldenRandom previews generated rulesets whose rules tell
// regions apart (protocols, ICMP type sets, ports and source ports,
// multicast and broadcast destinations, families, negations, verdict
// maps, a chain jumped to): each one's preview, derived table and regions
// hashed a line, compared with testdata/preview/random.golden.
// FW_GOLDEN_N previews as many; FW_GOLDEN_FILE=<path> uses <path>.preview.
func TestPreviewGoldenRandom(t *testing.T) {
	node := firewall.Node{Interfaces: []firewall.Interface{
		{Name: "lo", Loopback: true, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("::1/128")}},
		{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/24"), netip.MustParsePrefix("2001:db8::7/64"), netip.MustParsePrefix("fe80::7/64")}},
		{Name: "docker0", Kind: "bridge", Addrs: []netip.Prefix{netip.MustParsePrefix("172.17.0.1/16"), netip.MustParsePrefix("fd00:17::1/64")}},
	}, Forwarding: map[string]bool{firewall.FamilyIP: true}}
	n, file := goldenRandom, filepath.Join("testdata", "preview", "random.golden")
	if s := os.Getenv("FW_GOLDEN_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	if f := os.Getenv("FW_GOLDEN_FILE"); f != "" {
		file = f + ".preview"
	}
	var got strings.Builder
	for i := range n {
		rs, spec := regionRuleset(i)
		h := sha256.Sum256([]byte(goldenLines(t, rs, node, spec)))
		fmt.Fprintf(&got, "%d %s\n", i, hex.EncodeToString(h[:8]))
	}
	if os.Getenv("FW_SAVE_GOLDEN") == "1" {
		checkGolden(t, file, got.String(), true)
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(got.String(), "\n")
	bad := 0
	for i := range min(len(wl), len(gl)) {
		if wl[i] != gl[i] {
			if bad++; bad <= 3 {
				rs, spec := regionRuleset(i)
				j, _ := json.Marshal(struct {
					Ruleset *firewall.Ruleset
					Spec    MeshSpec
				}{rs, spec})
				t.Errorf("ruleset %d: its preview differs from %s:\n%s", i, file, j)
			}
		}
	}
	if len(wl) != len(gl) {
		t.Errorf("%d results, %s holds %d", len(gl)-1, file, len(wl)-1)
	}
}

// regionRuleset is the i-th generated ruleset, and a spec declaring some
// of its regions.
func regionRuleset(i int) (*firewall.Ruleset, MeshSpec) {
	r := rand.New(rand.NewPCG(uint64(i), 37))
	pick := func(n int) int { return r.IntN(n) }
	types := func() []int {
		var out []int
		for range 1 + pick(3) {
			lo := []int{0, 3, 8, 11, 128, 133, 135, 143, 200}[pick(9)]
			for t := lo; t <= min(255, lo+pick(4)*pick(40)); t++ {
				out = append(out, t)
			}
		}
		return out
	}
	ports := func() []firewall.PortRange {
		var out []firewall.PortRange
		for range 1 + pick(3) {
			p := []uint16{0, 53, 67, 68, 123, 1900, 5353, 20000, 65535}[pick(9)]
			out = append(out, firewall.PortRange{From: p, To: p + uint16(pick(3))*uint16(pick(3))})
		}
		return out
	}
	dsts := []string{"224.0.0.251/32", "239.255.255.250/32", "224.0.0.0/4", "255.255.255.255/32", "ff02::fb/128", "ff00::/8", "fe80::/10", "203.0.113.7/32"}
	srcs := []string{"198.51.100.0/24", "10.0.0.0/8", "2001:db8:1::/48"}
	cond := func() firewall.Cond {
		c := firewall.Cond{Negate: pick(6) == 0}
		switch pick(8) {
		case 0:
			c.Kind, c.Family = firewall.CondNFProto, []string{firewall.FamilyIP, firewall.FamilyIP6}[pick(2)]
		case 1, 2:
			c.Kind = firewall.CondL4Proto
			for range 1 + pick(2) {
				c.Protos = append(c.Protos, []int{1, 58, 17, 6, 50, 132}[pick(6)])
			}
		case 3:
			c.Kind, c.Types, c.Negate = firewall.CondICMPType, types(), pick(8) == 0
		case 4:
			c.Kind, c.Ports = firewall.CondDport, ports()
		case 5:
			c.Kind, c.Ports = firewall.CondSport, ports()
		case 6:
			c.Kind, c.Prefixes = firewall.CondDaddr, []netip.Prefix{netip.MustParsePrefix(dsts[pick(len(dsts))])}
		default:
			c.Kind, c.Prefixes = firewall.CondSaddr, []netip.Prefix{netip.MustParsePrefix(srcs[pick(len(srcs))])}
		}
		return c
	}
	rule := func(jump bool) firewall.Rule {
		var ru firewall.Rule
		for range pick(4) {
			ru.Conds = append(ru.Conds, cond())
		}
		ru.Verdict.Kind = []firewall.VerdictKind{firewall.VerdictAccept, firewall.VerdictAccept, firewall.VerdictDrop, firewall.VerdictReject, firewall.VerdictReturn}[pick(5)]
		switch {
		case jump && pick(4) == 0:
			ru.Verdict = firewall.Verdict{Kind: firewall.VerdictJump, Target: "sub"}
		case pick(8) == 0:
			ru.Verdict = firewall.Verdict{}
			for range 1 + pick(3) {
				e := firewall.VMapEntry{Verdict: firewall.Verdict{Kind: []firewall.VerdictKind{firewall.VerdictAccept, firewall.VerdictDrop}[pick(2)]}}
				if pick(2) == 0 {
					e.Cond = firewall.Cond{Kind: firewall.CondICMPType, Types: types()}
				} else {
					e.Cond = firewall.Cond{Kind: firewall.CondDport, Ports: ports()}
				}
				ru.VMap = append(ru.VMap, e)
			}
		}
		return ru
	}
	chain := func(name, hook string, n int) firewall.Chain {
		ch := firewall.Chain{Name: name}
		if hook != "" {
			ch.Hook, ch.Type, ch.Priority, ch.Policy = hook, "filter", 0, []string{"drop", "drop", "accept"}[pick(3)]
		}
		for range n {
			ch.Rules = append(ch.Rules, rule(hook != ""))
		}
		return ch
	}
	rs := &firewall.Ruleset{}
	for _, fam := range []string{firewall.FamilyInet, firewall.FamilyIP, firewall.FamilyIP6}[:1+pick(3)] {
		rs.Tables = append(rs.Tables, firewall.Table{Family: fam, Name: "t" + fam, Chains: []firewall.Chain{
			chain("input", firewall.HookInput, 2+pick(8)), chain("sub", "", pick(5)),
		}})
	}
	spec := MeshSpec{Node: "golden", Input: allow(OwnerManagement, "22/tcp")}
	declared := []string{"ip icmp type 8", "ip udp to 224.0.0.251 dport 5353", "ip6 icmpv6 type 128-140", "ip udp sport 67 dport 68", "ip6 udp to ff00::/8"}
	for range pick(3) {
		spec.DropClasses = append(spec.DropClasses, declared[pick(len(declared))])
	}
	for range pick(2) {
		spec.WidenClasses = append(spec.WidenClasses, declared[pick(len(declared))])
	}
	return rs, spec
}
