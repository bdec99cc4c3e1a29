package cutover

// The cutover's progress hook: each sub-step is announced (and heartbeated
// while it runs long) so the activity can record it and tests can stop at it.

import (
	"context"
	"time"
)

// ProgressFunc hears each cutover sub-step (the Step* names) when it begins,
// and again every second while a long one (stopping a container, waiting for
// health) runs: the activity heartbeats from it, and may arm failpoints on it.
type ProgressFunc func(step string)

type progressKey struct{}

// WithProgress returns a context whose cutover steps report to fn. It rides on
// the context, as net/http/httptrace does, so the activity's Containers
// interface needs no extra method.
func WithProgress(ctx context.Context, fn ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

func (e *Engine) step(ctx context.Context, name string) error {
	if fn, ok := ctx.Value(progressKey{}).(ProgressFunc); ok && fn != nil {
		fn(name)
	}
	if e.beforeStep != nil {
		if err := e.beforeStep(name); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// during runs fn as the sub-step step, repeating the progress call every
// second until fn returns, so that a long stop still heartbeats.
func (e *Engine) during(ctx context.Context, step string, fn func() error) error {
	if err := e.step(ctx, step); err != nil {
		return err
	}
	progress, _ := ctx.Value(progressKey{}).(ProgressFunc)
	if progress == nil {
		return fn()
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				progress(step)
			}
		}
	}()
	return fn()
}
