package activities

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/config"
)

func TestPlanActivity(t *testing.T) {
	a := &Activities{Node: "n1", Local: func() (*authority.Authority, error) {
		return &authority.Authority{Plan: config.Plan{Node: "n1", Role: "member"}, Fleet: "f1", Unsigned: true}, nil
	}}
	ctx := WithWorkflow(context.Background(), "fleet/f1")
	p, err := a.Plan(ctx, PlanInput{Node: "n1"})
	if err != nil || p.Node != "n1" {
		t.Fatalf("own plan: %+v, %v", p, err)
	}
	var ae *temporal.ApplicationError
	if _, err := a.Plan(ctx, PlanInput{Node: "n2"}); !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != ErrWrongNode {
		t.Fatalf("another node's plan: %v, want a non-retryable %s", err, ErrWrongNode)
	}
	a.Local = func() (*authority.Authority, error) { return nil, errors.New("node.name: missing") }
	if _, err := a.Plan(ctx, PlanInput{Node: "n1"}); !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != ErrBadPlan {
		t.Fatalf("a broken configuration: %v, want a non-retryable %s", err, ErrBadPlan)
	}
}
