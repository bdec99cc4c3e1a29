package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/containers"
	"adoption/firewall"
	"adoption/nodestate"
)

// Flipper replaces the found firewall with the mesh's own, and back.
type Flipper interface {
	Flip(spec firewall.MeshSpec, expectFound string) (*firewall.RevertPlan, error)
	Revert(p *firewall.RevertPlan) error
	Commit(p *firewall.RevertPlan) (string, error)
}

// FlipState is the node-local record of the flip, shared with the watchdog.
type FlipState interface {
	UpdateFlip(fn func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error)) error
	SaveListing(name, listing string) (string, error)
	MarkConverged(node string, at time.Time) error
}

// Error types of the flip.
const (
	ErrNotAdopted   = "NotAdopted"
	ErrStalePreview = "StalePreview"
	ErrFlipReverted = "FlipReverted"
)

// PreviewInput carries the mesh's ruleset as the workflow derives it from
// the plan and the node's progress.
type PreviewInput struct {
	Plan config.Plan       `json:"plan"`
	Spec firewall.MeshSpec `json:"spec"`
}

// Preview compares what the found firewall opens now with what the mesh's
// derived ruleset would open, port by port. It changes nothing.
func (a *Activities) Preview(ctx context.Context, in PreviewInput) (*firewall.Preview, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	if err := checkSpec(auth, in.Spec); err != nil {
		return nil, err
	}
	rs, err := a.Firewall.Ruleset()
	if err != nil {
		return nil, fmt.Errorf("list the found firewall: %w", err)
	}
	pv := firewall.PreviewFlip(rs, in.Spec)
	return &pv, nil
}

// FlipInput asks for the flip a preview approved.
type FlipInput struct {
	Plan           config.Plan       `json:"plan"`
	Spec           firewall.MeshSpec `json:"spec"`
	ExpectFound    string            `json:"expect_found"` // the preview's fingerprint of the found ruleset
	ID             string            `json:"id"`           // one per flip attempt: a retried activity resumes it
	ConfirmTimeout time.Duration     `json:"confirm_timeout"`
}

// FlipResult says where the flip stands.
type FlipResult struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	Deadline time.Time `json:"deadline"`
	Listing  string    `json:"listing,omitempty"` // where the predecessor's leftovers were saved (commit)
}

// Flip arms the watchdog, then in one netlink transaction takes the found
// firewall out of force and puts the mesh's derived ruleset in, then
// converges the node-level files. Without a confirmation by the deadline,
// the watchdog, which needs neither Temporal nor this worker, puts the
// firewall and the files back as they were.
func (a *Activities) Flip(ctx context.Context, in FlipInput) (*FlipResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	if err := checkFlipID(auth.Plan.Node, in.ID); err != nil {
		return nil, err
	}
	if err := checkSpec(auth, in.Spec); err != nil {
		return nil, err
	}
	if err := checkConfirmTimeout(auth, in.ConfirmTimeout); err != nil {
		return nil, err
	}
	if _, adopted, err := a.State.Adopted(); err != nil {
		return nil, err
	} else if !adopted {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("node %s is not adopted (no marker under state_dir): refusing to flip", in.Plan.Node), ErrNotAdopted, nil)
	}
	var resume *nodestate.FlipRecord
	paths := make([]string, 0, len(auth.Plan.NodeFiles))
	for _, f := range auth.Plan.NodeFiles {
		paths = append(paths, f.Path)
	}
	deadline := time.Now().Add(auth.Plan.ConfirmTimeout).UTC()
	err = a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur != nil && cur.ID == in.ID {
			resume = cur // a retried activity: the record says how far it got
			return nil, nil
		}
		if cur != nil && (cur.State == nodestate.FlipApplying || cur.State == nodestate.FlipFlipped || cur.State == nodestate.FlipConfirmed) {
			return nil, fmt.Errorf("flip %s is still %s on this node", cur.ID, cur.State)
		}
		return &nodestate.FlipRecord{ID: in.ID, Node: in.Plan.Node, Deadline: deadline, State: nodestate.FlipApplying, NodeFiles: paths}, nil
	})
	if err != nil {
		return nil, err
	}
	if resume != nil {
		switch resume.State {
		case nodestate.FlipFlipped:
			// The worker may have died between the flip and the node files
			// (failpoint flip-applied): converge them now (idempotent).
			for _, f := range auth.Plan.NodeFiles {
				if err := a.convergeFile(auth, f); err != nil {
					return nil, err
				}
			}
			return &FlipResult{ID: in.ID, State: resume.State, Deadline: resume.Deadline}, nil
		case nodestate.FlipConfirmed, nodestate.FlipCommitted:
			return &FlipResult{ID: in.ID, State: resume.State, Deadline: resume.Deadline}, nil
		case nodestate.FlipReverted:
			return nil, temporal.NewNonRetryableApplicationError("flip reverted: "+resume.Reason, ErrFlipReverted, nil)
		}
		// Applying: the worker died inside the flip. The batch is atomic, but
		// whether it went in is unknown: put everything back, say so.
		if err := a.revert(in.ID, "the worker was interrupted while applying the flip"); err != nil {
			return nil, err
		}
		return nil, temporal.NewNonRetryableApplicationError("flip reverted: the worker was interrupted while applying it; run the preview and the flip again", ErrFlipReverted, nil)
	}
	if err := a.StartWatchdog(); err != nil {
		_ = a.markFlip(in.ID, nodestate.FlipReverted, "the watchdog could not start: "+err.Error(), nil)
		return nil, fmt.Errorf("start the flip watchdog: %w (nothing was changed)", err)
	}
	a.Failpoints.Hit("flip-before-apply")
	heartbeat(ctx, "flip: one netlink transaction")
	plan, err := a.Flipper.Flip(in.Spec, in.ExpectFound)
	if err != nil {
		_ = a.markFlip(in.ID, nodestate.FlipReverted, "not applied: "+err.Error(), nil)
		if errors.Is(err, firewall.ErrStale) {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrStalePreview, err)
		}
		return nil, temporal.NewNonRetryableApplicationError("flip not applied: "+err.Error(), ErrFlipReverted, err)
	}
	raw, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	if err := a.markFlip(in.ID, nodestate.FlipFlipped, "", raw); err != nil {
		return nil, err
	}
	a.Failpoints.Hit("flip-applied")
	heartbeat(ctx, "flip: node files")
	for _, f := range auth.Plan.NodeFiles {
		if err := a.convergeFile(auth, f); err != nil {
			return nil, err
		}
	}
	return &FlipResult{ID: in.ID, State: nodestate.FlipFlipped, Deadline: deadline}, nil
}

