package main

// This file holds the marks section: opening and closing marked rules
// through the firewall package against one nft -f of the same rules, and
// nft, iptables and ufw run once per rule, in one ufw namespace.

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"adoption/bench/benchns"
	"adoption/bench/report"
	"adoption/config"
	"adoption/firewall/marks"
	"adoption/netns"
)

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
	// Runs is how many times the method ran; the figures are those of the
	// run with the median total, RunsMS every run's total in order.
	Runs   int       `json:"runs"`
	RunsMS []float64 `json:"runs_total_ms,omitempty"`
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

// marksMethod is one way of opening and closing the rules, and its runs.
type marksMethod struct {
	name string
	fn   func() (Result, error)
	runs int
	all  []Result
}

// runMarks opens and closes marked rules by each method in one fresh ufw
// namespace and checks that each leaves the ruleset as found. Ours and the
// one-nft-f peer are quick and noisy on a shared machine: they run runs
// times, interleaved so both see the same load, and the median run counts.
// The per-rule peers aggregate hundreds of process runs already: once.
func runMarks(n, runs int, skipUfw bool, stdout io.Writer) ([]report.Row, *Report, error) {
	b := &bench{ns: "bn-mk-" + benchns.RandHex(4)}
	b.path = filepath.Join("/run/netns", b.ns)
	for i := 0; i < n; i++ {
		b.ports = append(b.ports, config.Port{Num: uint16(20000 + i), Proto: "tcp"})
	}
	if runs < 1 {
		runs = 1
	}
	cleanup, err := b.setup()
	defer cleanup()
	if err != nil {
		return nil, nil, err
	}
	methods := []*marksMethod{
		{name: "firewall.Marker (one batch)", fn: b.ours, runs: runs},
		{name: "nft -f, one run to insert and one to delete by handle", fn: b.nftFile, runs: runs},
		{name: "nft insert, one run per port", fn: b.nft, runs: 1},
		{name: "iptables -I, one run per rule", fn: b.iptables, runs: 1},
		{name: "ufw allow, one run per port", fn: b.ufw, runs: 1},
	}
	if skipUfw {
		methods = methods[:len(methods)-1]
	}
	results, errRun := b.runMethods(methods, runs, stdout)
	if len(results) == 0 {
		return nil, nil, errRun
	}
	for i := range results {
		results[i].Ratio = results[i].TotalMS / results[0].TotalMS
	}
	rep := &Report{
		Date:   time.Now().UTC().Format(time.RFC3339),
		Ports:  fmt.Sprintf("%d-%d/tcp, IPv4 and IPv6", 20000, 20000+n-1),
		Kernel: hostInfo().Kernel,
		Tools:  versions(),
		Note: "one ufw namespace; each method opens the ports in both families and closes them again; nft and iptables run on a thread inside the namespace (no ip netns exec), ufw through ip netns exec for its own /etc copy; " +
			fmt.Sprintf("ours and nft -f ran %d times, interleaved, and the run with the median total is reported (runs_total_ms holds every run); the per-rule methods ran once", runs),
		Results: results,
	}
	return marksRows(results, methods[1].name, n), rep, errRun
}

// runMethods runs the methods interleaved, each as many times as it asks,
// and returns each one's median run, up to the first that failed.
func (b *bench) runMethods(methods []*marksMethod, runs int, stdout io.Writer) ([]Result, error) {
	before, err := b.listing()
	if err != nil {
		return nil, err
	}
	once := func(m *marksMethod) error {
		fmt.Fprintf(stdout, "marks: %s (run %d of %d) ...\n", m.name, len(m.all)+1, m.runs)
		r, err := m.fn()
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		after, err := b.listing()
		if err != nil {
			return err
		}
		r.Method = m.name
		r.TotalMS = r.OpenMS + r.CloseMS
		r.Restored = after == before
		m.all = append(m.all, r)
		if !r.Restored {
			return fmt.Errorf("%s did not leave the ruleset as found", m.name)
		}
		return nil
	}
	var errRun error
	for i := 0; i < runs && errRun == nil; i++ {
		for _, m := range methods {
			if i < m.runs && errRun == nil {
				errRun = once(m)
			}
		}
	}
	var results []Result
	for _, m := range methods {
		if errRun == nil && len(m.all) == 0 {
			errRun = once(m)
		}
		if len(m.all) == 0 {
			break
		}
		results = append(results, medianRun(m.all))
	}
	return results, errRun
}

