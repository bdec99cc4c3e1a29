// This file holds the names the workflows call the node's activities by:
// methods with the signatures of activities.Activities' and of the
// agent's watch (activities/watch.Watcher), which the workflows reach
// through a nil pointer (workflow.ExecuteActivity(ctx, a.FlipTrip, in)) so
// that they link none of the machinery. Nothing registers these: the
// node's agent registers the real ones, under the same names; a test in
// package activities keeps the signatures the same.

package nodewire

import (
	"context"

	"adoption/config"
	"adoption/firewall/flipwire"
)

// onTheNode is what a stub says if anything ever calls it.
const onTheNode = "nodewire: the node's activities run in its agent (package activities), not here"

// Activities names the node's activities (activities.Activities).
type Activities struct{}

// Watcher names the agent's watch activity (activities/watch.Watcher).
type Watcher struct{}

// Watch is the agent's watch (activities/watch.Watcher.Watch).
func (*Watcher) Watch(ctx context.Context, in Input) (*Result, error) { panic(onTheNode) }

// AcceptDrift is activities.Activities.AcceptDrift.
func (*Activities) AcceptDrift(ctx context.Context, in DriftInput) (*DriftResult, error) {
	panic(onTheNode)
}

// Adopt is activities.Activities.Adopt.
func (*Activities) Adopt(ctx context.Context, in AdoptInput) (*AdoptResult, error) { panic(onTheNode) }

// Brief is activities.Activities.Brief.
func (*Activities) Brief(ctx context.Context, in BriefInput) (*NodeBriefing, error) { panic(onTheNode) }

// CheckFoundationPorts is activities.Activities.CheckFoundationPorts.
func (*Activities) CheckFoundationPorts(ctx context.Context, in ProbeInput) (*CheckPortsResult, error) {
	panic(onTheNode)
}

// CloseRules is activities.Activities.CloseRules.
func (*Activities) CloseRules(ctx context.Context, in RulesInput) (*RulesResult, error) {
	panic(onTheNode)
}

// CommitFlip is activities.Activities.CommitFlip.
func (*Activities) CommitFlip(ctx context.Context, in ConfirmInput) (*FlipResult, error) {
	panic(onTheNode)
}

// ConvergeFiles is activities.Activities.ConvergeFiles.
func (*Activities) ConvergeFiles(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	panic(onTheNode)
}

// CutoverCreate is activities.Activities.CutoverCreate.
func (*Activities) CutoverCreate(ctx context.Context, in CutoverInput) (*CutoverResult, error) {
	panic(onTheNode)
}

// CutoverPreflight is activities.Activities.CutoverPreflight.
func (*Activities) CutoverPreflight(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	panic(onTheNode)
}

// CutoverRollback is activities.Activities.CutoverRollback.
func (*Activities) CutoverRollback(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	panic(onTheNode)
}

// CutoverSwap is activities.Activities.CutoverSwap.
func (*Activities) CutoverSwap(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	panic(onTheNode)
}

// CutoverWaitHealthy is activities.Activities.CutoverWaitHealthy.
func (*Activities) CutoverWaitHealthy(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	panic(onTheNode)
}

// FlipTrip is activities.Activities.FlipTrip.
func (*Activities) FlipTrip(ctx context.Context, in FlipTripInput) (*FlipResult, error) {
	panic(onTheNode)
}

// OpenRules is activities.Activities.OpenRules.
func (*Activities) OpenRules(ctx context.Context, in RulesInput) (*RulesResult, error) {
	panic(onTheNode)
}

// Plan is activities.Activities.Plan.
func (*Activities) Plan(ctx context.Context, in PlanInput) (*config.Plan, error) { panic(onTheNode) }

// Preview is activities.Activities.Preview.
func (*Activities) Preview(ctx context.Context, in PreviewInput) (*flipwire.Preview, error) {
	panic(onTheNode)
}

// Probe is activities.Activities.Probe.
func (*Activities) Probe(ctx context.Context, in ProbeInput) (*ProbeReport, error) { panic(onTheNode) }

// Prune is activities.Activities.Prune.
func (*Activities) Prune(ctx context.Context, in PruneInput) (*CutoverResult, error) {
	panic(onTheNode)
}

// RaiseFoundation is activities.Activities.RaiseFoundation.
func (*Activities) RaiseFoundation(ctx context.Context, in ProbeInput) (*FoundationResult, error) {
	panic(onTheNode)
}

// Rehearse is activities.Activities.Rehearse.
func (*Activities) Rehearse(ctx context.Context, in ModuleInput) (*Rehearsal, error) {
	panic(onTheNode)
}

// Release is activities.Activities.Release.
func (*Activities) Release(ctx context.Context, in ProbeInput) (*ReleaseResult, error) {
	panic(onTheNode)
}

// RevertFlip is activities.Activities.RevertFlip.
func (*Activities) RevertFlip(ctx context.Context, in ConfirmInput) (*FlipResult, error) {
	panic(onTheNode)
}
