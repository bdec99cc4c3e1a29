package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/containerenv"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/containers/cutover"
	"adoption/intent"
	"adoption/nodestate"
	"adoption/sockets"
)

// Cutover is the container engine's cutover, as the activities use it.
type Cutover interface {
	Preflight(ctx context.Context, spec cutover.Spec) (*cutover.Predecessor, error)
	Create(ctx context.Context, spec cutover.Spec, pred *cutover.Predecessor) (*cutover.Carried, error)
	Swap(ctx context.Context, name string, stopTimeout time.Duration) error
	WaitHealthy(ctx context.Context, name string, probe func(context.Context) error, timeout time.Duration) error
	Rollback(ctx context.Context, name string) error
	Prune(ctx context.Context, name string) error
	PortsAnswer(ctx context.Context, hostPorts []uint16) error
}

// Error types of the cutover.
const (
	ErrBadModule      = nodewire.ErrBadModule
	ErrCutoverRefused = nodewire.ErrCutoverRefused
	ErrMissingContent = nodewire.ErrMissingContent
	ErrUnhealthy      = nodewire.ErrUnhealthy
)

// ModuleInput is nodewire.ModuleInput.
type ModuleInput = nodewire.ModuleInput

// CutoverInput is nodewire.CutoverInput.
type CutoverInput = nodewire.CutoverInput

// CutoverResult is nodewire.CutoverResult.
type CutoverResult = nodewire.CutoverResult

// CutoverPreflight checks, before anything changes, that the module can cut
// over: its files' content is on the node, its ports are free or held only
// by the predecessor it replaces, its image is present, and the predecessor
// container of that name is found and recorded (mounts, ports, networks,
// restart policy). Any refusal is non-retryable: the node is unchanged.
func (a *Activities) CutoverPreflight(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	auth, m, err := a.signedModule(ctx, in.Plan, in.Module, in.Intent, in.Decisions)
	if err != nil {
		return nil, err
	}
	if err := a.refuseControl(auth, "migrate "+m.Name); err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		if _, ok := auth.Contents[f.SHA256]; !ok {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"module %s's file %s: the worker's configuration on node %s has no content with sha256 %.12s; update the node's configuration to the one the plan was sent from and restart adopt-worker",
				m.Name, f.Path, in.Plan.Node, f.SHA256), ErrMissingContent, nil)
		}
	}
	// A key both the node and the mesh changed refuses before anything
	// changes, named by path and key.
	if _, err := a.conflictsOf(auth, m, in.Decisions); err != nil {
		return nil, err
	}
	res := &CutoverResult{Step: "preflight"}
	if err := a.portsHeldOnlyBy(ctx, m); err != nil {
		return nil, err
	}
	if m.Container == nil {
		return res, nil
	}
	sp, err := a.spec(auth, m, in.Decisions)
	if err != nil {
		return nil, err
	}
	pred, err := a.Cutover.Preflight(a.progress(ctx, "preflight"), sp)
	if vc := a.valueConflicts(m, err); vc != nil {
		return nil, vc
	}
	if err != nil {
		return nil, a.refusal(ctx, fmt.Sprintf("cutover %s: preflight", m.Name), err)
	}
	res.Predecessor = pred
	return res, nil
}

// portsHeldOnlyBy refuses a module port that something other than what
// the module takes over listens on, naming the holder and what to do: for
// a container module, its predecessor container and those it replaces;
// for a host service, its own executables (modules[].holders), so a
// predecessor's service still on the port (a resolver on 53/udp) is found
// before the module's own service fails to bind.
func (a *Activities) portsHeldOnlyBy(ctx context.Context, m config.ModulePlan) error {
	if len(m.Ports) == 0 {
		return nil
	}
	ls, err := a.Sockets.Listeners()
	if err != nil {
		return fmt.Errorf("list listening sockets: %w", err)
	}
	ls = attributePublished(ls, a.Engine.Report(ctx))
	unitPID, err := a.replacedUnitPID(ctx, m)
	if err != nil {
		return err
	}
	for _, p := range m.Ports {
		for _, l := range ls {
			if l.Port != p.Num || l.Proto != p.Proto || mayHold(m, l) || (unitPID != 0 && l.Container == "" && l.PID == unitPID) ||
				(m.ReplacesExe != "" && l.Container == "" && l.Exe == m.ReplacesExe) {
				continue
			}
			if m.Container == nil {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
					"module %s's port %s is held by %s, and the module's own service on the node would not bind it; stop that holder (the predecessor's service the module replaces), "+
						"or, if it is the module's own service, list its executable in modules[%s].holders, or change modules[%s].ports; nothing was changed",
					m.Name, p, l.Holder(), m.Name, m.Name), ErrCutoverRefused, nil)
			}
			unit := ""
			if m.HostPredecessor() != "" {
				unit = fmt.Sprintf(" nor the main process of its predecessor unit %s (pid %d)", m.HostPredecessor(), unitPID)
			}
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"module %s's port %s is held by %s, which is not its predecessor container %s nor one it replaces%s; free the port, list the container in modules[%s].container.replaces, "+
					"name the predecessor's system unit that runs it in modules[%s].replaces_unit, or change modules[%s].ports; nothing was changed",
				m.Name, p, l.Holder(), m.Container.Name, unit, m.Name, m.Name, m.Name), ErrCutoverRefused, nil)
		}
	}
	return nil
}

