package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/activities/authority"
	"adoption/activities/caller"
	"adoption/config"
	"adoption/containers"
	"adoption/containers/cutover"
	"adoption/custody"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
	"adoption/nodestate"
)

// recorder is every node part a hostile request could reach: each call that
// would change the node is counted, so a refusal can be shown to change
// nothing.
type recorder struct {
	changes []string
	pred    *cutover.Predecessor
	waitErr error
}

func (r *recorder) Open(node, owner string, ports []config.Port) ([]marks.MarkedRule, []marks.MarkedRule, error) {
	r.changes = append(r.changes, "open "+owner)
	return nil, nil, nil
}
func (r *recorder) Close(node, owner string) ([]marks.MarkedRule, error) {
	r.changes = append(r.changes, "close "+owner)
	return nil, nil
}
func (r *recorder) Release(string) ([]marks.MarkedRule, error) {
	r.changes = append(r.changes, "release")
	return nil, nil
}
func (r *recorder) List(string) ([]marks.MarkedRule, error) { return nil, nil }
func (r *recorder) Flip(flip.MeshSpec, string, string) (*flip.RevertPlan, error) {
	r.changes = append(r.changes, "flip")
	return &flip.RevertPlan{}, nil
}
func (r *recorder) Revert(*flip.RevertPlan) error {
	r.changes = append(r.changes, "revert")
	return nil
}
func (r *recorder) InForce(*flip.RevertPlan, string) error { return nil }
func (r *recorder) Reassert(flip.MeshSpec) (bool, error)   { return false, nil }
func (r *recorder) Commit(*flip.RevertPlan) (string, error) {
	r.changes = append(r.changes, "commit")
	return "", nil
}
func (r *recorder) Preflight(context.Context, cutover.Spec) (*cutover.Predecessor, error) {
	return r.pred, nil
}
func (r *recorder) Create(_ context.Context, s cutover.Spec, p *cutover.Predecessor) (*cutover.Carried, error) {
	r.changes = append(r.changes, "create "+s.Name)
	return &cutover.Carried{}, nil
}
func (r *recorder) PortsAnswer(context.Context, []uint16) error { return nil }
func (r *recorder) Swap(context.Context, string, time.Duration) error {
	r.changes = append(r.changes, "swap")
	return nil
}
func (r *recorder) WaitHealthy(context.Context, string, func(context.Context) error, time.Duration) error {
	return r.waitErr
}
func (r *recorder) Rollback(context.Context, string) error { return nil }
func (r *recorder) Prune(context.Context, string) error {
	r.changes = append(r.changes, "prune")
	return nil
}

const localYAML = `
node: {name: n1, role: control, root: "ROOT", state_dir: "STATE", management_ports: ["22/tcp"]}
foundation: {ports: {registry: 5001/tcp}}
modules:
  - name: app
    ports: ["8080/tcp"]
    container: {name: app, image: app:1, ports: {"8080/tcp": "8080/tcp"}}
    files: [{path: /srv/app/app.env, content: "mesh\n", mode: "0640"}]
    health: {tcp: 127.0.0.1:8080}
node_files: [{path: /etc/hosts, content: "127.0.0.1 localhost\n"}]
flip: {confirm_timeout: 1m, witness: {disabled: true}}
authority: {unsigned: true}
`

