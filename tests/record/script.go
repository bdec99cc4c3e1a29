package main

// script is a node agent whose answers are scripted: the recorder needs
// the workflow to meet a refusal, a failed cutover, drift and a vanished
// rule on cue. Only the workflow's side is recorded, and replay depends
// on nothing else.

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/activities/watch"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
	"adoption/witness"
)

type script struct {
	node string
	plan config.Plan
	mu   sync.Mutex
	n    map[string]int
	// failFirst: the first call of these activities fails, non-retryable.
	failFirst map[string]string
	// errFirst: the first call of these activities returns this error.
	errFirst map[string]error
	// slowFirst: the first call of these activities takes this long.
	slowFirst map[string]time.Duration
	// confirmOnly: FlipTrip confirms but leaves the commit to CommitFlip
	// (the node's commit in it failed).
	confirmOnly bool
	// confirmed is the flip FlipTrip confirmed but did not commit
	// (confirmOnly): the node refuses to revert it, as a real one does.
	confirmed string
	// refusePreview: every preview refuses (a port opened by hand).
	refusePreview bool
	// watchDriftOwner: once this owner's rules are kept, the watch finds
	// a rule of it vanished (once) and drift (until accepted).
	watchDriftOwner    string
	accepted, restored bool
	// watchBound: a watch with nothing new answers after this long, as
	// the node's does after its bound (0: only when cancelled).
	watchBound time.Duration
}

func (s *script) call(name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[name]++
	if s.n[name] == 1 {
		if d := s.slowFirst[name]; d > 0 {
			s.mu.Unlock()
			time.Sleep(d)
			s.mu.Lock()
		}
		if err := s.errFirst[name]; err != nil {
			return s.n[name], err
		}
	}
	if why, ok := s.failFirst[name]; ok && s.n[name] == 1 {
		return s.n[name], temporal.NewNonRetryableApplicationError(why, activities.ErrCutoverRefused, nil)
	}
	return s.n[name], nil
}

func (s *script) mark(owner string, p config.Port) marks.MarkedRule {
	return marks.MarkedRule{Mark: marks.Mark{Node: s.node, Owner: owner, Port: p.Num, Proto: p.Proto}, Family: "ip", Table: "filter", Chain: "INPUT"}
}

func (s *script) Plan(_ context.Context, in activities.PlanInput) (*config.Plan, error) {
	if _, err := s.call("Plan"); err != nil {
		return nil, err
	}
	return &s.plan, nil
}

func (s *script) Probe(_ context.Context, in activities.ProbeInput) (*activities.ProbeReport, error) {
	if _, err := s.call("Probe"); err != nil {
		return nil, err
	}
	return &activities.ProbeReport{Node: s.node, At: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Firewall: eval.Report{Kind: "iptables-nft"}}, nil
}

func (s *script) Adopt(_ context.Context, in activities.AdoptInput) (*activities.AdoptResult, error) {
	if _, err := s.call("Adopt"); err != nil {
		return nil, err
	}
	return &activities.AdoptResult{Firewall: "iptables-nft", FirewallFingerprint: "fp-1",
		Custody: []custody.Record{{FileState: custody.FileState{Path: "/etc/hosts", Exists: true, SHA256: "ab"}, Found: true}}}, nil
}

func (s *script) CheckFoundationPorts(_ context.Context, in activities.ProbeInput) (*activities.CheckPortsResult, error) {
	if _, err := s.call("CheckFoundationPorts"); err != nil {
		return nil, temporal.NewNonRetryableApplicationError("foundation.ports.registry 5001/tcp is held by docker-proxy (pid 4242)", activities.ErrPortCollision, nil)
	}
	return &activities.CheckPortsResult{Checked: len(s.plan.Foundation)}, nil
}

func (s *script) OpenRules(_ context.Context, in activities.RulesInput) (*activities.RulesResult, error) {
	if _, err := s.call("OpenRules"); err != nil {
		return nil, err
	}
	var r activities.RulesResult
	for _, p := range in.Ports {
		r.Added = append(r.Added, s.mark(in.Owner, p))
	}
	return &r, nil
}

func (s *script) CloseRules(_ context.Context, in activities.RulesInput) (*activities.RulesResult, error) {
	_, err := s.call("CloseRules")
	return &activities.RulesResult{}, err
}

func (s *script) AcceptDrift(_ context.Context, in activities.DriftInput) (*activities.DriftResult, error) {
	_, err := s.call("AcceptDrift")
	s.mu.Lock()
	s.accepted = true
	s.mu.Unlock()
	return &activities.DriftResult{Items: []activities.DriftItem{{Kind: "file", Path: "/etc/hosts"}}, Firewall: "fp-2"}, err
}

// Watch answers at once what the script finds new, else waits
// (heartbeating) for its bound or its cancellation.
func (s *script) Watch(ctx context.Context, in watch.Input) (*watch.Result, error) {
	if _, err := s.call("Watch"); err != nil {
		return nil, err
	}
	res := &watch.Result{Checked: true, Reconciled: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	s.mu.Lock()
	if ports, ok := in.Owners[s.watchDriftOwner]; ok && s.watchDriftOwner != "" {
		if !s.restored {
			s.restored = true
			for _, p := range ports {
				res.Restored = append(res.Restored, s.mark(s.watchDriftOwner, p))
			}
		}
		if !s.accepted {
			res.Drift = []activities.DriftItem{{Kind: "file", Path: "/etc/hosts", Recorded: "ab", Now: "cd", What: "/etc/hosts changed since adoption"}}
		}
	}
	s.mu.Unlock()
	res.Digest = res.Findings.Digest()
	if len(res.Restored) > 0 || res.Digest != in.Known {
		return res, nil
	}
	var bound <-chan time.Time
	if s.watchBound > 0 {
		bound = time.After(s.watchBound)
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-bound:
			res.Bound = true
			return res, nil
		case <-time.After(200 * time.Millisecond):
			activity.RecordHeartbeat(ctx)
		}
	}
}

