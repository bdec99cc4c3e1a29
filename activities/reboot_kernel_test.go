package activities

// Root tests of the flip across a reboot, in network namespaces: the
// ruleset emptied, then the boot files loaded the way Debian boots
// (nftables.service: nft -f /etc/nftables.conf; ufw.service: ufw's rules
// only if /etc/ufw/ufw.conf says ENABLED=yes), then Docker adding its
// chains again.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
	"adoption/internal/ufwfixture"
	"adoption/nodestate"
)

// rebootNode is a ufw node beside Docker's chains: ufw allows 22/tcp and
// 8081/tcp (flip.drop), its boot files as a stock Debian 12 has them
// (nftables.service installed, enabled by flip.enable_boot_service).
type rebootNode struct {
	n    *fwtest.TestNet
	a    *Activities
	root string
	plan config.Plan
}

var rebootAllowed = config.MustPorts([]string{"22/tcp", "8081/tcp"})

func newRebootNode(t *testing.T) *rebootNode {
	t.Helper()
	testenv.NeedRoot(t, "network namespaces")
	testenv.NeedTools(t, "nft", "iptables-nft-restore", "ip6tables-nft-restore", "iptables-nft")
	n := fwtest.NewNamedNet(t, "rb-", "rb", "07")
	r := &rebootNode{n: n}
	r.loadUfw(t)
	r.loadDocker(t)
	n.Serve(t, []uint16{22, 8081})
	a, root := kernelActs(t, n)
	r.a, r.root = a, root
	r.plan = config.Plan{Node: "n1", ConfirmTimeout: time.Minute, ManagementPorts: config.MustPorts([]string{"22/tcp"}), Drop: config.MustPorts([]string{"8081/tcp"}),
		Witness: &config.Witness{Disabled: true}}
	withPlan(a, r.plan)
	enableBootService(a)
	adoptedAs(t, a, testEnvCaller)
	must(t, a.State.SetBaseline(nodestate.Baseline{Firewall: flip.FoundFingerprint(n.List(t))}))
	debianBoot(t, root, false)
	for p, c := range map[string]string{"etc/nftables.conf": debianNftablesConf, "etc/ufw/ufw.conf": ufwConf} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), []byte(c), 0o644))
	}
	return r
}

func (r *rebootNode) loadUfw(t *testing.T) {
	t.Helper()
	for _, cmd := range []string{"iptables-nft-restore", "ip6tables-nft-restore"} {
		fwtest.Run(t, ufwfixture.DefaultDeny(rebootAllowed), "ip", "netns", "exec", r.n.Node, cmd)
	}
}

// loadDocker adds what dockerd adds at its start.
func (r *rebootNode) loadDocker(t *testing.T) { t.Helper(); fwtest.DockerChains(t, r.n) }

// ufwEnabled is ufw.conf's ENABLED line, which ufw.service reads at boot.
var ufwEnabled = regexp.MustCompile(`(?m)^[ \t]*ENABLED[ \t]*=.*$`)

// reboot empties the ruleset and loads the boot files under the node's
// root as Debian does, then Docker's chains. It reports whether ufw loaded.
func (r *rebootNode) reboot(t *testing.T) bool {
	t.Helper()
	r.n.Nft(t, "flush ruleset\n")
	fwtest.Run(t, "", "ip", "netns", "exec", r.n.Node, "nft", "-f", filepath.Join(r.root, "etc/nftables.conf"))
	ufw := false
	if conf, err := os.ReadFile(filepath.Join(r.root, "etc/ufw/ufw.conf")); err == nil && ufwEnabled.Match(conf) &&
		strings.Contains(string(ufwEnabled.Find(conf)), "yes") {
		r.loadUfw(t)
		ufw = true
	}
	r.loadDocker(t)
	return ufw
}

// openings are the evaluator's answer on the node now, one line each.
func (r *rebootNode) openings(t *testing.T) []string {
	t.Helper()
	rs := r.n.List(t)
	node, err := firewall.ReadNode(r.n.Path(r.n.Node))
	must(t, err)
	var out []string
	for _, o := range eval.OpenPortsOn(rs, node) {
		out = append(out, openingKey(o))
	}
	sort.Strings(out)
	return out
}

func openingKey(o firewall.Opening) string {
	return fmt.Sprintf("%s %s %s %d-%d from %q via %q uncertain=%v", o.Direction, o.Family, o.Proto, o.Port, o.PortEnd, o.From, o.Via, o.Uncertain)
}

