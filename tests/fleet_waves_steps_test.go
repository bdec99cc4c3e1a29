package tests

// The steps of TestFleetWavesMigrateFlip beyond its waves: its fleet (the
// file, the reference nodes, the CLI calls it makes), the bad fleet files
// refused, a takeover and a flip seen by the nodes' clients, a node
// replaced outside the fleet and reported by an ask round, and a fleet
// flip paused between its waves.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"adoption/internal/wait"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

type fleetState = fleet.FleetState

// wavesFleet is the test's fleet: its dev server, name, fleet file and
// reference nodes (the control node first), with nodes the same for the
// status helpers.
type wavesFleet struct {
	t     *testing.T
	srv   *devServer
	name  string
	file  string
	refs  []*refNode
	nodes []*node
}

// write writes the fleet file: the server, the name, the nodes, and extra.
func (f *wavesFleet) write(extra string) {
	f.t.Helper()
	body := temporalYAML(f.srv) + fmt.Sprintf("name: %s\nnodes:\n", f.name)
	for _, n := range f.nodes {
		body += "  - " + n.cfg + "\n"
	}
	if err := os.WriteFile(f.file, []byte(body+extra), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// status is `adopt fleet status --json`.
func (f *wavesFleet) status() fleetState {
	f.t.Helper()
	out, errs, code := adopt(f.t, "fleet", "status", "--fleet", f.file, "--json")
	if code != 0 {
		f.t.Fatalf("fleet status: %s", errs)
	}
	var st fleetState
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		f.t.Fatal(err)
	}
	return st
}

// wait polls the fleet's status until cond holds.
func (f *wavesFleet) wait(what string, timeout time.Duration, cond func(fleetState) bool) fleetState {
	f.t.Helper()
	var st fleetState
	wait.Until(f.t, timeout, what, func() (bool, string) {
		st = f.status()
		return cond(st), fmt.Sprintf("op %+v, events:\n%s", st.Op, strings.Join(st.Events, "\n"))
	})
	return st
}

// op runs a fleet migrate or flip and waits until the fleet says it
// finished, without a failure.
func (f *wavesFleet) op(want string, args ...string) fleetState {
	f.t.Helper()
	return f.opWithin(3*time.Minute, want, args...)
}

// opWithin is op, waiting up to within for the op to finish.
func (f *wavesFleet) opWithin(within time.Duration, want string, args ...string) fleetState {
	f.t.Helper()
	out, errs, code := adopt(f.t, append(append([]string{"fleet"}, args...), "--fleet", f.file)...)
	if code != 0 || !strings.Contains(out, want) {
		f.t.Fatalf("fleet %s: exit %d, want %q\n%s%s", strings.Join(args, " "), code, want, out, errs)
	}
	st := f.wait("fleet "+strings.Join(args, " ")+" to finish", within, func(st fleetState) bool {
		return st.Op != nil && (st.Op.Done || st.Op.Halted != "")
	})
	if st.Op.Halted != "" || strings.Contains(st.Op.Standing(), "failed") {
		f.t.Fatalf("fleet %s: %s", strings.Join(args, " "), st.Op.Standing())
	}
	return st
}

// tookOver: web migrated on r, its container took over the predecessor's
// in the node's own engine (web runs v2, web.predecessor is kept
// stopped), and a client in the peer namespace gets v2 through the same
// published port, web's data as it was (sums, read before the fleet).
func (f *wavesFleet) tookOver(r *refNode, sums map[string]string) {
	t := f.t
	t.Helper()
	if got := r.get(t, 18080, "/version"); got != "v2" {
		t.Errorf("%s: a client gets %q from web after its migrate, want v2", r.Name, got)
	}
	if got := r.get(t, 18080, "/sums"); got != sums[r.Name] {
		t.Errorf("%s: web's data changed in the takeover:\n%s\nwant\n%s", r.Name, got, sums[r.Name])
	}
	if ps := r.engine(t, "ps", "-a", "--format", "{{.Names}} {{.State}}", "--filter", "name=web"); !strings.Contains(ps, "web running") || !strings.Contains(ps, "web.predecessor exited") {
		t.Errorf("%s's engine should run web and keep web.predecessor stopped: %q", r.Name, ps)
	}
}

// servedFlipped: r converged under the mesh's own ruleset (nothing of
// ufw's left in iptables), and a client in the peer namespace still gets
// web (v2) on its published port, through the node engine's DNAT, which
// the flip left in place.
func (f *wavesFleet) servedFlipped(r *refNode) {
	t := f.t
	t.Helper()
	if save := r.onNodeOut(t, "iptables-save"); strings.Contains(save, "ufw") {
		t.Errorf("%s converged, yet iptables-save still holds ufw's chains", r.Name)
	}
	if nat := r.onNodeOut(t, "iptables", "-t", "nat", "-S", "DOCKER"); !strings.Contains(nat, "--dport 18080 -j DNAT") {
		t.Errorf("%s: its engine no longer DNATs 18080 after the flip:\n%s", r.Name, nat)
	}
	if got := r.get(t, 18080, "/version"); got != "v2" {
		t.Errorf("%s flipped: a client gets %q from web's published port 18080, want v2", r.Name, got)
	}
}

// previewApproves waits (a minute at most) until r's preview approves
// again after the operator's ufw edits are undone. ufw rewrites its
// chains, which can take the module's marks out with them: until the
// node's reconcile (every 5 s) has put them back, the preview refuses,
// web's 18080 widening. A drift check (every 5 m) that fell while the
// port was open recorded it, which blocks the flip until the next check
// finds the firewall as adopted again: the operator, having restored it,
// accepts it (adopt drift accept). The marks counted right after the edit
// and once approved are logged.
func (f *wavesFleet) previewApproves(r *refNode) {
	t := f.t
	t.Helper()
	marks := func() int {
		return strings.Count(r.onNodeOut(t, "iptables-save")+r.onNodeOut(t, "ip6tables-save"), ":web:18080/tcp")
	}
	start, before := time.Now(), marks()
	refusals, accepted := -1, false
	wait.Until(t, time.Minute, r.Name+"'s preview to approve after the ufw edits", func() (bool, string) {
		refusals++
		out, errs, _ := adopt(t, "preview", r.Name, "--config", r.cfg)
		if strings.Contains(out, "APPROVED") {
			return true, ""
		}
		if strings.Contains(out, "drift(s) not reviewed") && !accepted {
			if out, errs, code := adopt(t, "drift", "accept", r.Name, "--config", r.cfg); code != 0 {
				t.Fatalf("adopt drift accept %s: %s%s", r.Name, out, errs)
			}
			accepted = true
		}
		return false, out + errs
	})
	t.Logf("measured: %s's preview approved %s after the ufw edits (%d refusal(s) before, drift accepted: %v); web's marks: %d right after, %d once approved",
		r.Name, time.Since(start).Round(100*time.Millisecond), refusals, accepted, before, marks())
}

// opState is how node stands in the fleet's op ("" if not a target).
func opState(st fleetState, node string) string {
	if st.Op == nil {
		return ""
	}
	for _, n := range st.Op.Nodes {
		if n.Node == node {
			return n.State
		}
	}
	return ""
}

// refusesBadFiles: a fleet file whose waves do not cover the fleet, with a
// percentage over 100, a negative budget, or an ask_after under a second,
// is refused by `adopt fleet start` at once, the key named, and neither
// the fleet's workflow nor any node's exists after.
func (f *wavesFleet) refusesBadFiles() {
	t := f.t
	for _, c := range []struct{ extra, want string }{
		{"waves: [1, 1]\n", "waves: [1 1] cover 2 of the fleet's 3 node(s) after the control node"},
		{"waves: [1, \"150%\"]\n", "waves[1]: 150%: a percentage over 100"},
		{"waves: [1, 2]\nmax_failed: -1\n", "max_failed: -1: negative"},
		{"waves: [1, 2]\nask_after: 500ms\n", "ask_after: 500ms: give a duration from 1s to 24h"},
	} {
		f.write(c.extra)
		out, errs, code := adopt(t, "fleet", "start", "--fleet", f.file)
		if code != exitCodeError || !strings.Contains(errs, c.want) || !strings.Contains(errs, "nothing was started or sent") {
			t.Errorf("fleet start with %q: exit %d, want %d naming %q and that nothing was started\n%s%s", c.extra, code, exitCodeError, c.want, out, errs)
		}
	}
	c := f.srv.client(t)
	ids := []string{fleet.FleetID(f.name)}
	for _, n := range f.nodes {
		ids = append(ids, workflows.WorkflowID(n.Name))
	}
	for _, id := range ids {
		_, err := c.DescribeWorkflow(context.Background(), id, "")
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			t.Errorf("after the refused fleet files, workflow %s: %v, want none", id, err)
		}
	}
}

