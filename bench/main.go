// Command bench is `make bench`: every figure measured side by side in one
// run (marks, probe, cutover, flip, flip-ref, scale; one file each),
// printed as one table and written with each section's details to
// bench/results/bench-<date>.json. Run it as root; see -h for every flag.
// Figures are printed, never asserted: the goals are read off the table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"adoption/bench/report"
	"adoption/bench/scale"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// flags are the command line's: which sections run, and how.
type flags struct {
	outDir                 string
	skipMarks, skipUfw     bool
	marksN, marksRuns      int
	skipProbe              bool
	probeN, probeScale     int
	probeFixture           string
	probeProfile           string
	skipCutover, skipFlip  bool
	cutoverN, flipN        int
	skipFlipRef, skipScale bool
	flipRefN               int
	scale                  scale.Options
}

func parseFlags(args []string) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&f.outDir, "out", filepath.Join("bench", "results"), "directory for the JSON result")
	fs.BoolVar(&f.skipMarks, "skip-marks", false, "leave out the marked-rules rows")
	fs.IntVar(&f.marksN, "n", 100, "marked rules: ports to open (from 20000, tcp)")
	fs.IntVar(&f.marksRuns, "marks-runs", 5, "marked rules: runs of ours and of the one-nft-f peer, interleaved (median reported); the per-rule peers run once")
	fs.BoolVar(&f.skipUfw, "skip-ufw", false, "marked rules: leave out `ufw allow` (about 0.5 s per rule)")
	fs.BoolVar(&f.skipProbe, "skip-probe", false, "leave out the probe of a control-node-shaped node")
	fs.IntVar(&f.probeN, "probe-n", 20, "probe: timed runs of each")
	fs.IntVar(&f.probeScale, "probe-scale", 10, "probe: also run the section on a node this many times the control node's rules and containers (0 or 1: not)")
	fs.StringVar(&f.probeFixture, "probe-fixture", "", "probe: also write the node's listed ruleset and interfaces as JSON to this `file` (internal/fwtest/testdata/dnat/control-node.json is one), and the node at -probe-scale beside it (FILE-x10.json: ADOPT_PREVIEW_FIXTURE for BenchmarkPreviewFixture)")
	fs.StringVar(&f.probeProfile, "probe-profile", "", "probe: also write a CPU profile of 50 more runs of ours (probe then preview, at once) to this `file` (go tool pprof): where the time goes")
	fs.BoolVar(&f.skipCutover, "skip-cutover", false, "leave out the cutover rows (needs Docker)")
	fs.IntVar(&f.cutoverN, "cutover-n", 5, "cutover: runs of each procedure")
	fs.BoolVar(&f.skipFlip, "skip-flip", false, "leave out the flip-under-load rows")
	fs.IntVar(&f.flipN, "flip-n", 5, "flip: runs of each procedure")
	fs.BoolVar(&f.skipFlipRef, "skip-flip-ref", false, "leave out the flip rows on the reference node (needs Docker, dockerd, ufw)")
	fs.IntVar(&f.flipRefN, "flip-ref-n", 5, "flip on the reference node: runs of each procedure")
	fs.BoolVar(&f.skipScale, "skip-scale", false, "leave out the orchestration-at-scale simulation (needs the Temporal CLI)")
	fs.IntVar(&f.scale.Nodes, "scale-nodes", 1000, "scale: simulated nodes (one NodeMigration, one module and one node worker each)")
	fs.StringVar(&f.scale.Waves, "scale-waves", "1,5,10%,100%", "scale: the fleet's waves: after the control node, as the fleet file's waves: (comma-separated counts or percentages; empty: one node at a time)")
	fs.StringVar(&f.scale.MaxFailed, "scale-max-failed", "", "scale: the fleet file's max_failed: (a count or a percentage; empty: none)")
	fs.DurationVar(&f.scale.Idle, "scale-idle", 5*time.Minute, "scale: the idle window, once every node is migrated (events per node per day, orchestrator CPU per hour)")
	fs.Func("scale-flip-batches", "scale: flips sent all at once, one batch after another, each its own p50/p99 (comma-separated; default 50,200)", func(s string) error {
		f.scale.Batches = nil
		for _, b := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(b))
			if err != nil {
				return err
			}
			f.scale.Batches = append(f.scale.Batches, n)
		}
		return nil
	})
	f.scale.Batches = []int{50, 200}
	fs.IntVar(&f.scale.Parallel, "scale-flip-parallel", 50, "scale: after the batches, the other nodes' flips in flight at once")
	fs.DurationVar(&f.scale.Timeout, "scale-timeout", 40*time.Minute, "scale: give up on one simulation after this long")
	fs.StringVar(&f.scale.Pollers, "scale-orch-pollers", "", "scale: the orchestrator's --workflow-pollers (a number or auto; empty: its default)")
	fs.StringVar(&f.scale.OrchTree, "scale-orch-tree", "", "scale: build the orchestrator from this tree (empty: this one)")
	fs.StringVar(&f.scale.Before, "scale-before", "", "scale: also run the whole simulation first with the orchestrator built from this tree (e.g. a checkout of main before a change); its figures are the rows' peer (ratio = before / ours)")
	fs.BoolVar(&f.scale.Witness, "scale-witness", false, "scale: witness each flip from the orchestrator as a real node's is (dials 127.0.0.1:22; a refusal counts as an answer); the simulated nodes set flip.witness.disabled otherwise")
	fs.IntVar(&f.scale.Attention, "scale-attention", 0, "scale: make this many nodes need a person once migrated (a declared node file edited by hand: drift) and check that `adopt status --attention`'s visibility query returns exactly them (fails the section otherwise); 0: not")
	fs.Func("scale-server-config", "scale: a dynamic config value for the dev server, KEY=VALUE with VALUE in JSON (repeatable), e.g. matching.useNewMatcher=true or matching.updateAckInterval=\"20m\"", func(s string) error {
		if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
			return fmt.Errorf("-scale-server-config %q: write KEY=VALUE", s)
		}
		f.scale.ServerConfig = append(f.scale.ServerConfig, s)
		return nil
	})
	fs.StringVar(&f.scale.Cluster, "scale-cluster", "", "scale: run on this running cluster (make cluster; its directory, e.g. .adoption/cluster: tls/, server.pid, config/) over mTLS, in a namespace of the run's own, instead of a dev server of its own")
	fs.StringVar(&f.scale.ClusterAddr, "scale-cluster-address", "", "scale: the cluster's frontend with -scale-cluster (empty: 127.0.0.1:7233)")
	fs.StringVar(&f.scale.DB, "scale-db", "tmpfs", "scale: the dev server's SQLite file on tmpfs (/dev/shm) or disk (the temp dir)")
	return f, fs.Parse(args)
}

