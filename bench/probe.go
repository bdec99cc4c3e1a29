package main

// The probe of a node shaped like the seed's control node (issue 7, "make
// bench"): a namespace with a ufw firewall of 54 incoming and 52 forwarding
// rules (ufw 0.36's own chain layout, loaded with iptables-restore, Docker's
// chains beside it), real listeners held by this process, 60 real Docker
// containers (created, not started, from a one-file image imported
// locally), and 12 declared files under a temporary root.
//
// Ours is activities.Activities.Probe with the worker's real parts. The
// peer gathers the same facts by shelling out, one command after another
// as a script would: nft -j list ruleset and ss -ltnup (each forked from a
// thread inside the namespace, so no ip netns exec cost), docker ps -a
// --format json, sha256sum of the 12 files, pgrep -x for the predecessor's
// control daemon. The peer only collects text; ours also decodes the
// ruleset, evaluates the open ports, attributes holders and reads the
// iptables-legacy table list.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"adoption/activities"
	"adoption/config"
	"adoption/containers"
	"adoption/custody"
	"adoption/firewall"
	"adoption/internal/fake"
	"adoption/internal/ufwfixture"
	"adoption/nodestate"
	"adoption/sockets"
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
	Note  string             `json:"note"`
}

type probeNode struct {
	ns        *benchNS
	root      string
	stateDir  string
	paths     []string // declared, as the plan names them
	listeners closers
	cli       *client.Client
	prefix    string // docker objects
	image     string
	real      bool // real Docker containers
}