// replacedUnitPID is the main process of the system unit module m replaces
// (replaces_unit), which may hold its ports until the swap stops it; 0
// when m replaces none or the unit runs no process.
func (a *Activities) replacedUnitPID(ctx context.Context, m config.ModulePlan) (int, error) {
	if m.HostPredecessor() == "" {
		return 0, nil
	}
	if a.Units == nil {
		return 0, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"module %s: %s, and this agent has no service manager to hand it over with; nothing was changed", m.Name, m.HostPredecessorSetting()), ErrCutoverRefused, nil)
	}
	st, err := a.Units.Unit(ctx, m.HostPredecessor())
	if err != nil {
		return 0, fmt.Errorf("module %s: read its predecessor unit %s: %w", m.Name, m.HostPredecessor(), err)
	}
	if !st.Known {
		return 0, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"module %s: %s: the node has no such unit (systemctl list-unit-files lists them) nor, for an executable, a process of it running; fix %s, nothing was changed",
			m.Name, m.HostPredecessorSetting(), m.HostPredecessorKey()), ErrCutoverRefused, nil)
	}
	return st.MainPID, nil
}

// mayHold reports whether listener l may hold one of module m's ports at
// its cutover.
func mayHold(m config.ModulePlan, l sockets.Listener) bool {
	if m.Container != nil {
		return l.Container == m.Container.Name || slices.Contains(m.Container.Replaces, l.Container)
	}
	return l.Container == "" && l.Exe != "" && slices.Contains(m.Holders, l.Exe)
}

// CutoverCreate creates the module's container under <name>.next with the
// predecessor's mounts (data in place), the module's ports and the
// predecessor's networks. Idempotent. What the predecessor has is measured
// on the node now (preflight again), never taken from the request: a
// request naming other mounts or networks (a bind mount of /, the Docker
// socket, network=host) is refused.
func (a *Activities) CutoverCreate(ctx context.Context, in CutoverInput) (*CutoverResult, error) {
	auth, m, err := a.signedModule(ctx, in.Plan, in.Module, in.Intent, in.Decisions)
	if err != nil {
		return nil, err
	}
	if m.Container == nil {
		return nil, authority.NotDeclared("module %s declares no container", m.Name)
	}
	sp, err := a.spec(auth, m, in.Decisions)
	if err != nil {
		return nil, err
	}
	pctx := a.progress(ctx, "create")
	pred, err := a.Cutover.Preflight(pctx, sp)
	if vc := a.valueConflicts(m, err); vc != nil {
		return nil, vc
	}
	if err != nil && !errors.Is(err, cutover.ErrMigrated) {
		return nil, a.refusal(ctx, fmt.Sprintf("cutover %s: create (preflight on the node)", m.Name), err)
	}
	if d := authority.PredecessorDiff(in.Predecessor, pred); d != "" {
		return nil, authority.NotDeclared("cutover %s: the predecessor the request describes is not the one on node %s: %s", m.Name, a.Node, d)
	}
	if _, err := a.takeUnitFile(ctx, m); err != nil {
		return nil, err
	}
	carried, err := a.Cutover.Create(pctx, sp, pred)
	if vc := a.valueConflicts(m, err); vc != nil {
		return nil, vc
	}
	if err != nil {
		return nil, a.refusal(ctx, fmt.Sprintf("cutover %s: create", m.Name), err)
	}
	// From here the node has something of this cutover to undo: it is
	// recorded as migrating until its last check confirms it (gates.go).
	if err := a.markCutover(m, nodestate.CutoverMigrating, nil); err != nil {
		return nil, fmt.Errorf("record %s's cutover on the node: %w", m.Name, err)
	}
	return &CutoverResult{Step: "create", Carried: carried}, nil
}