// kept are the preview's openings that the flip keeps.
func kept(pv *flip.Preview) []string {
	var out []string
	for _, f := range pv.Fates {
		if f.Fate == flip.FateKept && f.Opening.Class == "" { // the classes are not OpenPortsOn's
			out = append(out, openingKey(f.Opening))
		}
	}
	sort.Strings(out)
	return out
}

// After the commit, a reboot loads the mesh's table from the boot file
// (nftables.service, which the commit enabled), not ufw (switched off),
// beside Docker's chains added again: the evaluator's answer is exactly
// the committed preview's kept openings, as it was right after the
// commit.
func TestKernelRebootAfterCommit(t *testing.T) {
	r := newRebootNode(t)
	res, err := oneTrip(t, r.a, FlipInput{Plan: r.plan.Ref(), Spec: flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: r.plan.ManagementPorts[0], Owner: flip.OwnerManagement}}, Drop: r.plan.Drop},
		ID: "n1-1", ConfirmTimeout: time.Minute, Preview: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Preview == nil || !res.Preview.Approved || res.State != nodestate.FlipCommitted {
		t.Fatalf("flip: %+v", res)
	}
	want := kept(res.Preview)
	if len(want) == 0 {
		t.Fatal("the preview keeps nothing")
	}
	boot := readFile(t, filepath.Join(r.root, "etc/nftables.conf"))
	if strings.Contains(boot, "flush ruleset") || strings.Contains(boot, "table inet filter") || !strings.Contains(boot, "delete table inet adoption") {
		t.Errorf("the boot file flushes the ruleset or carries a table that was not in force:\n%s", boot)
	}
	if _, err := os.Readlink(filepath.Join(r.root, "etc/systemd/system/sysinit.target.wants/nftables.service")); err != nil {
		t.Errorf("the commit did not enable nftables.service: %v", err)
	}
	if !strings.Contains(readFile(t, filepath.Join(r.root, "etc/systemd/system/nftables.service.d/adoption.conf")), "ExecStop=\n") {
		t.Error("the commit left nftables.service's ExecStop flushing the ruleset")
	}
	committed := r.openings(t)
	if d := fwtest.Diff(strings.Join(want, "\n"), strings.Join(committed, "\n")); d != "" {
		t.Errorf("after the commit the evaluator differs from the preview's kept openings:\n%s", d)
	}
	if r.reboot(t) {
		t.Fatal("ufw loaded at boot after the commit")
	}
	booted := r.openings(t)
	if d := fwtest.Diff(strings.Join(want, "\n"), strings.Join(booted, "\n")); d != "" {
		t.Errorf("after the reboot the evaluator differs from the preview's kept openings:\n%s\nruleset:\n%s", d, r.n.Listing(t))
	}
	listing := r.n.Listing(t)
	if !strings.Contains(listing, "table inet adoption") || strings.Contains(listing, "ufw-") || !strings.Contains(listing, "DOCKER-USER") {
		t.Errorf("after the reboot the ruleset is not the mesh's beside Docker's:\n%s", listing)
	}
	// A restart of nftables.service (the drop-in's stop does nothing, the
	// start loads the boot file again) keeps Docker's chains.
	fwtest.Run(t, "", "ip", "netns", "exec", r.n.Node, "nft", "-f", filepath.Join(r.root, "etc/nftables.conf"))
	if l := r.n.Listing(t); !strings.Contains(l, "DOCKER-USER") || strings.Count(l, "table inet adoption") != 1 {
		t.Errorf("a reload of the boot file touched Docker's chains or doubled the mesh's table:\n%s", l)
	}
	r.n.ExpectReach(t, "rebooted", true, fwtest.Ports("22/tcp")...)
	r.n.ExpectReach(t, "rebooted", false, fwtest.Ports("8081/tcp")...)
}