// ConfirmInput names the flip to confirm, revert or commit.
type ConfirmInput struct {
	Plan config.Plan `json:"plan"`
	ID   string      `json:"id"`
}

// ConfirmFlip checks that the node still serves every declared port that
// has a health check, then confirms the flip, which stands the watchdog
// down. Reaching this activity at all proves the worker still reaches
// Temporal through the new ruleset.
func (a *Activities) ConfirmFlip(ctx context.Context, in ConfirmInput) (*FlipResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	if err := checkFlipID(auth.Plan.Node, in.ID); err != nil {
		return nil, err
	}
	for _, m := range auth.Plan.Modules {
		if m.Health == nil {
			continue
		}
		probe := containers.TCPProbe(m.Health.TCP)
		if m.Health.HTTP != "" {
			probe = containers.HTTPProbe(m.Health.HTTP)
		}
		if err := probe(ctx); err != nil {
			return nil, fmt.Errorf("module %s does not answer its health check after the flip: %w", m.Name, err)
		}
	}
	var res *FlipResult
	err = a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur == nil || cur.ID != in.ID {
			return nil, temporal.NewNonRetryableApplicationError("no flip "+in.ID+" on this node", ErrFlipReverted, nil)
		}
		switch cur.State {
		case nodestate.FlipReverted:
			return nil, temporal.NewNonRetryableApplicationError("flip reverted: "+cur.Reason, ErrFlipReverted, nil)
		case nodestate.FlipConfirmed, nodestate.FlipCommitted:
			res = &FlipResult{ID: cur.ID, State: cur.State, Deadline: cur.Deadline}
			return nil, nil
		}
		cur.State = nodestate.FlipConfirmed
		res = &FlipResult{ID: cur.ID, State: cur.State, Deadline: cur.Deadline}
		return cur, nil
	})
	return res, err
}

// RevertFlip puts the firewall and the node files back as they were just
// before the flip. Idempotent: a flip the watchdog already reverted is left.
func (a *Activities) RevertFlip(ctx context.Context, in ConfirmInput) (*FlipResult, error) {
	if _, err := a.authorize(ctx, in.Plan); err != nil {
		return nil, err
	}
	if err := checkFlipID(a.Node, in.ID); err != nil {
		return nil, err
	}
	if err := a.revert(in.ID, "the workflow did not confirm the flip in time"); err != nil {
		return nil, err
	}
	return &FlipResult{ID: in.ID, State: nodestate.FlipReverted}, nil
}

