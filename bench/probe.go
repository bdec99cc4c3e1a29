package main

// This file holds the probe section: activities.Activities.Probe of a node
// shaped like a predecessor's control node, alone and followed by the
// agent's preview of a flip, against a peer gathering the same facts by
// shelling out, one command after another; then the same at a multiple of
// the node's rules and containers.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/activities/fake"
	"adoption/bench/benchns"
	"adoption/bench/report"
	"adoption/config"
	"adoption/containers"
	"adoption/custody"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/firewall/nft"
	"adoption/nodestate"
	"adoption/sockets"
	"adoption/worker/gctarget"
	"adoption/workflows"
)

const (
	probeRulesIn    = 54
	probeRulesFwd   = 52
	probeContainers = 60
	probeFiles      = 12
)

// ProbeDetails is the probe section of the JSON.
type ProbeDetails struct {
	Runs            int       `json:"runs"`
	OursMS          []float64 `json:"ours_ms"`
	PeerMS          []float64 `json:"peer_ms"`
	OursMedianMS    float64   `json:"ours_median_ms"`
	PeerMedianMS    float64   `json:"peer_median_ms"`
	OursP90MS       float64   `json:"ours_p90_ms"`
	PeerP90MS       float64   `json:"peer_p90_ms"`
	Containers      string    `json:"containers"` // real or simulated
	PeerCommands    []string  `json:"peer_commands"`
	PeerOutputBytes int       `json:"peer_output_bytes"`
	Found           struct {
		FirewallKind string `json:"firewall_kind"`
		Tables       int    `json:"tables"`
		Chains       int    `json:"chains"`
		Rules        int    `json:"rules"`
		OpenPorts    int    `json:"open_ports"`
		Listeners    int    `json:"listeners"`
		Containers   int    `json:"containers"`
		Files        int    `json:"files_found"`
	} `json:"found_by_ours"`
	// Parts is each part timed on its own, median of the runs (not part
	// of the figure): where the time goes.
	Parts map[string]float64 `json:"parts_median_ms"`
	// WithPreviewMS: the probe followed by the agent's Preview activity
	// (list again, evaluate every traffic class the evaluator decides
	// before and after, derive, compare), each run.
	WithPreviewMS       []float64 `json:"with_preview_ms"`
	WithPreviewMedianMS float64   `json:"with_preview_median_ms"`
	// KeptListings is how many of ours' listings were answered from the
	// one kept (nft.Kept: the kernel held the ruleset last listed), of
	// Listings in all.
	KeptListings int `json:"kept_listings"`
	Listings     int `json:"listings"`
	// Fates counts the preview's fates by direction, family and protocol.
	Fates    map[string]int `json:"fates"`
	Approved bool           `json:"preview_approved"`
	// Comparison is the preview's comparison alone, its time and memory.
	Comparison *ComparisonDetails `json:"comparison"`
	// Factor is the node's size as a multiple of the control node's
	// rules and containers; Scaled is the same section at -probe-scale.
	Factor int           `json:"factor"`
	Scaled *ProbeDetails `json:"scaled,omitempty"`
	Note   string        `json:"note"`
}

type probeNode struct {
	ns        *benchns.NS
	root      string
	stateDir  string
	paths     []string // declared, as the plan names them
	listeners closers
	cli       *client.Client
	prefix    string // docker objects
	image     string
	real      bool // real Docker containers
	k         int  // a multiple of the control node's rules and containers
}

// probeRun is one run of the probe section.
type probeRun struct {
	p     *probeNode
	d     *ProbeDetails
	n     int
	acts  *activities.Activities
	plan  config.Plan
	files []string // the declared files' full paths
	spec  flip.MeshSpec
	kept  *nft.Kept
	nets  eval.Networks
}

// forget gives ours a listing kept for the next as the agent keeps it
// (worker.New), none kept yet: each run's probe lists the ruleset anew
// and its preview is answered from the probe's listing (the kernel holds
// the same ruleset), as on a node that was not listed before the probe.
func (r *probeRun) forget() {
	r.kept = &nft.Kept{}
	r.acts.Firewall = eval.Inspector{Netns: r.p.ns.Path, Engine: r.nets, Kept: r.kept}
}