func runProbe(n int, fixture string, stdout io.Writer) ([]Row, *ProbeDetails, error) {
	if n < 1 {
		return nil, nil, fmt.Errorf("-probe-n must be at least 1")
	}
	p := &probeNode{prefix: "bn-probe-" + randHex(3) + "-"}
	defer p.cleanup()
	fmt.Fprintf(stdout, "probe: raising a control-node-shaped node (%d+%d ufw rules, %d containers, %d files) ...\n",
		probeRulesIn, probeRulesFwd, probeContainers, probeFiles)
	if err := p.setup(); err != nil {
		return nil, nil, err
	}
	if fixture != "" {
		if err := p.saveFixture(fixture); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(stdout, "probe: wrote the node's ruleset and interfaces to %s\n", fixture)
	}
	d := &ProbeDetails{Runs: n}
	var engine activities.Containers
	if p.real {
		d.Containers = fmt.Sprintf("real: %d Docker containers created (not started) from a one-file image imported locally", probeContainers)
		engine = containers.New()
	} else {
		d.Containers = fmt.Sprintf("SIMULATED: Docker unreachable; %d container records from an in-memory engine, and the peer runs no docker ps", probeContainers)
		engine = fake.Engine{Containers: fake.Services(simulatedNames(probeContainers), 31000)}
	}
	acts := &activities.Activities{
		Node:     "bnprobe",
		Firewall: firewall.Inspector{Netns: p.ns.path},
		Engine:   engine,
		Sockets:  sockets.Proc{Root: "/proc", Netns: p.ns.path},
		Files:    custody.New(p.root, p.stateDir),
		State:    nodestate.New(p.stateDir),
	}
	plan := config.Plan{Node: "bnprobe", Role: "control", Control: []string{"predecessor-sync"}}
	for _, path := range p.paths {
		plan.NodeFiles = append(plan.NodeFiles, config.FilePlan{Path: path})
	}
	acts.Local = activities.Fixed(plan, nil, 30*time.Minute)
	ours := func() error {
		r, err := acts.Probe(context.Background(), activities.ProbeInput{Plan: plan})
		if err != nil {
			return err
		}
		if r.Firewall.Error != "" || r.SocketsError != "" || r.Containers.Error != "" {
			return fmt.Errorf("probe reported errors: firewall %q, sockets %q, containers %q", r.Firewall.Error, r.SocketsError, r.Containers.Error)
		}
		f := &d.Found
		f.FirewallKind, f.Tables, f.OpenPorts, f.Listeners, f.Containers = r.Firewall.Kind, len(r.Firewall.Tables), len(r.Firewall.Open), len(r.Sockets), len(r.Containers.Containers)
		f.Chains, f.Rules, f.Files = 0, 0, 0
		for _, t := range r.Firewall.Tables {
			f.Chains += len(t.Chains)
			for _, c := range t.Chains {
				f.Rules += c.Rules
			}
		}
		for _, fs := range r.Files {
			if fs.Exists {
				f.Files++
			}
		}
		return nil
	}
	files := make([]string, 0, len(p.paths))
	for _, path := range p.paths {
		files = append(files, filepath.Join(p.root, path))
	}
	d.PeerCommands = []string{"nft -j list ruleset (in the namespace)", "ss -ltnup (in the namespace)"}
	if p.real {
		d.PeerCommands = append(d.PeerCommands, "docker ps -a --format json")
	}
	d.PeerCommands = append(d.PeerCommands, fmt.Sprintf("sha256sum <%d files>", len(files)), "pgrep -x predecessor-sync")
	peer := func() error {
		total := 0
		outs := []func() (string, error){
			func() (string, error) { return p.ns.run(nil, "nft", "-j", "list", "ruleset") },
			func() (string, error) { return p.ns.run(nil, "ss", "-ltnup") },
		}
		if p.real {
			outs = append(outs, func() (string, error) { return command("docker", "ps", "-a", "--format", "json") })
		}
		outs = append(outs,
			func() (string, error) { return command("sha256sum", files...) },
			func() (string, error) {
				out, err := command("pgrep", "-x", "predecessor-sync")
				var ee *exec.ExitError
				if errors.As(err, &ee) && ee.ExitCode() == 1 {
					err = nil // none running
				}
				return out, err
			})
		for _, f := range outs {
			out, err := f()
			if err != nil {
				return err
			}
			total += len(out)
		}
		d.PeerOutputBytes = total
		return nil
	}
	// Two untimed runs of each warm the caches (dentries, Docker's).
	for i := 0; i < 2; i++ {
		if err := ours(); err != nil {
			return nil, nil, fmt.Errorf("ours: %w", err)
		}
		if err := peer(); err != nil {
			return nil, nil, fmt.Errorf("peer: %w", err)
		}
	}
	fmt.Fprintf(stdout, "probe: %d runs of each, alternating ...\n", n)
	for i := 0; i < n; i++ {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isOurs := range order {
			f := peer
			if isOurs {
				f = ours
			}
			start := time.Now()
			if err := f(); err != nil {
				return nil, nil, err
			}
			if isOurs {
				d.OursMS = append(d.OursMS, ms(time.Since(start)))
			} else {
				d.PeerMS = append(d.PeerMS, ms(time.Since(start)))
			}
		}
	}
	d.Parts = map[string]float64{}
	// The evaluation alone, on the ruleset and node as listed once: what
	// Inspect spends besides listing, without the noise of subtracting two
	// medians.
	insp := firewall.Inspector{Netns: p.ns.path}
	listed, err := insp.Ruleset()
	if err != nil {
		return nil, d, err
	}
	node, err := insp.Node()
	if err != nil {
		return nil, d, err
	}
	const evalPart = "ours: firewall evaluation alone (OpenPortsOn on the ruleset as listed)"
	parts := []struct {
		name string
		fn   func() error
	}{
		{"ours: firewall Inspect (list, decode, evaluate)", func() error { _, err := acts.Firewall.Inspect(context.Background()); return err }},
		{"ours: firewall Ruleset only (list, decode)", func() error { _, err := acts.Firewall.Ruleset(); return err }},
		{evalPart, func() error { firewall.OpenPortsOn(listed, node); return nil }},
		{"ours: containers Report", func() error { acts.Engine.Report(context.Background()); return nil }},
		{"ours: sockets Listeners", func() error { _, err := acts.Sockets.Listeners(); return err }},
		{"ours: files Inspect x12", func() error {
			for _, path := range p.paths {
				acts.Files.Inspect(path)
			}
			return nil
		}},
		{"ours: FindProcesses", func() error { acts.Sockets.FindProcesses(plan.Control); return nil }},
		{"peer: nft -j list ruleset", func() error { _, err := p.ns.run(nil, "nft", "-j", "list", "ruleset"); return err }},
		{"peer: ss -ltnup", func() error { _, err := p.ns.run(nil, "ss", "-ltnup"); return err }},
		{"peer: sha256sum", func() error { _, err := command("sha256sum", files...); return err }},
	}
	if p.real {
		parts = append(parts, struct {
			name string
			fn   func() error
		}{"peer: docker ps -a --format json", func() error { _, err := command("docker", "ps", "-a", "--format", "json"); return err }})
	}
	for _, part := range parts {
		var xs []float64
		for i := 0; i < max(3, n/2); i++ {
			start := time.Now()
			if err := part.fn(); err != nil {
				return nil, d, fmt.Errorf("%s: %w", part.name, err)
			}
			xs = append(xs, ms(time.Since(start)))
		}
		d.Parts[part.name] = median(xs)
	}
	d.OursMedianMS, d.PeerMedianMS = median(d.OursMS), median(d.PeerMS)
	d.OursP90MS, d.PeerP90MS = percentile(d.OursMS, 90), percentile(d.PeerMS, 90)
	if d.Found.Containers < probeContainers || d.Found.Files != probeFiles {
		return nil, d, fmt.Errorf("the probe saw %d containers and %d files, want at least %d and %d", d.Found.Containers, d.Found.Files, probeContainers, probeFiles)
	}
	d.Note = fmt.Sprintf("node: %d incoming + %d forwarding rules in IPv4 ufw-user-input/ufw-user-forward (ufw 0.36 layout), "+
		"the incoming ones without a source also in IPv6, Docker chains and nat beside; %d listeners held by the bench; containers %s; "+
		"%d declared files (120 B to 200 KiB) under a temporary root; median of %d runs each, order alternating, after 2 warm-up runs",
		probeRulesIn, probeRulesFwd, len(p.listeners), d.Containers, probeFiles, n)
	cont := "60 real containers"
	if !p.real {
		cont = "60 SIMULATED container records"
	}
	list := d.Parts["ours: firewall Ruleset only (list, decode)"]
	rows := []Row{
		row("probe", fmt.Sprintf("probe of a control-node-shaped node (106 rules, %s, 12 files), median of %d", cont, n),
			d.OursMedianMS, d.PeerMedianMS, "ms",
			"activities.Activities.Probe (ruleset decoded and open ports evaluated, sockets with holders, containers, file hashes, control daemons)",
			"shell-out: "+strings.Join(d.PeerCommands, "; ")+" (text only, nothing parsed or evaluated)",
			fmt.Sprintf("p90 ours %.1f, peer %.1f ms; of ours, %.1f ms (median, timed alone) is firewall.OpenPortsOn evaluating %d openings, which the peer does not do; "+
				"ours runs its parts one after another, as the peer does",
				d.OursP90MS, d.PeerP90MS, d.Parts[evalPart], d.Found.OpenPorts), 1),
		row("probe", "probe part: the firewall listing alone, median", list, d.Parts["peer: nft -j list ruleset"], "ms",
			"firewall.Inspector.Ruleset (netlink list + decode into the model)", "nft -j list ruleset (in the namespace, JSON text)",
			fmt.Sprintf("%d chains, %d rules in 3 tables", d.Found.Chains, d.Found.Rules), 1),
	}
	return rows, d, nil
}

