package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/bootpath"
	"adoption/containers/cutover"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// CommitFlip makes a confirmed flip final, in steps that can each fail and
// be retried, in this order: the boot path is checked (nothing changes when
// the node's boot would not load the mesh's table and the configuration
// does not let the commit see to it); the predecessor's dormant firewall is
// saved under state_dir and removed (Docker's and other tools' chains
// stay); then the boot files are written, last: nftables.service enabled
// and its stop kept from flushing the ruleset, the predecessor's loaders
// switched off, the mesh's table written where the boot loads it, ufw
// switched off (each file replaced kept in custody first). The kept
// predecessor containers are pruned; only then is the node marked
// converged. A commit that stops says what it changed and what not; a
// retry resumes.
func (a *Activities) CommitFlip(ctx context.Context, in ConfirmInput) (*FlipResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	v, err := a.checkIntent(ctx, auth, in.Intent, authority.FlipIntent(auth.Plan, true))
	if err != nil {
		return nil, err
	}
	// The ID names the file the predecessor's firewall is saved to.
	if err := authority.CheckFlipID(auth.Plan.Node, in.ID); err != nil {
		return nil, err
	}
	res, err := a.commit(ctx, auth, in.ID)
	if err == nil {
		a.spendIntent(ctx, auth, in.Intent, v)
	}
	return res, err
}

// The commit's steps, as its errors name them.
const (
	stepFirewall = "remove the predecessor's firewall"
	stepUnits    = "set up nftables.service to load the mesh's table at boot"
	stepNftConf  = "write " + BootNftablesConf
	stepUfwConf  = "set ENABLED=no in " + BootUfwConf
)

var commitSteps = []string{stepFirewall, stepUnits, stepNftConf, stepUfwConf}

// commit is CommitFlip's work, for it and for a confirmation asked to
// commit too; the flip ID is checked already.
func (a *Activities) commit(ctx context.Context, auth *authority.Authority, id string) (*FlipResult, error) {
	res := &FlipResult{ID: id, State: nodestate.FlipCommitted}
	var failed error
	err := a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur == nil || cur.ID != id {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no flip %s recorded on this node: nothing to commit, nothing was changed", id), ErrFlipNotConfirmed, nil)
		}
		if cur.State == nodestate.FlipCommitted {
			res.Listing = cur.Listing
			return nil, nil
		}
		if cur.State != nodestate.FlipConfirmed {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s is %s on this node, not confirmed: not committing it, nothing was changed", id, cur.State), ErrFlipNotConfirmed, nil)
		}
		plan := flip.RevertPlanFor(cur.Node)
		if err := json.Unmarshal(cur.Revert, plan); err != nil {
			return nil, fmt.Errorf("flip %s: revert plan unreadable: %w", id, err)
		}
		if len(cur.CommitDone) == 0 {
			// Nothing done yet: the kernel must hold the flip as confirmed
			// (a reboot since the confirmation put the predecessor back).
			heartbeat(ctx, "commit: the flip is in force")
			nf, err := a.flipInForce(cur)
			if err != nil {
				return nil, err
			}
			if nf != nil {
				err := RevertRecord(cur, a.Flipper, a.Files)
				switch {
				case errors.Is(err, flip.ErrCommitted):
					// An earlier attempt removed the predecessor and stopped
					// before it could record so: the commit resumes after
					// that step, with the listing that attempt saved.
					cur.CommitDone = append(cur.CommitDone, stepFirewall)
					if l := filepath.Join(a.Flips.Path(), listingName(id)); fileExists(l) {
						cur.Listing = l
					}
				case err != nil:
					return nil, fmt.Errorf("not committing flip %s, nothing was changed: %v; putting the node files back failed: %w", id, nf, err)
				default:
					failed = temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip reverted: not committing flip %s, it is no longer in force: %v; the node is back on its found firewall and its node files are restored; run the preview and the flip again", id, nf), ErrFlipReverted, nil)
					cur.State, cur.Reason = nodestate.FlipReverted, "not committed: "+nf.Error()
					return cur, nil
				}
			}
		}
		heartbeat(ctx, "commit: the boot path")
		boot, err := a.checkBoot(auth, plan)
		if err != nil {
			return nil, a.commitStopped(cur, "check the boot path", err, nil)
		}
		done := map[string]bool{}
		for _, s := range cur.CommitDone {
			done[s] = true
		}
		var changes []string
		step := func(name string, run func() error) bool {
			if failed != nil || done[name] {
				return false
			}
			if err := run(); err != nil {
				failed = a.commitStopped(cur, name, err, changes)
				return false
			}
			cur.CommitDone = append(cur.CommitDone, name)
			return true
		}
		if len(cur.CommitDone) > 0 && !done[stepUfwConf] {
			// Resumed after the predecessor is gone: whatever emptied the
			// ruleset since (a flush, a reboot before the boot files were
			// written) must not leave the node unfiltered until the next boot.
			if spec, err := bootpath.RecordSpec(cur); err == nil {
				if did, err := a.Flipper.Reassert(spec); err != nil {
					failed = a.commitStopped(cur, "put the mesh's table back", err, changes)
				} else if did {
					changes = append(changes, "put table inet adoption back (it was gone)")
				}
			}
		}
		step(stepFirewall, func() error {
			heartbeat(ctx, "commit: remove the predecessor's firewall")
			saved, err := a.Flipper.Commit(plan)
			if err != nil {
				return err
			}
			if cur.Listing, err = a.Flips.SaveListing(listingName(id), saved); err != nil {
				return fmt.Errorf("the predecessor's firewall is removed, but its listing could not be saved: %w", err)
			}
			changes = append(changes, "removed the predecessor's firewall (saved to "+cur.Listing+")")
			return nil
		})
		a.Failpoints.Hit("commit-firewall-removed")
		step(stepUnits, func() error {
			heartbeat(ctx, "commit: nftables.service")
			return a.applyBootUnits(boot, func(c string) { changes = append(changes, c) })
		})
		step(stepNftConf, func() error {
			heartbeat(ctx, "commit: boot-time ruleset")
			notes, err := a.writeBootRuleset(cur, plan)
			if err != nil {
				return err
			}
			res.Note = strings.Join(notes, "; ")
			changes = append(changes, "wrote "+BootNftablesConf+" (the found file in custody)")
			return nil
		})
		a.Failpoints.Hit("commit-persisted")
		step(stepUfwConf, func() error {
			changed, err := a.disableUfw()
			if changed {
				changes = append(changes, "set ENABLED=no in "+BootUfwConf+" (the found file in custody)")
			}
			return err
		})
		if failed != nil {
			return cur, nil // what was done is recorded, so a retry resumes
		}
		res.Listing = cur.Listing
		cur.State = nodestate.FlipCommitted
		return cur, nil
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		return nil, err
	}
	for _, m := range auth.Plan.Modules {
		if m.Container == nil {
			continue
		}
		heartbeat(ctx, "commit: prune "+m.Name+"'s predecessor")
		if err := a.Cutover.Prune(ctx, m.Container.Name); err != nil && !errors.Is(err, cutover.ErrNoRollback) && !errors.Is(err, cutover.ErrConflict) {
			return nil, errors.New(a.withheld(ctx, fmt.Sprintf("prune %s's predecessor", m.Name), err))
		}
	}
	if err := a.Flips.MarkConverged(auth.Plan.Node, time.Now().UTC()); err != nil {
		return nil, err
	}
	return res, nil
}