// marksRows are one row per peer, against ours (results[0]).
func marksRows(results []Result, nftFile string, n int) []report.Row {
	ours := results[0]
	var rows []report.Row
	for _, r := range results[1:] {
		peerIs := fmt.Sprintf("%s (%d process runs)", r.Method, r.ProcessRuns)
		note := fmt.Sprintf("open %.1f + close %.1f ms ours, %.1f + %.1f ms peer; ruleset as found after: ours %v, peer %v", ours.OpenMS, ours.CloseMS, r.OpenMS, r.CloseMS, ours.Restored, r.Restored)
		if r.Runs > 1 {
			note += fmt.Sprintf("; median of %d interleaved runs each (ours %s ms, peer %s ms)", r.Runs, joinMS(ours.RunsMS), joinMS(r.RunsMS))
		}
		if r.Method == nftFile {
			peerIs = fmt.Sprintf("one `nft -e -a -f` inserting the same %d rules into the same chains, then one `nft -f` deleting them by the handles it echoed (%d process runs)", r.Rules, r.ProcessRuns)
			note += "; the rule files are written before each timed run, as a script would have them; nft pays at exit for the kernel reclaiming the deleted rules, ours releases its sockets off the caller's path"
		}
		rows = append(rows, report.WithPeer("marks", fmt.Sprintf("open + close %d ports as marked rules (%d rules, IPv4 and IPv6)", n, r.Rules),
			ours.TotalMS, r.TotalMS, "ms", "firewall.Marker: one listing and one netlink batch per operation", peerIs, note, 1))
	}
	return rows
}

// medianRun returns the run with the median total (the lower middle of an
// even count), with every run's total and the count.
func medianRun(all []Result) Result {
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b Result) int { return cmp.Compare(a.TotalMS, b.TotalMS) })
	r := sorted[(len(sorted)-1)/2]
	r.Runs = len(all)
	r.Restored = true
	for _, a := range all {
		r.RunsMS = append(r.RunsMS, a.TotalMS)
		r.Restored = r.Restored && a.Restored
	}
	if len(all) == 1 {
		r.RunsMS = nil
	}
	return r
}

func joinMS(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, ", ")
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
	steps := append([][]string{
		{"ip", "netns", "add", b.ns},
		{"ip", "-n", b.ns, "link", "set", "lo", "up"},
	}, ufwNodeSteps(b.ns)...)
	return cleanup, runSteps(steps)
}

var counters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

func (b *bench) listing() (string, error) {
	out, err := exec.Command("ip", "netns", "exec", b.ns, "nft", "list", "ruleset").Output()
	return counters.ReplaceAllString(string(out), "counter"), err
}

func (b *bench) ours() (Result, error) {
	m := marks.NewMarker(b.path)
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
	return Result{Rules: len(added), OpenMS: report.MS(opened.Sub(start)), CloseMS: report.MS(closed.Sub(opened))}, nil
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
	return report.MS(time.Since(start)), err
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

// nftFile is what a script would do with nft itself: one `nft -e -a -f`
// inserting every rule, reading the handles nft echoes, and one `nft -f`
// deleting them by handle. The files are written before each timed run.
func (b *bench) nftFile() (Result, error) {
	dir, err := os.MkdirTemp("", "bench-nft-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	var ins strings.Builder
	for _, p := range b.ports {
		r := fmt.Sprintf("tcp dport %d counter accept comment %q", p.Num, comment(p))
		fmt.Fprintf(&ins, "insert rule ip filter ufw-user-input %s\ninsert rule ip6 filter ufw6-user-input %s\n", r, r)
	}
	insFile, delFile := filepath.Join(dir, "insert.nft"), filepath.Join(dir, "delete.nft")
	if err := os.WriteFile(insFile, []byte(ins.String()), 0o600); err != nil {
		return Result{}, err
	}
	var outs []string
	open, err := timed(func() (err error) { outs, err = b.inNS([][]string{{"nft", "-e", "-a", "-f", insFile}}); return err })
	if err != nil {
		return Result{}, err
	}
	// Each echoed line ends in "# handle N"; the lines name the family and
	// chain they went to.
	var del strings.Builder
	count := 0
	for _, line := range strings.Split(outs[0], "\n") {
		h := handleRe.FindStringSubmatch(line)
		if h == nil {
			continue
		}
		switch {
		case strings.Contains(line, " ip filter ufw-user-input "):
			fmt.Fprintf(&del, "delete rule ip filter ufw-user-input handle %s\n", h[1])
		case strings.Contains(line, " ip6 filter ufw6-user-input "):
			fmt.Fprintf(&del, "delete rule ip6 filter ufw6-user-input handle %s\n", h[1])
		default:
			return Result{}, fmt.Errorf("nft echoed a rule elsewhere: %q", line)
		}
		count++
	}
	if count != 2*len(b.ports) {
		return Result{}, fmt.Errorf("nft echoed %d handles, want %d:\n%s", count, 2*len(b.ports), outs[0])
	}
	if err := os.WriteFile(delFile, []byte(del.String()), 0o600); err != nil {
		return Result{}, err
	}
	closeMS, err := timed(func() error { _, err := b.inNS([][]string{{"nft", "-f", delFile}}); return err })
	if err != nil {
		return Result{}, err
	}
	return Result{Rules: count, ProcessRuns: 2, OpenMS: open, CloseMS: closeMS}, nil
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
