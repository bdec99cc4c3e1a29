package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/config"
	"adoption/containers"
	"adoption/containers/cutover"
	"adoption/custody"
	"adoption/firewall/flip"
	"adoption/intent"
	"adoption/sandbox"
	"adoption/workflows"
)

// leakPassword is baked into the leaky image's environment (as a real
// image's credential would be), nowhere in the configuration; its service
// prints it to the container's log (svc prints SVC_VERSION) and exits. It
// must reach no workflow history.
const leakPassword = "DBPASS-hunter2-9c1f7e"

// leakImage is the stand-in service with leakPassword as its SVC_VERSION.
const leakImage = "adoption-e2e-leaky:v1"

const hostileName, hostilePort, leakPort = "e2ehost", 18691, 18693

// hostilePlan: a module replacing a running predecessor, and a module whose
// container prints a password and exits.
var hostilePlan = fmt.Sprintf(`modules:
  - name: %[1]s
    ports: ["%[2]d/tcp"]
    container:
      name: %[1]s
      image: %[4]s
      ports: {"127.0.0.1:%[2]d/tcp": "8080/tcp"}
    files:
      - path: /srv/%[1]s/app.env
        mode: "0600"
        content: "MESH=1\n"
  - name: leaky
    ports: ["%[3]d/tcp"]
    container:
      name: %[1]sleak
      image: %[5]s
      cmd: ["-listen", "no-port"]
      ports: {"127.0.0.1:%[3]d/tcp": "8080/tcp"}
    health:
      http: http://127.0.0.1:%[3]d/health
      timeout: 5s
flip:
  confirm_timeout: 1m
cutover:
  stop_timeout: 2s
`, hostileName, hostilePort, leakPort, svcV2, leakImage)

var hostileFound = map[string]string{
	"/srv/" + hostileName + "/app.env": "PREDECESSOR_SECRET=" + secretCanary + "\n",
	"/etc/shadowlike":                  "root:$6$not-declared\n",
}

// hostileCase is one request a workflow that is not the product's sends to
// the node's activity queue, and the refusal it must get.
// notRegistered is the type of the SDK's answer to an activity the
// node's worker has not registered.
const notRegistered = "ActivityNotRegisteredError"

type hostileCase struct {
	Name     string
	Activity string
	Input    any
	Type     string // the ApplicationError type of the refusal
	Says     string // part of its message
}

// hostileOutcome is what the node answered.
type hostileOutcome struct {
	Name         string `json:"name"`
	Type         string `json:"type"`
	Message      string `json:"message"`
	NonRetryable bool   `json:"non_retryable"`
	Served       bool   `json:"served"`
}

// copyPlan is a deep copy of a plan, as a request would carry it.
func copyPlan(p config.Plan) config.Plan {
	b, _ := json.Marshal(p)
	var q config.Plan
	_ = json.Unmarshal(b, &q)
	return q
}

// planDiffers is what the node says of a request made under a plan its
// file does not derive (the request names its plan by hash only).
const planDiffers = "differs from node " + hostileName + "'s own configuration"

