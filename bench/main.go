// Command bench measures opening and closing marked rules on a ufw node: the
// firewall package (one listing and one netlink batch per operation) side by
// side with the per-rule commands an operator would otherwise run (nft,
// iptables, ufw), in one fresh network namespace, in one run.
//
//	go run ./bench            # as root; writes bench/results/marks-<date>.json
//	                          # and bench/results/cutover-<date>.json (bench/cutover.go)
//
// Figures are printed, never asserted: the goal (ours at least 10 times
// faster than the fastest per-rule command) is read off the table.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"adoption/config"
	"adoption/firewall"
	"adoption/netns"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// Result is one method's figures.
type Result struct {
	Method      string  `json:"method"`
	Rules       int     `json:"rules"`
	ProcessRuns int     `json:"process_runs"`
	OpenMS      float64 `json:"open_ms"`
	CloseMS     float64 `json:"close_ms"`
	TotalMS     float64 `json:"total_ms"`
	Ratio       float64 `json:"ratio_vs_ours"`
	Restored    bool    `json:"restored"`
}

// Report is what the JSON file holds.
type Report struct {
	Date    string   `json:"date"`
	Ports   string   `json:"ports"`
	Kernel  string   `json:"kernel"`
	Tools   []string `json:"tools"`
	Note    string   `json:"note"`
	Results []Result `json:"results"`
}