// ConvergeFiles writes the declared files of a module with no container:
// the mesh's content, looked up on the node by the hash the plan carries,
// written atomically with the mode asked for (else the one found) and the
// owner found. What was found stays in custody for a rollback. A module
// with a container converges its files inside its swap (CutoverSwap), while
// neither its predecessor nor its new container runs; this step is still
// served for a run that asks it before the swap.
func (a *Activities) ConvergeFiles(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	auth, m, err := a.signedModule(ctx, in.Plan, in.Module, in.Intent, in.Decisions)
	if err != nil {
		return nil, err
	}
	// Every file merges cleanly, or none is written.
	fds := fileDecisions(m, in.Decisions)
	if _, err := a.conflictsOf(auth, m, fds); err != nil {
		return nil, err
	}
	files, err := a.convergeModuleFiles(ctx, auth, m, fds)
	if err != nil {
		return nil, err
	}
	// A module with neither a container nor a health check is cut over
	// once its files are: this is its last step, which confirms it.
	if m.Container == nil && m.Health == nil {
		if err := a.confirmCutover(ctx, auth, m, in.Intent); err != nil {
			return nil, err
		}
	}
	return &CutoverResult{Step: "converge files", Files: files}, nil
}

// convergeModuleFiles writes each of m's declared files and records what
// it wrote as what the node's drift check expects there from now on
// (gates.go). Idempotent: a file already converged is written the same.
// The caller has checked that every file merges cleanly.
func (a *Activities) convergeModuleFiles(ctx context.Context, auth *authority.Authority, m config.ModulePlan, fds []FileDecision) ([]string, error) {
	var files []string
	for _, f := range m.Files {
		heartbeat(ctx, "converge "+f.Path)
		if err := a.convergeFileWith(auth, f, fds); err != nil {
			return files, err
		}
		if now := a.Files.Inspect(f.Path); now.Exists && now.SHA256 != "" {
			if err := a.markCutover(m, nodestate.CutoverMigrating, map[string]string{f.Path: now.SHA256}); err != nil {
				return files, fmt.Errorf("record %s's converged file %s on the node: %w", m.Name, f.Path, err)
			}
		}
		a.Failpoints.Hit("cutover:converge-file")
		files = append(files, f.Path)
	}
	return files, nil
}

// restoreModuleFiles puts back each of m's declared files as custody holds
// it, byte for byte (a file never taken was never converged: nothing to
// restore). Idempotent: a file as found is left alone.
func (a *Activities) restoreModuleFiles(m config.ModulePlan) ([]string, error) {
	var files []string
	for _, f := range m.Files {
		if _, ok, err := a.Files.Record(f.Path); err != nil || !ok {
			continue
		}
		if err := a.Files.Restore(f.Path); err != nil {
			return files, fmt.Errorf("restore %s from custody: %w", f.Path, err)
		}
		files = append(files, f.Path)
	}
	return files, nil
}

// CutoverSwap stops the predecessor, renames it <name>.predecessor, renames
// the new container to <name> and starts it. The module's declared files
// converge in between, inside the held window: after the predecessor has
// stopped (it never serves the mesh's file) and before the new container
// starts (it starts on it). A file that would not merge refuses before the
// predecessor stops. Resumable at every sub-step, the files included.
func (a *Activities) CutoverSwap(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	auth, m, err := a.signedModule(ctx, in.Plan, in.Module, in.Intent, in.Decisions)
	if err != nil {
		return nil, err
	}
	if m.Container == nil {
		return nil, authority.NotDeclared("module %s declares no container", m.Name)
	}
	fds := fileDecisions(m, in.Decisions)
	if len(m.Files) > 0 {
		if _, err := a.conflictsOf(auth, m, fds); err != nil {
			return nil, err
		}
	}
	var holds []cutover.HoldReport
	var drained *cutover.DrainReport
	sctx := cutover.WithHoldReport(a.progress(ctx, "swap"), func(r cutover.HoldReport) { holds = append(holds, r) })
	sctx = cutover.WithDrainReport(sctx, func(r cutover.DrainReport) {
		drained = &r
		logger(ctx).Info("cutover: overlap drained the predecessor", "module", m.Name, "container", r.Container, "took", r.Took, "left", r.Left, "unread", r.Unread)
	})
	var files []string
	var windowErr error
	if len(m.Files) > 0 {
		sctx = cutover.WithWindow(sctx, func(wctx context.Context) error {
			files, windowErr = a.convergeModuleFiles(wctx, auth, m, fds)
			return windowErr
		})
	}
	if err := a.Cutover.Swap(sctx, m.Container.Name, auth.Plan.StopTimeout); err != nil {
		if windowErr != nil && errors.Is(err, windowErr) {
			return nil, windowErr // the files' own refusal, as the converge step gives it
		}
		return nil, a.refusal(ctx, fmt.Sprintf("cutover %s: swap", m.Name), err)
	}
	if err := a.markCutover(m, nodestate.CutoverMigrating, nil); err != nil {
		return nil, fmt.Errorf("record %s's cutover on the node: %w", m.Name, err)
	}
	return &CutoverResult{Step: "swap", Hold: holdSaid(ctx, m.Name, holds), Drain: drained, Files: files}, nil
}

