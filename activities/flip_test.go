package activities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/activities/fake"
	"adoption/config"
	"adoption/firewall/flip"
	"adoption/firewall/nft"
	"adoption/nodestate"
)

// Unit tests of the flip's node-local record: what each outcome of the
// batch leaves, and who may move it on.

var flipSpecN1 = flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: "management"}}}

// flipPlanN1 is the node's own plan in these tests (the authority) and the
// plan every request carries: its flips are not witnessed from outside,
// so FlipTrip confirms from the node alone (no verdict is asked).
func flipPlanN1() config.Plan {
	return config.Plan{Node: "n1", ConfirmTimeout: time.Minute, ManagementPorts: []config.Port{{Num: 22, Proto: "tcp"}},
		Witness: &config.Witness{Disabled: true}}
}

// tripPlanN1 is flipPlanN1 witnessed from outside, the witness's key
// listed: FlipTrip confirms only on the witness's signed verdict.
func tripPlanN1() config.Plan {
	p := flipPlanN1()
	p.Witness = &config.Witness{Key: config.KeyLines{witnessKeyLine}}
	return p
}

func flipActs(t *testing.T) (*Activities, *fake.Flipper, string) {
	t.Helper()
	return flipActsWith(t, flipPlanN1())
}

func flipActsWith(t *testing.T, plan config.Plan) (*Activities, *fake.Flipper, string) {
	t.Helper()
	a, root := newActs(t)
	withPlan(a, plan)
	// A node whose boot loads the mesh's table (the preview checks it).
	debianBoot(t, root, true)
	// defaultDeny22's table is what the flip takes out of force whole.
	fl := &fake.Flipper{Neutralised: []flip.RuleRef{{Handle: 7}}, Saved: "table ip filter {}",
		Dormant: []flip.ChainRef{{Family: "inet", Table: "filter"}}}
	a.Flipper = fl
	a.StartWatchdog = func() error { return nil }
	adoptedAs(t, a, testEnvCaller)
	// A found firewall the node's own preview approves flipping, adopted
	// as it is (the baseline its drift check compares with).
	a.Firewall = fake.Firewall{Rules: defaultDeny22()}
	must(t, a.State.SetBaseline(nodestate.Baseline{Firewall: flip.FoundFingerprint(defaultDeny22())}))
	return a, fl, root
}

func flipIn(id string) FlipInput {
	return FlipInput{Plan: flipPlanN1().Ref(), Spec: flipSpecN1, ID: id, ConfirmTimeout: time.Minute}
}

func record(t *testing.T, a *Activities) *nodestate.FlipRecord {
	t.Helper()
	rec, err := a.Flips.(*nodestate.Dir).Flip()
	must(t, err)
	if rec == nil {
		t.Fatal("no flip record")
	}
	return rec
}

func setRecord(t *testing.T, a *Activities, rec nodestate.FlipRecord) {
	t.Helper()
	must(t, a.Flips.UpdateFlip(func(*nodestate.FlipRecord) (*nodestate.FlipRecord, error) { return &rec, nil }))
}

// A flip interrupted while applying is reverted when its activity runs
// again, and said so, with no transaction; a reverted flip is never
// confirmed.
func TestFlipResumeAfterInterruptedApply(t *testing.T) {
	a, fl, _ := flipActs(t)
	setRecord(t, a, nodestate.FlipRecord{ID: "n1-1", Node: "n1", State: nodestate.FlipApplying, Deadline: time.Now().Add(time.Minute), Revert: []byte(`{"node":"n1"}`)})
	_, err := oneTrip(t, a, flipIn("n1-1"))
	msg := appErr(t, err, ErrFlipReverted)
	if !strings.Contains(msg, "interrupted") || len(fl.Reverts) != 1 || len(fl.Flips) != 0 {
		t.Fatalf("reverts %d, transactions %d, error %s", len(fl.Reverts), len(fl.Flips), msg)
	}
	_, err = confirmStage(context.Background(), a, "n1-1")
	appErr(t, err, ErrFlipReverted)
}

