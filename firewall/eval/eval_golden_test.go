// This file holds the evaluator's recorded results: OpenPorts and
// OpenPortsOn must give what they gave when the goldens were written, on
// fwtest's DNAT fixtures and on pseudo-random decoded rulesets, three ways
// each. After a change meant to change results, rewrite them and read the
// diff: FW_SAVE_GOLDEN=1 go test -run TestEvalGolden ./firewall/eval.
// FW_GOLDEN_N and FW_GOLDEN_FILE run more inputs against another file.

package eval_test

import (
	"bytes"
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

	fw "adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
)

const goldenInputs = 2000

func TestEvalGolden(t *testing.T) {
	save := os.Getenv("FW_SAVE_GOLDEN") == "1"
	t.Run("fixtures", func(t *testing.T) {
		for _, name := range []string{"ufw-docker", "control-node", "docker28"} {
			rs, node := readFixture(t, name)
			got, err := json.MarshalIndent(struct {
				OnNode   []fw.Opening `json:"on_node"`
				ZeroNode []fw.Opening `json:"zero_node"`
			}{eval.OpenPortsOn(rs, node), eval.OpenPorts(rs)}, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			file := filepath.Join("testdata", "eval", name+".open.json")
			if save {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: the openings differ from %s:\n%s", name, file, firstDiff(string(want), string(got)))
			}
		}
	})
	// The traffic classes besides TCP and UDP ports (ICMP types, neighbour
	// discovery, multicast, other protocols) on the same fixtures: a
	// fixture listed before a decoder knew a match leaves the class
	// uncertain, which this shows (and fixturesDecoded refuses).
	t.Run("classes", func(t *testing.T) {
		for _, name := range []string{"ufw-docker", "control-node", "docker28", "reference-node"} {
			rs, node := readFixture(t, name)
			fixtureDecoded(t, name, rs)
			got, err := json.MarshalIndent(eval.ClassOpenings(rs, node), "", " ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			file := filepath.Join("testdata", "eval", name+".classes.json")
			if save {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: the class openings differ from %s:\n%s", name, file, firstDiff(string(want), string(got)))
			}
		}
	})
	t.Run("random", func(t *testing.T) {
		checkGolden(t, "random", goldenInputs, func(n int) func(int) *fw.Ruleset {
			data := goldenData(n)
			return func(i int) *fw.Ruleset { return goldenRuleset(data[i]) }
		})
	})
	t.Run("sources", func(t *testing.T) {
		checkGolden(t, "sources", goldenSourceInputs, func(int) func(int) *fw.Ruleset { return sourcesRuleset })
	})
}

// checkGolden compares the hashes of the results on n rulesets (a line
// each) with testdata/eval/<name>.golden, or writes them (FW_SAVE_GOLDEN=1).
// FW_GOLDEN_N overrides n; FW_GOLDEN_FILE=<path> uses <path>.<name>.
func checkGolden(t *testing.T, name string, n int, rulesets func(n int) func(i int) *fw.Ruleset) {
	file := filepath.Join("testdata", "eval", name+".golden")
	if s := os.Getenv("FW_GOLDEN_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	if f := os.Getenv("FW_GOLDEN_FILE"); f != "" {
		file = f + "." + name
	}
	ruleset := rulesets(n)
	var got strings.Builder
	for i := range n {
		fmt.Fprintf(&got, "%d %s\n", i, goldenHash(t, ruleset(i)))
	}
	if os.Getenv("FW_SAVE_GOLDEN") == "1" {
		if err := os.WriteFile(file, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
	if len(gl) != len(wl) {
		t.Fatalf("%d results, %s holds %d", len(gl)-1, file, len(wl)-1)
	}
	bad := 0
	for i := range gl {
		if gl[i] != wl[i] {
			if bad++; bad <= 5 {
				t.Errorf("input %d: results differ from %s; ruleset %s", i, file, mustJSON(ruleset(i)))
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d inputs differ", bad, n)
	}
}

const goldenSourceInputs = 300

// sourcesRuleset is a ruleset whose rules name many source prefixes, nested
// and overlapping (a blocklist, allowlists per port, a chain of its own),
// so that source regions and their reporting as prefixes are exercised
// beyond what the fuzz decoder's few prefixes do.
func sourcesRuleset(i int) *fw.Ruleset {
	r := rand.New(rand.NewPCG(uint64(i), 99))
	pfx := func() netip.Prefix {
		switch r.IntN(12) {
		case 0:
			a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(r.IntN(4)), 0, byte(r.IntN(16))})
			return netip.PrefixFrom(a, []int{32, 40, 48, 56, 64}[r.IntN(5)]).Masked()
		case 1:
			return []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("127.0.0.0/8"),
				netip.MustParsePrefix("::/0"), netip.MustParsePrefix("10.0.0.0/8")}[r.IntN(4)]
		}
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(16)), byte(r.IntN(256))})
		return netip.PrefixFrom(a, []int{12, 16, 20, 24, 26, 28, 30, 32}[r.IntN(8)]).Masked()
	}
	set := func(n int) []netip.Prefix {
		out := make([]netip.Prefix, n)
		for k := range out {
			out[k] = pfx()
		}
		return out
	}
	verdict := func() fw.Verdict {
		return fw.Verdict{Kind: []fw.VerdictKind{fw.VerdictAccept, fw.VerdictDrop, fw.VerdictJump, fw.VerdictReturn}[r.IntN(4)], Target: "c1"}
	}
	ports := []uint16{22, 25, 80, 443, 5432, 8080}
	portRule := func() fw.Rule {
		ru := fw.Rule{Conds: []fw.Cond{
			{Kind: fw.CondL4Proto, Protos: []int{[]int{6, 17}[r.IntN(2)]}},
			{Kind: fw.CondDport, Ports: []fw.PortRange{{From: ports[r.IntN(len(ports))], To: ports[r.IntN(len(ports))]}}},
		}, Verdict: fw.Verdict{Kind: []fw.VerdictKind{fw.VerdictAccept, fw.VerdictDrop}[r.IntN(2)]}}
		if r.IntN(3) != 0 {
			ru.Conds = append(ru.Conds, fw.Cond{Kind: fw.CondSaddr, Prefixes: set(1 + r.IntN(40)), Negate: r.IntN(6) == 0})
		}
		return ru
	}
	input := fw.Chain{Name: "input", Hook: fw.HookInput, Type: "filter", Policy: "drop", Rules: []fw.Rule{
		{Conds: []fw.Cond{{Kind: fw.CondSaddr, Prefixes: set(r.IntN(300))}}, Verdict: verdict()},
	}}
	for range r.IntN(6) {
		input.Rules = append(input.Rules, portRule())
	}
	c1 := fw.Chain{Name: "c1"}
	for range r.IntN(4) {
		c1.Rules = append(c1.Rules, portRule())
	}
	return &fw.Ruleset{Tables: []fw.Table{{Family: fw.FamilyInet, Name: "filter", Chains: []fw.Chain{input, c1}}}}
}

