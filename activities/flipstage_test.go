package activities

// Test-only ways into the flip in one round trip (fliptrip.go): FlipTrip
// run as the worker runs it on a node that does not witness its flips,
// and two of its stages alone, for tests that check one of them: the
// apply (the node's gates and preview, the record, the transaction, the
// resume from an earlier attempt's record) and the confirmation.

import (
	"context"
	"strings"
	"testing"

	"adoption/activities/trip"
)

// oneTrip runs FlipTrip on in, not witnessed, as the worker does: in an
// activity's context, through an agent's client that acknowledges every
// heartbeat (a.Temporal is given one if it has none). No verdict is asked.
func oneTrip(t *testing.T, a *Activities, in FlipInput) (*FlipResult, error) {
	t.Helper()
	if a.Temporal == nil {
		a.Temporal = &trip.Fake{}
	}
	return runTrip(t, a, FlipTripInput{FlipInput: in})
}

// refusedTrip is the node's own preview's refusal of a flip, its reasons
// one a line; any other answer fails the test.
func refusedTrip(t *testing.T, res *FlipResult, err error) string {
	t.Helper()
	if err != nil {
		t.Fatalf("want the node's preview to refuse the flip, got: %v", err)
	}
	if res.State != FlipPreviewRefused || res.Preview == nil || res.Preview.Approved {
		t.Fatalf("want the node's preview to refuse the flip, got %+v", res)
	}
	return strings.Join(res.Preview.Reasons, "\n")
}

// applyStage is FlipTrip's apply alone, behind the same authorization:
// the node's gates and preview, then the record and the transaction, or
// the resume from the record an earlier attempt left. Nothing is proven,
// confirmed or committed: the record says flipped at best.
func applyStage(ctx context.Context, a *Activities, in FlipInput) (*FlipResult, error) {
	auth, _, err := a.authorizeFlip(ctx, in.Plan, in.Intent)
	if err != nil {
		return nil, err
	}
	return a.flip(ctx, auth, in)
}

// confirmStage is FlipTrip's confirmation of flip id alone, on the node's
// own plan: its health checks, then the deadline and the kernel's state
// under the flip lock. No proof is asked, and nothing is committed.
func confirmStage(ctx context.Context, a *Activities, id string) (*FlipResult, error) {
	auth, err := a.Local()
	if err != nil {
		return nil, err
	}
	return a.confirm(ctx, auth, id)
}
