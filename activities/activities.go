// Package activities is the only bridge from the workflows to the node's
// parts. Every activity runs on the node's own task queue, receives the plan
// in its input and serves it only if it is the plan the node's own
// configuration derives (authorize.go), and returns metadata only: file
// contents stay on the node.
package activities

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/activities/trip"
	"adoption/containers"
	"adoption/custody"
	"adoption/failpoint"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/nodestate"
	"adoption/sockets"
	"adoption/units"
	"adoption/unknowns"
)

// The node's parts, as the activities need them. Each is small so a unit
// test can replace it; the worker passes the real ones.
type (
	Firewall interface {
		Inspect(ctx context.Context) (eval.Report, error)
		Ruleset() (*firewall.Ruleset, error)
	}
	Containers interface {
		Report(ctx context.Context) containers.Report
	}
	Sockets interface {
		Listeners() ([]sockets.Listener, error)
		FindProcesses(names []string) []sockets.Process
	}
	Custody interface {
		Inspect(path string) custody.FileState
		Take(path string) (custody.Record, error)
		Record(path string) (custody.Record, bool, error)
		Converge(path string, content []byte, mode os.FileMode, uid, gid int) error
		Restore(path string) error
		// Link makes a path taken into custody a symlink (a unit's
		// enablement); Remove takes away what is at one. Restore undoes
		// either.
		Link(path, target string) error
		Remove(path string) error
		Retake(path string) (custody.Record, error)
		// Blob is a custody copy's bytes, for node-local use only.
		Blob(sum string) ([]byte, error)
	}
	// Markers are the node's own records under state_dir, which the
	// gates read (gates.go): the adopted marker, each module's cutover,
	// the found firewall's baseline fingerprint.
	Markers interface {
		MarkAdopted(nodestate.Marker) error
		Adopted() (nodestate.Marker, bool, error)
		ClearAdopted() error
		Converged() (bool, error)
		Cutovers() (map[string]nodestate.CutoverRecord, error)
		UpdateCutover(module string, fn func(cur *nodestate.CutoverRecord) (*nodestate.CutoverRecord, error)) error
		Baseline() (nodestate.Baseline, bool, error)
		SetBaseline(nodestate.Baseline) error
		// Owner is the workflow the node serves (served.go).
		Owner() (nodestate.Owner, bool, error)
		SetOwner(nodestate.Owner) (nodestate.Owner, error)
		ClearOwner() error
		// Opened are the owners the node placed marks for itself
		// (firewall.go): a reconcile puts back only theirs.
		Opened() (map[string]time.Time, error)
		RecordOpened(owner string) error
		ForgetOpened(owner string) error
	}
)

// Activities holds one node's parts.
type Activities struct {
	Node     string // node.name of the worker's own config
	Firewall Firewall
	Marks    Marks
	Engine   Containers
	Cutover  Cutover
	Flipper  Flipper
	Flips    FlipState
	// StartWatchdog starts the flip's watchdog as a process of its own, so
	// it outlives this worker and needs no Temporal to revert.
	StartWatchdog func() error
	Sockets       Sockets
	// Units is the node's service manager: a module's predecessor that
	// is a system unit (replaces_unit) is checked, and disabled once the
	// cutover is confirmed, through it. nil: such a module is refused.
	Units      units.Manager
	Files      Custody
	State      Markers
	Failpoints failpoint.Set
	// Local reads the node's own configuration: the plan every request
	// must carry, the declared files' content by sha256 (the plan carries
	// only the hashes) and the limits. Read at every request, so an edit
	// of the file applies at the next retry.
	Local func() (*authority.Authority, error)
	// Root is node.root: a module's env_file is read under it.
	Root string
	// Temporal is the agent's own client: the flip in one round trip
	// proves through it that the node still reaches Temporal, and reads
	// the witness's verdict (fliptrip.go).
	Temporal TripClient
	// Converter decodes the witness's verdict heartbeat from the node's
	// workflow (the client's data converter); nil: the verdict is only
	// asked of the workflow by query, as agents did before.
	Converter converter.DataConverter
}

