package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/containers"
	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/nodestate"
	"adoption/unknowns"
)

// NodeReader reads the node's interfaces and forwarding switches, so the
// preview judges published ports through DNAT (firewall.Inspector has it).
// A Firewall without it previews on the ruleset alone.
type NodeReader interface {
	Node() (firewall.Node, error)
}

// Flipper replaces the found firewall with the mesh's own, and back.
type Flipper interface {
	Flip(spec flip.MeshSpec, expectFound, expectDerived string) (*flip.RevertPlan, error)
	Revert(p *flip.RevertPlan) error
	Commit(p *flip.RevertPlan) (string, error)
	// InForce checks the kernel holds the flip of p as applied, with the
	// mesh's table of fingerprint derived (flip.ErrNotInForce otherwise).
	InForce(p *flip.RevertPlan, derived string) error
	// Reassert puts the mesh's table for spec back when it is missing,
	// and reports whether it did.
	Reassert(spec flip.MeshSpec) (bool, error)
}

// FlipState is the node-local record of the flip, shared with the watchdog.
type FlipState interface {
	UpdateFlip(fn func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error)) error
	SaveListing(name, listing string) (string, error)
	// Path is the directory the listings are saved in.
	Path() string
	MarkConverged(node string, at time.Time) error
}

// Error types of the flip. The workflow decides by type what the node's
// answer means, so each names one outcome on the node.
const (
	ErrNotAdopted     = nodewire.ErrNotAdopted
	ErrStalePreview   = nodewire.ErrStalePreview
	ErrFlipReverted   = nodewire.ErrFlipReverted
	ErrFlipNotApplied = nodewire.ErrFlipNotApplied
	// ErrFlipOutcomeUnknown: the batch may be in force; the flip must be
	// treated as applied and reverted (the watchdog does at the deadline).
	ErrFlipOutcomeUnknown = "FlipOutcomeUnknown"
	ErrFlipConfirmed      = nodewire.ErrFlipConfirmed
	// ErrFlipInFlight: another flip is still in flight on this node.
	ErrFlipInFlight = "FlipInFlight"
	// ErrFlipDeadline: the confirmation came after the deadline.
	ErrFlipDeadline = "FlipDeadlinePassed"
	// ErrFlipNotConfirmed: a commit asked of a flip that is not confirmed.
	ErrFlipNotConfirmed = "FlipNotConfirmed"
	// ErrFlipNotInForce: the kernel does not hold the flip as applied (a
	// reboot inside the confirm window, a hand edit); it is not confirmed,
	// and reverting it failed: the watchdog reverts it at the deadline.
	ErrFlipNotInForce = "FlipNotInForce"
	// ErrBootPath: the commit refuses because the node's boot would not load
	// the mesh's table; the message names what to do.
	ErrBootPath = "BootPath"
)

// PreviewInput is nodewire.PreviewInput.
type PreviewInput = nodewire.PreviewInput

// Preview compares what the found firewall opens now with what the mesh's
// derived ruleset would open, port by port. It changes nothing.
func (a *Activities) Preview(ctx context.Context, in PreviewInput) (*flip.Preview, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	return a.preview(ctx, auth, in.Spec, in.Decisions)
}

// preview is the preview of one spec on this node, for the Preview
// activity and for a flip that previews on the node itself.
func (a *Activities) preview(ctx context.Context, auth *authority.Authority, spec flip.MeshSpec, decisions []FileDecision) (*flip.Preview, error) {
	if err := authority.CheckSpec(auth, spec); err != nil {
		return nil, err
	}
	// The reads are independent of each other: they overlap. The engine's
	// report is needed only once the fates are given (unknowns.Preview):
	// it is read beside the evaluation too.
	var engine containers.Report
	node, nodeErr := firewall.Node{}, ""
	var merges []FileMerge
	var mergeErr error
	var wg, files, engineRead sync.WaitGroup
	files.Add(1)
	go func() {
		defer files.Done()
		merges, mergeErr = a.nodeFileMerges(auth, decisions)
	}()
	defer files.Wait()
	engineRead.Add(1)
	go func() {
		defer engineRead.Done()
		engine = a.engineReport(ctx)
	}()
	defer engineRead.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if nr, ok := a.Firewall.(NodeReader); ok {
			var err error
			if node, err = nr.Node(); err != nil {
				node, nodeErr = firewall.Node{}, err.Error()
			}
		}
	}()
	rs, err := a.Firewall.Ruleset()
	if err != nil {
		wg.Wait()
		return nil, fmt.Errorf("list the found firewall: %w", err)
	}
	// What the flip derives does not depend on the node: it is prepared
	// while the node is read.
	prepared := flip.Prepare(rs, spec)
	wg.Wait()
	pv := prepared.On(node)
	if nodeErr != "" {
		// Without the node's interfaces a published port's fate is a
		// guess: refuse, naming why.
		pv.Approved = false
		pv.Reasons = append(pv.Reasons, "the node's interfaces and forwarding could not be read ("+nodeErr+"): published ports cannot be judged; fix that and preview again")
	}
	// What the evaluator cannot map (an unreachable engine, a container
	// network on none of the node's interfaces, a DNAT to no container)
	// refuses too, named: never a silent "kept" or "closing".
	heartbeat(ctx, "preview: containers")
	engineRead.Wait()
	if more := unknowns.Preview(rs, node, engine, auth.Plan, spec, &pv); len(more) > 0 {
		pv.Approved = false
		pv.Reasons = append(pv.Reasons, more...)
	}
	// What the commit will check of the boot path is checked now: a flip
	// the commit would refuse is never applied.
	heartbeat(ctx, "preview: the boot path")
	if why := a.previewBoot(auth, rs, &node); why != "" {
		pv.Approved = false
		pv.Reasons = append(pv.Reasons, why)
	}
	heartbeat(ctx, "preview: node files")
	files.Wait()
	a.previewNodeFiles(&pv, merges, mergeErr)
	return &pv, nil
}