// hostileCases are the requests a workflow not the product's sends: those
// with the node's own plan that would change the node are refused
// first for carrying no operator's intent (activities/intent.go): the
// field checks behind it are the activities' unit tests'.
func hostileCases(p config.Plan) []hostileCase {
	port := func(n uint16) config.Port { return config.Port{Num: n, Proto: "tcp"} }
	with := func(change func(*config.Plan)) config.Plan {
		q := copyPlan(p)
		change(&q)
		return q
	}
	spec := workflows.MeshSpec(&workflows.State{Node: p.Node, Plan: p})
	noMgmt := spec
	noMgmt.Input = nil
	extra := spec
	extra.Input = append(append([]flip.Allow(nil), spec.Input...), flip.Allow{Port: port(2375), Owner: hostileName})
	century := 100 * 365 * 24 * time.Hour
	// A flip is asked as the orchestrator asks it: in one round trip,
	// witnessed as the node's file says.
	trip := func(in activities.FlipInput) activities.FlipTripInput {
		return activities.FlipTripInput{FlipInput: in, Witness: p.Witness.Witnessed()}
	}
	pred := func(mounts []containers.Mount, networks []string) *cutover.Predecessor {
		return &cutover.Predecessor{ID: "0123456789ab", Name: hostileName, Image: svcV1, Mounts: mounts, Networks: networks}
	}
	return []hostileCase{
		{"undeclared port, the node's plan", "OpenRules", activities.RulesInput{Plan: p.Ref(), Owner: hostileName, Ports: []config.Port{port(2375)}},
			activities.ErrIntentRefused, "intent refused (missing)"},
		{"undeclared port in the plan", "OpenRules", activities.RulesInput{Plan: with(func(q *config.Plan) { q.Modules[0].Ports = append(q.Modules[0].Ports, port(2375)) }).Ref(), Owner: hostileName, Ports: []config.Port{port(2375)}},
			authority.ErrPlanMismatch, planDiffers},
		// The watch's checks run inside the agent and are not activities:
		// the node's worker does not know the name (the SDK's answer,
		// which Temporal may retry; the test's policy allows one attempt).
		{"a check no workflow schedules (reconcile, undeclared owner)", "Reconcile", activities.ReconcileInput{Plan: p.Ref(), Owners: map[string][]config.Port{"evil": {port(2375)}}},
			notRegistered, "unable to find activityType=Reconcile"},
		{"a check no workflow schedules (drift)", "CheckDrift", activities.DriftInput{Plan: p.Ref()},
			notRegistered, "unable to find activityType=CheckDrift"},
		{"bind mount of /", "CutoverCreate", activities.CutoverInput{Plan: p.Ref(), Module: hostileName, Predecessor: pred([]containers.Mount{{Type: "bind", Source: "/", Destination: "/host"}}, []string{"bridge"})},
			activities.ErrIntentRefused, "intent refused (missing)"},
		{"the Docker socket", "CutoverCreate", activities.CutoverInput{Plan: p.Ref(), Module: hostileName, Predecessor: pred([]containers.Mount{{Type: "bind", Source: "/var/run/docker.sock", Destination: "/var/run/docker.sock"}}, []string{"bridge"})},
			activities.ErrIntentRefused, "intent refused (missing)"},
		{"network=host", "CutoverCreate", activities.CutoverInput{Plan: p.Ref(), Module: hostileName, Predecessor: pred(nil, []string{"host"})},
			activities.ErrIntentRefused, "intent refused (missing)"},
		{"another image", "CutoverCreate", activities.CutoverInput{Plan: with(func(q *config.Plan) { q.Modules[0].Container.Image = svcV1 }).Ref(), Module: hostileName},
			authority.ErrPlanMismatch, planDiffers},
		{"a path outside the declared ones (drift accept)", "AcceptDrift", activities.DriftInput{Plan: p.Ref(), Custody: []custody.Record{{FileState: custody.FileState{Path: "/etc/shadowlike", Exists: true}, Found: true}}},
			activities.ErrIntentRefused, "intent refused (missing)"},
		{"a path outside the declared ones (probe)", "Probe", activities.ProbeInput{Plan: with(func(q *config.Plan) { q.NodeFiles = append(q.NodeFiles, config.FilePlan{Path: "/etc/shadowlike"}) }).Ref()},
			authority.ErrPlanMismatch, planDiffers},
		{"traversal in a flip ID (commit)", "CommitFlip", activities.ConfirmInput{Plan: p.Ref(), ID: hostileName + "-1/../../../../tmp/x-1"},
			activities.ErrIntentRefused, "intent refused (missing)"},
		{"traversal in a flip ID (flip)", "FlipTrip", trip(activities.FlipInput{Plan: p.Ref(), Spec: spec, ID: "../" + hostileName + "-1", ConfirmTimeout: p.ConfirmTimeout}),
			activities.ErrIntentRefused, "intent refused (missing)"},
		{"setuid mode", "ConvergeFiles", activities.ModuleInput{Plan: with(func(q *config.Plan) { q.Modules[0].Files[0].Mode = "4755" }).Ref(), Module: hostileName},
			authority.ErrPlanMismatch, planDiffers},
		{"100-year confirm timeout", "FlipTrip", trip(activities.FlipInput{Plan: p.Ref(), Spec: spec, ID: hostileName + "-1", ConfirmTimeout: century}),
			activities.ErrIntentRefused, "intent refused (missing)"},
		{"100-year confirm timeout in the plan", "FlipTrip", trip(activities.FlipInput{Plan: with(func(q *config.Plan) { q.ConfirmTimeout = century }).Ref(), Spec: spec, ID: hostileName + "-1", ConfirmTimeout: century}),
			authority.ErrPlanMismatch, planDiffers},
		{"ruleset without the management port", "FlipTrip", trip(activities.FlipInput{Plan: p.Ref(), Spec: noMgmt, ID: hostileName + "-1", ConfirmTimeout: p.ConfirmTimeout}),
			activities.ErrIntentRefused, "intent refused (missing)"},
		{"ruleset opening an undeclared port", "Preview", activities.PreviewInput{Plan: p.Ref(), Spec: extra},
			authority.ErrNotDeclared, "opens 2375/tcp for " + hostileName},
		{"health check elsewhere", "FlipTrip", trip(activities.FlipInput{Plan: with(func(q *config.Plan) { q.Modules[1].Health.HTTP = "http://169.254.169.254/latest/meta-data" }).Ref(), Spec: spec, ID: hostileName + "-1", ConfirmTimeout: p.ConfirmTimeout}),
			authority.ErrPlanMismatch, planDiffers},
		{"swap another container", "CutoverSwap", activities.ModuleInput{Plan: with(func(q *config.Plan) { q.Modules[0].Container.Name = "e2ehostvictim" }).Ref(), Module: hostileName},
			authority.ErrPlanMismatch, planDiffers},
		{"another node's plan", "Release", activities.ProbeInput{Plan: with(func(q *config.Plan) { q.Node = "e2eother" }).Ref()},
			activities.ErrWrongNode, `asked to act for node "e2eother"`},
		{"a module not declared", "Prune", activities.PruneInput{Plan: p.Ref(), Modules: []string{"postgres"}},
			activities.ErrIntentRefused, "intent refused (missing)"},
	}
}

