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

// GenesisInput asks for the foundation's ports to be checked and opened.
type GenesisInput struct {
	Plan config.Plan `json:"plan"`
}

// GenesisResult lists the marked rules genesis opened.
type GenesisResult struct {
	Marks []string `json:"marks"`
}

// Genesis checks the foundation's ports are free and opens them as marked rules.
func (a *Activities) Genesis(ctx context.Context, in GenesisInput) (*GenesisResult, error) {
	return nil, notImplemented("genesis (foundation port check and marked rules)", 3)
}

// ModuleInput names a module of the plan.
type ModuleInput struct {
	Plan   config.Plan `json:"plan"`
	Module string      `json:"module"`
}

// MigrateResult reports a cutover.
type MigrateResult struct {
	Step  string   `json:"step"`
	Marks []string `json:"marks"`
}

// Migrate runs a module's cutover.
func (a *Activities) Migrate(ctx context.Context, in ModuleInput) (*MigrateResult, error) {
	return nil, notImplemented("module cutover", 4)
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

// ReleaseResult lists the marked rules removed.
type ReleaseResult struct {
	Removed []string `json:"removed"`
}

// Release removes every marked rule and leaves the found firewall as found.
func (a *Activities) Release(ctx context.Context, in ProbeInput) (*ReleaseResult, error) {
	return nil, notImplemented("release (removing marked rules)", 3)
}
