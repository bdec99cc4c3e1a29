package main

// This file holds the flip section: connections lost while ours flips a
// plain ufw node (real ufw, a host listener, a peer hammering every 5 ms),
// against ufw disable then nft -f of the same derived table, alternating;
// the node goes back to the found firewall after each run.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"adoption/bench/benchns"
	"adoption/bench/report"
	"adoption/config"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
)

const (
	flipEvery    = 5 * time.Millisecond
	flipLead     = 300 * time.Millisecond // hammering before the procedure
	flipSettle   = 500 * time.Millisecond // hammering after it (ours: before and after the revert)
	flipPort     = 8080
	flipNodeName = "bnflip"
	methodFlip   = "firewall.Flipper Flip (+ Revert)"
	methodUfw    = "ufw disable; nft -f mesh.nft"
)

// FlipRun is one procedure, once.
type FlipRun struct {
	Seq         int       `json:"seq"`
	Method      string    `json:"method"`
	Hammer      HammerRun `json:"hammer"`
	ProcedureMS float64   `json:"procedure_ms"`        // ours: Flip; naive: ufw disable + nft -f
	RevertMS    float64   `json:"revert_ms,omitempty"` // ours only
	Restored    bool      `json:"restored"`            // the listing after going back equals the one before
}

// FlipDetails is the flip section of the JSON.
type FlipDetails struct {
	Runs          []FlipRun `json:"runs"`
	OursFailed    int       `json:"ours_failed_connections"`
	NaiveFailed   int       `json:"naive_failed_connections"`
	OursAttempts  int       `json:"ours_attempts"`
	NaiveAttempts int       `json:"naive_attempts"`
	OursMedianMS  float64   `json:"ours_median_flip_ms"`
	NaiveMedianMS float64   `json:"naive_median_flip_ms"`
	OursOutageMS  float64   `json:"ours_longest_outage_ms"`
	NaiveOutageMS float64   `json:"naive_longest_outage_ms"`
	OursHeldLost  int       `json:"ours_held_connections_lost"`
	NaiveHeldLost int       `json:"naive_held_connections_lost"`
	MeshNft       string    `json:"mesh_nft"`
	UfwAllows     []string  `json:"ufw_allows"`
	Note          string    `json:"note"`
}

type flipBench struct {
	node, peer *benchns.NS
	addr       string
	spec       flip.MeshSpec
	meshFile   string
	listeners  closers
}

