// Command bench is `make bench`: every figure measured side by side in one
// run, printed as one table (figure, ours, peer, peer/ours, unit, a note
// naming which is ours and which the peer's) and written with each
// section's details to bench/results/bench-<date>.json. Run it as root:
//
//	go run ./bench                       # about 10 minutes on 2 cores
//	go run ./bench -skip-scale -skip-ufw # quicker; see -h for every flag
//
// The sections:
//   - marks: opening and closing marked rules through the firewall package
//     (one listing and one netlink batch per operation) against nft,
//     iptables and ufw run once per rule (this file);
//   - probe: activities.Activities.Probe of a node shaped like the seed's
//     control node against gathering the same facts by shelling out
//     (probe.go);
//   - cutover: one service's unavailability, containers.Engine's cutover
//     against docker stop && rm && run (cutover.go, adapted by
//     cutover_rows.go);
//   - flip: connections lost under a 5 ms hammer, firewall.Flipper against
//     ufw disable then nft -f (flip.go);
//   - scale: a SIMULATION of 1,000 in-memory nodes driven through one Fleet
//     workflow by one orchestrator process (adopt-worker orchestrate) on one
//     dev server, then all flipped 50 at a time; absolute figures (scale.go).
//
// Figures are printed, never asserted: the goals are read off the table.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
	outDir := fs.String("out", filepath.Join("bench", "results"), "directory for the JSON result")
	skipMarks := fs.Bool("skip-marks", false, "leave out the marked-rules rows")
	n := fs.Int("n", 100, "marked rules: ports to open (from 20000, tcp)")
	skipUfw := fs.Bool("skip-ufw", false, "marked rules: leave out `ufw allow` (about 0.5 s per rule)")
	skipProbe := fs.Bool("skip-probe", false, "leave out the probe of a control-node-shaped node")
	probeN := fs.Int("probe-n", 20, "probe: timed runs of each")
	probeFixture := fs.String("probe-fixture", "", "probe: also write the node's listed ruleset and interfaces as JSON to this `file` (firewall/testdata/dnat/control-node.json is one)")
	skipCutover := fs.Bool("skip-cutover", false, "leave out the cutover rows (needs Docker)")
	cutoverN := fs.Int("cutover-n", 5, "cutover: runs of each procedure")
	skipFlip := fs.Bool("skip-flip", false, "leave out the flip-under-load rows")
	flipN := fs.Int("flip-n", 5, "flip: runs of each procedure")
	skipScale := fs.Bool("skip-scale", false, "leave out the orchestration-at-scale simulation (needs the Temporal CLI)")
	scaleNodes := fs.Int("scale-nodes", 1000, "scale: simulated nodes (one NodeMigration and one node worker each)")
	scaleFlips := fs.Int("scale-flips", 0, "scale: nodes flipped for the flip-to-converged latency (0: every node, which also times all converged)")
	scaleParallel := fs.Int("scale-flip-parallel", 50, "scale: flips in flight at once")
	scaleTimeout := fs.Duration("scale-timeout", 25*time.Minute, "scale: give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: it creates network namespaces")
	}
	for _, b := range []string{"ip", "nft", "iptables", "ip6tables", "iptables-restore", "ip6tables-restore", "ufw", "ss", "sha256sum", "pgrep"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("needs %s: %w", b, err)
		}
	}
	began := time.Now()
	res := Results{
		Date: time.Now().UTC().Format(time.RFC3339),
		Host: hostInfo(),
		Note: "every row measured in this run, ours beside the peer's; ratio = peer / ours, and every figure is lower-is-better, " +
			"so a ratio above 1 means ours is lower by that factor; rows marked SIMULATION are absolute figures with no peer",
		Sections: map[string]any{},
	}
	var errs []error
	section := func(name string, skip bool, fn func() ([]Row, any, error)) {
		if skip {
			res.Skipped = append(res.Skipped, name)
			fmt.Fprintf(stdout, "%s: skipped\n", name)
			return
		}
		t := time.Now()
		rows, det, err := fn()
		res.Rows = append(res.Rows, rows...)
		if det != nil {
			res.Sections[name] = det
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", name, err))
			fmt.Fprintf(stdout, "%s: FAILED: %v\n", name, err)
			return
		}
		fmt.Fprintf(stdout, "%s: done in %.0f s\n", name, time.Since(t).Seconds())
	}
	section("marks", *skipMarks, func() ([]Row, any, error) {
		rows, rep, err := runMarks(*n, *skipUfw, stdout)
		if rep == nil {
			return rows, nil, err
		}
		return rows, rep, err
	})
	section("probe", *skipProbe, func() ([]Row, any, error) {
		rows, det, err := runProbe(*probeN, *probeFixture, stdout)
		if det == nil {
			return rows, nil, err
		}
		return rows, det, err
	})
	section("cutover", *skipCutover, func() ([]Row, any, error) {
		rows, rep, err := cutoverRows(*cutoverN, stdout)
		if rep == nil {
			return rows, nil, err
		}
		return rows, rep, err
	})
	section("flip", *skipFlip, func() ([]Row, any, error) {
		rows, det, err := runFlip(*flipN, stdout)
		if det == nil {
			return rows, nil, err
		}
		return rows, det, err
	})
	section("scale", *skipScale, func() ([]Row, any, error) {
		rows, det, err := runScale(scaleOpts{nodes: *scaleNodes, flips: *scaleFlips, parallel: *scaleParallel, timeout: *scaleTimeout}, stdout)
		if det == nil {
			return rows, nil, err
		}
		return rows, det, err
	})

	fmt.Fprintf(stdout, "\nmake bench, %s, %d CPUs, kernel %s, %.0f s in all\n", res.Date, res.Host.CPUs, res.Host.Kernel, time.Since(began).Seconds())
	fmt.Fprintln(stdout, "ratio = peer / ours; every figure is lower-is-better, so above 1 means ours is lower by that factor")
	printTable(stdout, res.Rows)
	if len(res.Skipped) > 0 {
		fmt.Fprintf(stdout, "skipped: %s\n", strings.Join(res.Skipped, ", "))
	}
	file, err := writeResults(*outDir, res)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", file)
	return errors.Join(errs...)
}