// FlipInput is nodewire.FlipInput.
type FlipInput = nodewire.FlipInput

// FlipPreviewRefused is nodewire.FlipPreviewRefused.
const FlipPreviewRefused = nodewire.FlipPreviewRefused

// FlipResult is nodewire.FlipResult.
type FlipResult = nodewire.FlipResult

// flip is the apply of the flip in one round trip (fliptrip.go), once the
// request is authorized and its intent checked: it records the flip (with
// all a revert needs), arms the watchdog, then in one netlink transaction
// takes the found firewall out of force and puts the mesh's derived
// ruleset in, then converges the node-level files. Without a confirmation
// by the deadline, the watchdog, which needs neither Temporal nor this
// worker, puts the firewall and the files back. Any outcome not known to
// have changed nothing counts as applied.
func (a *Activities) flip(ctx context.Context, auth *authority.Authority, in FlipInput) (*FlipResult, error) {
	if err := a.checkDecisions(ctx, auth, in.Decisions); err != nil {
		return nil, err
	}
	if err := authority.CheckFlipID(auth.Plan.Node, in.ID); err != nil {
		return nil, err
	}
	if err := authority.CheckSpec(auth, in.Spec); err != nil {
		return nil, err
	}
	if err := authority.CheckConfirmTimeout(auth, in.ConfirmTimeout); err != nil {
		return nil, err
	}
	marker, adopted, err := a.State.Adopted()
	if err != nil {
		return nil, err
	} else if !adopted {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("node %s is not adopted (no marker under state_dir): refusing to flip", in.Plan.Node), ErrNotAdopted, nil)
	}
	pv, refused, err := a.gateFlip(ctx, auth, &in, marker)
	if err != nil || refused != nil {
		return refused, err
	}
	var resume *nodestate.FlipRecord
	paths := make([]string, 0, len(auth.Plan.NodeFiles))
	for _, f := range auth.Plan.NodeFiles {
		paths = append(paths, f.Path)
	}
	// The record keeps the spec as the flip applies it on this node's
	// firewall (its DHCP essentials decided from the found rules), so the
	// boot file and the guard write the same table. Unreadable now: the
	// flip would be refused as stale anyway.
	found, err := a.Firewall.Ruleset()
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("read the found firewall before flip %s: %v; nothing was changed", in.ID, err), ErrFlipNotApplied, nil)
	}
	mesh, err := json.Marshal(flip.EffectiveSpec(found, in.Spec))
	if err != nil {
		return nil, err
	}
	minimal, err := json.Marshal(flip.RevertPlanFor(in.Plan.Node))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(auth.Plan.ConfirmTimeout).UTC()
	err = a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		// A record of the same ID left by an earlier adoption (released,
		// then adopted again: flip IDs count from 1 again) is not this
		// flip's.
		earlier := cur != nil && !cur.Pending() && cur.Updated.Before(marker.AdoptedAt)
		if cur != nil && cur.ID == in.ID && !earlier {
			resume = cur // a retried activity: the record says how far it got
			return nil, nil
		}
		if cur.Pending() || (cur != nil && cur.State == nodestate.FlipConfirmed) {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s is still %s on this node: not starting flip %s, nothing was changed; wait until it is committed or reverted", cur.ID, cur.State, in.ID), ErrFlipInFlight, nil)
		}
		if cur != nil && cur.State == nodestate.FlipCommitted {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s is committed on this node: it is converged, nothing to flip", cur.ID), ErrFlipInFlight, nil)
		}
		// Every node file goes into custody before anything changes, so a
		// revert from this record alone can always restore it.
		for _, p := range paths {
			if _, err := a.Files.Take(p); err != nil {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("cannot take custody of %s: %v; nothing was changed", p, err), ErrBadPath, err)
			}
		}
		return &nodestate.FlipRecord{ID: in.ID, Node: in.Plan.Node, Deadline: deadline, State: nodestate.FlipApplying,
			NodeFiles: paths, Revert: minimal, Mesh: mesh, Derived: in.ExpectDerived}, nil
	})
	if err != nil {
		return nil, err
	}
	if resume != nil {
		return a.resumeFlip(auth, in, resume)
	}
	res, err := a.applyFlip(ctx, auth, in, deadline)
	if res != nil {
		res.Preview = pv
	}
	return res, err
}

