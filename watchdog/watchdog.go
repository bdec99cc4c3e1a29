// Package watchdog reverts a flip that nobody confirmed. It runs as a
// process of its own (adopt-worker watchdog), started just before the flip's
// batch, re-armed by the agent before it dials Temporal and at boot by its
// own unit, and depends on neither Temporal nor the worker: if the new
// ruleset cut the node off, or the worker died, the node still goes back to
// exactly what it was before the flip, by the deadline. It works from the
// node-local flip record alone.
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
	// Exclusive, when set, makes this the one watchdog of the node: it
	// returns ok=false when another holds the node already.
	Exclusive func() (release func(), ok bool, err error)
	Poll      time.Duration
	// RetryMax caps the wait between attempts of a revert that failed.
	RetryMax time.Duration
	Now      func() time.Time
	Log      io.Writer
}

// Run watches the current flip until it is confirmed, committed or
// reverted, reverting it itself once its deadline passes unconfirmed. A
// revert that fails is tried again, for as long as it takes: a node left in
// a flip nobody confirmed is the one outcome it must not accept.
func Run(ctx context.Context, o Options) error {
	if o.Poll == 0 {
		o.Poll = 200 * time.Millisecond
	}
	if o.RetryMax == 0 {
		o.RetryMax = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Exclusive != nil {
		release, ok, err := o.Exclusive()
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintln(o.Log, "watchdog: another watchdog already watches this node; leaving it to that one")
			return nil
		}
		defer release()
	}
	failures := 0
	for {
		rec, err := o.Records.Flip()
		if err != nil {
			return err
		}
		if rec == nil {
			fmt.Fprintln(o.Log, "watchdog: no flip recorded; nothing to watch")
			return nil
		}
		if !rec.Pending() {
			fmt.Fprintf(o.Log, "watchdog: flip %s is %s; standing down\n", rec.ID, rec.State)
			return nil
		}
		wait := o.Poll
		if !o.Now().Before(rec.Deadline) {
			err := revert(o, rec.ID)
			if err == nil {
				continue // the record now says why it stands down
			}
			failures++
			wait = min(o.Poll<<min(failures, 16), o.RetryMax)
			fmt.Fprintf(o.Log, "watchdog: REVERT OF FLIP %s FAILED (attempt %d): %v; THE NODE MAY STILL RUN AN UNCONFIRMED FLIP; trying again in %s\n",
				rec.ID, failures, err, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// revert takes the flip lock and reverts unless the confirmation won the
// race to it.
func revert(o Options, id string) error {
	return o.Records.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur == nil || cur.ID != id || !cur.Pending() {
			return nil, nil // confirmed (or handled) meanwhile
		}
		if err := o.Revert(cur); err != nil {
			return nil, err
		}
		cur.State = nodestate.FlipReverted
		cur.Reason = fmt.Sprintf("not confirmed by %s: the watchdog put the firewall and the node files back as they were before the flip", cur.Deadline.Format(time.RFC3339))
		fmt.Fprintf(o.Log, "watchdog: %s\n", cur.Reason)
		return cur, nil
	})
}