// runMarks opens and closes marked rules by each method in one fresh ufw
// namespace and checks that each leaves the ruleset as found.
func runMarks(n int, skipUfw bool, stdout io.Writer) ([]Row, *Report, error) {
	b := &bench{ns: "bn-mk-" + randHex(4)}
	b.path = filepath.Join("/run/netns", b.ns)
	for i := 0; i < n; i++ {
		b.ports = append(b.ports, config.Port{Num: uint16(20000 + i), Proto: "tcp"})
	}
	cleanup, err := b.setup()
	defer cleanup()
	if err != nil {
		return nil, nil, err
	}
	before, err := b.listing()
	if err != nil {
		return nil, nil, err
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
		if skipUfw && strings.HasPrefix(m.name, "ufw") {
			continue
		}
		fmt.Fprintf(stdout, "marks: %s ...\n", m.name)
		r, err := m.fn()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.name, err)
		}
		r.Method = m.name
		r.TotalMS = r.OpenMS + r.CloseMS
		after, err := b.listing()
		if err != nil {
			return nil, nil, err
		}
		r.Restored = after == before
		results = append(results, r)
	}
	for i := range results {
		results[i].Ratio = results[i].TotalMS / results[0].TotalMS
	}
	rep := &Report{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Ports:   fmt.Sprintf("%d-%d/tcp, IPv4 and IPv6", 20000, 20000+n-1),
		Kernel:  hostInfo().Kernel,
		Tools:   versions(),
		Note:    "one ufw namespace; each method opens the ports in both families and closes them again; nft and iptables run on a thread inside the namespace (no ip netns exec), ufw through ip netns exec for its own /etc copy",
		Results: results,
	}
	ours := results[0]
	var rows []Row
	for _, r := range results[1:] {
		rows = append(rows, row("marks", fmt.Sprintf("open + close %d ports as marked rules (%d rules, IPv4 and IPv6)", n, r.Rules),
			ours.TotalMS, r.TotalMS, "ms", "firewall.Marker: one listing and one netlink batch per operation",
			fmt.Sprintf("%s (%d process runs)", r.Method, r.ProcessRuns),
			fmt.Sprintf("open %.1f + close %.1f ms ours, %.1f + %.1f ms peer; ruleset as found after: ours %v, peer %v", ours.OpenMS, ours.CloseMS, r.OpenMS, r.CloseMS, ours.Restored, r.Restored), 1))
	}
	for _, r := range results {
		if !r.Restored {
			return rows, rep, fmt.Errorf("%s did not leave the ruleset as found", r.Method)
		}
	}
	return rows, rep, nil
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
