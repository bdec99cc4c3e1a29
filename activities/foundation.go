// Genesis raises the foundation's containers on the control node
// (foundation.containers) through the cutover's own machinery, as new
// containers in the node's engine: none is taken over. A failure rolls
// back what this attempt raised and names the step; a retry raises again.
package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/containers/cutover"
)

// ErrGenesis is nodewire.ErrGenesis.
const ErrGenesis = nodewire.ErrGenesis

// FoundationResult is nodewire.FoundationResult.
type FoundationResult = nodewire.FoundationResult

// foundationHealthTimeout bounds how long a raised container has to become
// healthy (its Docker healthcheck, else running) and answer on its ports.
const foundationHealthTimeout = 60 * time.Second

// RaiseFoundation creates, starts and health-checks every foundation
// container, in the order configured, after CheckFoundationPorts found
// their ports free. A container already the mesh's (an earlier genesis)
// is kept; one of the same name that is not the mesh's refuses, since
// genesis takes nothing over. Then it lists which foundation ports answer.
func (a *Activities) RaiseFoundation(ctx context.Context, in ProbeInput) (*FoundationResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	if _, err := a.checkIntent(ctx, auth, in.Intent, authority.StartIntent()); err != nil {
		return nil, err
	}
	if auth.Plan.Role != "control" {
		return nil, authority.NotDeclared("node %s is a %s: only the control node raises the foundation", auth.Plan.Node, auth.Plan.Role)
	}
	res := &FoundationResult{}
	var raised []string // this attempt's, rolled back on a failure
	fail := func(i int, step string, err error) error {
		c := auth.Plan.FoundationContainers[i]
		for j := len(raised) - 1; j >= 0; j-- {
			if rerr := a.Cutover.Rollback(a.progress(ctx, "genesis rollback"), raised[j]); rerr != nil {
				return fmt.Errorf("%s; rolling back %s failed too (retried with the step): %s", a.withheld(ctx, "genesis "+step, err), raised[j], a.withheld(ctx, "genesis rollback", rerr))
			}
		}
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"genesis: foundation.containers[%d] (%s): %s failed: %s; what this genesis raised was removed (%d container(s)); fix it, then: adopt retry %s",
			i, c.Name, step, a.withheld(ctx, "genesis "+c.Name, err), len(raised), auth.Plan.Node), ErrGenesis, nil)
	}
	for i, c := range auth.Plan.FoundationContainers {
		key := fmt.Sprintf("foundation.containers[%d]", i)
		env, err := a.envs().Container(auth, &c, key)
		if err != nil {
			return nil, fail(i, "read its environment", err)
		}
		sp := cutover.Spec{Name: c.Name, Image: c.Image, Cmd: c.Cmd, Ports: c.Ports, Env: env, Labels: config.KeyValues(c.Labels)}
		pctx := a.progress(ctx, "genesis "+c.Name)
		pred, err := a.Cutover.Preflight(pctx, sp)
		switch {
		case errors.Is(err, cutover.ErrMigrated) && pred == nil:
			res.Raised = append(res.Raised, c.Name) // raised by an earlier genesis
			continue
		case err != nil:
			return nil, fail(i, "preflight", err)
		case pred != nil:
			return nil, fail(i, "preflight", fmt.Errorf("container %s (%.12s) of that name is already on the node and not the mesh's: genesis raises new containers and takes none over; "+
				"give %s.name a name of its own", pred.Name, pred.ID, key))
		}
		raised = append(raised, c.Name)
		if _, err := a.Cutover.Create(pctx, sp, nil); err != nil {
			return nil, fail(i, "create", err)
		}
		if err := a.Cutover.Swap(pctx, c.Name, auth.Plan.StopTimeout); err != nil {
			return nil, fail(i, "start", err)
		}
		if err := a.Cutover.WaitHealthy(pctx, c.Name, nil, foundationHealthTimeout); err != nil {
			return nil, fail(i, "wait healthy", err)
		}
		var tcp []uint16
		for h := range c.Ports {
			if p, ok := config.HostPort(h); ok && p.Proto == "tcp" {
				tcp = append(tcp, p.Num)
			}
		}
		if err := a.Cutover.PortsAnswer(pctx, tcp); err != nil {
			return nil, fail(i, "ports answer", err)
		}
		res.Raised = append(res.Raised, c.Name)
	}
	ls, err := a.Sockets.Listeners()
	if err != nil {
		return nil, fmt.Errorf("list listening sockets: %w", err)
	}
	ls = attributePublished(ls, a.Engine.Report(ctx))
	for _, fp := range auth.Plan.Foundation {
		if holders(ls, fp.Port) != "" {
			res.Listening = append(res.Listening, fp)
		} else {
			res.Silent = append(res.Silent, fp)
		}
	}
	return res, nil
}
