// Fleet-wide requests, `adopt fleet migrate MODULE` and `adopt fleet flip`:
// the Updates' validators and handlers, and the run that sends each target
// node its request wave by wave (the fleet's waves), each wave within its
// budget of failures. The orchestrator's relay activity sends one node its
// request and waits until the node has served it.
package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/intent"
	"adoption/workflows"
	"adoption/workflows/fleet/relay"
)

// FleetOp is one fleet migrate or flip and how far it went.
type FleetOp struct {
	ID     string `json:"id"`   // the Update's ID; each node's request derives from it
	Kind   string `json:"kind"` // relay.KindMigrate or relay.KindFlip
	Module string `json:"module,omitempty"`
	// Intent is the request signed once for every target (an older
	// CLI's), sent to each as it is; Intents are it signed for each
	// target apart, by node, each sent to its node alone and dropped once
	// the node has answered (docs/access.md).
	Intent  *intent.Signed            `json:"intent,omitempty"`
	Intents map[string]*intent.Signed `json:"intents,omitempty"`
	Nodes   []OpNode                  `json:"nodes"`
	// Halted says which wave had more failures than its budget, naming
	// them; the op sends no more requests.
	Halted string `json:"halted,omitempty"`
	Done   bool   `json:"done,omitempty"`
	// Total, Served and Failed count the targets, in a status query's
	// answer, whose Nodes are the page's only.
	Total  int `json:"total,omitempty"`
	Served int `json:"served,omitempty"`
	Failed int `json:"failed,omitempty"`
	// pos is each target's index in Nodes (at), built once a run.
	pos map[string]int
}

// at is node's index in op.Nodes, -1 if it is not a target.
func (op *FleetOp) at(node string) int {
	if op.pos == nil {
		op.pos = make(map[string]int, len(op.Nodes))
		for j, n := range op.Nodes {
			op.pos[n.Node] = j
		}
	}
	if j, ok := op.pos[node]; ok {
		return j
	}
	return -1
}

// OpNode is one target of a FleetOp.
type OpNode struct {
	Node  string `json:"node"`
	Wave  int    `json:"wave"`
	State string `json:"state"` // waiting, running, done, failed
	Why   string `json:"why,omitempty"`
}

// Op node states.
const (
	opWaiting = "waiting"
	opRunning = "running"
	opDone    = "done"
	opFailed  = "failed"
)

// relayActs names the relay's activities (called through a nil pointer).
var relayActs *relay.Relay

// What names the op as the operator asked it.
func (op *FleetOp) What() string {
	if op.Kind == relay.KindMigrate {
		return "fleet migrate " + op.Module
	}
	return "fleet flip"
}

// intentFor is what the op sends node: its own intent, else the one
// naming every target (an older CLI's), else nil (unsigned).
func (op *FleetOp) intentFor(node string) *intent.Signed {
	if s, ok := op.Intents[node]; ok {
		return s
	}
	return op.Intent
}

// busy: the op still has requests to send or waits on some.
func (op *FleetOp) busy() bool { return op != nil && !op.Done && op.Halted == "" }

// Standing is how far the op went, in status's words.
func (op *FleetOp) Standing() string {
	var failed []string
	for _, n := range op.Nodes {
		if n.State == opFailed {
			failed = append(failed, n.Node+" ("+n.Why+")")
		}
	}
	total, done, nfailed := op.counts()
	if op.Total > len(op.Nodes) { // a status page: the counts are the op's
		total, done, nfailed = op.Total, op.Served, op.Failed
	}
	s := fmt.Sprintf("%d of %d node(s) done", done, total)
	if nfailed > 0 {
		shown := failed[:min(len(failed), listed)]
		s += fmt.Sprintf("; %d failed: ", nfailed) + strings.Join(shown, "; ")
		if more := nfailed - len(shown); more > 0 {
			s += fmt.Sprintf("; and %d more", more)
		}
	}
	switch {
	case op.Halted != "":
		s = "HALTED: " + op.Halted + "; " + s
	case op.Done:
		s = "finished: " + s
	}
	return s
}

// counts are the op's targets, those served and those failed.
func (op *FleetOp) counts() (total, served, failed int) {
	for _, n := range op.Nodes {
		switch n.State {
		case opDone:
			served++
		case opFailed:
			failed++
		}
	}
	return len(op.Nodes), served, failed
}