// Error types: the workflow tells by type what is the operator's to fix.
const (
	ErrWrongNode      = nodewire.ErrWrongNode
	ErrControlRunning = nodewire.ErrControlRunning
	ErrUnsupportedFW  = nodewire.ErrUnsupportedFW
	ErrMeshFirewall   = "MeshFirewallFound"
	ErrBadPath        = nodewire.ErrBadPath
)

// ProbeInput is nodewire.ProbeInput.
type ProbeInput = nodewire.ProbeInput

// ProbeReport is nodewire.ProbeReport.
type ProbeReport = nodewire.ProbeReport

// Probe looks at the node and changes nothing.
func (a *Activities) Probe(ctx context.Context, in ProbeInput) (*ProbeReport, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	heartbeat(ctx, "firewall")
	a.Failpoints.Hit("probe")
	r := &ProbeReport{Node: in.Plan.Node, At: time.Now().UTC()}
	// The reads are independent of each other: they overlap.
	var ls []sockets.Listener
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		fw, err := a.Firewall.Inspect(ctx)
		if err != nil {
			fw.Error = err.Error()
		}
		r.Firewall = fw
	}()
	go func() {
		defer wg.Done()
		r.Containers = a.engineReport(ctx)
	}()
	go func() {
		defer wg.Done()
		var err error
		if ls, err = a.Sockets.Listeners(); err != nil {
			r.SocketsError = err.Error()
		}
	}()
	for _, p := range auth.Plan.DeclaredPaths() {
		r.Files = append(r.Files, a.Files.Inspect(p).Public())
	}
	r.Control = a.Sockets.FindProcesses(auth.Plan.Control)
	wg.Wait()
	heartbeat(ctx, "read")
	if r.SocketsError == "" {
		r.Sockets = attributePublished(ls, r.Containers)
	}
	_, r.Adopted, _ = a.State.Adopted()
	r.Unknowns = unknowns.Probe(r.Firewall, r.Containers, auth.Plan)
	r.Behind = unknowns.Behind(r.Firewall.Open, r.Containers)
	return r, nil
}

// engineReport is the engine's report; an agent without an engine says so
// instead of reporting no containers.
func (a *Activities) engineReport(ctx context.Context) containers.Report {
	if a.Engine == nil {
		return containers.Report{Error: "this agent has no Docker engine configured"}
	}
	return a.Engine.Report(ctx)
}

// attributePublished names the container behind a port it publishes: the
// socket itself is held by Docker's proxy or by nothing (pure DNAT).
func attributePublished(ls []sockets.Listener, cr containers.Report) []sockets.Listener {
	for _, c := range cr.Containers {
		if c.State != "running" {
			continue
		}
		for _, p := range c.Ports {
			found := false
			for i := range ls {
				if ls[i].Port == p.HostPort && ls[i].Proto == p.Proto {
					ls[i].Container, found = c.Name, true
				}
			}
			if !found {
				ls = append(ls, sockets.Listener{Proto: p.Proto, Addr: p.HostIP, Port: p.HostPort, Container: c.Name})
			}
		}
	}
	return ls
}

// AdoptInput is nodewire.AdoptInput.
type AdoptInput = nodewire.AdoptInput

// AdoptResult is nodewire.AdoptResult.
type AdoptResult = nodewire.AdoptResult

