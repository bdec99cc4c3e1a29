// This file tests the decision of which workflow a node serves: pinned at a
// verified start, checked before anything else, the plan given only to the
// node's own workflow and its fleet, the agent's own process always served.

package caller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/nodestate"
)

func node(t *testing.T) (Node, *nodestate.Dir) {
	t.Helper()
	d := nodestate.New(t.TempDir())
	return Node{Name: "n1", Records: d, File: d.OwnerFile()}, d
}

func as(ns, wf string) context.Context {
	return With(context.Background(), Caller{Namespace: ns, Workflow: wf})
}

// refused fails the test unless err is the non-retryable wrong-workflow
// error whose message holds every one of says.
func refused(t *testing.T, err error, says ...string) {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != ErrWrongWorkflow || !ae.NonRetryable() {
		t.Fatalf("want a non-retryable %s error, got %v", ErrWrongWorkflow, err)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal does not say %q: %v", s, err)
		}
	}
}

func TestANodeServingNoneTakesAnyWorkflow(t *testing.T) {
	n, _ := node(t)
	for _, wf := range []string{"adopt/n1", "someone-else"} {
		if err := n.Check(as("default", wf)); err != nil {
			t.Errorf("%s refused by a node that serves none: %v", wf, err)
		}
	}
	if err := (Node{Name: "n1"}).Check(as("default", "any")); err != nil {
		t.Errorf("a node keeping no records refused: %v", err)
	}
}

func TestPinnedWorkflowIsTheOnlyOneServed(t *testing.T) {
	n, d := node(t)
	if err := n.Pin(as("default", "adopt/n1")); err != nil {
		t.Fatal(err)
	}
	o, ok, err := d.Owner()
	if err != nil || !ok || o.Workflow != "adopt/n1" || o.Namespace != "default" || o.At.IsZero() {
		t.Fatalf("owner record after Pin: %+v %v %v", o, ok, err)
	}
	if err := n.Check(as("default", "adopt/n1")); err != nil {
		t.Errorf("the pinned workflow refused: %v", err)
	}
	refused(t, n.Check(as("default", "intruder")), "serves workflow adopt/n1", "intruder", "nothing was changed", d.OwnerFile())
	// The same ID in another namespace is another workflow.
	refused(t, n.Check(as("other", "adopt/n1")), "namespace default")
	// A second start racing the first loses, and the record stays.
	refused(t, n.Pin(as("default", "intruder")), "adopt/n1")
	if o2, _, _ := d.Owner(); o2 != o {
		t.Errorf("the owner record changed after a refused Pin: %+v, was %+v", o2, o)
	}
	// Pinning the same workflow again (a retried start) is served.
	if err := n.Pin(as("default", "adopt/n1")); err != nil {
		t.Errorf("the pinned workflow's second Pin: %v", err)
	}
}

func TestAnAdoptedMarkerWithoutOwnerServesNoWorkflow(t *testing.T) {
	n, d := node(t)
	if err := d.MarkAdopted(nodestate.Marker{Node: "n1", AdoptedAt: time.Now(), Workflow: "adopt/n1"}); err != nil {
		t.Fatal(err)
	}
	// Not even the workflow the marker recorded: the request could say
	// anything, and the owner it would confirm cannot be known.
	for _, c := range []context.Context{as("default", "adopt/n1"), as("elsewhere", "adopt/n1"), as("default", "adopt/n2")} {
		err := n.Check(c)
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Type() != "OwnerUnknown" || !ae.NonRetryable() || !strings.Contains(err.Error(), "adopt-worker own") {
			t.Errorf("want a non-retryable OwnerUnknown naming adopt-worker own, got %v", err)
		}
	}
}

func TestTheAgentsOwnProcessIsServedAndPinsNothing(t *testing.T) {
	n, d := node(t)
	if err := n.Pin(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := d.Owner(); ok {
		t.Error("a call outside any workflow recorded an owner")
	}
	if err := n.Pin(as("default", "adopt/n1")); err != nil {
		t.Fatal(err)
	}
	if err := n.Check(context.Background()); err != nil {
		t.Errorf("the agent's own process refused: %v", err)
	}
	if err := n.CheckPlanReader(context.Background(), "", "/etc/adoption/node.yaml", signed); err != nil {
		t.Errorf("the agent's own process refused the plan: %v", err)
	}
}

func TestThePlanGoesToTheNodesWorkflowAndItsFleetOnly(t *testing.T) {
	n, _ := node(t)
	const src = "/etc/adoption/node.yaml"
	if err := n.CheckPlanReader(as("default", "fleet/prod"), "prod", src, signed); err != nil {
		t.Errorf("the fleet the file names refused: %v", err)
	}
	unsigned := errors.New("no signed start of this node in fleet prod")
	if err := n.CheckPlanReader(as("default", "fleet/prod"), "prod", src, func() error { return unsigned }); !errors.Is(err, unsigned) {
		t.Errorf("the fleet's workflow without the operator's signed run: %v, want the check's refusal", err)
	}
	refused(t, n.CheckPlanReader(as("default", "fleet/prod"), "", src, signed), "names no fleet (authority.fleet)", "serves no workflow yet", src)
	refused(t, n.CheckPlanReader(as("default", "fleet/test"), "prod", src, signed), `names fleet "prod"`, "fleet/prod")
	if err := n.Pin(as("default", "adopt/n1")); err != nil {
		t.Fatal(err)
	}
	if err := n.CheckPlanReader(as("default", "adopt/n1"), "", src, signed); err != nil {
		t.Errorf("the node's own workflow refused the plan: %v", err)
	}
	refused(t, n.CheckPlanReader(as("default", "adopt/n2"), "", src, signed), "serves workflow adopt/n1")
}

type brokenRecords struct{ *nodestate.Dir }

func (brokenRecords) Owner() (nodestate.Owner, bool, error) {
	return nodestate.Owner{}, false, errors.New("owner record is corrupt")
}

func TestAnUnreadableRecordIsAnErrorNotAPass(t *testing.T) {
	n := Node{Name: "n1", Records: brokenRecords{}}
	err := n.Check(as("default", "adopt/n1"))
	if err == nil || !strings.Contains(err.Error(), "node n1's owner record") || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("Check with an unreadable record: %v", err)
	}
	if err := n.CheckPlanReader(as("default", "adopt/n1"), "", "f", signed); err == nil {
		t.Error("CheckPlanReader passed with an unreadable record")
	}
}

// signed is a fleet run check that passes.
func signed() error { return nil }
