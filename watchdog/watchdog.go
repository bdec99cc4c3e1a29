// Package watchdog reverts a flip that nobody confirmed. It runs as a
// process of its own (adopt-worker watchdog), started just before the flip,
// and depends on neither Temporal nor the worker: if the new ruleset cut the
// node off, or the worker died, the node still goes back to exactly what it
// was before the flip, by the deadline.
package watchdog

import (
	"context"
	"fmt"
	"io"
	"time"

	"adoption/nodestate"
)

// Records is the node-local flip record.
type Records interface {
	UpdateFlip(fn func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error)) error
	Flip() (*nodestate.FlipRecord, error)
}

// Options are the watchdog's parts, passed in so tests can drive it.
type Options struct {
	Records Records
	// Revert undoes a flip from its record (activities.RevertRecord).
	Revert func(rec *nodestate.FlipRecord) error
	Poll   time.Duration
	Now    func() time.Time
	Log    io.Writer
}

// Run watches the current flip until it is confirmed, committed or
// reverted, reverting it itself once its deadline passes unconfirmed.
func Run(ctx context.Context, o Options) error {
	if o.Poll == 0 {
		o.Poll = 200 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	for {
		rec, err := o.Records.Flip()
		if err != nil {
			return err
		}
		if rec == nil {
			fmt.Fprintln(o.Log, "watchdog: no flip recorded; nothing to watch")
			return nil
		}
		switch rec.State {
		case nodestate.FlipConfirmed, nodestate.FlipCommitted, nodestate.FlipReverted:
			fmt.Fprintf(o.Log, "watchdog: flip %s is %s; standing down\n", rec.ID, rec.State)
			return nil
		}
		if !o.Now().Before(rec.Deadline) {
			return revert(o, rec.ID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Poll):
		}
	}
}

// revert takes the flip lock and reverts unless the confirmation won the
// race to it.
func revert(o Options, id string) error {
	return o.Records.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur == nil || cur.ID != id || (cur.State != nodestate.FlipApplying && cur.State != nodestate.FlipFlipped) {
			return nil, nil // confirmed (or handled) meanwhile
		}
		if err := o.Revert(cur); err != nil {
			fmt.Fprintf(o.Log, "watchdog: REVERT OF FLIP %s FAILED: %v\n", id, err)
			return nil, err
		}
		cur.State = nodestate.FlipReverted
		cur.Reason = fmt.Sprintf("not confirmed by %s: the watchdog put the firewall and the node files back as they were before the flip", cur.Deadline.Format(time.RFC3339))
		fmt.Fprintf(o.Log, "watchdog: %s\n", cur.Reason)
		return cur, nil
	})
}
