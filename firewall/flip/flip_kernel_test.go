package flip

import (
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/marks"
	"adoption/internal/fwtest"
)

// Root tests of the flip: a node namespace with a found firewall (ufw with
// Docker-style chains beside it, or a native table), the peer namespace
// connecting to it, and the kernel as the judge of what is open.

// newFlipNet is newTestNet with this file's own namespace names ("fl-").
func newFlipNet(t *testing.T) *fwtest.TestNet { return fwtest.NewNamedNet(t, "fl-", "fl", "01") }

func in(n *fwtest.TestNet, t *testing.T, name string, args ...string) {
	t.Helper()
	fwtest.Run(t, "", "ip", append([]string{"netns", "exec", n.Node, name}, args...)...)
}

// ufwDockerNode is a ufw default-deny node (ufw's own layout) allowing
// 22, 80, 8081 and 8083/tcp, with Docker-style chains beside it: DOCKER,
// DOCKER-USER, DOCKER-FORWARD jumped to from FORWARD before ufw's jumps,
// and a nat table with Docker's DNAT.
func ufwDockerNode(t *testing.T) *fwtest.TestNet {
	t.Helper()
	n := newFlipNet(t)
	fwtest.RestoreUfw(t, n)
	for _, f := range []struct{ cmd, chain string }{{"iptables-nft", "ufw-user-input"}, {"ip6tables-nft", "ufw6-user-input"}} {
		in(n, t, f.cmd, "-F", f.chain)
		for _, p := range []string{"22", "80", "8081", "8083"} {
			in(n, t, f.cmd, "-A", f.chain, "-p", "tcp", "--dport", p, "-j", "ACCEPT")
		}
	}
	fwtest.DockerChains(t, n)
	for _, args := range [][]string{
		{"-A", "DOCKER", "-d", "172.17.0.2/32", "!", "-i", "docker0", "-o", "docker0", "-p", "tcp", "--dport", "80", "-j", "ACCEPT"},
		{"-t", "nat", "-A", "DOCKER", "!", "-i", "docker0", "-p", "tcp", "--dport", "8088", "-j", "DNAT", "--to-destination", "172.17.0.2:80"},
	} {
		in(n, t, "iptables-nft", args...)
	}
	return n
}

// dockerListing is Docker's part of the ruleset as nft lists it, counters
// stripped: its chains, its jumps in FORWARD, and the nat table.
func dockerListing(n *fwtest.TestNet, t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, ch := range []string{"DOCKER", "DOCKER-USER", "DOCKER-FORWARD"} {
		b.WriteString(n.Quiet(t, "nft", "list", "chain", "ip", "filter", ch))
	}
	b.WriteString(fwtest.GrepLines(n.Quiet(t, "nft", "list", "chain", "ip", "filter", "FORWARD"), "DOCKER"))
	b.WriteString(n.Quiet(t, "nft", "list", "table", "ip", "nat"))
	return fwtest.Counters.ReplaceAllString(b.String(), "counter")
}

// echo serves TCP echo on port in the node namespace.
func echo(n *fwtest.TestNet, t *testing.T, port uint16) {
	t.Helper()
	var l net.Listener
	err := fwtest.InNetns(n.Node, func() (err error) {
		l, err = net.Listen("tcp", fmt.Sprintf("[::]:%d", port))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
}

// dialFromPeer opens a TCP connection from the peer namespace.
func dialFromPeer(n *fwtest.TestNet, t *testing.T, src, dst string, port uint16) net.Conn {
	t.Helper()
	var c net.Conn
	err := fwtest.InNetns(n.Peer, func() (err error) {
		d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err = d.Dial("tcp", net.JoinHostPort(dst, fmt.Sprint(port)))
		return err
	})
	if err != nil {
		t.Fatalf("connecting %s -> %s port %d: %v", src, dst, port, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func roundTrip(c net.Conn, msg string) error {
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return fmt.Errorf("echoed %q, sent %q", buf, msg)
	}
	return nil
}

// load connects to port from the peer namespace every 5 ms until stopped,
// on both families, and counts what failed.
type load struct {
	mu       sync.Mutex
	ok       int
	failures []string
	stop     chan struct{}
	done     sync.WaitGroup
}

func startLoad(n *fwtest.TestNet, t *testing.T, port uint16) *load {
	t.Helper()
	l := &load{stop: make(chan struct{})}
	for _, pair := range [][2]string{{fwtest.PeerV4a, fwtest.NodeV4}, {fwtest.PeerV6a, fwtest.NodeV6}} {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			err := fwtest.InNetns(n.Peer, func() error {
				d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(pair[0])}}
				for {
					select {
					case <-l.stop:
						return nil
					default:
					}
					start := time.Now()
					c, err := d.Dial("tcp", net.JoinHostPort(pair[1], fmt.Sprint(port)))
					l.mu.Lock()
					if err != nil {
						l.failures = append(l.failures, fmt.Sprintf("%s after %v: %v", start.Format("15:04:05.000"), time.Since(start).Round(time.Millisecond), err))
					} else {
						l.ok++
						c.Close()
					}
					l.mu.Unlock()
					time.Sleep(5 * time.Millisecond)
				}
			})
			if err != nil {
				t.Errorf("load: %v", err)
			}
		}()
	}
	return l
}

func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok + len(l.failures)
}