type bench struct {
	ns, path string
	ports    []config.Port
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	n := fs.Int("n", 100, "ports to open (from 20000, tcp)")
	outDir := fs.String("out", filepath.Join("bench", "results"), "directory for the JSON result")
	skipUfw := fs.Bool("skip-ufw", false, "leave out `ufw allow` (about 0.5 s per rule)")
	skipCutover := fs.Bool("skip-cutover", false, "leave out the cutover bench (needs Docker)")
	cutoverN := fs.Int("cutover-n", 5, "runs of each cutover procedure")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: it creates a network namespace")
	}
	for _, b := range []string{"ip", "nft", "iptables", "ip6tables", "ufw"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("needs %s: %w", b, err)
		}
	}
	id := make([]byte, 4)
	rand.Read(id)
	b := &bench{ns: "mk-bench-" + hex.EncodeToString(id)}
	b.path = filepath.Join("/run/netns", b.ns)
	for i := 0; i < *n; i++ {
		b.ports = append(b.ports, config.Port{Num: uint16(20000 + i), Proto: "tcp"})
	}
	cleanup, err := b.setup()
	defer cleanup()
	if err != nil {
		return err
	}
	before, err := b.listing()
	if err != nil {
		return err
	}

	methods := []struct {
		name string
		fn   func() (Result, error)
	}{
		{"firewall.Marker (one batch)", b.ours},
		{"nft insert, one run per port", b.nft},
		{"iptables -I, one run per rule", b.iptables},
		{"ufw allow, one run per port", b.ufw},
	}
	var results []Result
	for _, m := range methods {
		if *skipUfw && strings.HasPrefix(m.name, "ufw") {
			continue
		}
		fmt.Fprintf(stdout, "running %s ...\n", m.name)
		r, err := m.fn()
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		r.Method = m.name
		r.TotalMS = r.OpenMS + r.CloseMS
		after, err := b.listing()
		if err != nil {
			return err
		}
		r.Restored = after == before
		results = append(results, r)
	}
	for i := range results {
		results[i].Ratio = results[i].TotalMS / results[0].TotalMS
	}

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "method\trules\tprocess runs\topen ms\tclose ms\ttotal ms\tratio vs ours\trestored\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1fx\t%v\t\n", r.Method, r.Rules, r.ProcessRuns, r.OpenMS, r.CloseMS, r.TotalMS, r.Ratio, r.Restored)
	}
	tw.Flush()

	fastest := 0.0
	for _, r := range results[1:] {
		if fastest == 0 || r.TotalMS < fastest {
			fastest = r.TotalMS
		}
	}
	if fastest > 0 {
		fmt.Fprintf(stdout, "ours is %.1fx faster than the fastest per-rule command (goal: 10x)\n", fastest/results[0].TotalMS)
	}

	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	rep := Report{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Ports:   fmt.Sprintf("%d-%d/tcp, IPv4 and IPv6", 20000, 20000+*n-1),
		Kernel:  strings.TrimSpace(string(kernel)),
		Tools:   versions(),
		Note:    "one ufw namespace; each method opens the ports in both families and closes them again; nft and iptables run on a thread inside the namespace (no ip netns exec), ufw through ip netns exec for its own /etc copy",
		Results: results,
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	file := filepath.Join(*outDir, "marks-"+time.Now().Format("2006-01-02")+".json")
	js, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(file, append(js, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", file)
	if *skipCutover {
		fmt.Fprintln(stdout, "cutover bench skipped (-skip-cutover)")
	} else if err := runCutover(*cutoverN, *outDir, stdout); err != nil {
		return fmt.Errorf("cutover: %w", err)
	}
	for _, r := range results {
		if !r.Restored {
			return fmt.Errorf("%s did not leave the ruleset as found", r.Method)
		}
	}
	return nil
}

func versions() []string {
	var out []string
	for _, c := range [][]string{{"nft", "--version"}, {"iptables", "--version"}, {"ufw", "--version"}} {
		b, _ := exec.Command(c[0], c[1:]...).Output()
		out = append(out, strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)[0])
	}
	return out
}

// setup makes the namespace a ufw node with its own copy of /etc/ufw and
// /etc/default (ip netns exec bind-mounts /etc/netns/NS/* over /etc).
func (b *bench) setup() (func(), error) {
	etc := filepath.Join("/etc/netns", b.ns)
	cleanup := func() {
		exec.Command("ip", "netns", "del", b.ns).Run()
		os.RemoveAll(etc)
	}
	steps := [][]string{
		{"ip", "netns", "add", b.ns},
		{"ip", "-n", b.ns, "link", "set", "lo", "up"},
		{"mkdir", "-p", etc},
		{"cp", "-a", "/etc/ufw", filepath.Join(etc, "ufw")},
		{"cp", "-a", "/etc/default", filepath.Join(etc, "default")},
		{"sed", "-i", "-e", `s/^IPT_MODULES=.*/IPT_MODULES=""/`, "-e", "s/^IPV6=.*/IPV6=yes/", filepath.Join(etc, "default", "ufw")},
	}
	for _, ufw := range [][]string{
		{"--force", "reset"}, {"default", "deny", "incoming"}, {"default", "deny", "routed"},
		{"allow", "22/tcp"}, {"allow", "80/tcp"}, {"allow", "443/tcp"}, {"route", "allow", "proto", "tcp", "to", "any", "port", "8443"},
		{"--force", "enable"},
	} {
		steps = append(steps, append([]string{"ip", "netns", "exec", b.ns, "ufw"}, ufw...))
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return cleanup, fmt.Errorf("%s: %w\n%s", strings.Join(s, " "), err, out)
		}
	}
	return cleanup, nil
}

var counters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

func (b *bench) listing() (string, error) {
	out, err := exec.Command("ip", "netns", "exec", b.ns, "nft", "list", "ruleset").Output()
	return counters.ReplaceAllString(string(out), "counter"), err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (b *bench) ours() (Result, error) {
	m := firewall.NewMarker(b.path)
	start := time.Now()
	added, _, err := m.Open("bench", "bench", b.ports)
	if err != nil {
		return Result{}, err
	}
	opened := time.Now()
	removed, err := m.Close("bench", "bench")
	if err != nil {
		return Result{}, err
	}
	closed := time.Now()
	if len(added) != 2*len(b.ports) || len(removed) != len(added) {
		return Result{}, fmt.Errorf("added %d and removed %d rules, want %d", len(added), len(removed), 2*len(b.ports))
	}
	return Result{Rules: len(added), OpenMS: ms(opened.Sub(start)), CloseMS: ms(closed.Sub(opened))}, nil
}

// inNS runs commands from a thread inside the namespace: a child process
// inherits the forking thread's network namespace, so the per-rule commands
// pay only their own cost, as they would run on the node itself.
func (b *bench) inNS(cmds [][]string) (outs []string, err error) {
	err = netns.Do(b.path, func() error {
		for _, c := range cmds {
			var out bytes.Buffer
			cmd := exec.Command(c[0], c[1:]...)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %w\n%s", strings.Join(c, " "), err, out.String())
			}
			outs = append(outs, out.String())
		}
		return nil
	})
	return outs, err
}