func run(args []string, stdout io.Writer) error {
	f, err := parseFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: it creates network namespaces")
	}
	// The scale section needs only a namespace loaded with iptables-restore
	// (its found ruleset); the others the firewall tools and the peers'.
	tools := []string{"ip", "iptables-restore", "ip6tables-restore"}
	if !(f.skipMarks && f.skipProbe && f.skipCutover && f.skipFlip && f.skipFlipRef) {
		tools = append(tools, "nft", "iptables", "ip6tables", "ufw", "ss", "sha256sum", "pgrep")
	}
	for _, b := range tools {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("needs %s: %w", b, err)
		}
	}
	began := time.Now()
	r := &runner{out: stdout, res: Results{
		Date: time.Now().UTC().Format(time.RFC3339),
		Host: hostInfo(),
		Note: "every row measured in this run, ours beside the peer's; ratio = peer / ours, and every figure is lower-is-better, " +
			"so a ratio above 1 means ours is lower by that factor; rows marked SIMULATION are absolute figures with no peer",
		Sections: map[string]any{},
	}}
	r.section("marks", f.skipMarks, func() ([]report.Row, any, error) { return details(runMarks(f.marksN, f.marksRuns, f.skipUfw, stdout)) })
	r.section("probe", f.skipProbe, func() ([]report.Row, any, error) {
		return details(runProbe(f.probeN, f.probeScale, f.probeFixture, f.probeProfile, stdout))
	})
	r.section("cutover", f.skipCutover, func() ([]report.Row, any, error) { return details(cutoverRows(f.cutoverN, stdout)) })
	r.section("flip", f.skipFlip, func() ([]report.Row, any, error) { return details(runFlip(f.flipN, stdout)) })
	r.section("flip-ref", f.skipFlipRef, func() ([]report.Row, any, error) { return details(runRefFlip(f.flipRefN, stdout)) })
	r.section("scale", f.skipScale, func() ([]report.Row, any, error) { return details(scale.Run(context.Background(), f.scale, stdout)) })
	res := r.res
	fmt.Fprintf(stdout, "\nmake bench, %s, %d CPUs, kernel %s, %.0f s in all\n", res.Date, res.Host.CPUs, res.Host.Kernel, time.Since(began).Seconds())
	fmt.Fprintln(stdout, "ratio = peer / ours; every figure is lower-is-better, so above 1 means ours is lower by that factor")
	report.Print(stdout, res.Rows)
	if len(res.Skipped) > 0 {
		fmt.Fprintf(stdout, "skipped: %s\n", strings.Join(res.Skipped, ", "))
	}
	file, err := writeResults(f.outDir, res)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", file)
	return errors.Join(r.errs...)
}

// runner runs the sections one after another, gathering their rows,
// details and errors: a failed section does not stop the next.
type runner struct {
	out  io.Writer
	res  Results
	errs []error
}

func (r *runner) section(name string, skip bool, fn func() ([]report.Row, any, error)) {
	if skip {
		r.res.Skipped = append(r.res.Skipped, name)
		fmt.Fprintf(r.out, "%s: skipped\n", name)
		return
	}
	t := time.Now()
	rows, det, err := fn()
	r.res.Rows = append(r.res.Rows, rows...)
	if det != nil {
		r.res.Sections[name] = det
	}
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %w", name, err))
		r.res.Errors = append(r.res.Errors, fmt.Sprintf("%s: %v", name, err))
		fmt.Fprintf(r.out, "%s: FAILED: %v\n", name, err)
		return
	}
	fmt.Fprintf(r.out, "%s: done in %.0f s\n", name, time.Since(t).Seconds())
}

// details hands a section's details on as any, nil when there are none
// (a nil *D in an any is not nil).
func details[D any](rows []report.Row, det *D, err error) ([]report.Row, any, error) {
	if det == nil {
		return rows, nil, err
	}
	return rows, det, err
}