func (l *load) finish() (ok int, failures []string) {
	close(l.stop)
	l.done.Wait()
	return l.ok, l.failures
}

var flipSpec = MeshSpec{
	Node:  "n1",
	Input: concat(allow(OwnerManagement, "22/tcp"), allow("web", "80/tcp")),
	Drop:  fwtest.Ports("8081/tcp", "8083/tcp"),
}

func TestKernelFlipUfwBesideDocker(t *testing.T) {
	n := ufwDockerNode(t)
	n.Serve(t, []uint16{22, 80, 8081, 9999})
	echo(n, t, 8083)
	docker := dockerListing(n, t)
	n.ExpectReach(t, "before the flip", true, fwtest.Ports("22/tcp", "80/tcp", "8081/tcp", "8083/tcp")...)
	n.ExpectReach(t, "before the flip", false, fwtest.Ports("9999/tcp")...)
	// Established before the flip, on a port that closes at the flip.
	conns := []net.Conn{dialFromPeer(n, t, fwtest.PeerV4a, fwtest.NodeV4, 8083), dialFromPeer(n, t, fwtest.PeerV6a, fwtest.NodeV6, 8083)}
	for _, c := range conns {
		if err := roundTrip(c, "before"); err != nil {
			t.Fatal(err)
		}
	}

	found := n.List(t)
	if fp := firewall.Fingerprint(n.List(t)); fp != firewall.Fingerprint(found) {
		t.Fatalf("two listings of an unchanged ruleset: %s and %s", firewall.Fingerprint(found), fp)
	}
	preview := PreviewFlip(found, flipSpec)
	for _, w := range []struct {
		port uint16
		fate string
		by   string
		drop bool
	}{{22, FateKept, OwnerManagement, false}, {80, FateKept, "web", false}, {8081, FateClosing, "", true}, {8083, FateClosing, "", true}} {
		for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
			f, ok := fateOf(preview, fam, "tcp", w.port)
			if !ok || f.Fate != w.fate || f.By != w.by || f.Dropped != w.drop || f.Opening.PortEnd != 0 {
				t.Errorf("preview %s %d/tcp: %+v, %v; want %s by %q dropped=%v", fam, w.port, f, ok, w.fate, w.by, w.drop)
			}
		}
	}
	// ufw's own layout also routes 8443/tcp: the mesh keeps what the
	// found forward hook lets through (routed), so nothing refuses.
	t.Logf("preview approved=%v, reasons:\n%s", preview.Approved, strings.Join(preview.Reasons, "\n"))
	for _, f := range preview.Fates {
		if o := f.Opening; o.Direction == firewall.HookForward && o.Port == 8443 && (f.Fate != FateKept || f.By != OwnerRouted) {
			t.Errorf("preview: ufw's routed 8443/tcp %+v; want kept by %s", f, OwnerRouted)
		}
	}

	// Continuous connections to 80 across the flip.
	l := startLoad(n, t, 80)
	for deadline := time.Now().Add(2 * time.Second); l.count() < 20 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	f := NewFlipper(n.Path(n.Node))
	start := time.Now()
	plan, err := f.Flip(flipSpec, preview.FoundFingerprint, preview.DerivedFingerprint)
	took := time.Since(start)
	if err != nil {
		l.finish()
		t.Fatal(err)
	}
	before := l.count()
	for deadline := time.Now().Add(2 * time.Second); l.count() < before+20 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	ok, failures := l.finish()
	t.Logf("Flip took %v; %d connections to 80 during the run, %d failed", took, ok+len(failures), len(failures))
	if len(failures) > 0 || ok < 40 {
		t.Errorf("connections to 80 across the flip: %d ok, failures:\n%s", ok, strings.Join(failures, "\n"))
	}

	// The neutralising accepts sit at the top of ufw's entry chains.
	var at []string
	for _, r := range plan.Neutralised {
		at = append(at, r.Family+" "+r.Chain)
		if r.Handle == 0 || r.Comment != "adoption:n1:flip:neutralise" {
			t.Errorf("neutralised %+v", r)
		}
	}
	want := []string{"ip ufw-before-logging-input", "ip ufw-before-logging-forward", "ip ufw-before-logging-output",
		"ip6 ufw6-before-logging-input", "ip6 ufw6-before-logging-forward", "ip6 ufw6-before-logging-output"}
	if !reflect.DeepEqual(at, want) {
		t.Errorf("neutralised at %v, want %v", at, want)
	}
	save := n.Quiet(t, "iptables-save")
	if !strings.Contains(save, "-A ufw-before-logging-input -m comment --comment \"adoption:n1:flip:neutralise\" -j ACCEPT\n") {
		t.Errorf("iptables-save does not show the neutralising accept:\n%s", fwtest.GrepLines(save, "ufw-before-logging-input"))
	}
	n.Quiet(t, "ip6tables-save")

	n.ExpectReach(t, "after the flip", true, fwtest.Ports("22/tcp", "80/tcp")...)
	n.ExpectReach(t, "after the flip", false, fwtest.Ports("8081/tcp", "8083/tcp", "9999/tcp")...)
	for _, c := range conns {
		if err := roundTrip(c, "after"); err != nil {
			t.Errorf("a connection established before the flip: %v", err)
		}
	}
	if got := dockerListing(n, t); got != docker {
		t.Errorf("Docker's chains changed at the flip:\n%s", fwtest.Diff(docker, got))
	}
	// The model of the flipped ruleset is what the kernel holds.
	d, _ := DeriveFor(found, flipSpec)
	model, err := afterFlip(found, d.Ruleset, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eval.OpenPorts(n.List(t)), eval.OpenPorts(model); !reflect.DeepEqual(got, want) {
		t.Errorf("OpenPorts of the flipped kernel ruleset:\n%v\nof the preview's model:\n%v", got, want)
	}
	// Marker never takes the neutralising accepts for marks.
	listed, err := marks.NewMarker(n.Path(n.Node)).List("n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range listed {
		if m.Table != firewall.MeshTable {
			t.Errorf("Marker lists %v", m)
		}
	}
	t.Logf("Marker.List after the flip: %v (the mesh table's port rules parse as marks)", listed)

	// A retried Flip returns the plan in place and writes nothing.
	listing := n.Listing(t)
	again, err := f.Flip(flipSpec, preview.FoundFingerprint, preview.DerivedFingerprint)
	if err != nil || !reflect.DeepEqual(again.Neutralised, plan.Neutralised) || n.Listing(t) != listing {
		t.Errorf("Flip again: %+v, %v", again, err)
	}

	// Commit: ufw's chains go, with a saved listing; Docker's stay.
	start = time.Now()
	saved, err := f.Commit(plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Commit took %v, saved %d bytes", time.Since(start), len(saved))
	after := n.Listing(t)
	if strings.Contains(after, "ufw") || strings.Contains(after, "neutralise") {
		t.Errorf("after Commit the ruleset still holds ufw's chains or the flip's accepts:\n%s", fwtest.GrepLines(after, "ufw"))
	}
	for _, w := range []string{"chain ufw-before-input {", "chain ufw6-user-input {", "chain INPUT {", "jump ufw-before-logging-input", "th dport 8081"} {
		if !strings.Contains(saved, w) {
			t.Errorf("saved listing lacks %q", w)
		}
	}
	if strings.Contains(saved, "DOCKER") {
		t.Errorf("saved listing holds Docker's rules:\n%s", fwtest.GrepLines(saved, "DOCKER"))
	}
	if got := dockerListing(n, t); got != docker {
		t.Errorf("Docker's chains changed at Commit:\n%s", fwtest.Diff(docker, got))
	}
	for _, ch := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		if l := n.Quiet(t, "nft", "list", "chain", "ip", "filter", ch); !strings.Contains(l, "policy accept;") {
			t.Errorf("after Commit %s:\n%s", ch, l)
		}
	}
	n.ExpectReach(t, "after Commit", true, fwtest.Ports("22/tcp", "80/tcp")...)
	n.ExpectReach(t, "after Commit", false, fwtest.Ports("8081/tcp", "8083/tcp", "9999/tcp")...)
	for _, c := range conns {
		if err := roundTrip(c, "committed"); err != nil {
			t.Errorf("a connection established before the flip, after Commit: %v", err)
		}
	}
	n.Quiet(t, "iptables-save")
	if s, err := f.Commit(plan); err != nil || s != "" {
		t.Errorf("Commit again: %q, %v; want nothing to do", s, err)
	}
	if err := f.Revert(plan); !errors.Is(err, ErrCommitted) {
		t.Errorf("Revert after Commit: %v; want ErrCommitted", err)
	}
	if n.Listing(t) != after {
		t.Error("Commit again or Revert after Commit changed the ruleset")
	}
}

