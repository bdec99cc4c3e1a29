package activities

// Unit tests of the node's own preview in the flip's round trip, and of a
// commit that fails in it.

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

// The node's own preview approves: the apply stage applies exactly the
// fingerprints that preview saw and returns it; a retried attempt resumes
// from the record without previewing again (the mesh's ruleset is in force
// by then) and without a second transaction.
func TestFlipPreviewsOnTheNode(t *testing.T) {
	a, fl, _ := flipActs(t)
	a.Firewall = fake.Firewall{Rules: defaultDeny22()}
	res, err := applyStage(context.Background(), a, selfPreviewIn("n1-1"))
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
	again, err := applyStage(context.Background(), a, selfPreviewIn("n1-1"))
	if err != nil || again.State != nodestate.FlipFlipped || again.Preview != nil || len(fl.Flips) != 1 {
		t.Fatalf("retried attempt: %+v %v, %d transactions", again, err, len(fl.Flips))
	}
}

// The node's own preview refuses (an empty ruleset opens everything, and
// the spec keeps 22/tcp only): the answer carries the preview, nothing is
// recorded, no transaction runs, whether or not the request asked for the
// preview back.
func TestFlipPreviewRefusedOnTheNode(t *testing.T) {
	a, fl, _ := flipActs(t)
	a.Firewall = fake.Firewall{}
	must(t, a.State.SetBaseline(nodestate.Baseline{Firewall: flip.FoundFingerprint(&firewall.Ruleset{})}))
	for _, asked := range []bool{true, false} {
		in := selfPreviewIn("n1-1")
		in.Preview = asked
		res, err := oneTrip(t, a, in)
		if why := refusedTrip(t, res, err); !strings.Contains(why, "would close") {
			t.Fatalf("preview asked %v: refused for %s", asked, why)
		}
	}
	if rec, err := a.Flips.(*nodestate.Dir).Flip(); err != nil || rec != nil || len(fl.Flips) != 0 {
		t.Fatalf("a refused flip left record %+v (%v) and %d transactions", rec, err, len(fl.Flips))
	}
}

// The flip's round trip confirms and commits in the same call; when its
// commit fails the flip stays confirmed, the workflow's revert is answered
// "confirmed", and the round trip run again with the same ID commits it
// with no second transaction.
func TestConfirmThenCommit(t *testing.T) {
	a, fl, root := flipActs(t)
	debianBoot(t, root, true)
	fl.CommitErr = errString("netlink: device busy")
	if _, err := oneTrip(t, a, flipIn("n1-1")); err == nil || !strings.Contains(err.Error(), "is confirmed; its commit failed") {
		t.Fatalf("the flip with a failing commit: %v", err)
	}
	if rec := record(t, a); rec.State != nodestate.FlipConfirmed {
		t.Fatalf("record after a failed commit: %s", rec.State)
	}
	_, err := a.RevertFlip(context.Background(), ConfirmInput{Plan: flipPlanN1().Ref(), ID: "n1-1"})
	appErr(t, err, ErrFlipConfirmed)
	fl.CommitErr = nil
	res, err := oneTrip(t, a, flipIn("n1-1"))
	if err != nil || res.State != nodestate.FlipCommitted || res.Listing == "" || len(fl.Flips) != 1 {
		t.Fatalf("the flip run again: %+v %v, %d transactions", res, err, len(fl.Flips))
	}
	if _, ok, _ := a.State.Adopted(); ok {
		t.Fatal("a committed flip left the node marked adopted")
	}
}

type errString string

func (e errString) Error() string { return string(e) }
