package main

// This file holds the flip section on the reference node (sandbox.RefNode:
// its own dockerd, the real ufw with the ufw-docker arrangement, published
// services and a host service): connections lost while ours flips, against
// ufw disable then nft -f of the same derived table, alternating.

import (
	"fmt"
	"io"
	"os/exec"
	"strings"

	"adoption/bench/report"
	"adoption/firewall/flip"
	"adoption/sandbox"
)

const (
	refNodeName = "bnref"
	refIndex    = 240 // 198.19.240.0/30: no test uses it
	refImage    = "adoption-bench-ref-svc:v1"
	refHostPort = 22 // the host service, allowed by ufw, on the input path
)

// refService is one container of the reference node: its module, its
// published host port, its container port, whether ufw routes it.
type refService struct {
	module    string
	host, ctr int
	routed    bool
}

// refServices are a predecessor's node's shape: three routed published ports that
// modules declare and one published but unrouted (dropped at the flip).
func refServices() []refService {
	return []refService{
		{"mail", 18025, 8025, true},
		{"web", 18080, 8080, true},
		{"store", 15432, 5432, true},
		{"metrics", 19100, 9100, false},
	}
}

// RefFlipRun is one procedure, once, on the reference node.
type RefFlipRun struct {
	Seq    int    `json:"seq"`
	Method string `json:"method"`
	// Hammers by target: "18025/tcp" (published, HTTP) ..., "22/tcp" (host
	// service).
	Hammers     map[string]HammerRun `json:"hammers"`
	ProcedureMS float64              `json:"procedure_ms"`
	RevertMS    float64              `json:"revert_ms,omitempty"`
	// InForce is what a client and the node's nat table showed while the
	// mesh was in force.
	InForce  RefInForce `json:"in_force"`
	Restored bool       `json:"restored"`
}

// RefInForce: each published port as a fresh client saw it ("open",
// "refused", "filtered", or the error), and whether Docker's nat DOCKER
// chain still DNATed each declared port.
type RefInForce struct {
	Ports        map[string]string `json:"ports"`
	DockerDNAT   bool              `json:"docker_dnat_intact"`
	DockerChains string            `json:"docker_nat_chain,omitempty"` // when not intact
	// DockerUser is the filter table's DOCKER-USER chain and ufw's
	// forward chain, kept when a declared port did not answer: where the
	// forward path dropped it.
	DockerUser string `json:"docker_user_chain,omitempty"`
}

// RefFlipDetails is the reference flip section of the JSON.
type RefFlipDetails struct {
	Runs            []RefFlipRun  `json:"runs"`
	Spec            flip.MeshSpec `json:"spec"`
	PreviewApproved bool          `json:"preview_approved"`
	PreviewReasons  []string      `json:"preview_reasons,omitempty"`
	MeshNft         string        `json:"mesh_nft"`
	Ours            RefFlipSum    `json:"ours"`
	Naive           RefFlipSum    `json:"naive"`
	Note            string        `json:"note"`
}

// RefFlipSum is one method's figures over its runs.
type RefFlipSum struct {
	PublishedFailed   int     `json:"published_failed_connections"`
	PublishedAttempts int     `json:"published_attempts"`
	PublishedOutageMS float64 `json:"published_longest_outage_ms"`
	PublishedHeldLost int     `json:"published_held_connections_lost"`
	HostFailed        int     `json:"host_service_failed_connections"`
	HostAttempts      int     `json:"host_service_attempts"`
	HostOutageMS      float64 `json:"host_service_longest_outage_ms"`
	HostHeldLost      int     `json:"host_service_held_connections_lost"`
	MedianMS          float64 `json:"median_procedure_ms"`
	// AnsweredRuns counts runs in which every declared published port
	// answered a fresh client while the mesh was in force; DNATRuns those
	// in which Docker's nat chain still DNATed every declared port;
	// DroppedClosedRuns those in which the dropped port was closed.
	AnsweredRuns      int `json:"answered_runs"`
	DNATRuns          int `json:"docker_dnat_runs"`
	DroppedClosedRuns int `json:"dropped_closed_runs"`
	Runs              int `json:"runs"`
}

type refFlipBench struct {
	dir      string
	node     *sandbox.RefNode
	peerPath string
	spec     flip.MeshSpec
	meshFile string
	declared []refService
	dropped  []refService
}