// gateFlip is the node's own decision on a flip, whatever the request
// says (its Preview flag and expectations are not trusted): a retried
// attempt whose record exists resumes from that record (the ruleset it
// applied is already in force, so a preview now would only see the
// mesh's); a new flip is previewed here, in the same round trip, and
// refused unless that preview approves, every module of the local plan is
// migrated by the node's own records and no drift is pending by its own
// check. It sets the expectations to what its own preview saw, so exactly
// that ruleset is applied; a request naming other fingerprints is stale.
// A refusal changes nothing and is a result (FlipPreviewRefused) carrying
// the node's preview.
func (a *Activities) gateFlip(ctx context.Context, auth *authority.Authority, in *FlipInput, marker nodestate.Marker) (*flip.Preview, *FlipResult, error) {
	var rec *nodestate.FlipRecord
	if err := a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur != nil && cur.ID == in.ID && (cur.Pending() || !cur.Updated.Before(marker.AdoptedAt)) {
			c := *cur
			rec = &c
		}
		return nil, nil
	}); err != nil {
		return nil, nil, err
	}
	if rec != nil {
		in.ExpectDerived = rec.Derived
		return nil, nil, nil
	}
	heartbeat(ctx, "flip: preview")
	pv, err := a.preview(ctx, auth, in.Spec, in.Decisions)
	if err != nil {
		return nil, nil, err
	}
	heartbeat(ctx, "flip: the node's own gates")
	why, err := a.flipGates(ctx, auth)
	if err != nil {
		return nil, nil, err
	}
	if len(why) > 0 {
		pv.Approved = false
		pv.Reasons = append(pv.Reasons, why...)
	}
	if !pv.Approved {
		return nil, &FlipResult{ID: in.ID, State: FlipPreviewRefused, Preview: pv}, nil
	}
	if (in.ExpectFound != "" && in.ExpectFound != pv.FoundFingerprint) || (in.ExpectDerived != "" && in.ExpectDerived != pv.DerivedFingerprint) {
		return nil, nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"flip %s names a preview that no longer holds on node %s (found ruleset %.12s, now %.12s; mesh's ruleset %.12s, now %.12s): nothing was changed; preview again, then flip",
			in.ID, a.Node, in.ExpectFound, pv.FoundFingerprint, in.ExpectDerived, pv.DerivedFingerprint), ErrStalePreview, nil)
	}
	in.ExpectFound, in.ExpectDerived = pv.FoundFingerprint, pv.DerivedFingerprint
	return pv, nil, nil
}

// applyFlip is the flip once its record says applying: the watchdog, the
// one transaction, the record of its outcome, the node files.
func (a *Activities) applyFlip(ctx context.Context, auth *authority.Authority, in FlipInput, deadline time.Time) (*FlipResult, error) {
	if err := a.StartWatchdog(); err != nil {
		_ = a.markFlip(in.ID, nodestate.FlipNotApplied, "the watchdog could not start: "+err.Error(), nil)
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("start the flip watchdog: %v (nothing was changed)", err), ErrFlipNotApplied, err)
	}
	a.Failpoints.Hit("flip-before-apply")
	heartbeat(ctx, "flip: one netlink transaction")
	plan, err := a.Flipper.Flip(in.Spec, in.ExpectFound, in.ExpectDerived)
	if err != nil && errors.Is(err, flip.ErrNotApplied) {
		_ = a.markFlip(in.ID, nodestate.FlipNotApplied, "not applied: "+err.Error(), nil)
		if errors.Is(err, flip.ErrStale) || errors.Is(err, flip.ErrStaleDerived) {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrStalePreview, err)
		}
		return nil, temporal.NewNonRetryableApplicationError("flip not applied: "+err.Error(), ErrFlipNotApplied, err)
	}
	if err != nil {
		// The kernel's answer was lost: the batch may be in force. The
		// record stays applying, so the watchdog reverts it at the
		// deadline if nobody does sooner.
		_ = a.markFlip(in.ID, nodestate.FlipApplying, "outcome unknown: "+err.Error(), nil)
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s's outcome is unknown (%v): treated as applied, it must be reverted", in.ID, err), ErrFlipOutcomeUnknown, err)
	}
	// Between the batch and the record: a worker that dies here leaves the
	// record applying, which the watchdog treats as in force.
	a.Failpoints.Hit("flip-after-batch")
	raw, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	note := ""
	if plan.ShortEchoes > 0 {
		note = fmt.Sprintf("the kernel echoed %d neutralising rule(s) fewer than it applied; the revert finds them by comment", plan.ShortEchoes)
	}
	if err := a.markFlip(in.ID, nodestate.FlipFlipped, note, raw); err != nil {
		return nil, err
	}
	a.Failpoints.Hit("flip-applied")
	heartbeat(ctx, "flip: node files")
	for _, f := range auth.Plan.NodeFiles {
		if err := a.convergeFileWith(auth, f, in.Decisions); err != nil {
			return nil, err
		}
	}
	return &FlipResult{ID: in.ID, State: nodestate.FlipFlipped, Deadline: deadline, Note: note}, nil
}

