package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"adoption/config"
)

// The activities below are the steps of later issues. Until each lands it
// fails non-retryably with a clear message, so nothing pretends to work; the
// workflow records the error and the node stays where it was.

func notImplemented(what string, issue int) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s is not implemented yet (issue %d); the node was not changed", what, issue),
		ErrNotImplementedYet, nil)
}

// ModuleInput names a module of the plan.
type ModuleInput struct {
	Plan   config.Plan `json:"plan"`
	Module string      `json:"module"`
}

// PreviewResult says which open ports a flip would close.
type PreviewResult struct {
	Approved bool     `json:"approved"`
	Reasons  []string `json:"reasons"`
}

// Preview derives the mesh's ruleset and compares it with the found one.
func (a *Activities) Preview(ctx context.Context, in ProbeInput) (*PreviewResult, error) {
	return nil, notImplemented("flip preview", 5)
}

// Flip replaces the found firewall with the mesh's own.
func (a *Activities) Flip(ctx context.Context, in ProbeInput) (*PreviewResult, error) {
	return nil, notImplemented("flip", 5)
}