// hostileSetup is a node whose own configuration is a file, as the agent
// reads it, with every part recording what would change.
func hostileSetup(t *testing.T) (*Activities, *recorder, config.Plan, string) {
	t.Helper()
	a, root := newActs(t)
	state := filepath.Join(t.TempDir(), "state")
	cfgPath := filepath.Join(t.TempDir(), "n1.yaml")
	must(t, os.WriteFile(cfgPath, []byte(strings.NewReplacer("ROOT", root, "STATE", state).Replace(localYAML)), 0o600))
	cfg, err := config.Load(cfgPath)
	must(t, err)
	rec := &recorder{pred: &cutover.Predecessor{ID: "abc", Name: "app", Networks: []string{"bridge"}}}
	a.Marks, a.Flipper, a.Cutover = rec, rec, rec
	a.StartWatchdog = func() error { rec.changes = append(rec.changes, "watchdog"); return nil }
	a.Local = func() (*authority.Authority, error) {
		c, err := config.Load(cfgPath)
		if err != nil {
			return nil, err
		}
		return authority.FromConfig(c, cfgPath), nil
	}
	must(t, os.MkdirAll(filepath.Join(root, "srv/app"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "srv/app/app.env"), []byte("APP_PASSWORD=found\n"), 0o640))
	must(t, os.WriteFile(filepath.Join(root, "etc-shadow"), []byte("root:$6$secret\n"), 0o600))
	adoptedAs(t, a, caller.Caller{Namespace: "default", Workflow: productWorkflow})
	return a, rec, cfg.Plan(), cfgPath
}

// clone is a deep copy through JSON, as the plan travels.
func clone(t *testing.T, p config.Plan) config.Plan {
	t.Helper()
	b, err := json.Marshal(p)
	must(t, err)
	var q config.Plan
	must(t, json.Unmarshal(b, &q))
	return q
}