// resumeFlip continues a flip whose activity ran before, from its record.
func (a *Activities) resumeFlip(auth *authority.Authority, in FlipInput, rec *nodestate.FlipRecord) (*FlipResult, error) {
	switch rec.State {
	case nodestate.FlipFlipped:
		// The worker may have died between the flip and the node files
		// (failpoint flip-applied): converge them now (idempotent).
		for _, f := range auth.Plan.NodeFiles {
			if err := a.convergeFileWith(auth, f, in.Decisions); err != nil {
				return nil, err
			}
		}
		return &FlipResult{ID: in.ID, State: rec.State, Deadline: rec.Deadline}, nil
	case nodestate.FlipConfirmed, nodestate.FlipCommitted:
		return &FlipResult{ID: in.ID, State: rec.State, Deadline: rec.Deadline}, nil
	case nodestate.FlipReverted:
		return nil, temporal.NewNonRetryableApplicationError("flip reverted: "+rec.Reason, ErrFlipReverted, nil)
	case nodestate.FlipNotApplied:
		return nil, temporal.NewNonRetryableApplicationError("flip "+rec.ID+" was not applied: "+rec.Reason, ErrFlipNotApplied, nil)
	}
	// Applying: the worker died inside the flip (or its answer was lost).
	// The batch is atomic, but whether it went in is unknown: put
	// everything back, say so.
	if _, err := a.revert(in.ID, "the worker was interrupted while applying the flip"); err != nil {
		return nil, err
	}
	return nil, temporal.NewNonRetryableApplicationError("flip reverted: the worker was interrupted while applying it; run the preview and the flip again", ErrFlipReverted, nil)
}

func (a *Activities) markFlip(id, state, reason string, revert json.RawMessage) error {
	return a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur == nil || cur.ID != id {
			return nil, fmt.Errorf("flip record %s vanished", id)
		}
		cur.State, cur.Reason = state, reason
		if revert != nil {
			cur.Revert = revert
		}
		return cur, nil
	})
}

// convergeFileWith writes what the merge of f gives: the mesh's content
// for a file replaced whole, the per-key merge (kept keys, decisions) for
// one with keep or a format (merge.go). The file is kept in custody since
// adoption, so a revert restores what was found. Path, content and mode
// all come from the node's own configuration (f is of auth's plan); the
// mode keeps set-id and sticky bits as written ("4755").
func (a *Activities) convergeFileWith(auth *authority.Authority, f config.FilePlan, decisions []FileDecision) error {
	if err := authority.CheckDeclared(auth, f.Path); err != nil {
		return err
	}
	mesh, ok := auth.Contents[f.SHA256]
	if !ok {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("no content with sha256 %.12s for %s in this worker's configuration", f.SHA256, f.Path), ErrMissingContent, nil)
	}
	content, fm, err := a.merged(f, mesh, decisions)
	if err != nil {
		return err
	}
	if len(fm.Conflicts) > 0 {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %d conflicting key(s); nothing was written", f.Path, len(fm.Conflicts)), ErrFileConflict, nil, fm.Conflicts)
	}
	rec, err := a.Files.Take(f.Path)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("cannot take custody of %s: %v", f.Path, err), ErrBadPath, nil)
	}
	mode := os.FileMode(0o644)
	if rec.Link == "" && rec.Mode != "" {
		if m, err := config.ParseMode(rec.Mode); err == nil {
			mode = m // the mode found, unless the configuration sets one
		}
	}
	if f.Mode != "" {
		m, err := config.ParseMode(f.Mode)
		if err != nil {
			return authority.NotDeclared("mode %q of %s: %v", f.Mode, f.Path, err)
		}
		mode = m
	}
	return a.Files.Converge(f.Path, content, mode, rec.UID, rec.GID)
}