// holdSaid is how the engine held the module's ports, for its status (the
// last hold taken says it); a hold that dropped new connections instead of
// queueing them is logged as well, never silent.
func holdSaid(ctx context.Context, module string, holds []cutover.HoldReport) *cutover.HoldReport {
	if len(holds) == 0 {
		return nil
	}
	r := holds[len(holds)-1]
	if !r.Queued {
		logger(ctx).Error("cutover: the port hold fell back to dropping new connections; clients wait for their retransmission (1 s)",
			"module", module, "container", r.Owner, "ports", r.Ports, "why", r.Dropped)
	}
	return &r
}

// CutoverWaitHealthy waits for the new container: its own healthcheck when
// it has one, otherwise the module's health (TCP connect or HTTP GET).
func (a *Activities) CutoverWaitHealthy(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	auth, m, err := a.signedModule(ctx, in.Plan, in.Module, in.Intent, nil)
	if err != nil {
		return nil, err
	}
	// This step confirms the cutover: only one the node sees under way.
	if err := a.cutoverUnderway(ctx, auth, m); err != nil {
		return nil, err
	}
	if m.Container == nil {
		return a.hostServiceHealthy(ctx, auth, m, in.Intent)
	}
	var probe func(context.Context) error
	timeout := 30 * time.Second
	if h := m.Health; h != nil {
		if h.TCP != "" {
			probe = cutover.TCPProbe(h.TCP)
		} else {
			probe = cutover.HTTPProbe(h.HTTP)
		}
		if h.Timeout > 0 {
			timeout = h.Timeout
		}
	}
	if err := a.Cutover.WaitHealthy(a.progress(ctx, "wait healthy"), m.Container.Name, probe, timeout); err != nil {
		// Not retried: the workflow rolls back at once rather than keep a
		// sick container in the predecessor's place. The container's own
		// output stays in the agent's log; no cause is attached, since the
		// cause's text would reach the history too.
		return nil, temporal.NewNonRetryableApplicationError(a.withheld(ctx, fmt.Sprintf("cutover %s: wait healthy", m.Name), err), ErrUnhealthy, nil)
	}
	// Healthy inside is not enough: every declared port must answer on the
	// node, as its clients reach it.
	var tcp []uint16
	for _, p := range m.Ports {
		if p.Proto == "tcp" {
			tcp = append(tcp, p.Num)
		}
	}
	if err := a.Cutover.PortsAnswer(ctx, tcp); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("cutover %s: ports: %v; modules[%s].ports must be published by its container (container.ports)", m.Name, err, m.Name), ErrUnhealthy, nil)
	}
	// A predecessor unit is disabled now, and only now: until the last
	// check passed a reboot had to bring it back. Before the record, so a
	// confirmed cutover never leaves it enabled; a rollback (the record
	// not written) enables it again.
	if m.HostPredecessor() != "" {
		if err := a.disableReplacedUnit(ctx, m); err != nil {
			return nil, err
		}
	}
	// The cutover's last check passed on the node: it is confirmed, and
	// from now on no rollback undoes it (gates.go).
	if err := a.confirmCutover(ctx, auth, m, in.Intent); err != nil {
		return nil, err
	}
	return &CutoverResult{Step: "healthy"}, nil
}