// TestHostileRequestsAreRefused is the corpus at the activity
// boundary: each request is refused non-retryably, by type, naming what
// differs, and nothing on the node changes.
func TestHostileRequestsAreRefused(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		typ  string
		want string
		run  func(a *Activities, p config.Plan) error
	}{
		{"undeclared port in the plan", authority.ErrPlanMismatch, "differs from node n1's own configuration", func(a *Activities, p config.Plan) error {
			p.Modules[0].Ports = append(p.Modules[0].Ports, config.Port{Num: 2375, Proto: "tcp"})
			_, err := a.OpenRules(ctx, RulesInput{Plan: p.Ref(), Owner: "app", Ports: p.Modules[0].Ports})
			return err
		}},
		{"undeclared port with the node's plan", authority.ErrNotDeclared, "port 2375/tcp is not declared for app", func(a *Activities, p config.Plan) error {
			_, err := a.OpenRules(ctx, RulesInput{Plan: p.Ref(), Owner: "app", Ports: []config.Port{{Num: 2375, Proto: "tcp"}}})
			return err
		}},
		{"undeclared owner in a reconcile", authority.ErrNotDeclared, `owner "evil" is neither the foundation nor a module`, func(a *Activities, p config.Plan) error {
			_, err := a.reconcile(ctx, ReconcileInput{Plan: p.Ref(), Owners: map[string][]config.Port{"evil": {{Num: 2375, Proto: "tcp"}}}})
			return err
		}},
		{"forward path for a port the container does not publish", authority.ErrNotDeclared, "port 2375/tcp is not published by app's container in node n1's configuration (published: 8080/tcp)", func(a *Activities, p config.Plan) error {
			_, err := a.OpenRules(ctx, RulesInput{Plan: p.Ref(), Owner: "app", Ports: p.Modules[0].Ports, Forward: []config.Port{{Num: 2375, Proto: "tcp"}}})
			return err
		}},
		{"forward path for the foundation", authority.ErrNotDeclared, "foundation asks to open published ports 5001/tcp on the forward path, but node n1's configuration gives it no container", func(a *Activities, p config.Plan) error {
			_, err := a.OpenRules(ctx, RulesInput{Plan: p.Ref(), Owner: flip.OwnerFoundation, Forward: []config.Port{{Num: 5001, Proto: "tcp"}}})
			return err
		}},
		{"forward path for an undeclared owner in a reconcile", authority.ErrNotDeclared, `owner "evil" is neither the foundation nor a module`, func(a *Activities, p config.Plan) error {
			_, err := a.reconcile(ctx, ReconcileInput{Plan: p.Ref(), Forward: map[string][]config.Port{"evil": {{Num: 2375, Proto: "tcp"}}}})
			return err
		}},
		{"forward path for an unpublished port in a reconcile", authority.ErrNotDeclared, "port 9999/tcp is not published by app's container", func(a *Activities, p config.Plan) error {
			_, err := a.reconcile(ctx, ReconcileInput{Plan: p.Ref(), Owners: map[string][]config.Port{"app": p.Modules[0].Ports}, Forward: map[string][]config.Port{"app": {{Num: 9999, Proto: "tcp"}}}})
			return err
		}},
		{"another image", authority.ErrPlanMismatch, "differs from node n1's own configuration", func(a *Activities, p config.Plan) error {
			p.Modules[0].Container.Image = "docker:cli"
			_, err := a.CutoverCreate(ctx, CutoverInput{Plan: p.Ref(), Module: "app"})
			return err
		}},
		{"bind mount of / and the Docker socket", authority.ErrNotDeclared, "the predecessor the request describes is not the one on node n1: mounts", func(a *Activities, p config.Plan) error {
			_, err := a.CutoverCreate(ctx, CutoverInput{Plan: p.Ref(), Module: "app", Predecessor: &cutover.Predecessor{ID: "abc", Name: "app",
				Mounts: []containers.Mount{{Type: "bind", Source: "/", Destination: "/host"}, {Type: "bind", Source: "/var/run/docker.sock", Destination: "/var/run/docker.sock"}}}})
			return err
		}},
		{"network=host", authority.ErrNotDeclared, `networks: the request says ["host"]`, func(a *Activities, p config.Plan) error {
			_, err := a.CutoverCreate(ctx, CutoverInput{Plan: p.Ref(), Module: "app", Predecessor: &cutover.Predecessor{ID: "abc", Name: "app", Networks: []string{"host"}}})
			return err
		}},
		{"a path outside the declared ones", authority.ErrNotDeclared, `path "/etc-shadow" is not declared`, func(a *Activities, p config.Plan) error {
			_, err := a.AcceptDrift(ctx, DriftInput{Plan: p.Ref(), Custody: []custody.Record{{FileState: custody.FileState{Path: "/etc-shadow", Exists: true}, Found: true}}})
			return err
		}},
		{"a path outside the declared ones, in the plan", authority.ErrPlanMismatch, "differs from node n1's own configuration", func(a *Activities, p config.Plan) error {
			p.NodeFiles = append(p.NodeFiles, config.FilePlan{Path: "/etc-shadow"})
			_, err := a.Probe(ctx, ProbeInput{Plan: p.Ref()})
			return err
		}},
		{"traversal in a flip ID (commit)", authority.ErrBadRequest, `flip ID "n1-1/../../../../tmp/x-1" is not one of node n1's`, func(a *Activities, p config.Plan) error {
			_, err := a.CommitFlip(ctx, ConfirmInput{Plan: p.Ref(), ID: "n1-1/../../../../tmp/x-1"})
			return err
		}},
		{"traversal in a flip ID (flip)", authority.ErrBadRequest, `flip ID "../n1-1"`, func(a *Activities, p config.Plan) error {
			_, err := a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: specOf(p), ID: "../n1-1", ConfirmTimeout: p.ConfirmTimeout}})
			return err
		}},
		{"setuid mode", authority.ErrPlanMismatch, "differs from node n1's own configuration", func(a *Activities, p config.Plan) error {
			p.Modules[0].Files[0].Mode = "4755"
			_, err := a.ConvergeFiles(ctx, ModuleInput{Plan: p.Ref(), Module: "app"})
			return err
		}},
		{"100-year confirm timeout in the plan", authority.ErrPlanMismatch, "differs from node n1's own configuration", func(a *Activities, p config.Plan) error {
			p.ConfirmTimeout = 100 * 365 * 24 * time.Hour
			_, err := a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: specOf(p), ID: "n1-1", ConfirmTimeout: p.ConfirmTimeout}})
			return err
		}},
		{"100-year confirm timeout beside the node's plan", authority.ErrNotDeclared, "confirm timeout 876000h0m0s is not node n1's flip.confirm_timeout (1m0s)", func(a *Activities, p config.Plan) error {
			_, err := a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: specOf(p), ID: "n1-1", ConfirmTimeout: 100 * 365 * 24 * time.Hour}})
			return err
		}},
		{"ruleset without the management port", authority.ErrNotDeclared, "does not keep management port 22/tcp", func(a *Activities, p config.Plan) error {
			s := specOf(p)
			s.Input = s.Input[1:]
			_, err := a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: s, ID: "n1-1", ConfirmTimeout: p.ConfirmTimeout}})
			return err
		}},
		{"ruleset opening an undeclared port", authority.ErrNotDeclared, "opens 2375/tcp for app", func(a *Activities, p config.Plan) error {
			s := specOf(p)
			s.Input = append(s.Input, flip.Allow{Port: config.Port{Num: 2375, Proto: "tcp"}, Owner: "app"})
			_, err := a.Preview(ctx, PreviewInput{Plan: p.Ref(), Spec: s})
			return err
		}},
		{"ruleset forwarding an undeclared port", authority.ErrNotDeclared, "forwards 9999/tcp", func(a *Activities, p config.Plan) error {
			s := specOf(p)
			s.Forward = append(s.Forward, flip.Allow{Port: config.Port{Num: 9999, Proto: "tcp"}, Owner: "app"})
			_, err := a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: s, ID: "n1-1", ConfirmTimeout: p.ConfirmTimeout}})
			return err
		}},
		{"health endpoint elsewhere", authority.ErrPlanMismatch, "differs from node n1's own configuration", func(a *Activities, p config.Plan) error {
			p.Modules[0].Health.TCP = "10.0.0.1:8080"
			_, err := a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: specOf(p), ID: "n1-1", ConfirmTimeout: p.ConfirmTimeout}})
			return err
		}},
		{"management port removed from the plan", authority.ErrPlanMismatch, "differs from node n1's own configuration", func(a *Activities, p config.Plan) error {
			p.ManagementPorts = nil
			_, err := a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: specOf(p), ID: "n1-1", ConfirmTimeout: p.ConfirmTimeout}})
			return err
		}},
		{"another node's plan", ErrWrongNode, `asked to act for node "n2"`, func(a *Activities, p config.Plan) error {
			p.Node = "n2"
			_, err := a.Release(ctx, ProbeInput{Plan: p.Ref()})
			return err
		}},
		{"a module not declared, pruned", ErrBadModule, `module "postgres" is not in node n1's configuration`, func(a *Activities, p config.Plan) error {
			_, err := a.Prune(ctx, PruneInput{Plan: p.Ref(), Modules: []string{"postgres"}})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, rec, plan, _ := hostileSetup(t)
			before := a.Files.Inspect("/srv/app/app.env")
			err := tc.run(a, clone(t, plan))
			msg := appErr(t, err, tc.typ)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("refusal lacks %q:\n%s", tc.want, msg)
			}
			// A request names its plan by hash: the refusal names the
			// node's own, so the operator can tell which file is which.
			if own := "(sha256 " + plan.Hash()[:12] + ")"; tc.typ == authority.ErrPlanMismatch && !strings.Contains(msg, own) {
				t.Errorf("refusal does not name the node's own plan %s:\n%s", own, msg)
			}
			if len(rec.changes) != 0 {
				t.Errorf("a refused request changed the node: %v", rec.changes)
			}
			if after := a.Files.Inspect("/srv/app/app.env"); after != before {
				t.Errorf("a refused request changed a declared file: %+v -> %+v", before, after)
			}
		})
	}
}