// A reboot inside the confirm window (the flip applied, not confirmed: the
// round trip's attempt died with the node) boots the node's found boot
// files: ufw is back and the mesh's table is gone. The round trip run
// again resumes the flip, refuses to confirm it, and reverts it (its node
// files restored), never committed: the boot files are the found ones,
// and the evaluator's answer is the one before the flip.
func TestKernelRebootInsideConfirmWindow(t *testing.T) {
	r := newRebootNode(t)
	ctx := context.Background()
	before := r.openings(t)
	spec := flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: r.plan.ManagementPorts[0], Owner: flip.OwnerManagement}}, Drop: r.plan.Drop}
	in := FlipInput{Plan: r.plan.Ref(), Spec: spec, ID: "n1-1", ConfirmTimeout: time.Minute, Preview: true}
	res, err := applyStage(ctx, r.a, in)
	if err != nil || res.State != nodestate.FlipFlipped {
		t.Fatalf("flip: %+v %v", res, err)
	}
	if !r.reboot(t) {
		t.Fatal("ufw did not load at a boot before the commit")
	}
	_, err = oneTrip(t, r.a, in)
	msg := appErr(t, err, ErrFlipReverted)
	if !strings.Contains(msg, "table inet adoption is not in the ruleset") {
		t.Fatalf("the refusal does not say why: %s", msg)
	}
	if rec := record(t, r.a); rec.State != nodestate.FlipReverted {
		t.Fatalf("the flip is %s after a refused confirmation", rec.State)
	}
	if _, err := r.a.CommitFlip(ctx, ConfirmInput{Plan: r.plan.Ref(), ID: "n1-1"}); err == nil {
		t.Fatal("a reverted flip was committed")
	}
	for p, want := range map[string]string{"etc/nftables.conf": debianNftablesConf, "etc/ufw/ufw.conf": ufwConf} {
		if got := readFile(t, filepath.Join(r.root, p)); got != want {
			t.Errorf("%s changed by a flip that was never committed:\n%s", p, got)
		}
	}
	if _, err := os.Lstat(filepath.Join(r.root, "etc/systemd/system/sysinit.target.wants/nftables.service")); err == nil {
		t.Error("nftables.service was enabled by a flip that was never committed")
	}
	if after := r.openings(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("after the refusal the evaluator's answer is not the one before the flip:\n%s", fwtest.Diff(strings.Join(before, "\n"), strings.Join(after, "\n")))
	}
	r.n.ExpectReach(t, "reverted", true, fwtest.Ports("22/tcp", "8081/tcp")...)
}

// A commit that stopped after removing the predecessor (in the round trip
// resumed after its first attempt applied the flip) resumes: when
// something emptied the ruleset in between, the retry puts the mesh's
// table back before it writes the rest, so the node is never left
// unfiltered, and the evaluator's answer is the preview's kept openings.
func TestKernelCommitResumesAfterAFlush(t *testing.T) {
	r := newRebootNode(t)
	ctx := context.Background()
	spec := flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: r.plan.ManagementPorts[0], Owner: flip.OwnerManagement}}, Drop: r.plan.Drop}
	in := FlipInput{Plan: r.plan.Ref(), Spec: spec, ID: "n1-1", ConfirmTimeout: time.Minute, Preview: true}
	res, err := applyStage(ctx, r.a, in)
	if err != nil || res.State != nodestate.FlipFlipped {
		t.Fatalf("flip: %+v %v", res, err)
	}
	ufwConfPath := filepath.Join(r.root, "etc/ufw/ufw.conf")
	must(t, os.Remove(ufwConfPath))
	must(t, os.Mkdir(ufwConfPath, 0o755))
	_, err = oneTrip(t, r.a, in)
	if err == nil || !strings.Contains(err.Error(), "Steps done: remove the predecessor's firewall") {
		t.Fatalf("a commit that stopped at ufw.conf: %v", err)
	}
	r.n.Nft(t, "flush ruleset\n")
	r.loadDocker(t)
	must(t, os.Remove(ufwConfPath))
	must(t, os.WriteFile(ufwConfPath, []byte(ufwConf), 0o644))
	cm, err := r.a.CommitFlip(ctx, ConfirmInput{Plan: r.plan.Ref(), ID: "n1-1"})
	if err != nil || cm.State != nodestate.FlipCommitted {
		t.Fatalf("the resumed commit: %+v %v", cm, err)
	}
	if got := r.openings(t); strings.Join(got, "\n") != strings.Join(kept(res.Preview), "\n") {
		t.Errorf("after the resumed commit the evaluator differs from the preview's kept openings:\n%s", fwtest.Diff(strings.Join(kept(res.Preview), "\n"), strings.Join(got, "\n")))
	}
	r.n.ExpectReach(t, "resumed", true, fwtest.Ports("22/tcp")...)
	r.n.ExpectReach(t, "resumed", false, fwtest.Ports("8081/tcp")...)
}