func runProbe(n, scaleK int, fixture, profile string, stdout io.Writer) ([]report.Row, *ProbeDetails, error) {
	if n < 1 || scaleK < 0 {
		return nil, nil, fmt.Errorf("-probe-n must be at least 1 and -probe-scale at least 0")
	}
	// Ours runs in this process with the agent's garbage collector target
	// (adopt-worker run sets the same).
	defer gctarget.TuneGC(os.Getenv)()
	rows, d, err := probeAt(1, n, fixture, profile, stdout)
	if err != nil || scaleK <= 1 {
		return rows, d, err
	}
	bigFixture := ""
	if fixture != "" {
		bigFixture = strings.TrimSuffix(fixture, ".json") + fmt.Sprintf("-x%d.json", scaleK)
	}
	_, big, err := probeAt(scaleK, n, bigFixture, "", stdout)
	d.Scaled = big
	if err != nil {
		return rows, d, fmt.Errorf("at %d times: %w", scaleK, err)
	}
	return append(rows, scaledRows(d, big)...), d, nil
}

// probeAt is the section on a node k times the control node's rules and
// containers.
func probeAt(k, n int, fixture, profile string, stdout io.Writer) ([]report.Row, *ProbeDetails, error) {
	p := &probeNode{prefix: "bn-probe-" + benchns.RandHex(3) + "-", k: k}
	defer p.cleanup()
	fmt.Fprintf(stdout, "probe: raising a control-node-shaped node at %d times (%d+%d ufw rules, %d containers, %d files) ...\n",
		k, k*probeRulesIn, k*probeRulesFwd, k*probeContainers, probeFiles)
	if err := p.setup(); err != nil {
		return nil, nil, err
	}
	if fixture != "" {
		if err := p.saveFixture(fixture); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(stdout, "probe: wrote the node's ruleset and interfaces to %s\n", fixture)
	}
	r := newProbeRun(p, n)
	// Two untimed runs of each warm the caches (dentries, Docker's).
	for i := 0; i < 2; i++ {
		if err := r.ours(); err != nil {
			return nil, nil, fmt.Errorf("ours: %w", err)
		}
		if err := r.preview(); err != nil {
			return nil, nil, fmt.Errorf("ours, the preview: %w", err)
		}
		if err := r.peer(); err != nil {
			return nil, nil, fmt.Errorf("peer: %w", err)
		}
	}
	fmt.Fprintf(stdout, "probe: %d runs of each, alternating ...\n", n)
	if err := r.alternate(); err != nil {
		return nil, nil, err
	}
	if profile != "" {
		if err := r.profile(profile, 50); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(stdout, "probe: wrote a CPU profile of 50 runs of ours to %s\n", profile)
	}
	if err := r.timeParts(); err != nil {
		return nil, r.d, err
	}
	if err := r.timeComparison(n); err != nil {
		return nil, r.d, fmt.Errorf("the comparison alone: %w", err)
	}
	d := r.d
	d.OursMedianMS, d.PeerMedianMS = report.Median(d.OursMS), report.Median(d.PeerMS)
	d.OursP90MS, d.PeerP90MS = report.Percentile(d.OursMS, 90), report.Percentile(d.PeerMS, 90)
	d.WithPreviewMedianMS = report.Median(d.WithPreviewMS)
	if d.Found.Containers < k*probeContainers || d.Found.Files != probeFiles {
		return nil, d, fmt.Errorf("the probe saw %d containers and %d files, want at least %d and %d", d.Found.Containers, d.Found.Files, k*probeContainers, probeFiles)
	}
	d.Note = fmt.Sprintf("node: %d incoming + %d forwarding rules in IPv4 ufw-user-input/ufw-user-forward (ufw 0.36 layout), "+
		"the incoming ones without a source also in IPv6, Docker chains and nat beside (12 DNATs whatever the size); %d listeners held by the bench; containers %s; "+
		"%d declared files (120 B to 200 KiB) under a temporary root; median of %d runs each, order alternating, after 2 warm-up runs; "+
		"with the preview: Probe then the Preview activity of the spec the workflow derives for the plan (management port 22/tcp); "+
		"ours with the agent's garbage collector target (GOGC %d, gctarget.AgentGCPercent, unless GOGC is set) and the listing kept for the next as on the agent, none kept before each probe; "+
		"ours overlaps its independent reads (firewall, engine, sockets; in the preview the listing, the node and the engine), the peer runs its commands one after another",
		k*probeRulesIn, k*probeRulesFwd, len(p.listeners), d.Containers, probeFiles, n, gctarget.Percent())
	return r.rows(), d, nil
}