func runFlip(n int, stdout io.Writer) ([]report.Row, *FlipDetails, error) {
	if n < 1 {
		return nil, nil, fmt.Errorf("-flip-n must be at least 1")
	}
	b := &flipBench{}
	defer b.cleanup()
	d := &FlipDetails{UfwAllows: []string{"22/tcp", "80/tcp", "443/tcp", fmt.Sprintf("%d/tcp", flipPort), "route 8443/tcp"}}
	fmt.Fprintln(stdout, "flip: raising a ufw node and its peer ...")
	if err := b.setup(); err != nil {
		return nil, nil, err
	}
	d.MeshNft = b.meshFileText()
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
			fmt.Fprintf(stdout, "flip %d/%d: %s ...\n", i+1, n, m)
			r, err := b.round(ours)
			if err != nil {
				return nil, d, fmt.Errorf("%s, run %d: %w", m, i+1, err)
			}
			r.Seq, r.Method = len(d.Runs)+1, m
			d.Runs = append(d.Runs, r)
		}
	}
	var oursMS, naiveMS []float64
	for _, r := range d.Runs {
		if r.Method == methodFlip {
			d.OursFailed += r.Hammer.Failed()
			d.OursAttempts += r.Hammer.Attempts
			d.OursOutageMS = max(d.OursOutageMS, r.Hammer.LongestOutageMS)
			oursMS = append(oursMS, r.ProcedureMS)
			if !r.Hammer.Held {
				d.OursHeldLost++
			}
		} else {
			d.NaiveFailed += r.Hammer.Failed()
			d.NaiveAttempts += r.Hammer.Attempts
			d.NaiveOutageMS = max(d.NaiveOutageMS, r.Hammer.LongestOutageMS)
			naiveMS = append(naiveMS, r.ProcedureMS)
			if !r.Hammer.Held {
				d.NaiveHeldLost++
			}
		}
	}
	d.OursMedianMS, d.NaiveMedianMS = report.Median(oursMS), report.Median(naiveMS)
	d.Note = fmt.Sprintf("real ufw %s in a namespace (own /etc/ufw copy; default deny incoming and routed; allow %s); "+
		"a peer namespace over a veth connects to %d/tcp every %s (500 ms dial and greeting timeouts, one connection held across); "+
		"hammer window: %s before, the procedure, %s after (ours: Flip, %s, Revert, %s); %d runs each, order alternating; "+
		"the naive ufw disable flushes ufw's chains one iptables call at a time before it sets the policies to accept",
		ufwVersion(), strings.Join(d.UfwAllows, ", "), flipPort, flipEvery, flipLead, flipSettle, flipSettle, flipSettle, n)
	oursIs, peerIs := "firewall.Flipper.Flip then Revert (one netlink transaction each)", "ufw disable; nft -f mesh.nft (Derive(spec).Text())"
	rows := []report.Row{
		report.WithPeer("flip", fmt.Sprintf("connections failed during the flip (refused + timed out), hammer every 5 ms, %d runs", n),
			float64(d.OursFailed), float64(d.NaiveFailed), "connections", oursIs, peerIs,
			fmt.Sprintf("of %d and %d attempts; held connections lost: ours %d, peer %d", d.OursAttempts, d.NaiveAttempts, d.OursHeldLost, d.NaiveHeldLost), 0),
		report.WithPeer("flip", "longest outage of the declared port during the flip", d.OursOutageMS, d.NaiveOutageMS, "ms", oursIs, peerIs,
			"first failed attempt to the next successful one, worst run", 1),
		report.WithPeer("flip", fmt.Sprintf("flip's own duration, median of %d", n), d.OursMedianMS, d.NaiveMedianMS, "ms",
			"Flipper.Flip (list, analyse, one batch)", "ufw disable + nft -f", "", 1),
	}
	for _, r := range d.Runs {
		if !r.Restored {
			return rows, d, fmt.Errorf("run %d (%s) did not leave the ruleset as found", r.Seq, r.Method)
		}
	}
	return rows, d, nil
}

func ufwVersion() string {
	out, _ := exec.Command("ufw", "--version").Output()
	return strings.TrimPrefix(strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0], "ufw ")
}