func timed(f func() error) (float64, error) {
	start := time.Now()
	err := f()
	return ms(time.Since(start)), err
}

var handleRe = regexp.MustCompile(`# handle (\d+)`)

func comment(p config.Port) string { return fmt.Sprintf("adoption:bench:nft:%d/%s", p.Num, p.Proto) }

func (b *bench) nft() (Result, error) {
	var ins [][]string
	for _, p := range b.ports {
		r := fmt.Sprintf("tcp dport %d counter accept comment %q", p.Num, comment(p))
		ins = append(ins, []string{"nft", "-e", "-a", "insert rule ip filter ufw-user-input " + r + "; insert rule ip6 filter ufw6-user-input " + r})
	}
	var outs []string
	open, err := timed(func() (err error) { outs, err = b.inNS(ins); return err })
	if err != nil {
		return Result{}, err
	}
	var del [][]string
	for i, o := range outs {
		h := handleRe.FindAllStringSubmatch(o, -1)
		if len(h) != 2 {
			return Result{}, fmt.Errorf("port %v: no handles in nft's echo %q", b.ports[i], o)
		}
		h4, _ := strconv.Atoi(h[0][1])
		h6, _ := strconv.Atoi(h[1][1])
		del = append(del, []string{"nft", fmt.Sprintf("delete rule ip filter ufw-user-input handle %d; delete rule ip6 filter ufw6-user-input handle %d", h4, h6)})
	}
	closeMS, err := timed(func() error { _, err := b.inNS(del); return err })
	if err != nil {
		return Result{}, err
	}
	return Result{Rules: 2 * len(b.ports), ProcessRuns: len(ins) + len(del), OpenMS: open, CloseMS: closeMS}, nil
}

func (b *bench) iptables() (Result, error) {
	rule := func(op, cmd, chain string, p config.Port) []string {
		return []string{cmd, op, chain, "-p", "tcp", "-m", "tcp", "--dport", strconv.Itoa(int(p.Num)), "-m", "comment", "--comment", comment(p), "-j", "ACCEPT"}
	}
	var ins, del [][]string
	for _, p := range b.ports {
		ins = append(ins, rule("-I", "iptables", "ufw-user-input", p), rule("-I", "ip6tables", "ufw6-user-input", p))
		del = append(del, rule("-D", "iptables", "ufw-user-input", p), rule("-D", "ip6tables", "ufw6-user-input", p))
	}
	open, err := timed(func() error { _, err := b.inNS(ins); return err })
	if err != nil {
		return Result{}, err
	}
	closeMS, err := timed(func() error { _, err := b.inNS(del); return err })
	if err != nil {
		return Result{}, err
	}
	return Result{Rules: 2 * len(b.ports), ProcessRuns: len(ins) + len(del), OpenMS: open, CloseMS: closeMS}, nil
}

func (b *bench) ufw() (Result, error) {
	do := func(args ...string) error {
		out, err := exec.Command("ip", append([]string{"netns", "exec", b.ns, "ufw"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ufw %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	open, err := timed(func() error {
		for _, p := range b.ports {
			if err := do("allow", p.String()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	closeMS, err := timed(func() error {
		for _, p := range b.ports {
			if err := do("delete", "allow", p.String()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	return Result{Rules: 2 * len(b.ports), ProcessRuns: 2 * len(b.ports), OpenMS: open, CloseMS: closeMS}, nil
}