func (s *script) step(name string) (*activities.CutoverResult, error) {
	if _, err := s.call(name); err != nil {
		return nil, err
	}
	return &activities.CutoverResult{Step: name}, nil
}

func (s *script) CutoverPreflight(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
	return s.step("CutoverPreflight")
}
func (s *script) CutoverCreate(_ context.Context, in activities.CutoverInput) (*activities.CutoverResult, error) {
	return s.step("CutoverCreate")
}
func (s *script) ConvergeFiles(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
	return s.step("ConvergeFiles")
}
func (s *script) CutoverSwap(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
	return s.step("CutoverSwap")
}
func (s *script) CutoverWaitHealthy(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
	return s.step("CutoverWaitHealthy")
}
func (s *script) CutoverRollback(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
	return s.step("CutoverRollback")
}
func (s *script) Prune(_ context.Context, in activities.PruneInput) (*activities.CutoverResult, error) {
	return s.step("Prune")
}

func (s *script) Preview(_ context.Context, in activities.PreviewInput) (*flip.Preview, error) {
	if _, err := s.call("Preview"); err != nil {
		return nil, err
	}
	return s.preview(), nil
}

func (s *script) preview() *flip.Preview {
	if s.refusePreview {
		return &flip.Preview{FoundFingerprint: "found-1", DerivedFingerprint: "derived-1", Reasons: []string{"9999/tcp is open on the node and not in the plan"}}
	}
	return &flip.Preview{Approved: true, FoundFingerprint: "found-1", DerivedFingerprint: "derived-1"}
}

// FlipTrip is the flip in one round trip: the node previews, applies,
// proves the way out and in, confirms and commits; a commit that fails
// (confirmOnly) leaves the flip confirmed, for the workflow to commit.
func (s *script) FlipTrip(_ context.Context, in activities.FlipTripInput) (*activities.FlipResult, error) {
	if _, err := s.call("FlipTrip"); err != nil {
		return nil, err
	}
	pv := s.preview()
	if !pv.Approved {
		return &activities.FlipResult{ID: in.ID, State: activities.FlipPreviewRefused, Preview: pv}, nil
	}
	if s.confirmOnly {
		s.mu.Lock()
		s.confirmed = in.ID
		s.mu.Unlock()
		return nil, temporal.NewNonRetryableApplicationError("flip "+in.ID+" is confirmed; its commit failed: /etc/nftables.conf is read-only", "CommitStopped", nil)
	}
	res := &activities.FlipResult{ID: in.ID, State: "committed", Deadline: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC),
		Listing: "/var/lib/adoption/flips/" + in.ID + ".rules", Preview: pv}
	if in.Witness {
		// Confirmed on the witness's answer, which the result carries.
		res.Witness = &activities.WitnessVerdict{ID: in.ID, State: activities.WitnessAnswered, Why: witnessAnswer}
	}
	return res, nil
}

// witnessAnswer is what the scripted witness says answered.
const witnessAnswer = "22/tcp on 192.0.2.1"

// scriptedWitness is the orchestrator's witness of the recorded flips: it
// answers after a pause, as the real one completes once the node's flip
// activity has read its verdict and ended.
func scriptedWitness(ctx context.Context, in witness.Input) (*witness.Result, error) {
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &witness.Result{Answered: []string{witnessAnswer}}, nil
}

func (s *script) RevertFlip(_ context.Context, in activities.ConfirmInput) (*activities.FlipResult, error) {
	_, err := s.call("RevertFlip")
	s.mu.Lock()
	confirmed := s.confirmed == in.ID
	s.mu.Unlock()
	if err == nil && confirmed {
		return nil, temporal.NewNonRetryableApplicationError("flip "+in.ID+" is already confirmed on this node: not reverting it", activities.ErrFlipConfirmed, nil)
	}
	return &activities.FlipResult{ID: in.ID, State: "reverted"}, err
}

func (s *script) CommitFlip(_ context.Context, in activities.ConfirmInput) (*activities.FlipResult, error) {
	_, err := s.call("CommitFlip")
	return &activities.FlipResult{ID: in.ID, State: "committed", Listing: "/var/lib/adoption/flips/" + in.ID + ".rules"}, err
}

func (s *script) Release(_ context.Context, in activities.ProbeInput) (*activities.ReleaseResult, error) {
	_, err := s.call("Release")
	return &activities.ReleaseResult{}, err
}

func (s *script) RaiseFoundation(_ context.Context, in activities.ProbeInput) (*activities.FoundationResult, error) {
	if _, err := s.call("RaiseFoundation"); err != nil {
		return nil, err
	}
	res := &activities.FoundationResult{Listening: s.plan.Foundation}
	for _, c := range s.plan.FoundationContainers {
		res.Raised = append(res.Raised, c.Name)
	}
	return res, nil
}

func (s *script) Rehearse(_ context.Context, in activities.ModuleInput) (*activities.Rehearsal, error) {
	if _, err := s.call("Rehearse"); err != nil {
		return nil, err
	}
	return &activities.Rehearsal{Node: s.node, Module: in.Module, Steps: []activities.RehearsalStep{{Name: "preflight"}, {Name: "swap"}}}, nil
}

func (s *script) Brief(_ context.Context, in activities.BriefInput) (*activities.NodeBriefing, error) {
	if _, err := s.call("Brief"); err != nil {
		return nil, err
	}
	return &activities.NodeBriefing{Preview: &flip.Preview{Approved: true, FoundFingerprint: "found-1", DerivedFingerprint: "derived-1"}}, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