// Before the batch the record holds all a revert needs: the node's name
// (the mesh's table by name, the accepts by comment), the node files
// already in custody, the spec applied.
func TestFlipRecordBeforeBatchIsRevertible(t *testing.T) {
	plan := flipPlanN1()
	plan.NodeFiles = []config.FilePlan{{Path: "/etc/hosts", SHA256: strings.Repeat("a", 64)}}
	a, fl, root := flipActsWith(t, plan)
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc/hosts"), []byte("found\n"), 0o644))
	var seen *nodestate.FlipRecord
	fl.FlipErr = fmt.Errorf("sending the batch: %w: ENOBUFS", nft.ErrOutcomeUnknown)
	a.StartWatchdog = func() error {
		seen = record(t, a) // what the watchdog starts from
		return nil
	}
	in := flipIn("n1-1")
	in.Plan = plan.Ref()
	_, err := oneTrip(t, a, in)
	msg := appErr(t, err, ErrFlipOutcomeUnknown)
	if !strings.Contains(msg, "treated as applied") {
		t.Fatalf("error: %s", msg)
	}
	if seen == nil || seen.State != nodestate.FlipApplying || len(seen.Revert) == 0 || len(seen.Mesh) == 0 || seen.Derived == "" {
		t.Fatalf("record when the watchdog started: %+v", seen)
	}
	if _, ok, err := a.Files.Record("/etc/hosts"); !ok || err != nil {
		t.Fatalf("node file not in custody before the batch: %v", err)
	}
	// Unknown outcome: still pending, so the watchdog keeps watching.
	if rec := record(t, a); !rec.Pending() || !strings.Contains(rec.Reason, "outcome unknown") {
		t.Fatalf("after an unknown outcome the record is %+v; want pending", rec)
	}
	r, err := a.RevertFlip(context.Background(), ConfirmInput{Plan: plan.Ref(), ID: "n1-1"})
	if err != nil || r.State != nodestate.FlipReverted || len(fl.Reverts) != 1 || fl.Reverts[0].Node != "n1" {
		t.Fatalf("revert of an unknown outcome: %+v %v, reverts %+v", r, err, fl.Reverts)
	}
}

// Known not applied (stale): the record says so, the watchdog stands down,
// a revert has nothing to do and says not-applied, not reverted.
func TestFlipNotAppliedIsNotReverted(t *testing.T) {
	a, fl, _ := flipActs(t)
	fl.FlipErr = fmt.Errorf("not flipping: %w (%w)", flip.ErrStaleDerived, flip.ErrNotApplied)
	_, err := oneTrip(t, a, flipIn("n1-1"))
	appErr(t, err, ErrStalePreview)
	if rec := record(t, a); rec.State != nodestate.FlipNotApplied || rec.Pending() {
		t.Fatalf("record %+v", rec)
	}
	r, err := a.RevertFlip(context.Background(), ConfirmInput{Plan: flipPlanN1().Ref(), ID: "n1-1"})
	if err != nil || r.State != nodestate.FlipNotApplied || len(fl.Reverts) != 0 {
		t.Fatalf("revert: %+v %v, reverts %d", r, err, len(fl.Reverts))
	}
}

// Fewer echoes than rules sent: the batch is in; the apply counts it as
// applied and says so.
func TestFlipShortEchoesIsApplied(t *testing.T) {
	a, fl, _ := flipActs(t)
	fl.ShortEchoes = 1
	r, err := applyStage(context.Background(), a, flipIn("n1-1"))
	if err != nil || r.State != nodestate.FlipFlipped || !strings.Contains(r.Note, "echoed 1") {
		t.Fatalf("flip: %+v %v", r, err)
	}
	if rec := record(t, a); rec.State != nodestate.FlipFlipped {
		t.Fatalf("record %+v", rec)
	}
}