// hostileInput is what the hostile workflow is given: the plan it copied
// and, once the node is adopted, an intent the operator's key really
// signed for a release of this node and plan (a valid-looking request).
type hostileInput struct {
	Plan    config.Plan    `json:"plan"`
	Adopted bool           `json:"adopted"`
	Intent  *intent.Signed `json:"intent,omitempty"`
}

// cases are the requests sent: before the node is adopted, the corpus
// with the refusals of the node's own checks; once it serves its own
// workflow, the same requests and the signed release, each refused as
// coming from another workflow (but another node's plan, refused first
// as not this node's).
func (in hostileInput) cases() []hostileCase {
	cs := hostileCases(in.Plan)
	if !in.Adopted {
		return cs
	}
	cs = append(cs, hostileCase{"a copied plan and a valid signed intent (release)", "Release", activities.ProbeInput{Plan: in.Plan.Ref(), Intent: in.Intent}, "", ""})
	for i := range cs {
		if cs[i].Type != activities.ErrWrongNode && cs[i].Type != notRegistered {
			cs[i].Type, cs[i].Says = activities.ErrWrongWorkflow, "serves workflow "+workflows.WorkflowID(in.Plan.Node)
		}
	}
	return cs
}

// hostileWorkflow is the test's own workflow, registered only in this test
// on its own task queue: anyone with access to the namespace can write one.
// It sends every hostile case to the node's activity queue, once each.
func hostileWorkflow(ctx workflow.Context, in hostileInput) ([]hostileOutcome, error) {
	p := in.Plan
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              workflows.NodeQueue(p.Node),
		ScheduleToStartTimeout: time.Minute,
		StartToCloseTimeout:    time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out []hostileOutcome
	for _, c := range in.cases() {
		var res json.RawMessage
		err := workflow.ExecuteActivity(ctx, c.Activity, c.Input).Get(ctx, &res)
		o := hostileOutcome{Name: c.Name, Served: err == nil}
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) {
			o.Type, o.Message, o.NonRetryable = ae.Type(), ae.Error(), ae.NonRetryable()
		} else if err != nil {
			o.Message = err.Error()
		}
		out = append(out, o)
	}
	return out, nil
}

// nodeState is what a refused request must not change: the ruleset, the
// files under the root and under state_dir (paths, modes, bytes), and the
// node's containers as `docker ps -a` lists them. Kept as text per part so
// a difference can be named.
type nodeState map[string]string