// newProbeRun gives the node's real parts to the activities (the engine
// simulated when Docker is unreachable) and names the peer's commands.
func newProbeRun(p *probeNode, n int) *probeRun {
	r := &probeRun{p: p, n: n, d: &ProbeDetails{Runs: n, Factor: p.k}}
	var engine activities.Containers
	var nets eval.Networks // the agent's Inspector asks the engine for its bridges
	if p.real {
		r.d.Containers = fmt.Sprintf("real: %d Docker containers created (not started) from a one-file image imported locally", p.k*probeContainers)
		e := containers.New()
		engine, nets = e, e
	} else {
		r.d.Containers = fmt.Sprintf("SIMULATED: Docker unreachable; %d container records from an in-memory engine, and the peer runs no docker ps", p.k*probeContainers)
		engine = fake.Engine{Containers: fake.Services(simulatedNames(p.k*probeContainers), 31000)}
	}
	r.acts = &activities.Activities{
		Node:    "bnprobe",
		Engine:  engine,
		Sockets: sockets.Proc{Root: "/proc", Netns: p.ns.Path},
		Files:   custody.New(p.root, p.stateDir),
		State:   nodestate.New(p.stateDir),
	}
	r.plan = config.Plan{Node: "bnprobe", Role: "control", Control: []string{"predecessor-sync"}, ManagementPorts: config.MustPorts([]string{"22/tcp"})}
	for _, path := range p.paths {
		r.plan.NodeFiles = append(r.plan.NodeFiles, config.FilePlan{Path: path})
		r.files = append(r.files, filepath.Join(p.root, path))
	}
	r.acts.Local = authority.Fixed(r.plan, nil, 30*time.Minute)
	r.nets = nets
	r.forget()
	r.spec = workflows.MeshSpec(&workflows.State{Node: r.plan.Node, Plan: r.plan})
	r.d.PeerCommands = []string{"nft -j list ruleset (in the namespace)", "ss -ltnup (in the namespace)"}
	if p.real {
		r.d.PeerCommands = append(r.d.PeerCommands, "docker ps -a --format json")
	}
	r.d.PeerCommands = append(r.d.PeerCommands, fmt.Sprintf("sha256sum <%d files>", len(r.files)), "pgrep -x predecessor-sync")
	return r
}

// ours is one Probe, counting what it found.
func (r *probeRun) ours() error {
	res, err := r.acts.Probe(context.Background(), activities.ProbeInput{Plan: r.plan.Ref()})
	if err != nil {
		return err
	}
	if res.Firewall.Error != "" || res.SocketsError != "" || res.Containers.Error != "" {
		return fmt.Errorf("probe reported errors: firewall %q, sockets %q, containers %q", res.Firewall.Error, res.SocketsError, res.Containers.Error)
	}
	f := &r.d.Found
	f.FirewallKind, f.Tables, f.OpenPorts, f.Listeners, f.Containers = res.Firewall.Kind, len(res.Firewall.Tables), len(res.Firewall.Open), len(res.Sockets), len(res.Containers.Containers)
	f.Chains, f.Rules, f.Files = 0, 0, 0
	for _, t := range res.Firewall.Tables {
		f.Chains += len(t.Chains)
		for _, c := range t.Chains {
			f.Rules += c.Rules
		}
	}
	for _, fs := range res.Files {
		if fs.Exists {
			f.Files++
		}
	}
	return nil
}

// preview is the agent's Preview activity, counting the fates it gives.
func (r *probeRun) preview() error {
	pv, err := r.acts.Preview(context.Background(), activities.PreviewInput{Plan: r.plan.Ref(), Spec: r.spec})
	if err != nil {
		return err
	}
	r.d.Approved, r.d.Fates = pv.Approved, map[string]int{}
	for _, f := range pv.Fates {
		r.d.Fates[f.Opening.Direction+" "+f.Opening.Family+" "+f.Opening.Proto+" "+f.Fate]++
	}
	return nil
}

// peer runs the peer's commands one after another, as a script would.
func (r *probeRun) peer() error {
	outs := []func() (string, error){
		func() (string, error) { return r.p.ns.Run(nil, "nft", "-j", "list", "ruleset") },
		func() (string, error) { return r.p.ns.Run(nil, "ss", "-ltnup") },
	}
	if r.p.real {
		outs = append(outs, func() (string, error) { return command("docker", "ps", "-a", "--format", "json") })
	}
	outs = append(outs,
		func() (string, error) { return command("sha256sum", r.files...) },
		func() (string, error) {
			out, err := command("pgrep", "-x", "predecessor-sync")
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 1 {
				err = nil // none running
			}
			return out, err
		})
	total := 0
	for _, f := range outs {
		out, err := f()
		if err != nil {
			return err
		}
		total += len(out)
	}
	r.d.PeerOutputBytes = total
	return nil
}