// Bad input: a flip while another is in flight, and one without the
// preview's fingerprint, are refused by type, and nothing changes.
func TestFlipRefusals(t *testing.T) {
	a, fl, _ := flipActs(t)
	setRecord(t, a, nodestate.FlipRecord{ID: "n1-1", Node: "n1", State: nodestate.FlipFlipped, Deadline: time.Now().Add(time.Minute)})
	before := record(t, a)
	_, err := oneTrip(t, a, flipIn("n1-2"))
	if msg := appErr(t, err, ErrFlipInFlight); !strings.Contains(msg, "flip n1-1 is still flipped") {
		t.Fatalf("refusal: %s", msg)
	}
	in := flipIn("n1-3")
	in.ExpectDerived = "d" // not what the node's own preview derives
	_, err = oneTrip(t, a, in)
	if msg := appErr(t, err, ErrStalePreview); !strings.Contains(msg, "names a preview that no longer holds") {
		t.Fatalf("refusal: %s", msg)
	}
	if after := record(t, a); after.ID != before.ID || after.State != before.State || len(fl.Reverts) != 0 || len(fl.Flips) != 0 {
		t.Fatalf("a refused flip changed the record: %+v", after)
	}
}

// Confirmation checks the deadline under the lock; a revert of a confirmed
// flip answers "already confirmed", by its own type, and changes nothing.
func TestConfirmDeadlineAndAlreadyConfirmed(t *testing.T) {
	a, fl, _ := flipActs(t)
	in := ConfirmInput{Plan: flipPlanN1().Ref(), ID: "n1-1"}
	setRecord(t, a, nodestate.FlipRecord{ID: "n1-1", Node: "n1", State: nodestate.FlipFlipped, Deadline: time.Now().Add(-time.Second)})
	_, err := confirmStage(context.Background(), a, "n1-1")
	appErr(t, err, ErrFlipDeadline)
	if rec := record(t, a); rec.State != nodestate.FlipFlipped {
		t.Fatalf("a late confirmation moved the record: %+v", rec)
	}
	setRecord(t, a, nodestate.FlipRecord{ID: "n1-1", Node: "n1", State: nodestate.FlipFlipped, Deadline: time.Now().Add(time.Minute)})
	if r, err := confirmStage(context.Background(), a, "n1-1"); err != nil || r.State != nodestate.FlipConfirmed {
		t.Fatalf("confirm: %+v %v", r, err)
	}
	if r, err := confirmStage(context.Background(), a, "n1-1"); err != nil || r.State != nodestate.FlipConfirmed {
		t.Fatalf("a retried confirm: %+v %v", r, err)
	}
	_, err = a.RevertFlip(context.Background(), in)
	appErr(t, err, ErrFlipConfirmed)
	if rec := record(t, a); rec.State != nodestate.FlipConfirmed || len(fl.Reverts) != 0 {
		t.Fatalf("revert of a confirmed flip changed something: %+v, reverts %d", rec, len(fl.Reverts))
	}
}

const debianNftablesConf = "#!/usr/sbin/nft -f\n\nflush ruleset\n\ntable inet filter {\n\tchain input {\n\t\ttype filter hook input priority filter;\n\t}\n}\n"
const ufwConf = "# /etc/ufw/ufw.conf\n#\n\n# Set to yes to start on boot.\nENABLED=yes\n\nLOGLEVEL=low\n"