func readFixture(t *testing.T, name string) (*fw.Ruleset, fw.Node) {
	t.Helper()
	b, err := os.ReadFile(fwtest.FixturePath(name))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Ruleset *fw.Ruleset `json:"ruleset"`
		Node    fw.Node     `json:"node"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Ruleset, f.Node
}

// goldenData is a fixed stream of inputs for fzRuleset: half of them of
// small bytes (plain rules, ports and prefixes from the pools), half of any
// bytes (the rare features).
func goldenData(n int) [][]byte {
	r := rand.New(rand.NewPCG(10, 7))
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, r.IntN(400))
		for k := range b {
			if i%2 == 0 {
				b[k] = byte(r.IntN(8))
			} else {
				b[k] = byte(r.Uint32())
			}
		}
		out[i] = b
	}
	return out
}

// goldenNode is a node with an uplink, a container bridge with a port
// enslaved to it, and IPv4 forwarding only.
var goldenNode = fw.Node{
	Interfaces: []fw.Interface{
		{Name: "lo", Loopback: true, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("::1/128")}},
		{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/24"), netip.MustParsePrefix("2001:db8::7/64")}},
		{Name: "docker0", Kind: "bridge", Addrs: []netip.Prefix{netip.MustParsePrefix("172.17.0.1/16"), netip.MustParsePrefix("fd00:17::1/64")}},
		{Name: "veth1", Kind: "veth", Master: "docker0"},
	},
	Forwarding: map[string]bool{fw.FamilyIP: true, fw.FamilyIP6: false},
}

var goldenTargets = []fw.NATTarget{
	{Addr: netip.MustParseAddr("172.17.0.2"), PortMin: 8080, PortMax: 8080},
	{Addr: netip.MustParseAddr("172.17.0.3")},
	{Local: true, PortMin: 22, PortMax: 22},
	{Addr: netip.MustParseAddr("fd00:17::2"), PortMin: 80, PortMax: 80},
	{Addr: netip.MustParseAddr("10.9.9.9"), PortMin: 80, PortMax: 80},
	{Addr: netip.MustParseAddr("172.17.0.4"), PortMin: 1000, PortMax: 1010},
	{Addr: netip.MustParseAddr("127.0.0.1"), PortMin: 80, PortMax: 80},
	{Addr: netip.MustParseAddr("203.0.113.7"), PortMin: 443, PortMax: 443},
	{Unknown: "golden: unreadable"},
}

// withNAT is a copy of rs whose prerouting base chains are nat chains and
// some of whose accepts are DNATs, some rules also asking for the
// connection's original port or DNAT status.
func withNAT(rs *fw.Ruleset) *fw.Ruleset {
	var c fw.Ruleset
	if err := json.Unmarshal(mustJSON(rs), &c); err != nil {
		panic(err)
	}
	k := 0
	for ti := range c.Tables {
		for ci := range c.Tables[ti].Chains {
			ch := &c.Tables[ti].Chains[ci]
			if ch.Hook == fw.HookPrerouting {
				ch.Type = "nat"
			}
			for ri := range ch.Rules {
				ru := &ch.Rules[ri]
				k++
				if ru.Verdict.Kind == fw.VerdictAccept && k%3 != 0 {
					t := goldenTargets[k%len(goldenTargets)]
					ru.Verdict = fw.Verdict{Kind: fw.VerdictDNAT, NAT: &t}
				}
				switch k % 7 {
				case 1:
					ru.Conds = append(ru.Conds, fw.Cond{Kind: fw.CondOrigDport, Ports: []fw.PortRange{{From: 18080, To: 18090}, {From: 22, To: 22}}})
				case 3:
					ru.Conds = append(ru.Conds, fw.Cond{Kind: fw.CondCtStatus, Bits: 1 << 5, Negate: k%2 == 0})
				case 5:
					ru.Conds = append(ru.Conds, fw.Cond{Kind: fw.CondOrigDaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}})
				}
			}
		}
	}
	return &c
}

// goldenRuleset is fzRuleset(data) with every table made one the evaluator
// reads (an arp table becomes inet, a table without an evaluated base chain
// gets its first chain hooked at input or forward with policy drop): most
// of the decoder's rulesets otherwise leave every port open.
func goldenRuleset(data []byte) *fw.Ruleset {
	rs := fzRuleset(data)
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if t.Family == "arp" {
			t.Family = fw.FamilyInet
		}
		based := false
		for _, ch := range t.Chains {
			based = based || ch.Hook == fw.HookInput || ch.Hook == fw.HookForward || ch.Hook == fw.HookPrerouting
		}
		if !based {
			ch := &t.Chains[0]
			ch.Hook, ch.Type, ch.Policy = fw.HookInput, "filter", "drop"
			if len(data) > 0 && data[0]&1 == 1 {
				ch.Hook = fw.HookForward
			}
		}
	}
	return rs
}

func goldenHash(t *testing.T, rs *fw.Ruleset) string {
	t.Helper()
	h := sha256.New()
	for _, ops := range [][]fw.Opening{eval.OpenPorts(rs), eval.OpenPortsOn(rs, goldenNode), eval.OpenPortsOn(withNAT(rs), goldenNode)} {
		h.Write(mustJSON(ops))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// firstDiff shows the first line where two texts differ, with a little
// context.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			lo := max(0, i-3)
			return fmt.Sprintf("line %d:\nwant %q\n got %q\n(want lines %d-%d: %q)", i+1, w, g, lo+1, i+1, wl[lo:min(i+1, len(wl))])
		}
	}
	return "same lines"
}

// fixtureDecoded fails when a condition of the fixture's ruleset is one
// the decoder now reads but did not when the fixture was listed (an ICMP
// type match kept as "never matches tcp or udp", a hop limit as an
// undecidable xt match): the fixture is stale and
// its classes' answers are not the node's. Regenerate it: FW_SAVE_FIXTURES=1
// with the kernel test that lists it, go run ./bench -probe-fixture, or
// (reference-node) ADOPT_REFDIFF_FIXTURE=FILE with the reference node's
// differential test in tests/.
func fixtureDecoded(t *testing.T, name string, rs *fw.Ruleset) {
	t.Helper()
	for _, tb := range rs.Tables {
		for _, ch := range tb.Chains {
			for _, r := range ch.Rules {
				for _, c := range r.Conds {
					if strings.Contains(c.Reason, "icmp match") || strings.Contains(c.Reason, "icmp6 match") || strings.Contains(c.Reason, "match hl ") {
						t.Errorf("fixture %s, %s %s chain %s: %q was listed before ICMP types and hop limits were decoded; regenerate the fixture", name, tb.Family, tb.Name, ch.Name, c.Reason)
						return
					}
				}
			}
		}
	}
}