func TestKernelFlipRevertExact(t *testing.T) {
	n := ufwDockerNode(t)
	n.Serve(t, []uint16{80, 8081})
	before := n.Listing(t)
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(flipSpec, firewall.Fingerprint(n.List(t)), derivedFP(t, n.List(t), flipSpec))
	if err != nil {
		t.Fatal(err)
	}
	n.ExpectReach(t, "flipped", false, fwtest.Ports("8081/tcp")...)
	start := time.Now()
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
	t.Logf("Revert took %v", time.Since(start))
	if after := n.Listing(t); after != before {
		t.Errorf("after Revert the ruleset differs from before the flip:\n%s", fwtest.Diff(before, after))
	}
	if err := f.Revert(plan); err != nil {
		t.Errorf("second Revert: %v", err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("after a second Revert the ruleset differs:\n%s", fwtest.Diff(before, after))
	}
	n.ExpectReach(t, "reverted", true, fwtest.Ports("80/tcp", "8081/tcp")...)
	if _, err := f.Commit(plan); err == nil || !strings.Contains(err.Error(), "reverted") {
		t.Errorf("Commit after Revert: %v; want a refusal", err)
	}
}

func derivedFP(t *testing.T, found *firewall.Ruleset, spec MeshSpec) string {
	t.Helper()
	fp, err := DerivedFingerprint(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// A revert needs nothing but the node's name: the record written before
// the batch holds only that, and a worker killed between the batch and
// the record leaves exactly that.
func TestKernelFlipRevertFromNodeNameAlone(t *testing.T) {
	n := ufwDockerNode(t)
	n.Serve(t, []uint16{80, 8081})
	before := n.Listing(t)
	f := NewFlipper(n.Path(n.Node))
	if _, err := f.Flip(flipSpec, firewall.Fingerprint(n.List(t)), derivedFP(t, n.List(t), flipSpec)); err != nil {
		t.Fatal(err)
	}
	n.ExpectReach(t, "flipped", false, fwtest.Ports("8081/tcp")...)
	if err := f.Revert(RevertPlanFor(flipSpec.Node)); err != nil {
		t.Fatal(err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("after a revert from the node's name the ruleset differs from before the flip:\n%s", fwtest.Diff(before, after))
	}
	n.ExpectReach(t, "reverted", true, fwtest.Ports("80/tcp", "8081/tcp")...)
}

// The ruleset the flip would apply must be the one the preview approved:
// a spec changed after the preview (another port) is refused, nothing
// changed.
func TestKernelFlipStaleDerived(t *testing.T) {
	n := ufwDockerNode(t)
	approved := derivedFP(t, n.List(t), flipSpec)
	edited := flipSpec
	edited.Input = append(append([]Allow(nil), flipSpec.Input...), allow("web", "2222/tcp")...)
	before := n.Listing(t)
	_, err := NewFlipper(n.Path(n.Node)).Flip(edited, firewall.Fingerprint(n.List(t)), approved)
	if !errors.Is(err, ErrStaleDerived) || !errors.Is(err, ErrNotApplied) || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("Flip of a spec the preview did not approve: %v; want ErrStaleDerived, not applied", err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("a stale derived ruleset changed the ruleset:\n%s", fwtest.Diff(before, after))
	}
	if _, err := NewFlipper(n.Path(n.Node)).Flip(flipSpec, firewall.Fingerprint(n.List(t)), ""); !errors.Is(err, ErrStaleDerived) {
		t.Fatalf("Flip without an approved fingerprint: %v; want ErrStaleDerived", err)
	}
}

func TestKernelFlipStale(t *testing.T) {
	n := ufwDockerNode(t)
	fp := PreviewFlip(n.List(t), flipSpec).FoundFingerprint
	in(n, t, "iptables-nft", "-I", "ufw-user-input", "-p", "tcp", "--dport", "1", "-j", "DROP")
	changed := n.Listing(t)
	_, err := NewFlipper(n.Path(n.Node)).Flip(flipSpec, fp, derivedFP(t, n.List(t), flipSpec))
	if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "run the preview again") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("Flip after a hand edit: %v; want ErrStale", err)
	}
	t.Logf("refused: %v", err)
	if after := n.Listing(t); after != changed {
		t.Errorf("a stale Flip changed the ruleset:\n%s", fwtest.Diff(changed, after))
	}
}

func TestKernelFlipNativePredecessor(t *testing.T) {
	n := newFlipNet(t)
	n.Nft(t, `
table inet filter {
	set web { type inet_service; elements = { 80, 443 } }
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname "lo" accept
		tcp dport 22 accept
		tcp dport @web accept
		tcp dport 8081 counter accept
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
	}
	chain output {
		type filter hook output priority filter; policy accept;
	}
}`)
	n.Serve(t, []uint16{22, 80, 443, 8081})
	before := n.Listing(t)
	spec := MeshSpec{Node: "n1", Input: concat(allow(OwnerManagement, "22/tcp"), allow("web", "80/tcp", "443/tcp")), Drop: fwtest.Ports("8081/tcp")}
	eff := EffectiveSpec(n.List(t), spec) // what Flip derives from
	f, p, plan := previewedFlip(t, n, spec)
	if len(plan.Neutralised) != 3 {
		t.Errorf("neutralised %v; want the top of input, forward and output", plan.Neutralised)
	}
	n.ExpectReach(t, "flipped", true, fwtest.Ports("22/tcp", "80/tcp", "443/tcp")...)
	n.ExpectReach(t, "flipped", false, fwtest.Ports("8081/tcp")...)
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("after Revert the ruleset differs:\n%s", fwtest.Diff(before, after))
	}
	n.ExpectReach(t, "reverted", true, fwtest.Ports("8081/tcp")...)

	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := f.Commit(plan)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(saved, "table inet filter {") || !strings.Contains(saved, "th dport 8081") {
		t.Errorf("saved listing:\n%s", saved)
	}
	after := n.Listing(t)
	if strings.Contains(after, "table inet filter") {
		t.Errorf("the predecessor's table survived Commit:\n%s", after)
	}
	n.ExpectReach(t, "committed", true, fwtest.Ports("22/tcp", "80/tcp", "443/tcp")...)
	n.ExpectReach(t, "committed", false, fwtest.Ports("8081/tcp")...)

	// What Flip wrote is what Derived.Text says: loaded with nft into the
	// peer namespace, both list the same.
	d, _ := Derive(eff)
	fwtest.Run(t, d.Text(), "ip", "netns", "exec", n.Peer, "nft", "-f", "-")
	viaText := fwtest.Run(t, "", "ip", "netns", "exec", n.Peer, "nft", "list", "table", "inet", firewall.MeshTable)
	viaFlip := n.Quiet(t, "nft", "list", "table", "inet", firewall.MeshTable)
	if fwtest.Counters.ReplaceAllString(viaText, "counter") != fwtest.Counters.ReplaceAllString(viaFlip, "counter") {
		t.Errorf("nft -f of Derived.Text and Flip's batch differ:\n%s", fwtest.Diff(viaFlip, viaText))
	}
}