// revert is shared with the watchdog's logic: under the flip lock, a flip
// that is applying or flipped is reverted (firewall, then files).
func (a *Activities) revert(id, reason string) error {
	return a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur == nil || cur.ID != id || cur.State == nodestate.FlipReverted {
			return nil, nil
		}
		if cur.State == nodestate.FlipConfirmed || cur.State == nodestate.FlipCommitted {
			return nil, temporal.NewNonRetryableApplicationError("flip "+id+" is already "+cur.State+": not reverting it", ErrFlipReverted, nil)
		}
		if err := RevertRecord(cur, a.Flipper, a.Files); err != nil {
			return nil, err
		}
		cur.State, cur.Reason = nodestate.FlipReverted, reason
		return cur, nil
	})
}

// RevertRecord undoes a flip from its node-local record: the firewall from
// the revert plan, then every node file from custody. The watchdog calls it
// too; the caller holds the flip lock.
func RevertRecord(rec *nodestate.FlipRecord, fw interface {
	Revert(*firewall.RevertPlan) error
}, files interface{ Restore(string) error }) error {
	if len(rec.Revert) > 0 {
		var plan firewall.RevertPlan
		if err := json.Unmarshal(rec.Revert, &plan); err != nil {
			return fmt.Errorf("flip %s: revert plan unreadable: %w", rec.ID, err)
		}
		if err := fw.Revert(&plan); err != nil {
			return fmt.Errorf("flip %s: revert the firewall: %w", rec.ID, err)
		}
	}
	for _, p := range rec.NodeFiles {
		if err := files.Restore(p); err != nil {
			return fmt.Errorf("flip %s: restore %s: %w", rec.ID, p, err)
		}
	}
	return nil
}

// CommitFlip makes a confirmed flip final: the predecessor's dormant
// firewall is saved under state_dir and removed (Docker's and other tools'
// chains stay), the kept predecessor containers are pruned, and the node is
// marked converged.
func (a *Activities) CommitFlip(ctx context.Context, in ConfirmInput) (*FlipResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	// The ID names the file the predecessor's firewall is saved to.
	if err := checkFlipID(auth.Plan.Node, in.ID); err != nil {
		return nil, err
	}
	res := &FlipResult{ID: in.ID, State: nodestate.FlipCommitted}
	err = a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur == nil || cur.ID != in.ID {
			return nil, fmt.Errorf("no flip %s on this node", in.ID)
		}
		if cur.State == nodestate.FlipCommitted {
			return nil, nil
		}
		if cur.State != nodestate.FlipConfirmed {
			return nil, temporal.NewNonRetryableApplicationError("flip "+in.ID+" is "+cur.State+", not confirmed: not committing it", ErrFlipReverted, nil)
		}
		var plan firewall.RevertPlan
		if err := json.Unmarshal(cur.Revert, &plan); err != nil {
			return nil, err
		}
		saved, err := a.Flipper.Commit(&plan)
		if err != nil {
			return nil, fmt.Errorf("remove the predecessor's firewall: %w", err)
		}
		if res.Listing, err = a.Flips.SaveListing("predecessor-firewall-"+in.ID+".nft", saved); err != nil {
			return nil, err
		}
		cur.State = nodestate.FlipCommitted
		return cur, nil
	})
	if err != nil {
		return nil, err
	}
	for _, m := range auth.Plan.Modules {
		if m.Container == nil {
			continue
		}
		if err := a.Cutover.Prune(ctx, m.Container.Name); err != nil && !errors.Is(err, containers.ErrNoRollback) && !errors.Is(err, containers.ErrConflict) {
			return nil, errors.New(a.withheld(ctx, fmt.Sprintf("prune %s's predecessor", m.Name), err))
		}
	}
	if err := a.Flips.MarkConverged(auth.Plan.Node, time.Now().UTC()); err != nil {
		return nil, err
	}
	return res, nil
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

// convergeFile writes a declared file's mesh content (kept in custody
// since adoption, so a revert restores what was found). Path, content and
// mode all come from the node's own configuration (f is of auth's plan);
// the mode keeps set-id and sticky bits as written ("4755").
func (a *Activities) convergeFile(auth *Authority, f config.FilePlan) error {
	return a.convergeFileWith(auth, f, nil)
}

// convergeFileWith writes what the merge of f gives: the mesh's content
// for a file replaced whole, the per-key merge (kept keys, decisions) for
// one with keep or a format (merge.go).
func (a *Activities) convergeFileWith(auth *Authority, f config.FilePlan, decisions []FileDecision) error {
	if err := checkDeclared(auth, f.Path); err != nil {
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
			return notDeclared("mode %q of %s: %v", f.Mode, f.Path, err)
		}
		mode = m
	}
	return a.Files.Converge(f.Path, content, mode, rec.UID, rec.GID)
}