func runRefFlip(n int, stdout io.Writer) ([]report.Row, *RefFlipDetails, error) {
	if n < 1 {
		return nil, nil, fmt.Errorf("-flip-ref-n must be at least 1")
	}
	for _, tool := range []string{"docker", "dockerd", "nsenter", "ufw", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, nil, fmt.Errorf("the reference node needs %s: %w", tool, err)
		}
	}
	b := &refFlipBench{}
	defer b.cleanup()
	fmt.Fprintln(stdout, "flip-ref: raising the reference node (its own dockerd, ufw with ufw-docker, 4 published services) ...")
	d := &RefFlipDetails{}
	if err := b.setup(d); err != nil {
		return nil, nil, err
	}
	if err := b.alternate(n, d, stdout); err != nil {
		return nil, d, err
	}
	var oursMS, naiveMS []float64
	for _, r := range d.Runs {
		if r.Method == methodFlip {
			d.Ours.add(r, b)
			oursMS = append(oursMS, r.ProcedureMS)
		} else {
			d.Naive.add(r, b)
			naiveMS = append(naiveMS, r.ProcedureMS)
		}
	}
	d.Ours.MedianMS, d.Naive.MedianMS = report.Median(oursMS), report.Median(naiveMS)
	d.Note = b.note(d, n)
	rows := b.rows(d, n)
	for _, r := range d.Runs {
		if !r.Restored {
			return rows, d, fmt.Errorf("run %d (%s) did not leave the ruleset as found", r.Seq, r.Method)
		}
	}
	return rows, d, nil
}

// alternate runs each procedure n times, the order alternating.
func (b *refFlipBench) alternate(n int, d *RefFlipDetails, stdout io.Writer) error {
	for i := 0; i < n; i++ {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, ours := range order {
			m := methodUfw
			if ours {
				m = methodFlip
			}
			fmt.Fprintf(stdout, "flip-ref %d/%d: %s ...\n", i+1, n, m)
			r, err := b.round(ours)
			r.Seq, r.Method = len(d.Runs)+1, m
			d.Runs = append(d.Runs, r)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", m, i+1, err)
			}
		}
	}
	return nil
}

// add counts one run into its method's figures.
func (s *RefFlipSum) add(r RefFlipRun, b *refFlipBench) {
	s.Runs++
	for target, h := range r.Hammers {
		if target == fmt.Sprintf("%d/tcp", refHostPort) {
			s.HostFailed += h.Failed()
			s.HostAttempts += h.Attempts
			s.HostOutageMS = max(s.HostOutageMS, h.LongestOutageMS)
			if !h.Held {
				s.HostHeldLost++
			}
			continue
		}
		s.PublishedFailed += h.Failed()
		s.PublishedAttempts += h.Attempts
		s.PublishedOutageMS = max(s.PublishedOutageMS, h.LongestOutageMS)
		if !h.Held {
			s.PublishedHeldLost++
		}
	}
	answered, closed := true, true
	for _, sv := range b.declared {
		answered = answered && r.InForce.Ports[portKey(sv.host)] == "open"
	}
	for _, sv := range b.dropped {
		closed = closed && r.InForce.Ports[portKey(sv.host)] == "filtered"
	}
	if answered {
		s.AnsweredRuns++
	}
	if closed {
		s.DroppedClosedRuns++
	}
	if r.InForce.DockerDNAT {
		s.DNATRuns++
	}
}

// published are the declared published ports, as the rows name them.
func (b *refFlipBench) published() string {
	var declared []string
	for _, sv := range b.declared {
		declared = append(declared, portKey(sv.host))
	}
	return strings.Join(declared, ", ")
}

