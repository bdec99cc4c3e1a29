// record writes the histories that tests/replay_test.go replays: real
// workflow runs of today's code on a real dev server that this program
// starts, each node's agent scripted (script.go) so that every path meets
// its cue. Run it after a change to the workflows' command sequence, and
// keep the histories it replaced as docs/histories.md says:
//
//	go run ./tests/record -out tests/testdata
//
// It writes history-<scenario>-run<N>.json, one file per run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"golang.org/x/crypto/ssh"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/codec"
	"adoption/config"
	"adoption/intent"
	"adoption/internal/devserver"
	"adoption/internal/opkey"
	"adoption/witness"
	"adoption/workflows"
	"adoption/workflows/fleet"
	"adoption/workflows/fleet/relay"
)

func main() {
	out := flag.String("out", "tests/testdata", "directory for history-*.json")
	bin := flag.String("temporal", os.Getenv("ADOPT_TEMPORAL_BIN"), "the Temporal CLI (make temporal-cli)")
	key := flag.String("codec-key", "tests/testdata/history-codec.key", "the codec key the histories are encrypted with, as production's are (the replay test decrypts with it)")
	only := flag.String("scenario", "", "record only this scenario (control, member, carried, fleet, waves or ask); the others' files are left as they are")
	flag.Parse()
	if *bin == "" {
		*bin = filepath.Join(os.Getenv("HOME"), ".cache", "adoption", "bin", "temporal")
	}
	if *only != "" && *only != "control" && *only != "member" && *only != "carried" && *only != "fleet" && *only != "waves" && *only != "ask" {
		fmt.Fprintf(os.Stderr, "record: -scenario %q: it is control, member, carried, fleet, waves or ask\n", *only)
		os.Exit(3)
	}
	if err := run(*bin, *out, *only, *key); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

type rec struct {
	c   client.Client
	out string
	ctx context.Context
	// key is the run's operator key: every request is signed as the CLI
	// signs it, so the histories carry intents as real runs do.
	key ssh.Signer
	// plans are the fleet's nodes' plans, for the fleet's one intent.
	plans []config.Plan
	// dc decodes the payloads (the codec's converter).
	dc converter.DataConverter
}

// sign is the operator's intent for action on plans' nodes.
func (r *rec) sign(action string, args map[string]string, plans ...config.Plan) *intent.Signed {
	targets := make([]intent.Target, 0, len(plans))
	for _, p := range plans {
		targets = append(targets, intent.Target{Node: p.Node, PlanHash: p.Hash()})
	}
	in, err := intent.New(action, targets, args, time.Now(), time.Hour)
	if err != nil {
		panic(err)
	}
	s, err := intent.Sign(in, r.key)
	if err != nil {
		panic(err)
	}
	return &s
}

func run(bin, out, only, keyFile string) error {
	secret, err := os.ReadFile(keyFile)
	if err != nil {
		return fmt.Errorf("-codec-key: %w", err)
	}
	cd, err := codec.New(secret)
	if err != nil {
		return fmt.Errorf("-codec-key %s: %w", keyFile, err)
	}
	dc := codec.DataConverter(cd)
	dir, err := os.MkdirTemp("", "adoption-record-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port, err := devserver.Port()
	if err != nil {
		return err
	}
	// A small history threshold: the node's run continues as new within
	// the scenario, as it would after weeks. DieWithParent: the server
	// goes with this program, however it ends.
	srv, err := devserver.Launch(devserver.Spec{Bin: bin, Port: port, DB: filepath.Join(dir, "temporal.db"), Log: filepath.Join(dir, "server.log"),
		Extra: []string{"--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=130"}, DieWithParent: true})
	if err != nil {
		return err
	}
	defer srv.Stop()
	c, err := client.Dial(client.Options{HostPort: srv.Addr, DataConverter: dc, FailureConverter: codec.FailureConverter(dc), Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		return err
	}
	defer c.Close()

	wf := worker.New(c, workflows.TaskQueue, worker.Options{})
	fleet.Register(wf)
	// The orchestrator's relay, which a fleet migrate or flip goes through.
	wf.RegisterActivity(&relay.Relay{C: c, Every: 200 * time.Millisecond})
	// The orchestrator's witness, scripted: it answers for a flip whose
	// plan names the address to dial, once the node's flip has had time
	// to read it, as the real one lingers until the node has.
	wf.RegisterActivityWithOptions(scriptedWitness, activity.RegisterOptions{Name: witness.ActivityType})
	if err := wf.Start(); err != nil {
		return err
	}
	defer wf.Stop()
	agents := map[string]*script{}
	agent := func(s *script) error {
		agents[s.node] = s
		w := worker.New(c, workflows.NodeQueue(s.node), worker.Options{DisableWorkflowWorker: true})
		w.RegisterActivity(s)
		if err := w.Start(); err != nil {
			return err
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	k, err := opkey.Generate(dir, "operator", "record-operator")
	if err != nil {
		return err
	}
	signer, err := intent.SignerFromFile(k.Path)
	if err != nil {
		return err
	}
	r := &rec{c: c, out: out, ctx: ctx, key: signer, dc: dc}

	// 1. A control node: genesis refused (a port collision), retried by a
	// bare signal as the Web UI sends it; a module's cutover fails and
	// rolls back, then is retried; drift found and accepted; a vanished
	// marked rule put back; a refused signal; continue-as-new; the flip.
	if only == "" || only == "control" {
		ctrl := controlPlan("rcontrol")
		if err := agent(&script{node: "rcontrol", plan: ctrl,
			failFirst:       map[string]string{"CheckFoundationPorts": "collision", "CutoverWaitHealthy": "cutover mail: wait healthy: no answer on 8025/tcp"},
			watchDriftOwner: "mail", watchBound: time.Second}); err != nil {
			return err
		}
		if err := r.control(ctrl); err != nil {
			return fmt.Errorf("control scenario: %w", err)
		}
	}
	if only == "ask" {
		for _, p := range askPlans() {
			if err := agent(&script{node: p.Node, plan: p}); err != nil {
				return err
			}
		}
		return r.ask(askPlans())
	}
	if only == "waves" {
		plans := wavePlans()
		for _, p := range plans {
			if err := agent(&script{node: p.Node, plan: p, refusePreview: p.Node == "rwc"}); err != nil {
				return err
			}
		}
		return r.waves(plans)
	}
	if only == "" || only == "member" {
		p := memberPlan("rmember")
		if err := agent(memberScript("rmember", p)); err != nil {
			return err
		}
		if err := r.member(p); err != nil {
			return fmt.Errorf("member scenario: %w", err)
		}
	}
	if only == "" || only == "carried" {
		p := carriedPlan("rcarried")
		// Its first flip transaction finds the node's firewall moved since
		// its own preview: the stale-preview fallback.
		stale := temporal.NewNonRetryableApplicationError("flip names a preview that no longer holds", activities.ErrStalePreview, nil)
		if err := agent(&script{node: "rcarried", plan: p, failFirst: map[string]string{"CheckFoundationPorts": "collision"},
			errFirst: map[string]error{"FlipTrip": stale}}); err != nil {
			return err
		}
		if err := r.carried(p); err != nil {
			return fmt.Errorf("carried scenario: %w", err)
		}
	}
	if only != "" && only != "fleet" {
		return nil
	}
	// 2. A fleet of four: plans read from the agents, a member terminated
	// and retried, a member whose agent refuses its first plan read (the
	// fleet holds, `adopt fleet next` goes on without it, `adopt fleet
	// retry` starts it later), malformed progress signals, continue-as-new
	// by history length, every node released at the end.
	for _, n := range []string{"rf1", "rf2", "rf3", "rf4"} {
		p := config.Plan{Node: n, Role: "member", ReconcileInterval: 0, ConfirmTimeout: time.Minute}
		if n == "rf1" {
			p.Role = "control"
		}
		r.plans = append(r.plans, p)
		s := &script{node: n, plan: p}
		if n == "rf3" {
			s.failFirst = map[string]string{"Plan": "node.yaml on rf3 is unreadable"}
		}
		if err := agent(s); err != nil {
			return err
		}
	}
	if err := r.fleet(); err != nil {
		return fmt.Errorf("fleet scenario: %w", err)
	}
	if only != "" {
		return nil
	}
	plans := wavePlans()
	for _, p := range plans {
		s := &script{node: p.Node, plan: p}
		if p.Node == "rwc" {
			s.refusePreview = true
		}
		if err := agent(s); err != nil {
			return err
		}
	}
	if err := r.waves(plans); err != nil {
		return fmt.Errorf("waves scenario: %w", err)
	}
	for _, p := range askPlans() {
		if err := agent(&script{node: p.Node, plan: p}); err != nil {
			return err
		}
	}
	if err := r.ask(askPlans()); err != nil {
		return fmt.Errorf("ask scenario: %w", err)
	}
	return nil
}

func controlPlan(node string) config.Plan {
	return config.Plan{
		Node: node, Role: "control",
		ManagementPorts: []config.Port{{Num: 22, Proto: "tcp"}},
		Witness:         &config.Witness{Address: "192.0.2.1"}, // never dialled: the witness is scripted
		Foundation:      []config.NamedPort{{Name: "registry", Port: config.Port{Num: 5001, Proto: "tcp"}}},
		Modules: []config.ModulePlan{{Name: "mail", Ports: []config.Port{{Num: 8025, Proto: "tcp"}},
			Container: &config.Container{Name: "mail", Image: "mesh/mail:2"},
			Files:     []config.FilePlan{{Path: "/srv/mail/mail.env", SHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"}}}},
		ConfirmTimeout:    time.Minute,
		ReconcileInterval: 2 * time.Second,
		DriftInterval:     3 * time.Second,
	}
}

// state queries the node until cond holds.
func (r *rec) waitNode(node, what string, cond func(workflows.State) bool) (workflows.State, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st workflows.State
		v, err := r.c.QueryWorkflow(r.ctx, workflows.WorkflowID(node), "", workflows.QueryStatus)
		if err == nil && v.Get(&st) == nil && cond(st) {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("node %s: timed out waiting for %s (phase %s, last error %q)", node, what, st.Phase, st.LastError)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (r *rec) update(node, name string, in workflows.RequestInput) error {
	h, err := r.c.UpdateWorkflow(r.ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.WorkflowID(node), UpdateName: name, Args: []any{in}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	return h.Get(r.ctx, nil)
}

func (r *rec) control(plan config.Plan) error {
	id := workflows.WorkflowID(plan.Node)
	if _, err := r.c.ExecuteWorkflow(r.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.NodeWorkflow, workflows.Input{Plan: plan, Intent: r.sign(authority.ActStart, nil, plan)}); err != nil {
		return err
	}
	if _, err := r.waitNode(plan.Node, "genesis failed", func(s workflows.State) bool { return s.Genesis.State == "failed" }); err != nil {
		return err
	}
	// A bare signal, as the Web UI sends it, and one the signal path refuses.
	if err := r.c.SignalWorkflow(r.ctx, id, "", workflows.SignalRetry, nil); err != nil {
		return err
	}
	if err := r.c.SignalWorkflow(r.ctx, id, "", workflows.SignalMigrate, workflows.RequestInput{Module: "nosuch"}); err != nil {
		return err
	}
	if _, err := r.waitNode(plan.Node, "genesis done", func(s workflows.State) bool { return s.Genesis.State == "done" }); err != nil {
		return err
	}
	if err := r.update(plan.Node, workflows.UpdateMigrate, workflows.RequestInput{Module: "mail", Intent: r.sign(authority.ActMigrate, map[string]string{"module": "mail"}, plan)}); err != nil {
		return err
	}
	if _, err := r.waitNode(plan.Node, "mail failed", func(s workflows.State) bool {
		return len(s.Modules) > 0 && s.Modules[0].State == workflows.ModuleFailed
	}); err != nil {
		return err
	}
	if err := r.update(plan.Node, workflows.UpdateRetry, workflows.RequestInput{Module: "mail", Intent: r.sign(authority.ActRetry, map[string]string{"module": "mail"}, plan)}); err != nil {
		return err
	}
	if _, err := r.waitNode(plan.Node, "mail migrated and drift found", func(s workflows.State) bool {
		return s.Modules[0].State == workflows.ModuleMigrated && len(s.Drift) > 0
	}); err != nil {
		return err
	}
	if err := r.c.SignalWorkflow(r.ctx, id, "", workflows.SignalDriftAccept, workflows.RequestInput{Intent: r.sign(authority.ActDriftAccept, nil, plan)}); err != nil {
		return err
	}
	if _, err := r.waitNode(plan.Node, "drift accepted and a continue-as-new", func(s workflows.State) bool {
		return len(s.Drift) == 0 && s.Runs >= 1
	}); err != nil {
		return err
	}
	var pv any
	h, err := r.c.UpdateWorkflow(r.ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdatePreview,
		Args: []any{workflows.RequestInput{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return err
	}
	if err := h.Get(r.ctx, &pv); err != nil {
		return err
	}
	if err := r.update(plan.Node, workflows.UpdateFlip, workflows.RequestInput{Intent: r.sign(authority.ActFlip, authority.FlipArgs(plan), plan)}); err != nil {
		return err
	}
	if err := r.c.GetWorkflow(r.ctx, id, "").Get(r.ctx, nil); err != nil {
		return fmt.Errorf("the control node's workflow: %w", err)
	}
	return r.writeRuns("control", id)
}

func (r *rec) fleet() error {
	members := []fleet.FleetMember{{Node: "rf1", Role: "control"}, {Node: "rf2", Role: "member"}, {Node: "rf3", Role: "member"}, {Node: "rf4", Role: "member"}}
	fid := fleet.FleetID("rfleet")
	if _, err := r.c.ExecuteWorkflow(r.ctx, client.StartWorkflowOptions{ID: fid, TaskQueue: workflows.TaskQueue}, fleet.FleetWorkflow,
		fleet.FleetInput{Name: "rfleet", Members: members, HistoryLimit: 60, Intent: r.sign(authority.ActFleet, nil, r.plans...)}); err != nil {
		return err
	}
	if _, err := r.waitNode("rf2", "rf2 adopted", func(s workflows.State) bool { return s.Phase == workflows.PhaseAdopted }); err != nil {
		return err
	}
	if err := r.c.SignalWorkflow(r.ctx, fid, "", workflows.SignalNodeProgress, "malformed"); err != nil {
		return err
	}
	if err := r.c.SignalWorkflow(r.ctx, fid, "", workflows.SignalNodeProgress, workflows.NodeProgress{Node: "nosuch", Phase: "adopted"}); err != nil {
		return err
	}
	if err := r.c.TerminateWorkflow(r.ctx, workflows.WorkflowID("rf2"), "", "record: a node terminated under its fleet"); err != nil {
		return err
	}
	// The fleet may have continued as new since it started rf2 (then it
	// cannot see the end): the retry is what restarts it either way.
	if err := r.c.SignalWorkflow(r.ctx, fid, "", fleet.SignalFleetRetry, fleet.FleetRetry{Node: "rf2"}); err != nil {
		return err
	}
	if err := r.waitFleet("rf2 started again", func(st fleet.FleetState) bool {
		for _, e := range st.Events {
			if strings.Contains(e, "started again node rf2") {
				return true
			}
		}
		return false
	}); err != nil {
		return err
	}
	if _, err := r.waitNode("rf2", "rf2 adopted again", func(s workflows.State) bool { return s.Phase == workflows.PhaseAdopted }); err != nil {
		return err
	}
	// rf3's agent refuses the first plan read: the fleet holds on it.
	if err := r.waitFleet("held on rf3", func(st fleet.FleetState) bool { return strings.Contains(st.Held, "rf3") }); err != nil {
		return err
	}
	if err := r.c.SignalWorkflow(r.ctx, fid, "", fleet.SignalFleetNext, nil); err != nil {
		return err
	}
	if _, err := r.waitNode("rf4", "rf4 adopted", func(s workflows.State) bool { return s.Phase == workflows.PhaseAdopted }); err != nil {
		return err
	}
	if err := r.c.SignalWorkflow(r.ctx, fid, "", fleet.SignalFleetRetry, fleet.FleetRetry{Node: "rf3"}); err != nil {
		return err
	}
	if _, err := r.waitNode("rf3", "rf3 adopted", func(s workflows.State) bool { return s.Phase == workflows.PhaseAdopted }); err != nil {
		return err
	}
	for _, p := range r.plans {
		if err := r.update(p.Node, workflows.UpdateRelease, workflows.RequestInput{Intent: r.sign(authority.ActRelease, nil, p)}); err != nil {
			return err
		}
	}
	var st fleet.FleetState
	if err := r.c.GetWorkflow(r.ctx, fid, "").Get(r.ctx, &st); err != nil {
		return fmt.Errorf("the fleet: %w", err)
	}
	if st.Runs == 0 {
		return errors.New("the fleet never continued as new: lower its history limit")
	}
	return r.writeRuns("fleet", fid)
}

func (r *rec) waitFleet(what string, cond func(fleet.FleetState) bool) error {
	return r.waitFleetNamed("rfleet", what, cond)
}

func (r *rec) waitFleetNamed(name, what string, cond func(fleet.FleetState) bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st fleet.FleetState
		v, err := r.c.QueryWorkflow(r.ctx, fleet.FleetID(name), "", fleet.QueryFleet)
		if err == nil && v.Get(&st) == nil && cond(st) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet: timed out waiting for %s: %+v", what, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writeRuns writes every run of workflow id, oldest first.
func (r *rec) writeRuns(scenario, id string) error {
	_, err := r.runs(scenario, id)
	return err
}

// runs writes every run of workflow id, oldest first, and returns them.
func (r *rec) runs(scenario, id string) ([]*historypb.History, error) {
	var out []*historypb.History
	var runs []string
	var token []byte
	for {
		res, err := r.c.ListWorkflow(r.ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = %q", id), NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range res.Executions {
			runs = append(runs, e.GetExecution().GetRunId())
		}
		if token = res.NextPageToken; len(token) == 0 {
			break
		}
	}
	// Visibility lists newest first.
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	for i, run := range runs {
		h := &historypb.History{}
		it := r.c.GetWorkflowHistory(r.ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return nil, err
			}
			h.Events = append(h.Events, e)
		}
		js, err := protojson.Marshal(h)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(r.out, fmt.Sprintf("history-%s-run%d.json", scenario, i+1))
		if err := os.WriteFile(p, js, 0o644); err != nil {
			return nil, err
		}
		fmt.Printf("%s: %d events\n", p, len(h.Events))
		out = append(out, h)
	}
	return out, nil
}