// A confirmed flip commits: the boot files are written, the ones replaced
// taken into custody byte-exact first; a commit that fails in the flip's
// round trip leaves the flip confirmed, and the retry (adopt retry's
// CommitFlip) finishes it; a commit of a flip that is not confirmed is
// refused and changes nothing.
func TestFlipConfirmCommit(t *testing.T) {
	a, fl, root := flipActs(t)
	debianBoot(t, root, true)
	for p, c := range map[string]string{"etc/nftables.conf": debianNftablesConf, "etc/ufw/ufw.conf": ufwConf} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), []byte(c), 0o644))
	}
	in := ConfirmInput{Plan: flipPlanN1().Ref(), ID: "n1-1"}
	_, err := a.CommitFlip(context.Background(), in)
	appErr(t, err, ErrFlipNotConfirmed)
	if b, _ := os.ReadFile(filepath.Join(root, "etc/ufw/ufw.conf")); string(b) != ufwConf {
		t.Fatal("a refused commit changed ufw.conf")
	}
	fl.CommitErr = fmt.Errorf("netlink: device busy")
	if _, err := oneTrip(t, a, flipIn("n1-1")); err == nil || !strings.Contains(err.Error(), "is confirmed; its commit failed") || !strings.Contains(err.Error(), "device busy") {
		t.Fatalf("the flip with a failing commit: %v", err)
	}
	if rec := record(t, a); rec.State != nodestate.FlipConfirmed {
		t.Fatalf("a failed commit moved the record to %s", rec.State)
	}
	if _, ok, _ := a.State.Adopted(); !ok {
		t.Fatal("a failed commit marked the node converged")
	}
	fl.CommitErr = nil
	r, err := a.CommitFlip(context.Background(), in)
	if err != nil || r.Listing == "" {
		t.Fatalf("commit: %+v %v", r, err)
	}
	if b, err := os.ReadFile(r.Listing); err != nil || string(b) != "table ip filter {}" {
		t.Fatalf("saved listing: %q %v", b, err)
	}
	nft, _ := os.ReadFile(filepath.Join(root, "etc/nftables.conf"))
	if !strings.Contains(string(nft), "table inet adoption {") || !strings.Contains(string(nft), "th dport 22") || strings.Contains(string(nft), "flush ruleset") {
		t.Fatalf("boot ruleset:\n%s", nft)
	}
	ufw, _ := os.ReadFile(filepath.Join(root, "etc/ufw/ufw.conf"))
	if want := strings.Replace(ufwConf, "ENABLED=yes", "ENABLED=no", 1); string(ufw) != want {
		t.Fatalf("ufw.conf:\n%s\nwant:\n%s", ufw, want)
	}
	if _, err := a.CommitFlip(context.Background(), in); err != nil {
		t.Fatalf("a retried commit failed: %v", err)
	}
	if _, ok, _ := a.State.Adopted(); ok {
		t.Fatal("a converged node still carries the adopted marker")
	}
	// Reversible by hand: custody gives back the found bytes.
	for p, c := range map[string]string{"/etc/nftables.conf": debianNftablesConf, "/etc/ufw/ufw.conf": ufwConf} {
		must(t, a.Files.Restore(p))
		if b, _ := os.ReadFile(filepath.Join(root, p)); string(b) != c {
			t.Fatalf("%s restored from custody is not the found file: %q", p, b)
		}
	}
}

// A record with the same flip ID left by an earlier adoption (released,
// adopted again) does not pass for this flip's: the flip runs afresh.
func TestFlipIgnoresRecordOfEarlierAdoption(t *testing.T) {
	a, fl, _ := flipActs(t)
	setRecord(t, a, nodestate.FlipRecord{ID: "n1-1", Node: "n1", State: nodestate.FlipReverted, Reason: "old"})
	must(t, a.State.ClearAdopted())
	must(t, a.State.MarkAdopted(nodestate.Marker{Node: "n1", AdoptedAt: record(t, a).Updated.Add(time.Second)}))
	r, err := oneTrip(t, a, flipIn("n1-1"))
	if err != nil || r.State != nodestate.FlipCommitted || r.Preview == nil || len(fl.Flips) != 1 {
		t.Fatalf("flip after a re-adoption: %+v %v, %d transactions", r, err, len(fl.Flips))
	}
}