// saveFixture writes the node's ruleset as the firewall lists it and its
// interfaces as the evaluator reads them, in the shape of the firewall
// package's testdata/dnat fixtures: its unit tests and BenchmarkOpenPorts
// evaluate exactly what this section's probe evaluates, without a kernel.
func (p *probeNode) saveFixture(file string) error {
	insp := firewall.Inspector{Netns: p.ns.path}
	rs, err := insp.Ruleset()
	if err != nil {
		return err
	}
	node, err := insp.Node()
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(struct {
		Ruleset *firewall.Ruleset `json:"ruleset"`
		Node    firewall.Node     `json:"node"`
	}{rs, node}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}

func command(name string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", name, err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.String(), nil
}

func (p *probeNode) setup() error {
	var err error
	if p.ns, err = newNS("pr"); err != nil {
		return err
	}
	if _, err := p.ns.run([]byte(ufwfixture.Control4(probeRulesIn, probeRulesFwd)), "iptables-restore"); err != nil {
		return fmt.Errorf("load the IPv4 firewall: %w", err)
	}
	if _, err := p.ns.run([]byte(ufwfixture.Control6(probeRulesIn)), "ip6tables-restore"); err != nil {
		return fmt.Errorf("load the IPv6 firewall: %w", err)
	}
	for _, l := range []struct {
		proto string
		port  int
	}{{"tcp", 22}, {"tcp", 25}, {"tcp", 53}, {"udp", 53}, {"tcp", 80}, {"tcp", 443}, {"tcp", 587}, {"tcp", 993},
		{"udp", 123}, {"tcp", 5000}, {"tcp", 8080}, {"tcp", 8443}, {"tcp", 9100}} {
		c, err := p.ns.serve(l.proto, l.port)
		if err != nil {
			return fmt.Errorf("listen %d/%s: %w", l.port, l.proto, err)
		}
		p.listeners = append(p.listeners, c)
	}
	dir, err := os.MkdirTemp("", "bn-probe-")
	if err != nil {
		return err
	}
	p.root, p.stateDir = filepath.Join(dir, "root"), filepath.Join(dir, "state")
	sizes := []int{120, 310, 520, 900, 1400, 2100, 3300, 4800, 8200, 16 << 10, 64 << 10, 200 << 10}
	for i, path := range []string{
		"/etc/hosts", "/etc/resolv.conf", "/etc/ssh/sshd_config.d/predecessor.conf", "/etc/default/ufw",
		"/etc/docker/daemon.json", "/etc/systemd/system/predecessor-sync.service", "/srv/mail/postfix/main.cf",
		"/srv/mail/dovecot/dovecot.conf", "/srv/web/nginx.conf", "/srv/app/app.env", "/srv/registry/config.yml",
		"/etc/ssl/certs/ca-bundle.crt",
	} {
		full := filepath.Join(p.root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		b := make([]byte, sizes[i])
		rand.Read(b)
		if err := os.WriteFile(full, b, 0o640); err != nil {
			return err
		}
		p.paths = append(p.paths, path)
	}
	return p.containers()
}

// containers creates 60 containers (not started) from a one-file image:
// labels, a named volume, a read-only bind and a published port each, as a
// predecessor's services carry them. An unreachable engine leaves p.real
// false (the section then uses simulated records, and says so).
func (p *probeNode) containers() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = cli.Ping(pctx)
		pcancel()
	}
	if err != nil {
		return nil
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return nil
	}
	p.cli, p.image = cli, p.prefix+"img:1"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("#!/bin/true\n")
	if err := tw.WriteHeader(&tar.Header{Name: "svc", Mode: 0o755, Size: int64(len(body)), ModTime: time.Now()}); err != nil {
		return err
	}
	tw.Write(body)
	tw.Close()
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, p.image,
		image.ImportOptions{Changes: []string{`ENTRYPOINT ["/svc"]`}})
	if err != nil {
		return fmt.Errorf("import %s: %w", p.image, err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	bind := filepath.Join(filepath.Dir(p.root), "bind")
	if err := os.MkdirAll(bind, 0o755); err != nil {
		return err
	}
	for i := 0; i < probeContainers; i++ {
		mod := probeModules[i%len(probeModules)]
		name := p.containerName(i)
		port := fmt.Sprintf("%d", 31000+i)
		_, err := cli.ContainerCreate(ctx, &container.Config{
			Image:        p.image,
			Labels:       map[string]string{"com.predecessor.module": mod, "com.predecessor.instance": fmt.Sprint(i)},
			ExposedPorts: nat.PortSet{"8080/tcp": {}},
		}, &container.HostConfig{
			Binds:         []string{name + "-data:/data", bind + ":/config:ro"},
			PortBindings:  nat.PortMap{"8080/tcp": {{HostIP: "127.0.0.1", HostPort: port}}},
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		}, nil, nil, name)
		if err != nil {
			return fmt.Errorf("create container %s: %w", name, err)
		}
	}
	p.real = true
	return nil
}

var probeModules = []string{"mail", "web", "db", "registry", "app", "queue", "cache", "dns", "monitor", "backup"}

func (p *probeNode) containerName(i int) string {
	return fmt.Sprintf("%s%s-%02d", p.prefix, probeModules[i%len(probeModules)], i)
}

func (p *probeNode) cleanup() {
	p.listeners.Close()
	p.ns.del()
	if p.root != "" {
		os.RemoveAll(filepath.Dir(p.root))
	}
	if p.cli == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	list, _ := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("name", p.prefix))})
	for _, c := range list {
		if len(c.Names) > 0 && strings.HasPrefix(strings.TrimPrefix(c.Names[0], "/"), p.prefix) {
			p.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) //nolint:errcheck
		}
	}
	for i := 0; i < probeContainers; i++ {
		p.cli.VolumeRemove(ctx, p.containerName(i)+"-data", true) //nolint:errcheck
	}
	p.cli.ImageRemove(ctx, p.image, image.RemoveOptions{Force: true, PruneChildren: true}) //nolint:errcheck
	p.cli.Close()
}

// simulatedNames are the simulated engine's containers when Docker is
// unreachable.
func simulatedNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%02d", i)
	}
	return names
}
