package main

// This file holds the reference node of the flip-ref section: raising and
// removing it, its clients, what a client sees while the mesh is in force,
// and one procedure's run under the hammer.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"adoption/bench/report"
	"adoption/config"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/netns"
	"adoption/sandbox"
)

func (b *refFlipBench) setup(d *RefFlipDetails) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return fmt.Errorf("find the module root (go env GOMOD): %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if b.dir, err = os.MkdirTemp("", "bn-ref-"); err != nil {
		return err
	}
	bin := filepath.Join(b.dir, "adopt-sandbox")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./sandbox/cmd/adopt-sandbox")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build adopt-sandbox (the node's host service): %v: %s", err, out)
	}
	if err := sandbox.ServiceImages(ctx, root, map[string]string{"v1": refImage}); err != nil {
		return err
	}
	spec := sandbox.RefSpec{Spec: sandbox.Spec{Name: refNodeName, Index: refIndex, Dir: filepath.Join(b.dir, "node"), Binary: bin,
		Allowed: []config.Port{{Num: refHostPort, Proto: "tcp"}}}}
	b.spec = flip.MeshSpec{Node: refNodeName,
		Input: []flip.Allow{{Port: config.Port{Num: refHostPort, Proto: "tcp"}, Owner: flip.OwnerManagement}}}
	for _, s := range refServices() {
		spec.Services = append(spec.Services, sandbox.Service{
			Name: s.module, Image: refImage, Routed: s.routed,
			Host:      config.Port{Num: uint16(s.host), Proto: "tcp"},
			Container: config.Port{Num: uint16(s.ctr), Proto: "tcp"},
			Cmd:       []string{"-listen", fmt.Sprintf(":%d", s.ctr), "-data", "/named,/anon"},
			Volumes:   []string{s.module + "-data:/named"},
		})
		p := config.Port{Num: uint16(s.host), Proto: "tcp"}
		if !s.routed {
			b.dropped = append(b.dropped, s)
			b.spec.Drop = append(b.spec.Drop, p)
			continue
		}
		// As workflows.MeshSpec derives it for a migrated module: its
		// declared port for input, its published host port for forwarding.
		b.declared = append(b.declared, s)
		b.spec.Input = append(b.spec.Input, flip.Allow{Port: p, Owner: s.module})
		b.spec.Forward = append(b.spec.Forward, flip.Allow{Port: p, Owner: s.module})
	}
	b.node = sandbox.NewRef(spec)
	if err := b.node.Up(); err != nil {
		return err
	}
	b.peerPath = "/run/netns/" + b.node.Peer
	d.Spec = b.spec
	found, err := eval.Inspector{Netns: b.node.NetnsPath()}.Ruleset()
	if err != nil {
		return err
	}
	node, err := firewall.ReadNode(b.node.NetnsPath())
	if err != nil {
		return err
	}
	pv := flip.PreviewFlipOn(found, node, b.spec)
	d.PreviewApproved, d.PreviewReasons = pv.Approved, pv.Reasons
	derived, err := flip.DeriveFor(found, b.spec)
	if err != nil {
		return err
	}
	d.MeshNft = derived.Text()
	b.meshFile = filepath.Join(b.dir, "mesh.nft")
	if err := os.WriteFile(b.meshFile, []byte(d.MeshNft), 0o600); err != nil {
		return err
	}
	// Every declared port must answer before any run: a run that starts
	// broken measures nothing.
	for _, s := range b.declared {
		if got := b.client(s.host); got != "open" {
			return fmt.Errorf("published port %d does not answer a client before any flip: %s", s.host, got)
		}
	}
	return nil
}

func (b *refFlipBench) cleanup() {
	if b.node != nil {
		if err := b.node.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "flip-ref:", err)
		}
	}
	if b.dir != "" {
		exec.Command("docker", "image", "rm", "-f", refImage).Run() //nolint:errcheck // best effort at cleanup
		os.RemoveAll(b.dir)
	}
}