// A DNAT in ufw's before.rules (*nat: 8443/tcp to the node's 22) works
// before the flip, and the flip would keep it in force; but nothing loads
// it at boot once the commit switches ufw off. The preview refuses,
// naming the rule, and nothing changes. Moved as the refusal says, into a
// native table the found /etc/nftables.conf declares, the flip is
// approved, committed, and after a reboot the DNAT still works with real
// packets from the peer.
func TestKernelUfwNatRuleSurvivesTheBootOrIsRefused(t *testing.T) {
	r := newRebootNode(t)
	const dnatTo = fwtest.NodeV4 + ":22"
	rebaseline := func() {
		must(t, r.a.State.SetBaseline(nodestate.Baseline{Firewall: flip.FoundFingerprint(r.n.List(t))}))
	}
	through := []fwtest.Probe{{Proto: "tcp", Src: fwtest.PeerV4a, Port: 8443}}
	dnatWorks := func(when string) {
		t.Helper()
		if !r.n.Reach(t, through)[through[0]] {
			t.Fatalf("%s: 8443/tcp (DNAT to %s) does not get through from the peer:\n%s", when, dnatTo, r.n.Listing(t))
		}
	}
	fwtest.Run(t, "", "ip", "netns", "exec", r.n.Node, "iptables-nft", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", "8443", "-j", "DNAT", "--to-destination", dnatTo)
	rebaseline()
	dnatWorks("before the flip")
	before := r.n.Listing(t)
	spec := flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: r.plan.ManagementPorts[0], Owner: flip.OwnerManagement}}, Drop: r.plan.Drop}
	res, err := oneTrip(t, r.a, FlipInput{Plan: r.plan.Ref(), Spec: spec, ID: "n1-1", ConfirmTimeout: time.Minute, Preview: true})
	if err != nil || res.State != FlipPreviewRefused || res.Preview == nil {
		t.Fatalf("flip with ufw's *nat DNAT: %+v %v; want it refused by the node's preview", res, err)
	}
	reason := strings.Join(res.Preview.Reasons, "\n")
	for _, w := range []string{"the commit would refuse", "table ip nat chain PREROUTING", "dnat to " + dnatTo, "/etc/ufw/before.rules", "then preview again"} {
		if !strings.Contains(reason, w) {
			t.Errorf("the preview's refusal lacks %q:\n%s", w, reason)
		}
	}
	t.Logf("refused: %s", reason)
	if after := r.n.Listing(t); after != before {
		t.Fatalf("a refused flip changed the ruleset:\n%s", fwtest.Diff(before, after))
	}
	if got := readFile(t, filepath.Join(r.root, "etc/nftables.conf")); got != debianNftablesConf {
		t.Fatalf("a refused flip changed the boot file:\n%s", got)
	}

	// The fix the refusal names: a native table the boot file declares.
	const portfwd = "table ip portfwd {\n\tchain prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\ttcp dport 8443 dnat to " + dnatTo + "\n\t}\n}\n"
	fwtest.Run(t, "", "ip", "netns", "exec", r.n.Node, "iptables-nft", "-t", "nat", "-D", "PREROUTING", "-p", "tcp", "--dport", "8443", "-j", "DNAT", "--to-destination", dnatTo)
	r.n.Nft(t, portfwd)
	must(t, os.WriteFile(filepath.Join(r.root, "etc/nftables.conf"), []byte(debianNftablesConf+"\n"+portfwd), 0o644))
	rebaseline()
	dnatWorks("moved into table ip portfwd")
	res, err = oneTrip(t, r.a, FlipInput{Plan: r.plan.Ref(), Spec: spec, ID: "n1-2", ConfirmTimeout: time.Minute, Preview: true})
	if err != nil || res.State != nodestate.FlipCommitted {
		t.Fatalf("flip with the DNAT in a declared native table: %+v %v", res, err)
	}
	dnatWorks("committed")
	if r.reboot(t) {
		t.Fatal("ufw loaded at boot after the commit")
	}
	dnatWorks("rebooted")
	r.n.ExpectReach(t, "rebooted", true, fwtest.Ports("22/tcp")...)
	r.n.ExpectReach(t, "rebooted", false, fwtest.Ports("8081/tcp")...)
}