// exitCodeError is the CLI's exit code for an error (a bad file among them).
const exitCodeError = 1

// replacedOutside: once the fleet has continued as new (its history grown
// by migrates every node answers at once), n's workflow is terminated and
// started again outside the fleet, by hand. The fleet cannot see that run
// end (a child's future does not cross continue-as-new); its first ask
// round after the restart, ask_after (15 s) into its new run, reports n
// replaced outside the fleet. Within wave 2's budget, it holds nothing.
func (f *wavesFleet) replacedOutside(n *node) {
	t := f.t
	const askAfter = 15 * time.Second
	runs := f.status().Runs
	deadline := time.Now().Add(4 * time.Minute)
	grown := 0
	for f.status().Runs <= runs {
		if time.Now().After(deadline) {
			t.Fatalf("the fleet did not continue as new within 4 minutes (%d migrate(s) sent to grow its history)", grown)
		}
		f.op("migrate web on e2ewb, e2ewc, e2ewd", "migrate", "web")
		grown++
	}
	continued := time.Now()
	id := workflows.WorkflowID(n.Name)
	if out, errs, code := runCmd(t, temporalBin(t), append([]string{"workflow", "terminate", "--workflow-id", id, "--reason", "terminated outside the fleet (e2e)"}, f.srv.cliArgs()...)...); code != 0 {
		t.Fatalf("temporal workflow terminate %s: %s%s", id, out, errs)
	}
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt start %s outside the fleet: %s%s", n.Name, out, errs)
	}
	restarted := time.Now()
	now := f.status()
	i := now.Index(n.Name)
	st := f.wait(n.Name+" reported replaced outside the fleet", 3*time.Minute, func(st fleetState) bool {
		return strings.Contains(st.Nodes[i].Ended, "replaced outside the fleet")
	})
	took := time.Since(restarted)
	t.Logf("measured: the fleet continued as new after %d migrate(s); %s terminated and started again outside it %s later; the fleet reported it %s after the restart (ask_after %s): %s",
		grown, n.Name, restarted.Sub(continued).Round(100*time.Millisecond), took.Round(100*time.Millisecond), askAfter, st.Nodes[i].Ended)
	// The round's timer starts when the fleet's loop last went quiet: the
	// last migrate's answers may still land after the restart, and a round
	// (one visibility query, one describe) takes seconds under load. A
	// second round would come ask_after later still (30 s and more here).
	if took > askAfter*9/5 {
		t.Errorf("%s reported %s after its restart: later than the fleet's first ask round (ask_after %s)", n.Name, took, askAfter)
	}
	if !strings.Contains(strings.Join(st.Events, "\n"), "node "+n.Name+" replaced outside the fleet") {
		t.Errorf("no event naming %s replaced:\n%s", n.Name, strings.Join(st.Events, "\n"))
	}
	if st.Held != "" {
		t.Errorf("held %q: %s failed within wave 2's budget of 1, which holds nothing", st.Held, n.Name)
	}
}