// onNode runs a command in the node's namespace.
func (b *refFlipBench) onNode(args ...string) (string, error) {
	out, err := b.node.OnNode(args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (b *refFlipBench) listing() (string, error) {
	out, err := b.onNode("nft", "list", "ruleset")
	return counters.ReplaceAllString(out, "counter"), err
}

// client is one fresh client's GET /health on a published port, from the
// peer: "open" (a 200), "refused", "filtered" (nothing within a second) or
// what else went wrong.
func (b *refFlipBench) client(port int) string {
	state := ""
	err := netns.Do(b.peerPath, func() error {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", b.node.Addr, port), time.Second)
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			state = "refused"
			return nil
		case err != nil:
			state = "filtered"
			return nil
		}
		defer c.Close()
		if err := sandbox.HealthCheck(c, bufio.NewReader(c), false, time.Second); err != nil {
			state = "connected, no answer: " + err.Error()
			return nil
		}
		state = "open"
		return nil
	})
	if err != nil {
		return err.Error()
	}
	return state
}

// inForce looks at the node while the mesh is in force.
func (b *refFlipBench) inForce() RefInForce {
	f := RefInForce{Ports: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range refServices() { // at once: a filtered port costs its whole timeout
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := b.client(s.host)
			mu.Lock()
			f.Ports[portKey(s.host)] = st
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, s := range b.declared {
		if f.Ports[portKey(s.host)] != "open" {
			fu, _ := b.onNode("iptables", "-S", "DOCKER-USER")
			uf, _ := b.onNode("iptables", "-S", "ufw-user-forward")
			f.DockerUser = fu + uf
			break
		}
	}
	nat, err := b.onNode("iptables", "-t", "nat", "-S", "DOCKER")
	f.DockerDNAT = err == nil
	for _, s := range b.declared {
		f.DockerDNAT = f.DockerDNAT && strings.Contains(nat, fmt.Sprintf("--dport %d -j DNAT", s.host))
	}
	if !f.DockerDNAT {
		f.DockerChains = nat
		if err != nil {
			f.DockerChains = err.Error()
		}
	}
	return f
}

func (b *refFlipBench) ufw(args ...string) error { return ufwIn(b.node.Netns, args...) }

func (b *refFlipBench) nft(args ...string) error {
	_, err := b.onNode(append([]string{"nft"}, args...)...)
	return err
}

// round runs one procedure under the hammers and goes back to the found
// firewall.
func (b *refFlipBench) round(ours bool) (RefFlipRun, error) {
	r := RefFlipRun{Hammers: map[string]HammerRun{}}
	before, err := b.listing()
	if err != nil {
		return r, err
	}
	var expect, derived string
	if ours {
		rs, err := eval.Inspector{Netns: b.node.NetnsPath()}.Ruleset()
		if err != nil {
			return r, err
		}
		expect = firewall.Fingerprint(rs)
		if derived, err = flip.DerivedFingerprint(rs, b.spec); err != nil {
			return r, err
		}
	}
	type running struct {
		target string
		stop   func() (HammerRun, error)
	}
	var hs []running
	for _, s := range b.declared {
		hs = append(hs, running{portKey(s.host), hammerOn(b.peerPath, fmt.Sprintf("%s:%d", b.node.Addr, s.host), flipEvery, httpHealth{})})
	}
	hs = append(hs, running{portKey(refHostPort), hammerOn(b.peerPath, fmt.Sprintf("%s:%d", b.node.Addr, refHostPort), flipEvery, greeting{})})
	stopAll := func() error {
		var errs []error
		for _, h := range hs {
			res, err := h.stop()
			if err != nil {
				errs = append(errs, fmt.Errorf("hammer %s: %w", h.target, err))
			}
			r.Hammers[h.target] = res
		}
		return errors.Join(errs...)
	}
	time.Sleep(flipLead)
	var procErr error
	start := time.Now()
	if ours {
		flipper := flip.NewFlipper(b.node.NetnsPath())
		r.ProcedureMS, r.RevertMS, procErr = flipAndRevert(start, flipper, b.spec, expect, derived, func() { r.InForce = b.inForce() })
	} else {
		procErr = ufwThenNft(b.ufw, func() error { _, err := b.onNode("nft", "-f", b.meshFile); return err })
		r.ProcedureMS = report.MS(time.Since(start))
		if procErr == nil {
			time.Sleep(flipSettle)
			r.InForce = b.inForce()
		}
	}
	time.Sleep(flipSettle)
	herr := stopAll()
	if procErr != nil {
		return r, procErr
	}
	if herr != nil {
		return r, herr
	}
	var after string
	if r.Restored, after, err = restored(b, ours, before); err != nil {
		return r, err
	}
	if !r.Restored {
		return r, fmt.Errorf("the ruleset after the run differs from the one before:\n%s", lineDiff(before, after))
	}
	return r, nil
}

// lineDiff lists the lines only one of a and b has, in any order.
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for l, c := range count {
		switch {
		case c > 0:
			out = append(out, "- "+strings.TrimSpace(l))
		case c < 0:
			out = append(out, "+ "+strings.TrimSpace(l))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