// CutoverRollback puts the predecessor back: the new container removed, the
// predecessor renamed back and started, the module's files restored from
// custody byte for byte. Every step is idempotent.
func (a *Activities) CutoverRollback(ctx context.Context, in ModuleInput) (*CutoverResult, error) {
	auth, m, err := a.module(ctx, in.Plan, in.Module)
	if err != nil {
		return nil, err
	}
	if _, err := a.checkUndo(ctx, auth, in.Intent, authority.ModuleIntent(m.Name)); err != nil {
		return nil, err
	}
	// Only a cutover the node has not confirmed is rolled back: once its
	// last check passed, the module is migrated, and its predecessor and
	// files as found are the way back only until then.
	if rec, err := a.confirmedCutover(m.Name); err != nil {
		return nil, err
	} else if rec != nil {
		return nil, gateRefusal(ErrCutoverConfirmed, "module %s's cutover was confirmed on node %s at %s (its last check passed): it is migrated, and a rollback would undo a finished cutover",
			m.Name, a.Node, rec.Confirmed.Format(time.RFC3339))
	}
	res := &CutoverResult{Step: "rolled back"}
	if m.Container != nil {
		var holds []cutover.HoldReport
		rctx := cutover.WithHoldReport(a.progress(ctx, "rollback"), func(r cutover.HoldReport) { holds = append(holds, r) })
		// The files as found go back in the window: the new container
		// stopped, the predecessor not yet started on them.
		var windowErr error
		if len(m.Files) > 0 || m.HostPredecessor() != "" {
			rctx = cutover.WithWindow(rctx, func(wctx context.Context) error {
				if _, windowErr = a.restoreModuleFiles(m); windowErr != nil {
					return windowErr
				}
				// The unit's file as found, before the unit starts on it.
				windowErr = a.restoreUnitFile(wctx, m)
				return windowErr
			})
		}
		if err := a.Cutover.Rollback(rctx, m.Container.Name); err != nil {
			if windowErr != nil && errors.Is(err, windowErr) {
				return nil, windowErr
			}
			return nil, errors.New(a.withheld(ctx, fmt.Sprintf("roll back %s's containers", m.Name), err))
		}
		res.Hold = holdSaid(ctx, m.Name, holds)
	}
	// Again after the containers (nothing to do when the window did it):
	// a module without a container, a cutover that never stopped its
	// predecessor, or a run that converged its files before the swap.
	files, err := a.restoreModuleFiles(m)
	if err != nil {
		return nil, err
	}
	res.Files = files
	if err := a.markCutover(m, nodestate.CutoverRolledBack, nil); err != nil {
		return nil, fmt.Errorf("record %s's rollback on the node: %w", m.Name, err)
	}
	return res, nil
}

// PruneInput is nodewire.PruneInput.
type PruneInput = nodewire.PruneInput

// Prune removes the stopped predecessor containers kept for rollback (never
// their volumes).
func (a *Activities) Prune(ctx context.Context, in PruneInput) (*CutoverResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	v, err := a.checkIntent(ctx, auth, in.Intent, []authority.Form{{Actions: []string{authority.ActPrune}, Args: authority.PruneArgs(auth.Plan)}})
	if err != nil {
		return nil, err
	}
	for _, name := range in.Modules {
		if _, ok := auth.Plan.Module(name); !ok {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused: module %q is not in node %s's configuration; nothing was pruned", name, auth.Plan.Node), ErrBadModule, nil)
		}
	}
	// A kept predecessor is a rollback's way back: only those of modules
	// the node itself counts as migrated go.
	for _, name := range in.Modules {
		m, _ := auth.Plan.Module(name)
		if rec, err := a.confirmedCutover(name); err != nil {
			return nil, err
		} else if rec == nil {
			if why := a.migratedAsShown(ctx, auth, m); why != "" || a.hasCutoverRecord(name) {
				return nil, gateRefusal(ErrNotMigrated, "module %s's cutover is not confirmed on node %s, so its predecessor is still the way back; nothing was pruned", name, a.Node)
			}
		}
	}
	res := &CutoverResult{Step: "pruned"}
	for _, name := range in.Modules {
		m, _ := auth.Plan.Module(name)
		if m.Container == nil {
			continue
		}
		if err := a.Cutover.Prune(ctx, m.Container.Name); err != nil {
			return nil, a.refusal(ctx, "prune "+name, err)
		}
		res.Files = append(res.Files, m.Container.Name+cutover.PredecessorSuffix)
	}
	a.spendIntent(ctx, auth, in.Intent, v)
	return res, nil
}