// pausedBetweenWaves: `adopt fleet flip`, then `adopt fleet pause` while
// wave 1 (e2ewb, whose flip waits 5 s before its apply) is under way. Wave
// 1 is served; wave 2 (e2ewc) does not start while paused: its flip waits
// and e2ewc stays adopted, checked every second for 15 s. `adopt fleet
// resume` lets wave 2 go on to the end.
func (f *wavesFleet) pausedBetweenWaves() {
	t := f.t
	began := time.Now()
	if out, errs, code := adopt(t, "fleet", "flip", "--fleet", f.file); code != 0 || !strings.Contains(out, "flip on e2ewb, e2ewc") {
		t.Fatalf("fleet flip: exit %d, want it on e2ewb, e2ewc\n%s%s", code, out, errs)
	}
	if out, errs, code := adopt(t, "fleet", "pause", "--fleet", f.file); code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("fleet pause: exit %d\n%s%s", code, out, errs)
	}
	paused := time.Now()
	if _, errs, code := adopt(t, "fleet", "pause", "--fleet", f.file); code != 2 || !strings.Contains(errs, "already paused") {
		t.Errorf("a second pause: exit %d, want 2 saying already paused\n%s", code, errs)
	}
	st := f.wait("wave 1 (e2ewb) to be served", 3*time.Minute, func(st fleetState) bool {
		s := opState(st, "e2ewb")
		return s == "done" || s == "failed"
	})
	if opState(st, "e2ewb") != "done" {
		t.Fatalf("wave 1: %s", st.Op.Standing())
	}
	served := time.Now()
	// The window in which the pause must hold: e2ewc's flip waiting and
	// e2ewc adopted, as the fleet's status and e2ewc's own say.
	const hold = 15 * time.Second
	checks := 0
	wait.Quiet(t, hold, "wave 2 moved while the fleet was paused (e2ewc's flip in the fleet's status, e2ewc's phase)", func() bool {
		st := f.status()
		if s := opState(st, "e2ewc"); s != "waiting" || st.Paused == "" {
			t.Logf("%s after wave 1 was served, paused %q: e2ewc's flip is %q, want waiting", time.Since(served).Round(time.Second), st.Paused, s)
			return true
		}
		if s, err := status(t, f.nodes[2]); err != nil || s.Phase != workflows.PhaseAdopted {
			t.Logf("e2ewc while paused: %v %v, want adopted", s.Phase, err)
			return true
		}
		checks++
		return false
	})
	held := time.Since(served)
	if out, errs, code := adopt(t, "fleet", "resume", "--fleet", f.file); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("fleet resume: exit %d\n%s%s", code, out, errs)
	}
	resumed := time.Now()
	st = f.wait("the flip to finish after the resume", 3*time.Minute, func(st fleetState) bool {
		return st.Op != nil && (st.Op.Done || st.Op.Halted != "")
	})
	if st.Op.Halted != "" || strings.Contains(st.Op.Standing(), "failed") {
		t.Fatalf("the flip after the resume: %s", st.Op.Standing())
	}
	t.Logf("measured: paused %s after the flip began; wave 1 served %s after the pause; wave 2 held %s (%d checks, e2ewc adopted, its flip waiting), %s paused in all; the flip finished %s after the resume",
		paused.Sub(began).Round(time.Millisecond), served.Sub(paused).Round(100*time.Millisecond), held.Round(100*time.Millisecond), checks,
		resumed.Sub(paused).Round(100*time.Millisecond), time.Since(resumed).Round(100*time.Millisecond))
	// The fleet's own order of things: wave 1 began, then the pause, the
	// resume, and only then wave 2.
	last := func(s string) int {
		at := -1
		for i, e := range st.Events {
			if strings.Contains(e, s) {
				at = i
			}
		}
		return at
	}
	order := []string{"fleet flip: wave 1: e2ewb", "operator: pause", "operator: resume", "fleet flip: wave 2: e2ewc"}
	for k := 1; k < len(order); k++ {
		if a, b := last(order[k-1]), last(order[k]); a < 0 || b < 0 || a > b {
			t.Errorf("events: %q (at %d) should come before %q (at %d):\n%s", order[k-1], a, order[k], b, strings.Join(st.Events, "\n"))
		}
	}
}