func (b *refFlipBench) note(d *RefFlipDetails, n int) string {
	pub := b.published()
	note := fmt.Sprintf("reference node (sandbox.RefNode): its own dockerd %s in the node's namespace, real ufw %s with the ufw-docker arrangement "+
		"(default deny incoming and routed; allow %d/tcp; route allow the container ports of %s; 19100/tcp published but unrouted); "+
		"clients in a peer namespace at %s (outside the private ranges) hammer each of %s over HTTP (GET /health through DNAT into the node engine's containers) "+
		"and the host service %d/tcp, each every %s with 500 ms dial and answer timeouts and one keep-alive connection held across; "+
		"hammer window: %s before, the procedure, %s after (ours: Flip, %s, Revert, %s); %d runs each, order alternating; "+
		"the spec keeps %s for forwarding (ct original proto-dst) and drops 19100/tcp; the preview of that spec %s",
		dockerdVersion(), ufwVersion(), refHostPort, pub, b.node.PeerAddr, pub, refHostPort, flipEvery, flipLead, flipSettle, flipSettle, flipSettle, n,
		pub, approvedText(d))
	if d.Naive.AnsweredRuns < d.Naive.Runs {
		// What the in-force listing of DOCKER-USER and ufw-user-forward
		// (kept in the runs' details) shows.
		note += "; the naive procedure left declared published ports unanswered while in force in " +
			fmt.Sprintf("%d/%d runs: ", d.Naive.Runs-d.Naive.AnsweredRuns, d.Naive.Runs) +
			"ufw disable flushes ufw-user-forward (ufw's routed allows) but not the ufw-docker block in DOCKER-USER, whose drop of new " +
			"connections to the private ranges then catches every published port, and an accept in table inet adoption cannot undo a drop " +
			"in ip filter; Docker's DNAT itself stays; such an outage lasts until ufw is enabled again, so its figure is bounded by the hammer window"
	}
	return note
}

func (b *refFlipBench) rows(d *RefFlipDetails, n int) []report.Row {
	pub := b.published()
	oursIs, peerIs := "firewall.Flipper.Flip then Revert, reference node", "ufw disable; nft -f mesh.nft (DeriveFor(found, spec).Text())"
	inForce := fmt.Sprintf("while in force, every declared published port answered a fresh client in %d/%d runs ours, %d/%d peer; "+
		"Docker's nat DOCKER chain still DNATed them in %d/%d ours, %d/%d peer; the dropped 19100/tcp was closed in %d/%d ours, %d/%d peer",
		d.Ours.AnsweredRuns, d.Ours.Runs, d.Naive.AnsweredRuns, d.Naive.Runs, d.Ours.DNATRuns, d.Ours.Runs, d.Naive.DNATRuns, d.Naive.Runs,
		d.Ours.DroppedClosedRuns, d.Ours.Runs, d.Naive.DroppedClosedRuns, d.Naive.Runs)
	return []report.Row{
		report.WithPeer("flip-ref", fmt.Sprintf("connections failed on published ports %s during the flip, reference node, %d runs", pub, n),
			float64(d.Ours.PublishedFailed), float64(d.Naive.PublishedFailed), "connections", oursIs, peerIs,
			fmt.Sprintf("of %d and %d attempts; %s", d.Ours.PublishedAttempts, d.Naive.PublishedAttempts, inForce), 0),
		report.WithPeer("flip-ref", "longest outage of a published port during the flip, reference node", d.Ours.PublishedOutageMS, d.Naive.PublishedOutageMS, "ms",
			oursIs, peerIs, "first failed attempt to the next successful one (or to the end of the window), worst port of the worst run", 1),
		report.WithPeer("flip-ref", fmt.Sprintf("held keep-alive connections to published ports lost (%d per run), reference node", len(b.declared)),
			float64(d.Ours.PublishedHeldLost), float64(d.Naive.PublishedHeldLost), "connections", oursIs, peerIs,
			fmt.Sprintf("of %d held each; a held connection survived when it still answered GET /health after the window", len(b.declared)*n), 0),
		report.WithPeer("flip-ref", fmt.Sprintf("connections failed on the host service %d/tcp during the flip, reference node", refHostPort),
			float64(d.Ours.HostFailed), float64(d.Naive.HostFailed), "connections", oursIs, peerIs,
			fmt.Sprintf("of %d and %d attempts; longest outage %.1f ms ours, %.1f ms peer; held lost %d ours, %d peer",
				d.Ours.HostAttempts, d.Naive.HostAttempts, d.Ours.HostOutageMS, d.Naive.HostOutageMS, d.Ours.HostHeldLost, d.Naive.HostHeldLost), 0),
		report.WithPeer("flip-ref", fmt.Sprintf("flip's own duration on the reference node, median of %d", n), d.Ours.MedianMS, d.Naive.MedianMS, "ms",
			"Flipper.Flip (list, analyse, one batch)", "ufw disable + nft -f", "", 1),
	}
}

func approvedText(d *RefFlipDetails) string {
	if d.PreviewApproved {
		return "approves"
	}
	return "REFUSES: " + strings.Join(d.PreviewReasons, "; ")
}

func portKey(p int) string { return fmt.Sprintf("%d/tcp", p) }

func dockerdVersion() string {
	out, _ := exec.Command("dockerd", "--version").Output()
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Docker version "))
}