// module authorizes the request and picks the named module of the node's
// own plan.
func (a *Activities) module(ctx context.Context, p config.PlanRef, name string) (*authority.Authority, config.ModulePlan, error) {
	auth, err := a.authorize(ctx, p)
	if err != nil {
		return nil, config.ModulePlan{}, err
	}
	m, ok := auth.Plan.Module(name)
	if !ok {
		return nil, m, temporal.NewNonRetryableApplicationError(fmt.Sprintf("module %q is not in node %s's plan", name, auth.Plan.Node), ErrBadModule, nil)
	}
	return auth, m, nil
}

// signedModule is module for a cutover step: the request's intent must be
// the operator's migrate or retry of that module, and each decision it
// carries the operator's resolve.
func (a *Activities) signedModule(ctx context.Context, p config.PlanRef, name string, signed *intent.Signed, ds []FileDecision) (*authority.Authority, config.ModulePlan, error) {
	auth, m, err := a.module(ctx, p, name)
	if err != nil {
		return nil, m, err
	}
	if _, err := a.checkIntent(ctx, auth, signed, authority.ModuleIntent(m.Name)); err != nil {
		return nil, m, err
	}
	if err := a.checkDecisions(ctx, auth, ds); err != nil {
		return nil, m, err
	}
	return auth, m, nil
}

// progress heartbeats every cutover sub-step, and lets a test kill the
// worker at one (failpoint "cutover:<step>").
func (a *Activities) progress(ctx context.Context, step string) context.Context {
	heartbeat(ctx, step)
	return cutover.WithProgress(ctx, func(sub string) {
		heartbeat(ctx, sub)
		a.Failpoints.Hit("cutover:" + sub)
	})
}

// spec is the module's container for the engine, its environment
// overrides read on the node (package containerenv), with the decisions on its
// conflicting variables and labels among ds.
func (a *Activities) spec(auth *authority.Authority, m config.ModulePlan, ds []FileDecision) (cutover.Spec, error) {
	c := m.Container
	env, err := a.envs().Module(auth, m)
	if err != nil {
		return cutover.Spec{}, err
	}
	return cutover.Spec{Name: c.Name, Image: c.Image, Cmd: c.Cmd, Ports: c.Ports, Env: env, Labels: config.KeyValues(c.Labels),
		Keep: c.Keep, Takes: containerTakes(m, ds), DropPorts: c.DropPorts, Replaces: c.Replaces, Cutover: m.Cutover, Exclusive: c.Exclusive, ReplacesUnit: m.HostPredecessor()}, nil
}

// envs reads the containers' environment overrides on this node.
func (a *Activities) envs() containerenv.Node { return containerenv.Node{Name: a.Node, Root: a.Root} }

// refusal maps the engine's errors: bad input and refusals are not retried
// (nothing was changed, and nothing will change by itself); a Docker fault
// is an ordinary error and retries. A container's own output in the error
// stays in the agent's log (withheld).
func (a *Activities) refusal(ctx context.Context, what string, err error) error {
	msg := a.withheld(ctx, what, err)
	for _, e := range []error{cutover.ErrImageMissing, cutover.ErrMigrated, cutover.ErrConflict,
		cutover.ErrPortHeld, cutover.ErrUnhealthy, cutover.ErrNoRollback, cutover.ErrPortDropped, cutover.ErrBadSpec} {
		if errors.Is(err, e) {
			return temporal.NewNonRetryableApplicationError(msg, ErrCutoverRefused, nil)
		}
	}
	return errors.New(msg)
}

// hostServiceHealthy checks a module with no container (a service on the
// node itself) by its declared health, from the agent's network namespace,
// until it answers or the health's timeout passes: a module whose check
// fails is not migrated, and the workflow rolls it back.
func (a *Activities) hostServiceHealthy(ctx context.Context, auth *authority.Authority, m config.ModulePlan, signed *intent.Signed) (*CutoverResult, error) {
	h := m.Health
	if h == nil {
		return nil, authority.NotDeclared("module %s declares neither a container nor a health check", m.Name)
	}
	probe := cutover.HTTPProbe(h.HTTP)
	what := "GET " + h.HTTP
	if h.TCP != "" {
		probe, what = cutover.TCPProbe(h.TCP), "TCP connect to "+h.TCP
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		heartbeat(ctx, "wait healthy "+m.Name)
		err := probe(ctx)
		if err == nil {
			if err := a.confirmCutover(ctx, auth, m, signed); err != nil {
				return nil, err
			}
			return &CutoverResult{Step: "healthy"}, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"module %s: its health check (%s) did not pass within %s: %s; the service on the node must answer before the module is migrated",
				m.Name, what, timeout, a.withheld(ctx, "health "+m.Name, err)), ErrUnhealthy, nil)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