// alternate times n runs of each, the order alternating.
func (r *probeRun) alternate() error {
	for i := 0; i < r.n; i++ {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isOurs := range order {
			start := time.Now()
			if !isOurs {
				if err := r.peer(); err != nil {
					return err
				}
				r.d.PeerMS = append(r.d.PeerMS, report.MS(time.Since(start)))
				continue
			}
			r.forget()
			start = time.Now()
			if err := r.ours(); err != nil {
				return err
			}
			r.d.OursMS = append(r.d.OursMS, report.MS(time.Since(start)))
			if err := r.preview(); err != nil {
				return err
			}
			r.d.WithPreviewMS = append(r.d.WithPreviewMS, report.MS(time.Since(start)))
			r.d.KeptListings += r.kept.Hits()
			r.d.Listings += 2
		}
	}
	return nil
}

// profile writes a CPU profile of n runs of ours, probe then preview, to
// file: where the time goes, not part of any figure.
func (r *probeRun) profile(file string, n int) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	for i := 0; i < n; i++ {
		r.forget()
		if err := r.ours(); err != nil {
			return err
		}
		if err := r.preview(); err != nil {
			return err
		}
	}
	return nil
}

const (
	probeEvalPart = "ours: firewall evaluation alone (OpenPortsOn on the ruleset as listed)"
	probeListPart = "ours: firewall Ruleset only (list, decode), none kept"
	probeKeptPart = "ours: firewall Ruleset, the one kept (generation, ipsets and namespace read)"
)

type probePart struct {
	name string
	fn   func() error
}

// timeParts times each part alone, the median of its runs: where the time
// goes, not part of the figure.
func (r *probeRun) timeParts() error {
	r.d.Parts = map[string]float64{}
	parts, err := r.parts()
	if err != nil {
		return err
	}
	for _, part := range parts {
		var xs []float64
		for i := 0; i < max(3, r.n/2); i++ {
			start := time.Now()
			if err := part.fn(); err != nil {
				return fmt.Errorf("%s: %w", part.name, err)
			}
			xs = append(xs, report.MS(time.Since(start)))
		}
		r.d.Parts[part.name] = report.Median(xs)
	}
	return nil
}

// parts are ours and the peer's parts. The evaluation alone runs on the
// ruleset and node as listed once: what Inspect spends besides listing,
// without the noise of subtracting two medians.
func (r *probeRun) parts() ([]probePart, error) {
	insp := eval.Inspector{Netns: r.p.ns.Path}
	listed, err := insp.Ruleset()
	if err != nil {
		return nil, err
	}
	node, err := insp.Node()
	if err != nil {
		return nil, err
	}
	a, ns := r.acts, r.p.ns
	cold := eval.Inspector{Netns: r.p.ns.Path, Engine: r.nets}
	parts := []probePart{
		{"ours: firewall Inspect (list, decode, evaluate), none kept", func() error { _, err := cold.Inspect(context.Background()); return err }},
		{probeListPart, func() error { _, err := cold.Ruleset(); return err }},
		{probeKeptPart, func() error { _, err := a.Firewall.Ruleset(); return err }},
		{"ours: firewall Node (interfaces, routes, the engine's bridges)", func() error { _, err := a.Firewall.(eval.Inspector).Node(); return err }},
		{probeEvalPart, func() error { eval.OpenPortsOn(listed, node); return nil }},
		{"ours: containers Report", func() error { a.Engine.Report(context.Background()); return nil }},
		{"ours: sockets Listeners", func() error { _, err := a.Sockets.Listeners(); return err }},
		{"ours: files Inspect x12", func() error {
			for _, path := range r.p.paths {
				a.Files.Inspect(path)
			}
			return nil
		}},
		{"ours: FindProcesses", func() error { a.Sockets.FindProcesses(r.plan.Control); return nil }},
		{"peer: nft -j list ruleset", func() error { _, err := ns.Run(nil, "nft", "-j", "list", "ruleset"); return err }},
		{"peer: ss -ltnup", func() error { _, err := ns.Run(nil, "ss", "-ltnup"); return err }},
		{"peer: sha256sum", func() error { _, err := command("sha256sum", r.files...); return err }},
	}
	if r.p.real {
		parts = append(parts, probePart{"peer: docker ps -a --format json", func() error { _, err := command("docker", "ps", "-a", "--format", "json"); return err }})
	}
	return parts, nil
}