// nextWave is the first wave with a node not yet served, -1 if none.
func (op *FleetOp) nextWave() int {
	for _, n := range op.Nodes {
		if n.State == opWaiting || n.State == opRunning {
			return n.Wave
		}
	}
	return -1
}

// registerOps sets the Update handlers of fleet migrate and fleet flip.
// Their validators do not run on replay, so they may grow unversioned.
func (f *fleet) registerOps(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateFleetMigrate,
		func(ctx workflow.Context, in FleetRequest) (FleetAnswer, error) {
			targets, skipped := f.st.migrateTargets(in.Nodes, f.follows(ctx))
			return f.takeOp(ctx, relay.KindMigrate, in, targets, skipped), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in FleetRequest) error {
			if err := workflows.LateAfter(ctx, in.NotAfter); err != nil {
				return err
			}
			return f.st.migrateRefusal(in, f.follow != 1)
		}},
	); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateFleetFlip,
		func(ctx workflow.Context, in FleetRequest) (FleetAnswer, error) {
			targets, skipped := f.st.flipTargets()
			return f.takeOp(ctx, relay.KindFlip, in, targets, skipped), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in FleetRequest) error {
			if err := workflows.LateAfter(ctx, in.NotAfter); err != nil {
				return err
			}
			if err := f.st.opRefusal(relay.KindFlip, ""); err != nil {
				return err
			}
			if targets, skipped := f.st.flipTargets(); len(targets) == 0 {
				return fmt.Errorf("no node of the fleet is migrated and running: %s; migrate first (`adopt fleet migrate MODULE`)", names(skipped, "; "))
			}
			return nil
		}},
	)
}

// takeOp records a new op on targets (fleet indexes) and says it.
func (f *fleet) takeOp(ctx workflow.Context, kind string, in FleetRequest, targets []int, skipped []string) FleetAnswer {
	op := &FleetOp{ID: workflow.GetCurrentUpdateInfo(ctx).ID, Kind: kind, Module: in.Module, Intent: in.Intent}
	ans := FleetAnswer{Skipped: skipped}
	for _, i := range targets {
		node := f.st.Nodes[i].Node
		op.Nodes = append(op.Nodes, OpNode{Node: node, Wave: f.st.WaveOf(i), State: opWaiting})
		ans.Targets = append(ans.Targets, node)
		if s, ok := in.Intents[node]; ok { // the targets' only: the others' are never sent
			if op.Intents == nil {
				op.Intents = make(map[string]*intent.Signed, len(targets))
			}
			op.Intents[node] = s
		}
	}
	if f.st.Op.busy() { // another module's migrate, following the waves still
		f.st.Following = append(f.st.Following, f.st.Op)
	}
	f.st.Op = op
	line := "operator: " + op.What() + " on " + names(ans.Targets, ", ")
	if len(skipped) > 0 {
		line += "; not on " + names(skipped, "; ")
	}
	f.note(ctx, line)
	return ans
}

// maxFollowing bounds the migrates that follow the waves besides the
// latest op: each carries its targets (docs/fleet.md, bounded by design).
const maxFollowing = 2

// opRefusal refuses a new op (kind, module) while one it would run into is
// under way: a flip while any op is, a migrate while a flip is, or a
// migrate of the same module. A migrate of another module goes along
// with the ones following the waves (each waits for the waves to come).
func (st *FleetState) opRefusal(kind, module string) error {
	if len(st.Following) >= maxFollowing && st.Op.busy() {
		return fmt.Errorf("%d fleet migrates are under way already (%s): wait for one to finish (`adopt fleet status`)", maxFollowing+1, st.Op.What())
	}
	for _, op := range st.ops() {
		if op.busy() && (kind == relay.KindFlip || op.Kind == relay.KindFlip || op.Module == module) {
			return fmt.Errorf("%s is under way (%s): wait for it to finish (`adopt fleet status`)", op.What(), op.Standing())
		}
	}
	return nil
}

