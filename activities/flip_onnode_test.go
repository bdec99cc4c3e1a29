package activities

// Unit tests of the flip in two round trips: the node previews and flips
// in one activity, then confirms and commits in one.

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"adoption/activities/fake"
	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// defaultDeny22 is a found firewall that keeps 22/tcp open and nothing
// else, so that flipSpecN1's preview approves.
func defaultDeny22() *firewall.Ruleset {
	accept := func(conds ...firewall.Cond) firewall.Rule {
		return firewall.Rule{Conds: conds, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}
	}
	return &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "filter", Chains: []firewall.Chain{{
		Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter",
		Rules: []firewall.Rule{accept(firewall.Cond{Kind: firewall.CondL4Proto, Protos: []int{unix.IPPROTO_TCP}},
			firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 22, To: 22}}})},
	}, {Name: "forward", Hook: firewall.HookForward, Policy: "drop", Type: "filter"}}}}}
}

func selfPreviewIn(id string) FlipInput {
	return FlipInput{Plan: flipPlanN1().Ref(), Spec: flipSpecN1, ID: id, ConfirmTimeout: time.Minute, Preview: true}
}

// The node's own preview approves: the flip applies exactly the
// fingerprints that preview saw and returns it; a retried attempt resumes
// from the record without previewing again (the mesh's ruleset is in force
// by then) and without a second transaction.
func TestFlipPreviewsOnTheNode(t *testing.T) {
	a, fl, _ := flipActs(t)
	a.Firewall = fake.Firewall{Rules: defaultDeny22()}
	res, err := a.Flip(context.Background(), selfPreviewIn("n1-1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.State != nodestate.FlipFlipped || res.Preview == nil || !res.Preview.Approved {
		t.Fatalf("flip: %+v", res)
	}
	pv := res.Preview
	if len(fl.Flips) != 1 || fl.Flips[0] != [2]string{pv.FoundFingerprint, pv.DerivedFingerprint} || pv.DerivedFingerprint == "" {
		t.Fatalf("the transaction expected %q, the preview saw %s / %s", fl.Flips, pv.FoundFingerprint, pv.DerivedFingerprint)
	}
	if rec := record(t, a); rec.Derived != pv.DerivedFingerprint || rec.State != nodestate.FlipFlipped {
		t.Fatalf("record: %+v", rec)
	}
	again, err := a.Flip(context.Background(), selfPreviewIn("n1-1"))
	if err != nil || again.State != nodestate.FlipFlipped || again.Preview != nil || len(fl.Flips) != 1 {
		t.Fatalf("retried attempt: %+v %v, %d transactions", again, err, len(fl.Flips))
	}
}

// The node's own preview refuses (an empty ruleset opens everything, and
// the spec keeps 22/tcp only): the answer carries the preview, nothing is
// recorded, no transaction runs. Asking for a preview while carrying
// expectations is refused as stale, and changes nothing either.
func TestFlipPreviewRefusedOnTheNode(t *testing.T) {
	a, fl, _ := flipActs(t)
	a.Firewall = fake.Firewall{}
	must(t, a.State.SetBaseline(nodestate.Baseline{Firewall: flip.FoundFingerprint(&firewall.Ruleset{})}))
	res, err := a.Flip(context.Background(), selfPreviewIn("n1-1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.State != FlipPreviewRefused || res.Preview == nil || res.Preview.Approved || !strings.Contains(strings.Join(res.Preview.Reasons, "\n"), "would close") {
		t.Fatalf("flip: %+v", res)
	}
	// Without asking for the preview back, the node's preview still runs
	// and refuses: an error this time, by its own type.
	in := selfPreviewIn("n1-2")
	in.Preview = false
	_, err = a.Flip(context.Background(), in)
	if msg := appErr(t, err, ErrFlipRefused); !strings.Contains(msg, "would close") {
		t.Fatalf("refusal: %s", msg)
	}
	if rec, err := a.Flips.(*nodestate.Dir).Flip(); err != nil || rec != nil || len(fl.Flips) != 0 {
		t.Fatalf("a refused flip left record %+v (%v) and %d transactions", rec, err, len(fl.Flips))
	}
}

// A confirmation asked to commit too converges the node in the same call;
// when its commit part fails the flip stays confirmed, and the workflow's
// revert is answered "confirmed" so that it commits again.
func TestConfirmThenCommit(t *testing.T) {
	a, fl, root := flipActs(t)
	debianBoot(t, root, true)
	if _, err := a.Flip(context.Background(), flipIn("n1-1")); err != nil {
		t.Fatal(err)
	}
	in := ConfirmInput{Plan: flipPlanN1().Ref(), ID: "n1-1", Commit: true}
	fl.CommitErr = errString("netlink: device busy")
	if _, err := a.ConfirmFlip(context.Background(), in); err == nil || !strings.Contains(err.Error(), "is confirmed; its commit failed") {
		t.Fatalf("confirm with a failing commit: %v", err)
	}
	if rec := record(t, a); rec.State != nodestate.FlipConfirmed {
		t.Fatalf("record after a failed commit: %s", rec.State)
	}
	_, err := a.RevertFlip(context.Background(), ConfirmInput{Plan: flipPlanN1().Ref(), ID: "n1-1"})
	appErr(t, err, ErrFlipConfirmed)
	fl.CommitErr = nil
	res, err := a.ConfirmFlip(context.Background(), in)
	if err != nil || res.State != nodestate.FlipCommitted || res.Listing == "" {
		t.Fatalf("confirm and commit: %+v %v", res, err)
	}
	if _, ok, _ := a.State.Adopted(); ok {
		t.Fatal("a committed flip left the node marked adopted")
	}
}

type errString string

func (e errString) Error() string { return string(e) }