func (r *probeRun) rows() []report.Row {
	d, n := r.d, r.n
	cont := "60 real containers"
	if !r.p.real {
		cont = "60 SIMULATED container records"
	}
	return []report.Row{
		report.WithPeer("probe", fmt.Sprintf("probe + preview of a control-node-shaped node (106 rules, %s, 12 files), median of %d", cont, n),
			d.WithPreviewMedianMS, d.PeerMedianMS, "ms",
			"activities.Activities.Probe, then the Preview activity (every traffic class the evaluator decides, before and after the flip); the listing kept for the next, and the garbage collector target, as on the agent",
			"shell-out: "+strings.Join(d.PeerCommands, "; ")+" (text only, nothing parsed, evaluated or previewed)",
			fmt.Sprintf("%d fates: %v; %d of ours' %d listings answered from the one kept (the ruleset unchanged since the last), a kept listing %.1f ms against %.1f listed anew (parts); goal: ratio at least 2",
				fateCount(d.Fates), d.Fates, d.KeptListings, d.Listings, d.Parts[probeKeptPart], d.Parts[probeListPart]), 1),
		report.WithPeer("probe", fmt.Sprintf("probe of a control-node-shaped node (106 rules, %s, 12 files), median of %d", cont, n),
			d.OursMedianMS, d.PeerMedianMS, "ms",
			"activities.Activities.Probe (ruleset decoded and open ports evaluated, sockets with holders, containers, file hashes, control daemons)",
			"shell-out: "+strings.Join(d.PeerCommands, "; ")+" (text only, nothing parsed or evaluated)",
			fmt.Sprintf("p90 ours %.1f, peer %.1f ms; of ours, %.1f ms (median, timed alone) is firewall.OpenPortsOn evaluating %d openings, which the peer does not do; "+
				"ours runs its parts one after another, as the peer does",
				d.OursP90MS, d.PeerP90MS, d.Parts[probeEvalPart], d.Found.OpenPorts), 1),
		report.WithPeer("probe", "probe part: the firewall listing alone, none kept, median", d.Parts[probeListPart], d.Parts["peer: nft -j list ruleset"], "ms",
			"firewall.Inspector.Ruleset (netlink list + decode into the model) without a listing kept", "nft -j list ruleset (in the namespace, JSON text)",
			fmt.Sprintf("%d chains, %d rules in 3 tables", d.Found.Chains, d.Found.Rules), 1),
		comparisonRow(d),
	}
}

// scaledRows set the section at k times the control node beside the same
// at once: what the preview and the probe cost as the node grows.
func scaledRows(one, big *ProbeDetails) []report.Row {
	k := big.Factor
	return []report.Row{
		report.WithPeer("probe", fmt.Sprintf("probe + preview at %d times the rules (%d+%d) and containers (%d), median of %d", k, k*probeRulesIn, k*probeRulesFwd, k*probeContainers, big.Runs),
			big.WithPreviewMedianMS, big.PeerMedianMS, "ms", "as at once", "as at once",
			fmt.Sprintf("%d fates; containers %s", fateCount(big.Fates), big.Containers), 1),
		report.WithPeer("probe", fmt.Sprintf("probe + preview: cost at %d times over cost at once (ours beside the peer's)", k),
			big.WithPreviewMedianMS/one.WithPreviewMedianMS, big.PeerMedianMS/one.PeerMedianMS, "x",
			"ours at k times / ours at once", "the peer at k times / the peer at once",
			fmt.Sprintf("goal: ours at most %d", k), 2),
		comparisonRow(big),
		report.Absolute("probe", fmt.Sprintf("preview's comparison alone: cost at %d times over cost at once", k),
			big.Comparison.MedianMS/one.Comparison.MedianMS, "x", "flip.PreviewFlipOn at k times / at once",
			fmt.Sprintf("allocated bytes %.2fx, peak heap %.2fx", ratio(big.Comparison.AllocBytes, one.Comparison.AllocBytes),
				ratio(big.Comparison.PeakHeapBytes, one.Comparison.PeakHeapBytes)), 2),
	}
}

// ratio is a / b, 0 when b is.
func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func fateCount(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