// Adopt takes custody of every declared file and marks the node adopted. The
// found firewall is left exactly as it is. It refuses while a predecessor
// control daemon runs: that daemon would rewrite the files in custody.
func (a *Activities) Adopt(ctx context.Context, in AdoptInput) (*AdoptResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	if _, err := a.checkIntent(ctx, auth, in.Intent, authority.StartIntent()); err != nil {
		return nil, err
	}
	if err := authority.CheckWorkflowID(in.WorkflowID); err != nil {
		return nil, err
	}
	if running := a.Sockets.FindProcesses(auth.Plan.Control); len(running) > 0 {
		p := running[0]
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"predecessor control daemon %s (pid %d) is running on node %s (%d such process(es)); stop the predecessor's control daemons first, then run: adopt retry %s",
			p.Exe, p.PID, in.Plan.Node, len(running), in.Plan.Node), ErrControlRunning, nil, running)
	}
	fw, err := a.Firewall.Inspect(ctx)
	if err != nil {
		return nil, fmt.Errorf("inspect the found firewall: %w", err)
	}
	if fw.Unsupported != "" {
		return nil, temporal.NewNonRetryableApplicationError(fw.Unsupported, ErrUnsupportedFW, nil)
	}
	// The mesh's own table is never a found firewall: it means the node
	// was flipped (converged), and adopting it would take the mesh's rules
	// for the predecessor's and reopen what the flip closed.
	for _, t := range fw.Tables {
		if firewall.TableOwner(&firewall.Table{Family: t.Family, Name: t.Name}).Owner == firewall.OwnedByMesh {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"node %s has table inet %s, the mesh's own firewall: the node was flipped by the mesh (converged) and this is not a found firewall to adopt; nothing was changed. Leave a converged node as it is",
				in.Plan.Node, firewall.MeshTable), ErrMeshFirewall, nil)
		}
	}
	// A member binds the overlay's port when it is placed on the private
	// network: a predecessor's tunnel holding it is found now, before the
	// node is adopted (the control node checks every foundation port at
	// genesis).
	if auth.Plan.Role != "control" {
		if _, err := a.checkFree(ctx, auth.Plan.Placement(), "the node was not adopted and nothing was changed; then run: adopt retry "+in.Plan.Node); err != nil {
			return nil, err
		}
	}
	rs, err := a.Firewall.Ruleset()
	if err != nil {
		return nil, fmt.Errorf("list the found firewall: %w", err)
	}
	res := &AdoptResult{Firewall: fw.Kind, FirewallFingerprint: flip.FoundFingerprint(rs)}
	// The node's own baseline for its drift check (gates.go): recorded
	// at a fresh adoption, kept by a retried one.
	_, wasAdopted, err := a.State.Adopted()
	if err != nil {
		return nil, err
	}
	if _, has, err := a.State.Baseline(); err != nil {
		return nil, err
	} else if !wasAdopted || !has {
		if err := a.State.SetBaseline(nodestate.Baseline{Firewall: res.FirewallFingerprint, At: time.Now().UTC()}); err != nil {
			return nil, fmt.Errorf("record the found firewall's baseline: %w", err)
		}
	}
	for _, p := range auth.Plan.DeclaredPaths() {
		heartbeat(ctx, "custody "+p)
		rec, err := a.Files.Take(p)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("cannot take custody of %s: %v; fix the path in the plan or on the node, then run: adopt retry %s", p, err, in.Plan.Node),
				ErrBadPath, err)
		}
		rec = rec.Public()
		res.Custody = append(res.Custody, rec)
		a.Failpoints.Hit("adopt-custody")
	}
	// The marker names the workflow the node verified (its start intent
	// claimed for the caller, served.go), never the request's field.
	if err := a.State.MarkAdopted(nodestate.Marker{Node: in.Plan.Node, AdoptedAt: time.Now().UTC(), Workflow: callingWorkflow(ctx)}); err != nil {
		return nil, fmt.Errorf("write the adopted marker: %w", err)
	}
	a.Failpoints.Hit("adopt-marked")
	return res, nil
}

func (a *Activities) checkNode(node string) error {
	if node != a.Node {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("this worker manages node %q but was asked to act for node %q; check node.name on both sides", a.Node, node),
			ErrWrongNode, nil)
	}
	return nil
}

func heartbeat(ctx context.Context, step string) {
	if !activity.IsActivity(ctx) {
		return
	}
	// The flip in one round trip heartbeats its progress, so a step's
	// heartbeat never hides that the flip is applied (fliptrip.go).
	if p, ok := trip.ProgressOf(ctx); ok {
		q := *p
		q.Step = step
		activity.RecordHeartbeat(ctx, q)
		return
	}
	activity.RecordHeartbeat(ctx, step)
}