func nodeStateOf(t *testing.T, n *node) nodeState {
	t.Helper()
	tree := func(dir string) string {
		var b strings.Builder
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			sum := ""
			if d.Type().IsRegular() {
				c, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				sum = sha256Hex(c)
			}
			fmt.Fprintf(&b, "%s %s %s\n", p, info.Mode(), sum)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	return nodeState{
		"ruleset":   ruleset(t, n),
		"root":      tree(n.Root),
		"state_dir": tree(n.StateDir),
		"docker ps": dockerPS(t),
	}
}

// dockerPS lists the node's containers, with each one's mounts sorted
// (docker lists them in map order).
func dockerPS(t *testing.T) string {
	t.Helper()
	out := docker(t, "ps", "-a", "--no-trunc", "--filter", "name="+hostileName, "--format", "{{.ID}}|{{.Names}}|{{.Image}}|{{.State}}|{{.Ports}}|{{.Mounts}}")
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "|")
		mounts := strings.Split(f[len(f)-1], ",")
		sort.Strings(mounts)
		lines = append(lines, strings.Join(f[:len(f)-1], " ")+" "+strings.Join(mounts, ","))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// same fails the test naming every part that changed, with both versions.
func (s nodeState) same(t *testing.T, after nodeState, what string) {
	t.Helper()
	for _, k := range []string{"ruleset", "root", "state_dir", "docker ps"} {
		if s[k] != after[k] {
			t.Errorf("%s changed the node's %s:\nbefore:\n%s\nafter:\n%s", what, k, s[k], after[k])
		}
	}
}

// TestHostileRequestsRefusedByTheNode: with nothing but access to the
// namespace, before the node is adopted, a workflow of the test's own asks the node's agent for what
// its configuration does not declare (an undeclared port, a bind mount of
// /, the Docker socket, network=host, a path outside the declared ones, a
// traversal in a flip ID, a setuid mode, a 100-year confirm timeout, a
// ruleset without the management port, another node's plan...), and the
// product's own workflow receives signals with crafted plans. Once the
// product's workflow adopted the node, the same workflow's requests, and
// a copied plan with an intent the operator's key really signed, are
// refused as coming from a workflow the node does not serve. Each request
// is refused, non-retryably, naming what differs, and the node's ruleset,
// files, state_dir and containers hash the same. Before that, a module
// whose container prints a password fails its cutover: the password is in
// the agent's log and in no history. The agent is the production build,
// started with ADOPT_FAILPOINTS set: it says it ignores them, and does.
func TestHostileRequestsRefusedByTheNode(t *testing.T) {
	needDocker(t)
	if err := sandbox.ServiceImages(context.Background(), "..", map[string]string{leakPassword: leakImage}); err != nil {
		t.Fatal(err)
	}
	srv := startDevServer(t)
	predecessor(t, hostileName, hostilePort)
	t.Cleanup(func() { _, _ = runDocker("rm", "-f", hostileName+"leak", hostileName+"leak.next") })
	n := upNodeWith(t, sandbox.Spec{Name: hostileName, Index: 200, Files: hostileFound,
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp"})}, srv.Addr(), hostilePlan)
	cfg, err := config.Load(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	plan := cfg.Plan()
	if b, _ := json.Marshal(plan); strings.Contains(string(b), leakPassword) {
		t.Fatal("the password is in the plan: the history check below would prove nothing")
	}

	// The production build ignores failpoints, loudly: armed at the probe,
	// a failpoint build would exit there.
	w := startWorkerBinary(t, n, "adopt-worker", "ADOPT_FAILPOINTS=probe,adopt-marked")
	w.waitRunning(t)
	// Before the node serves a workflow, the node's own checks answer a
	// workflow that is not the product's.
	c := srv.client(t)
	queue := "e2e-hostile-" + n.Name
	hw := worker.New(c, queue, worker.Options{})
	hw.RegisterWorkflowWithOptions(hostileWorkflow, workflow.RegisterOptions{Name: "e2e-hostile-requests"})
	if err := hw.Start(); err != nil {
		t.Fatal(err)
	}
	defer hw.Stop()
	runHostile(t, c, queue, n, hostileInput{Plan: plan}, "e2e-hostile-"+n.Name+"-early")
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("start: %s%s", out, errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if w.cmd.ProcessState != nil || !strings.Contains(w.log.String(), "ADOPT_FAILPOINTS is set") || !strings.Contains(w.log.String(), "IGNORED") {
		t.Fatalf("the production worker did not say it ignores ADOPT_FAILPOINTS (exited: %v):\n%s", w.cmd.ProcessState, w.log)
	}

	// A container that prints a password fails its cutover; the reason in
	// status is short and says where the output is.
	if out, errs, code := adopt(t, "migrate", n.Name, "leaky", "--config", n.cfg); code != 0 {
		t.Fatalf("migrate leaky: %s%s", out, errs)
	}
	st := waitFor(t, n, "the leaky module's cutover to fail", func(st workflows.State) bool {
		return len(st.Modules) == 2 && st.Modules[1].State == workflows.ModuleFailed
	})
	if le := st.Modules[1].LastError; !strings.Contains(le, "withheld from the workflow history") || strings.Contains(le, leakPassword) {
		t.Fatalf("the leaky module's error: %q", le)
	}
	if !strings.Contains(w.log.String(), leakPassword) {
		t.Fatalf("the container's output is not in the agent's log, so the history check below proves nothing:\n%s", w.log)
	}

	// A workflow that is not the product's, with a copied plan and a
	// valid signed intent: refused as not the workflow the node serves.
	k, err := sandbox.OperatorKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := intent.SignerFromFile(k.Path)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := intent.New(authority.ActRelease, []intent.Target{{Node: n.Name, PlanHash: plan.Hash()}}, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := intent.Sign(rel, signer)
	if err != nil {
		t.Fatal(err)
	}
	runHostile(t, c, queue, n, hostileInput{Plan: plan, Adopted: true, Intent: &signed}, "e2e-hostile-"+n.Name)

	// The product's workflow, signalled with crafted plans: each plan is
	// recorded, and the node refuses to act on it.
	signals := []struct {
		name, kind, module string
		change             func(*config.Plan)
		done               func(workflows.State) string // the refusal, once served
	}{
		{"migrate with an undeclared port", workflows.SignalMigrate, hostileName,
			func(q *config.Plan) {
				q.Modules[0].Ports = append(q.Modules[0].Ports, config.Port{Num: 2375, Proto: "tcp"})
			},
			func(st workflows.State) string { return st.Modules[0].LastError }},
		{"retry with a setuid mode", workflows.SignalRetry, hostileName,
			func(q *config.Plan) { q.Modules[0].Files[0].Mode = "4755" },
			func(st workflows.State) string { return st.Modules[0].LastError }},
		{"flip without the management port, a 100-year window", workflows.SignalFlip, "",
			func(q *config.Plan) { q.ManagementPorts, q.ConfirmTimeout = nil, 100*365*24*time.Hour },
			func(st workflows.State) string { return st.LastError }},
	}
	for _, sg := range signals {
		t.Run(sg.name, func(t *testing.T) {
			before := nodeStateOf(t, n)
			prev, _ := status(t, n)
			p := copyPlan(plan)
			sg.change(&p)
			if err := c.SignalWorkflow(context.Background(), workflows.WorkflowID(n.Name), "", sg.kind, workflows.RequestInput{Module: sg.module, Plan: &p}); err != nil {
				t.Fatal(err)
			}
			st := waitFor(t, n, "the crafted request to be served and refused", func(st workflows.State) bool {
				return sg.done(st) != sg.done(prev) && strings.Contains(sg.done(st), "differs from node "+n.Name+"'s own configuration")
			})
			if !strings.Contains(sg.done(st), "nothing was changed") {
				t.Errorf("refusal: %s", sg.done(st))
			}
			before.same(t, nodeStateOf(t, n), "a crafted plan")
		})
	}

	// The password is in no history: not the node's, not the hostile one's.
	for _, id := range []string{workflows.WorkflowID(n.Name), "e2e-hostile-" + n.Name, "e2e-hostile-" + n.Name + "-early"} {
		h := historyOf(t, c, id)
		js, err := protojson.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := proto.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(js), leakPassword) || strings.Contains(string(raw), leakPassword) {
			t.Fatalf("the container's password reached the history of %s", id)
		}
		if strings.Contains(string(js), secretCanary) || strings.Contains(string(raw), secretCanary) {
			t.Fatalf("a found file's content reached the history of %s", id)
		}
	}
}

// runHostile runs the hostile workflow once (as id), checks each outcome
// against in.cases(), and that node n's state is unchanged.
func runHostile(t *testing.T, c client.Client, queue string, n *node, in hostileInput, id string) {
	t.Helper()
	before := nodeStateOf(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "e2e-hostile-requests", in)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []hostileOutcome
	if err := run.Get(ctx, &outcomes); err != nil {
		t.Fatal(err)
	}
	cases := in.cases()
	if len(outcomes) != len(cases) {
		t.Fatalf("%d outcomes for %d cases", len(outcomes), len(cases))
	}
	for i, o := range outcomes {
		want := cases[i]
		if o.Served || o.Type != want.Type || (!o.NonRetryable && want.Type != notRegistered) || !strings.Contains(o.Message, want.Says) {
			t.Errorf("%s (%s): served=%v type=%q non-retryable=%v\n  %s\nwant a non-retryable %s saying %q", o.Name, want.Activity, o.Served, o.Type, o.NonRetryable, o.Message, want.Type, want.Says)
		}
	}
	before.same(t, nodeStateOf(t, n), "a hostile request ("+id+")")
}

func runDocker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	return string(out), err
}

// historyOf is the whole history of a workflow's latest run.
func historyOf(t *testing.T, c client.Client, id string) *historypb.History {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	return h
}