// commitStopped is the error of a commit that stopped at step: what this
// call and earlier ones changed, what is left, and that a retry resumes.
// Never "nothing was changed" unless nothing was. A refusal of the boot
// path keeps its type (ErrBootPath), so the workflow shows it as given.
func (a *Activities) commitStopped(rec *nodestate.FlipRecord, step string, err error, changes []string) error {
	var left []string
	done := map[string]bool{}
	for _, s := range rec.CommitDone {
		done[s] = true
	}
	for _, s := range commitSteps {
		if !done[s] {
			left = append(left, s)
		}
	}
	var ae *temporal.ApplicationError
	why := err.Error()
	if errors.As(err, &ae) {
		why = ae.Message()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "flip %s's commit stopped at %q: %s. ", rec.ID, step, why)
	switch {
	case len(rec.CommitDone) == 0 && len(changes) == 0:
		b.WriteString("Nothing was changed. ")
	default:
		if len(rec.CommitDone) > 0 {
			fmt.Fprintf(&b, "Steps done: %s. ", strings.Join(rec.CommitDone, "; "))
		}
		if len(changes) > 0 {
			fmt.Fprintf(&b, "Changed by this attempt: %s. ", strings.Join(changes, "; "))
		}
	}
	fmt.Fprintf(&b, "Not done: %s. The flip stays confirmed and in force; fix the cause, then adopt retry %s: the commit resumes there.", strings.Join(left, "; "), rec.Node)
	if ae != nil && ae.NonRetryable() {
		return temporal.NewNonRetryableApplicationError(b.String(), ae.Type(), nil)
	}
	return errors.New(b.String())
}

// listingName is the file under state_dir the predecessor's firewall is
// saved in when flip id's commit removes it.
func listingName(id string) string { return "predecessor-firewall-" + id + ".nft" }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
