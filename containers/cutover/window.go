package cutover

// The window of a swap: the moment in which neither the predecessor nor the
// mesh's container runs. A caller that has something to change while no
// instance of the service runs (the module's declared files) passes it here;
// the engine runs it inside the held window, in the order the names imply.

import "context"

// WindowFunc runs inside the window. It must be idempotent: a resumed swap
// or rollback runs it again when Docker shows the window not yet closed.
type WindowFunc func(ctx context.Context) error

type windowKey struct{}

// WithWindow returns a context whose Swap runs fn after every predecessor
// has stopped and before the mesh's container starts (an overlap: before
// the mesh's container starts beside its predecessor, the only moment it
// does not run), and whose Rollback runs fn after the mesh's container has
// stopped and before the predecessor starts again. A Swap resumed with the
// mesh's container running, or a Rollback with the predecessor running,
// does not run it: the window has closed, and fn ran in it.
func WithWindow(ctx context.Context, fn WindowFunc) context.Context {
	return context.WithValue(ctx, windowKey{}, fn)
}

// inWindow runs the context's window function, if any, as step.
func (e *Engine) inWindow(ctx context.Context, step string) error {
	fn, _ := ctx.Value(windowKey{}).(WindowFunc)
	if fn == nil {
		return nil
	}
	return e.during(ctx, step, func() error { return fn(ctx) })
}

// RunWindow runs the context's window function, if any: what the engine
// does between one instance's stop and the other's start, for a stand-in
// of the engine (activities/fake) to do the same.
func RunWindow(ctx context.Context) error {
	if fn, _ := ctx.Value(windowKey{}).(WindowFunc); fn != nil {
		return fn(ctx)
	}
	return nil
}