func (b *flipBench) setup() error {
	var err error
	if b.node, err = benchns.New("fl"); err != nil {
		return err
	}
	if b.peer, err = benchns.New("flp"); err != nil {
		return err
	}
	nodeAddr, _, err := benchns.Link(b.node, b.peer)
	if err != nil {
		return err
	}
	b.addr = fmt.Sprintf("%s:%d", nodeAddr, flipPort)
	if err := runSteps(ufwNodeSteps(b.node.Name, fmt.Sprintf("%d/tcp", flipPort))); err != nil {
		return err
	}
	for _, port := range []int{22, 80, flipPort} {
		c, err := b.node.Serve("tcp", port)
		if err != nil {
			return err
		}
		b.listeners = append(b.listeners, c)
	}
	b.spec = flip.MeshSpec{Node: flipNodeName,
		Input: []flip.Allow{
			{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: flip.OwnerManagement},
			{Port: config.Port{Num: 80, Proto: "tcp"}, Owner: "web"},
			{Port: config.Port{Num: 443, Proto: "tcp"}, Owner: "web"},
			{Port: config.Port{Num: flipPort, Proto: "tcp"}, Owner: "app"},
		},
		Forward: []flip.Allow{{Port: config.Port{Num: 8443, Proto: "tcp"}, Owner: "app"}},
	}
	d, err := flip.Derive(b.spec)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "bn-flip-mesh-*.nft")
	if err != nil {
		return err
	}
	b.meshFile = f.Name()
	if _, err := f.WriteString(d.Text()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (b *flipBench) meshFileText() string {
	t, _ := os.ReadFile(b.meshFile)
	return string(t)
}

func (b *flipBench) cleanup() {
	b.listeners.Close()
	b.peer.Del()
	b.node.Del()
	if b.meshFile != "" {
		os.Remove(b.meshFile)
	}
}

func (b *flipBench) listing() (string, error) {
	out, err := b.node.Run(nil, "nft", "list", "ruleset")
	return counters.ReplaceAllString(out, "counter"), err
}

func (b *flipBench) ufw(args ...string) error { return ufwIn(b.node.Name, args...) }

func (b *flipBench) nft(args ...string) error {
	_, err := b.node.Run(nil, append([]string{"nft"}, args...)...)
	return err
}

// round runs one procedure under the hammer and goes back to the found
// firewall.
func (b *flipBench) round(ours bool) (FlipRun, error) {
	var r FlipRun
	before, err := b.listing()
	if err != nil {
		return r, err
	}
	flipper := flip.NewFlipper(b.node.Path)
	var expect string
	var found *firewall.Ruleset
	if ours {
		rs, err := eval.Inspector{Netns: b.node.Path}.Ruleset()
		if err != nil {
			return r, err
		}
		expect, found = firewall.Fingerprint(rs), rs
	}
	stop := hammer(b.peer, b.addr, flipEvery)
	time.Sleep(flipLead)
	var procErr error
	start := time.Now()
	if ours {
		derived, err := flip.DerivedFingerprint(found, b.spec)
		if err != nil {
			return r, err
		}
		r.ProcedureMS, r.RevertMS, procErr = flipAndRevert(start, flipper, b.spec, expect, derived, func() {})
	} else {
		procErr = ufwThenNft(b.ufw, func() error { _, err := b.node.Run(nil, "nft", "-f", b.meshFile); return err })
		r.ProcedureMS = report.MS(time.Since(start))
	}
	time.Sleep(flipSettle)
	h, herr := stop()
	if procErr != nil {
		return r, procErr
	}
	if herr != nil {
		return r, fmt.Errorf("hammer: %w", herr)
	}
	r.Hammer = h
	r.Restored, _, err = restored(b, ours, before)
	return r, err
}

// flipNode is what putting a node's firewall back after a flip run needs.
type flipNode interface {
	nft(args ...string) error
	ufw(args ...string) error
	listing() (string, error)
}

// restored puts the found firewall back after the naive procedure (ours
// reverted already) and says whether the listing is the one from before:
// ours must put back the very listing; ufw enable after ufw disable
// recreates its chains in another order, so the naive run is held to the
// same rules, in any order. after is the listing now.
func restored(n flipNode, ours bool, before string) (ok bool, after string, err error) {
	if !ours {
		if err := n.nft("delete", "table", "inet", firewall.MeshTable); err != nil {
			return false, "", err
		}
		if err := n.ufw("--force", "enable"); err != nil {
			return false, "", err
		}
	}
	if after, err = n.listing(); err != nil {
		return false, "", err
	}
	return after == before || (!ours && sortedLines(after) == sortedLines(before)), after, nil
}

// ufwIn runs ufw in the namespace named netns.
func ufwIn(netns string, args ...string) error {
	out, err := exec.Command("ip", append([]string{"netns", "exec", netns, "ufw"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ufw %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func sortedLines(s string) string {
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// flipAndRevert is ours, timed from start: Flip, the mesh in force for
// flipSettle (look sees it then), Revert. It returns the flip's and the
// revert's durations.
func flipAndRevert(start time.Time, f *flip.Flipper, spec flip.MeshSpec, expect, derived string, look func()) (flipMS, revertMS float64, err error) {
	plan, err := f.Flip(spec, expect, derived)
	flipMS = report.MS(time.Since(start))
	if err != nil {
		return flipMS, 0, err
	}
	time.Sleep(flipSettle)
	look()
	rs := time.Now()
	err = f.Revert(plan)
	return flipMS, report.MS(time.Since(rs)), err
}

// ufwThenNft is the naive procedure: ufw disable, then nft -f of the mesh.
func ufwThenNft(ufw func(args ...string) error, nftFile func() error) error {
	if err := ufw("disable"); err != nil {
		return err
	}
	return nftFile()
}
