package watch

// This file holds the gate between the loop and the node's other
// activities: the loop never checks while the agent serves a request (a
// release removing the marks, a cutover converging files), so it cannot
// put back a mark a release just removed or see a cutover's files half
// written. A check that finds the gate held waits for the loop's next tick.

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// ActivityName is the Watch activity's registered name (a wire format).
const ActivityName = "Watch"

// Interceptor is the node worker's interceptor that holds the gate while
// any activity but Watch runs (worker.Options.Interceptors).
func (l *Loop) Interceptor() interceptor.WorkerInterceptor { return &gate{l: l} }

type gate struct {
	interceptor.WorkerInterceptorBase
	l *Loop
}

func (g *gate) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &gated{l: g.l}
	i.Next = next
	return i
}

type gated struct {
	interceptor.ActivityInboundInterceptorBase
	l *Loop
}

func (i *gated) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if activity.GetInfo(ctx).ActivityType.Name != ActivityName {
		i.l.serving.RLock()
		defer i.l.serving.RUnlock()
	}
	return i.Next.ExecuteActivity(ctx, in)
}