// TestTheNodesOwnPlanIsServed: the same requests carrying the node's own
// plan and its own choices go through, acting on the local plan.
func TestTheNodesOwnPlanIsServed(t *testing.T) {
	ctx := context.Background()
	a, rec, plan, _ := hostileSetup(t)
	p := clone(t, plan)
	if _, err := a.OpenRules(ctx, RulesInput{Plan: p.Ref(), Owner: "app", Ports: p.Modules[0].Ports}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.OpenRules(ctx, RulesInput{Plan: p.Ref(), Owner: flip.OwnerFoundation, Ports: []config.Port{{Num: 5001, Proto: "tcp"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Preview(ctx, PreviewInput{Plan: p.Ref(), Spec: specOf(p)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CutoverCreate(ctx, CutoverInput{Plan: p.Ref(), Module: "app", Predecessor: rec.pred}); err != nil {
		t.Fatal(err)
	}
	// The node's own plan is not enough for a flip: the node's own gates
	// (app's cutover is not confirmed, its preview refuses) say no, and
	// nothing changes (gates_test.go has the flip they let through).
	res, err := a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: specOf(p), ID: "n1-1", ConfirmTimeout: p.ConfirmTimeout}})
	if why := refusedTrip(t, res, err); !strings.Contains(why, "module app's cutover is migrating on node n1, not confirmed by it") {
		t.Fatalf("flip: %s", why)
	}
	if strings.Join(rec.changes, ",") != "open app,open foundation,create app" {
		t.Fatalf("changes: %v", rec.changes)
	}
}

// TestAnEditedFileAppliesAtTheNextRequest: the operator changes the node's
// file, and the next request must carry the new plan; the old one is now
// the mismatch.
func TestAnEditedFileAppliesAtTheNextRequest(t *testing.T) {
	ctx := context.Background()
	a, _, plan, cfgPath := hostileSetup(t)
	b, err := os.ReadFile(cfgPath)
	must(t, err)
	must(t, os.WriteFile(cfgPath, []byte(strings.Replace(string(b), `ports: ["8080/tcp"]`, `ports: ["8080/tcp", "8443/tcp"]`, 1)), 0o600))
	_, err = a.Probe(ctx, ProbeInput{Plan: clone(t, plan).Ref()})
	msg := appErr(t, err, authority.ErrPlanMismatch)
	if !strings.Contains(msg, "the request's plan (sha256 "+plan.Hash()[:12]+") differs") || !strings.Contains(msg, cfgPath) || !strings.Contains(msg, "adopt retry n1") {
		t.Fatalf("refusal: %s", msg)
	}
	c, err := config.Load(cfgPath)
	must(t, err)
	if _, err := a.Probe(ctx, ProbeInput{Plan: c.Plan().Ref()}); err != nil {
		t.Fatalf("the edited file's plan was refused: %v", err)
	}
	must(t, os.WriteFile(cfgPath, []byte("node: {name: n1}\nbogus: 1\n"), 0o600))
	_, err = a.Probe(ctx, ProbeInput{Plan: c.Plan().Ref()})
	appErr(t, err, authority.ErrLocalConfig)
}

// TestContainerOutputStaysInTheLog: a container's logs (here a password)
// are not in the activity's error, which is what reaches the history.
func TestContainerOutputStaysInTheLog(t *testing.T) {
	a, rec, plan, _ := hostileSetup(t)
	const password = "hunter2-db-password"
	rec.waitErr = &cutover.OutputError{Reason: "container app stopped (exited, exit code 1) 1s after start, before it was healthy",
		What: "its last output", Output: "connecting with DB_PASSWORD=" + password, Err: cutover.ErrUnhealthy}
	if _, err := a.CutoverSwap(context.Background(), ModuleInput{Plan: clone(t, plan).Ref(), Module: "app"}); err != nil {
		t.Fatal(err) // the cutover under way, as the check that follows needs
	}
	_, err := a.CutoverWaitHealthy(context.Background(), ModuleInput{Plan: clone(t, plan).Ref(), Module: "app"})
	msg := appErr(t, err, ErrUnhealthy)
	if strings.Contains(msg, password) || strings.Contains(err.Error(), password) {
		t.Fatalf("the container's output reached the activity error: %s", msg)
	}
	var unwrapped interface{ Unwrap() error }
	if errors.As(err, &unwrapped) && unwrapped.Unwrap() != nil && strings.Contains(unwrapped.Unwrap().Error(), password) {
		t.Fatal("the container's output is in the error's cause")
	}
	for _, want := range []string{"exit code 1", "its last output is withheld from the workflow history", "agent's log on node n1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("short reason lacks %q: %s", want, msg)
		}
	}
}

// TestFoundHashesAreKeyed: what the probe and adoption send carries the
// keyed digest, never the plain sha256 of a found file.
func TestFoundHashesAreKeyed(t *testing.T) {
	a, _, plan, _ := hostileSetup(t)
	ad, err := a.Adopt(context.Background(), AdoptInput{Plan: clone(t, plan).Ref(), WorkflowID: "node-migration/n1"})
	must(t, err)
	pr, err := a.Probe(context.Background(), ProbeInput{Plan: clone(t, plan).Ref()})
	must(t, err)
	b, _ := json.Marshal([]any{ad, pr})
	sum := sha256.Sum256([]byte("APP_PASSWORD=found\n"))
	plain := hex.EncodeToString(sum[:])
	if strings.Contains(string(b), plain) {
		t.Fatal("a found file's plain sha256 is in a result")
	}
	if !strings.Contains(string(b), "hmac-sha256:") {
		t.Fatalf("no keyed digest in the results: %s", b)
	}
}

// specOf is the mesh ruleset the workflow derives for plan with every
// module migrated and genesis done.
func specOf(p config.Plan) flip.MeshSpec {
	s := flip.MeshSpec{Node: p.Node, Drop: p.Drop}
	for _, mp := range p.ManagementPorts {
		s.Input = append(s.Input, flip.Allow{Port: mp, Owner: "management"})
	}
	for _, fp := range p.Foundation {
		s.Input = append(s.Input, flip.Allow{Port: fp.Port, Owner: flip.OwnerFoundation})
	}
	for _, m := range p.Modules {
		for _, port := range m.Ports {
			s.Input = append(s.Input, flip.Allow{Port: port, Owner: m.Name})
			s.Forward = append(s.Forward, flip.Allow{Port: port, Owner: m.Name})
		}
	}
	return s
}

// forwardRecorder is a recorder whose marks also open the forward path.
type forwardRecorder struct{ *recorder }

func (r forwardRecorder) OpenForward(node, owner string, ports []config.Port) ([]marks.MarkedRule, []marks.MarkedRule, error) {
	r.changes = append(r.changes, "open-forward "+owner)
	var added []marks.MarkedRule
	for _, p := range ports {
		added = append(added, marks.MarkedRule{Mark: marks.Mark{Node: node, Owner: owner, Port: p.Num, Proto: p.Proto}})
	}
	return added, nil, nil
}

// TestReconcileReassertsForwardMarks: reconcile puts back a module's marks
// on the forward path as well as on the input path, and a worker whose
// marks cannot reach the forward path refuses before changing anything.
func TestReconcileReassertsForwardMarks(t *testing.T) {
	ctx := context.Background()
	a, rec, plan, _ := hostileSetup(t)
	must(t, a.State.RecordOpened("app")) // the node placed app's marks
	p := clone(t, plan)
	in := ReconcileInput{Plan: p.Ref(), Owners: map[string][]config.Port{"app": p.Modules[0].Ports}, Forward: map[string][]config.Port{"app": {{Num: 8080, Proto: "tcp"}}}}
	if _, err := a.reconcile(ctx, in); err == nil || !strings.Contains(err.Error(), "cannot open the forward path") {
		t.Fatalf("a worker without forward marks reconciled forward ports: %v", err)
	}
	if len(rec.changes) != 0 {
		t.Fatalf("the refused reconcile changed the node: %v", rec.changes)
	}
	a.Marks = forwardRecorder{rec}
	res, err := a.reconcile(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"open app", "open-forward app"}; strings.Join(rec.changes, ",") != strings.Join(want, ",") {
		t.Errorf("reconcile did %v, want %v", rec.changes, want)
	}
	if len(res.Added) != 1 || res.Added[0].Mark.Port != 8080 {
		t.Errorf("reconcile reports %+v, want the forward mark for 8080/tcp", res.Added)
	}
}

// TestReconcileOpensOnlyWhatTheNodePlaced: a reconcile needs no intent,
// so it puts back only the marks the node placed itself. A declared module
// never migrated (no OpenRules, no cutover record) is left alone: its port
// is not opened, and the answer names it. The foundation of an adopted
// node, a module whose ports OpenRules opened, and one with a cutover under
// way are put back; on a node not adopted (or released) nothing is.
func TestReconcileOpensOnlyWhatTheNodePlaced(t *testing.T) {
	ctx := context.Background()
	a, rec, plan, _ := hostileSetup(t)
	p := clone(t, plan)
	app := map[string][]config.Port{"app": p.Modules[0].Ports}
	res, err := a.reconcile(ctx, ReconcileInput{Plan: p.Ref(), Owners: app})
	if err != nil || len(rec.changes) != 0 || len(res.Added) != 0 || strings.Join(res.NotPlaced, ",") != "app" {
		t.Fatalf("a module never migrated: %+v %v, changes %v", res, err, rec.changes)
	}
	must(t, a.State.UpdateCutover("app", func(*nodestate.CutoverRecord) (*nodestate.CutoverRecord, error) {
		return &nodestate.CutoverRecord{State: nodestate.CutoverRolledBack}, nil
	}))
	if res, err := a.reconcile(ctx, ReconcileInput{Plan: p.Ref(), Owners: app}); err != nil || len(rec.changes) != 0 || len(res.NotPlaced) != 1 {
		t.Fatalf("a module rolled back: %+v %v, changes %v", res, err, rec.changes)
	}
	must(t, a.State.UpdateCutover("app", func(*nodestate.CutoverRecord) (*nodestate.CutoverRecord, error) {
		return &nodestate.CutoverRecord{State: nodestate.CutoverMigrating}, nil
	}))
	if _, err := a.reconcile(ctx, ReconcileInput{Plan: p.Ref(), Owners: app}); err != nil || strings.Join(rec.changes, ",") != "open app" {
		t.Fatalf("a module under way: %v, changes %v", err, rec.changes)
	}
	rec.changes = nil
	must(t, a.State.ClearAdopted())
	if res, err := a.reconcile(ctx, ReconcileInput{Plan: p.Ref(), Owners: app}); err != nil || len(rec.changes) != 0 || len(res.NotPlaced) != 1 {
		t.Fatalf("a node not adopted: %+v %v, changes %v", res, err, rec.changes)
	}
}

// TestARequestCarryingAWholePlanIsCheckedByItsHash: an older orchestrator's
// request carries the whole plan where a reference now goes; the node
// names it by its own hash, serves it when it is the node's own plan and
// refuses it when it is not, as it refuses a reference.
func TestARequestCarryingAWholePlanIsCheckedByItsHash(t *testing.T) {
	ctx := context.Background()
	a, _, plan, _ := hostileSetup(t)
	legacy := func(p config.Plan) ProbeInput {
		b, err := json.Marshal(map[string]any{"plan": p})
		must(t, err)
		var in ProbeInput
		must(t, json.Unmarshal(b, &in))
		return in
	}
	in := legacy(clone(t, plan))
	if in.Plan != plan.Ref() {
		t.Fatalf("a whole plan read as %+v, not %+v", in.Plan, plan.Ref())
	}
	if _, err := a.Probe(ctx, in); err != nil {
		t.Fatalf("the node's own plan, whole, was refused: %v", err)
	}
	other := clone(t, plan)
	other.Modules[0].Container.Image = "docker:cli"
	_, err := a.Probe(ctx, legacy(other))
	if msg := appErr(t, err, authority.ErrPlanMismatch); !strings.Contains(msg, "(sha256 "+other.Hash()[:12]+") differs") {
		t.Fatalf("refusal: %s", msg)
	}
}