// migrateRefusal is why the fleet refuses `adopt fleet migrate` of
// in.Module on in.Nodes (the nodes whose configuration declares it), or nil.
func (st *FleetState) migrateRefusal(in FleetRequest, follow bool) error {
	if !follow && st.Op.busy() { // a fleet before fleet-ops-follow: one op at a time
		return fmt.Errorf("%s is under way (%s): wait for it to finish (`adopt fleet status`)", st.Op.What(), st.Op.Standing())
	}
	if err := st.opRefusal(relay.KindMigrate, in.Module); err != nil {
		return err
	}
	if in.Module == "" {
		return errors.New("module: none given: name the module to migrate (`adopt fleet migrate MODULE`)")
	}
	if len(in.Nodes) == 0 {
		return fmt.Errorf("module %q: no node of the fleet declares it", in.Module)
	}
	pos := make(map[string]int, len(st.Nodes)) // st.Index, once for every name
	for i, n := range st.Nodes {
		pos[n.Node] = i
	}
	var problems []string
	for _, node := range in.Nodes {
		i, ok := pos[node]
		switch {
		case !ok:
			problems = append(problems, "node "+node+" is not of this fleet")
		case st.Nodes[i].Declares != nil && !slices.Contains(st.Nodes[i].Declares, in.Module):
			problems = append(problems, fmt.Sprintf("node %s does not declare module %s (it declares %s)", node, in.Module, strings.Join(st.Nodes[i].Declares, ", ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("module %q: %s", in.Module, names(problems, "; "))
	}
	if targets, skipped := st.migrateTargets(in.Nodes, follow); len(targets) == 0 {
		return fmt.Errorf("module %q: none of the nodes that declare it is running in the fleet: %s", in.Module, names(skipped, "; "))
	}
	return nil
}

// migrateTargets are the nodes of names the fleet started and that run
// (fleet order), and, when the op follows the waves, those not started yet
// (each is sent its request once its wave has started); and the others
// with why.
func (st *FleetState) migrateTargets(names []string, follow bool) (targets []int, skipped []string) {
	named := make(map[string]bool, len(names)) // a thousand names, looked up per node
	for _, name := range names {
		named[name] = true
	}
	for i, n := range st.Nodes {
		if !named[n.Node] {
			continue
		}
		if (n.Started || follow) && n.Ended == "" {
			targets = append(targets, i)
		} else {
			skipped = append(skipped, n.Node+" "+n.standing())
		}
	}
	return targets, skipped
}

// flipTargets are the nodes the fleet started that run, adopted with every
// module migrated (fleet order), and the others with why.
func (st *FleetState) flipTargets() (targets []int, skipped []string) {
	for i, n := range st.Nodes {
		switch {
		case n.Started && n.Ended == "" && n.Done && n.Phase == workflows.PhaseAdopted:
			targets = append(targets, i)
		case n.Started && n.Ended == "" && n.Phase == workflows.PhaseAdopted:
			skipped = append(skipped, fmt.Sprintf("%s has %d of %d module(s) migrated", n.Node, n.Migrated, n.Modules))
		default:
			skipped = append(skipped, n.Node+" "+n.standing())
		}
	}
	return targets, skipped
}

// relayBatch is the most nodes one relay activity serves: a wave of
// MaxFleetNodes is then MaxFleetNodes/relayBatch pending activities, under
// the server's PendingActivitiesLimit (docs/fleet.md), each activity's
// input a few hundred kilobytes at most (a signed intent per node).
const relayBatch = 200

// relayBatches cuts a wave's nodes into batches of at most relayBatch.
func relayBatches(wave []int) [][]int {
	var out [][]int
	for len(wave) > 0 {
		n := min(len(wave), relayBatch)
		out = append(out, wave[:n])
		wave = wave[n:]
	}
	return out
}

// served records how op node j's request went.
func (f *fleet) served(ctx workflow.Context, op *FleetOp, j int, out relay.Outcome, err error) {
	n := &op.Nodes[j]
	if n.State != opRunning {
		return // settled already: the node said it was done (nodeServed)
	}
	delete(op.Intents, n.Node) // served: never sent again
	switch {
	case err != nil:
		n.State, n.Why = opFailed, workflows.ErrorMessage(err)
	case out.Why != "":
		n.State, n.Why = opFailed, out.Why
	default:
		n.State, n.Why = opDone, ""
	}
	if n.State == opFailed {
		f.event(ctx, fmt.Sprintf("%s: node %s failed: %s", op.What(), n.Node, n.Why))
	}
}

// ops runs the fleet's op, a wave at a time, while the fleet is not paused
// and not due to continue as new (the next run goes on with the next wave).
// It ends when the fleet is cancelled: Await then returns at once, and
// looping on it would never yield.
func (f *fleet) ops(ctx workflow.Context) {
	var next *FleetOp
	for {
		if err := workflow.Await(ctx, func() bool {
			next = nil
			if f.st.Paused != "" || f.leaving || f.due(ctx) {
				return false
			}
			for _, op := range f.st.ops() {
				if op.busy() && f.opReady(op) {
					next = op
					return true
				}
			}
			return false
		}); err != nil {
			return
		}
		f.opWave(ctx, next)
		if ctx.Err() != nil {
			return // cancelled within the wave: its nodes stay running
		}
		f.st.dropFinished()
	}
}

// opWave sends every node of the op's next wave its request at once, waits
// for all, and halts the op when more of them failed than the wave's
// budget allows.
func (f *fleet) opWave(ctx workflow.Context, op *FleetOp) {
	if !f.opsTaken {
		taken(ctx, changeFleetOps)
		f.opsTaken = true
	}
	k := op.nextWave()
	if k < 0 {
		op.Done = true
		f.note(ctx, op.What()+" "+op.Standing())
		return
	}
	f.opBusy = true
	defer func() { f.opBusy = false }()
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue, // the orchestrator's: it talks to the nodes' workflows
		StartToCloseTimeout: 7 * 24 * time.Hour,  // a node's agent may be down for days; its request waits
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: time.Minute},
	})
	var wave []int // the op's nodes of wave k still to serve
	var sent []string
	for j := range op.Nodes {
		n := &op.Nodes[j]
		if n.Wave != k || (n.State != opWaiting && n.State != opRunning) {
			continue
		}
		n.State = opRunning
		wave = append(wave, j)
		sent = append(sent, n.Node)
	}
	f.note(ctx, fmt.Sprintf("%s: wave %d: %s (up to %d may fail)", op.What(), k, names(sent, ", "), f.st.budget(k)))
	if f.follows(ctx) {
		wave = f.endedBeforeSent(ctx, op, wave)
	}
	if f.batches == 0 {
		f.batches = 1 // one relay activity a node: runs recorded before
		if workflow.GetVersion(ctx, changeFleetRelayBatches, workflow.DefaultVersion, 1) >= 1 {
			f.batches = 2
		}
	}
	request := func(j int) relay.NodeRequest {
		n := op.Nodes[j]
		return relay.NodeRequest{Node: n.Node, Kind: op.Kind, Module: op.Module, ID: op.ID, Intent: op.intentFor(n.Node)}
	}
	if f.batches == 1 {
		futs := map[int]workflow.Future{}
		for _, j := range wave {
			futs[j] = workflow.ExecuteActivity(actx, relayActs.Request, request(j))
		}
		for _, j := range wave {
			var out relay.Outcome
			err := futs[j].Get(ctx, &out)
			f.served(ctx, op, j, out, err)
		}
	} else {
		var futs []workflow.Future
		batches := relayBatches(wave)
		for _, b := range batches {
			in := relay.Batch{Intent: op.Intent}
			for _, j := range b {
				r := request(j)
				if r.Intent == op.Intent {
					r.Intent = nil // the batch's, sent once
				}
				in.Requests = append(in.Requests, r)
			}
			futs = append(futs, workflow.ExecuteActivity(actx, relayActs.Requests, in))
		}
		for bi, b := range batches {
			fut := futs[bi]
			workflow.Go(ctx, func(ctx workflow.Context) {
				var outs []relay.Outcome
				err := fut.Get(ctx, &outs)
				for x, j := range b {
					var out relay.Outcome
					if err == nil && x < len(outs) {
						out = outs[x]
					}
					f.served(ctx, op, j, out, err)
				}
			})
		}
		// Each node is settled by its batch's answer or, sooner, by its
		// own progress (nodeServed): the wave ends with its last node.
		if err := workflow.Await(ctx, func() bool {
			for _, j := range wave {
				if op.Nodes[j].State == opRunning {
					return false
				}
			}
			return true
		}); err != nil {
			return
		}
	}
	var failed []string
	for _, n := range op.Nodes {
		if n.Wave == k && n.State == opFailed {
			failed = append(failed, n.Node+" "+n.Why)
		}
	}
	if len(failed) > f.st.budget(k) {
		op.Halted = fmt.Sprintf("wave %d halted: %d node(s) failed, its budget (max_failed) allows %d: %s. Fix them, then run `adopt %s` again",
			k, len(failed), f.st.budget(k), names(failed, "; "), op.What())
		op.Intents = nil // halted: no more are sent
		f.note(ctx, op.What()+": "+op.Halted)
		return
	}
	f.show(ctx)
}
