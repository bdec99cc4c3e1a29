package cutover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"

	"adoption/containers/cutoverwire"
)

var errCrash = errors.New("simulated crash")

// forwardSteps are the sub-steps of a cutover with a predecessor on two
// networks, in order.
var forwardSteps = []string{StepPreflight, StepCreate, StepConnectNetworks, StepArmRestart, StepDisarmPredecessor,
	StepRenamePredecessor, StepRenameNext, StepStopPredecessor, StepStart, StepWaitHealthy}

var rollbackSteps = []string{StepStopNew, StepRenameNew, StepRestorePredecessor, StepStartPredecessor, StepRemoveNew}

// crashAt arms e to fail the first time it reaches step.
func crashAt(e *Engine, step string) {
	var once sync.Once
	e.beforeStep = func(s string) error {
		err := error(nil)
		if s == step {
			once.Do(func() { err = errCrash })
		}
		return err
	}
}

// cutover is what the Migrate activity does: resume from what Docker shows.
func cutover(ctx context.Context, e *Engine, spec Spec, probe func(context.Context) error) error {
	st, err := e.State(ctx, spec.Name)
	if err != nil {
		return err
	}
	// Swapped: the new container has the name; Swap finishes arming and
	// starting it (a no-op when it runs), Preflight would say "migrated".
	if st.Phase != PhaseSwapped {
		pred, err := e.Preflight(ctx, spec)
		if err != nil {
			return fmt.Errorf("preflight: %w", err)
		}
		if _, err := e.Create(ctx, spec, pred); err != nil {
			return fmt.Errorf("create: %w", err)
		}
	}
	if err := e.Swap(ctx, spec.Name, time.Second); err != nil {
		return fmt.Errorf("swap: %w", err)
	}
	if err := e.WaitHealthy(ctx, spec.Name, probe, 2*time.Second); err != nil {
		return fmt.Errorf("wait healthy: %w", err)
	}
	return nil
}

func fakePredecessor(f *fakeDocker) string {
	return f.add("mail", "mail:1", container.HostConfig{
		Binds:         []string{"maildata:/var/mail", "/srv/mail/conf:/etc/mail:ro"},
		RestartPolicy: container.RestartPolicy{Name: "always"},
		PortBindings:  nat.PortMap{"25/tcp": {{HostPort: "2525"}}},
	}, []container.MountPoint{
		{Type: mount.TypeVolume, Name: "maildata", Source: "/var/lib/docker/volumes/maildata/_data", Destination: "/var/mail", RW: true},
		{Type: mount.TypeVolume, Name: "0f3a9c", Source: "/var/lib/docker/volumes/0f3a9c/_data", Destination: "/var/spool", RW: true},
		{Type: mount.TypeBind, Source: "/srv/mail/conf", Destination: "/etc/mail", RW: false, Propagation: "rprivate"},
	}, []string{"mailnet", "backend"}, true, nil)
}

var mailSpec = Spec{Name: "mail", Image: "mesh/mail:2", Ports: map[string]string{"2525/tcp": "25/tcp"}}

func TestRecordPredecessor(t *testing.T) {
	f := newFake("mail:1", "mesh/mail:2")
	id := fakePredecessor(f)
	pred, err := NewWith(f).Preflight(context.Background(), mailSpec)
	if err != nil {
		t.Fatal(err)
	}
	want := &Predecessor{ID: id, Name: "mail", Image: "mail:1", ImageID: "sha256:mail:1",
		Mounts: []cutoverwire.Mount{
			{Type: "bind", Source: "/srv/mail/conf", Destination: "/etc/mail", ReadOnly: true, Propagation: "rprivate"},
			{Type: "volume", Name: "maildata", Source: "/var/lib/docker/volumes/maildata/_data", Destination: "/var/mail"},
			{Type: "volume", Name: "0f3a9c", Source: "/var/lib/docker/volumes/0f3a9c/_data", Destination: "/var/spool", Anonymous: true},
		},
		Ports:         []cutoverwire.Published{{HostPort: 2525, ContainerPort: 25, Proto: "tcp"}},
		Networks:      []string{"mailnet", "backend"},
		RestartPolicy: "always", Running: true}
	if !reflect.DeepEqual(pred, want) {
		t.Fatalf("predecessor:\n got %+v\nwant %+v", pred, want)
	}
}

func TestCutoverThenRollbackFake(t *testing.T) {
	ctx := context.Background()
	f := newFake("mail:1", "mesh/mail:2")
	predID := fakePredecessor(f)
	e := NewWith(f)
	if err := cutover(ctx, e, mailSpec, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	st, _ := e.State(ctx, "mail")
	if st.Phase != PhaseSwapped || !st.Live.Running || st.Predecessor.Running || st.Predecessor.ID != predID {
		t.Fatalf("state after cutover: %+v", st)
	}
	c, _ := f.ContainerInspect(ctx, "mail")
	if c.HostConfig.RestartPolicy.Name != "always" || len(c.NetworkSettings.Networks) != 2 {
		t.Fatalf("new container: restart %v networks %v", c.HostConfig.RestartPolicy, c.NetworkSettings.Networks)
	}
	var vols []string
	for _, m := range c.Mounts {
		vols = append(vols, string(m.Type)+":"+m.Source+">"+m.Destination)
	}
	if got := strings.Join(vols, " "); got != "bind:/srv/mail/conf>/etc/mail volume:maildata>/var/mail volume:0f3a9c>/var/spool" {
		t.Fatalf("mounts of the new container: %s", got)
	}
	p, _ := f.ContainerInspect(ctx, "mail.predecessor")
	if p.HostConfig.RestartPolicy.Name != "no" {
		t.Fatalf("kept predecessor must not restart by itself: %v", p.HostConfig.RestartPolicy)
	}
	if err := e.Rollback(ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	if got := f.names(); !reflect.DeepEqual(got, []string{"mail*"}) {
		t.Fatalf("after rollback: %v", got)
	}
	p, _ = f.ContainerInspect(ctx, "mail")
	if p.ID != predID || p.HostConfig.RestartPolicy.Name != "always" {
		t.Fatalf("restored predecessor: %s %v", p.ID, p.HostConfig.RestartPolicy)
	}
	if err := e.Rollback(ctx, "mail"); err != nil {
		t.Fatalf("rollback twice: %v", err)
	}
	if len(f.volumesGone) > 0 {
		t.Fatalf("volumes removed: %v", f.volumesGone)
	}
}

// checkInvariants: never two running containers for the module (both would
// want the ports), never a volume removed, every container under one of the
// three names.
func checkInvariants(t *testing.T, f *fakeDocker, when string) {
	t.Helper()
	running := 0
	for _, n := range f.names() {
		if strings.HasSuffix(n, "*") {
			running++
		}
		switch strings.TrimSuffix(n, "*") {
		case "mail", "mail.next", "mail.predecessor":
		default:
			t.Fatalf("%s: unexpected container %s", when, n)
		}
	}
	if running > 1 {
		t.Fatalf("%s: %d containers running: %v", when, running, f.names())
	}
	if len(f.volumesGone) > 0 {
		t.Fatalf("%s: volumes removed: %v", when, f.volumesGone)
	}
}

func TestResumeAfterEachStepFake(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	for _, step := range forwardSteps {
		for _, then := range []string{"resume", "rollback"} {
			t.Run(step+"/"+then, func(t *testing.T) {
				f := newFake("mail:1", "mesh/mail:2")
				predID := fakePredecessor(f)
				e := NewWith(f)
				crashAt(e, step)
				if err := cutover(ctx, e, mailSpec, ok); !errors.Is(err, errCrash) {
					t.Fatalf("crash at %s: %v", step, err)
				}
				checkInvariants(t, f, "after the crash")
				e.beforeStep = nil
				if then == "resume" {
					if err := cutover(ctx, e, mailSpec, ok); err != nil {
						t.Fatalf("resume: %v (names %v)", err, f.names())
					}
					if got := f.names(); !reflect.DeepEqual(got, []string{"mail*", "mail.predecessor"}) {
						t.Fatalf("after resume: %v", got)
					}
					// A resumed Preflight sees the predecessor stopped and
					// disarmed by the swap; what it was comes from the labels.
					if c, _ := f.ContainerInspect(ctx, "mail"); c.HostConfig.RestartPolicy.Name != "always" {
						t.Fatalf("new container's restart policy after resume: %v", c.HostConfig.RestartPolicy)
					}
					if err := e.Rollback(ctx, "mail"); err != nil {
						t.Fatal(err)
					}
					c, _ := f.ContainerInspect(ctx, "mail")
					if got := f.names(); !reflect.DeepEqual(got, []string{"mail*"}) || c.ID != predID || c.HostConfig.RestartPolicy.Name != "always" {
						t.Fatalf("rollback after resume: %v, %s, %v", got, c.ID, c.HostConfig.RestartPolicy)
					}
				} else {
					if err := e.Rollback(ctx, "mail"); err != nil {
						t.Fatalf("rollback: %v (names %v)", err, f.names())
					}
					c, _ := f.ContainerInspect(ctx, "mail")
					if got := f.names(); !reflect.DeepEqual(got, []string{"mail*"}) || c.ID != predID || c.HostConfig.RestartPolicy.Name != "always" {
						t.Fatalf("after rollback: %v, %s, %v", got, c.ID, c.HostConfig.RestartPolicy)
					}
				}
				checkInvariants(t, f, "at the end")
			})
		}
	}
}

func TestRollbackResumesAfterEachStepFake(t *testing.T) {
	ctx := context.Background()
	for _, step := range rollbackSteps {
		t.Run(step, func(t *testing.T) {
			f := newFake("mail:1", "mesh/mail:2")
			predID := fakePredecessor(f)
			e := NewWith(f)
			if err := cutover(ctx, e, mailSpec, func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			crashAt(e, step)
			if err := e.Rollback(ctx, "mail"); !errors.Is(err, errCrash) {
				t.Fatalf("crash at %s: %v", step, err)
			}
			checkInvariants(t, f, "after the crash")
			e.beforeStep = nil
			if err := e.Rollback(ctx, "mail"); err != nil {
				t.Fatalf("rollback again: %v (%v)", err, f.names())
			}
			c, _ := f.ContainerInspect(ctx, "mail")
			if got := f.names(); !reflect.DeepEqual(got, []string{"mail*"}) || c.ID != predID || c.HostConfig.RestartPolicy.Name != "always" {
				t.Fatalf("after rollback: %v, %s, %v", got, c.ID, c.HostConfig.RestartPolicy)
			}
			checkInvariants(t, f, "at the end")
		})
	}
}

func TestNewServiceFake(t *testing.T) {
	ctx := context.Background()
	f := newFake("mesh/mail:2")
	e := NewWith(f)
	pred, err := e.Preflight(ctx, mailSpec)
	if err != nil || pred != nil {
		t.Fatalf("no predecessor: %v %v", pred, err)
	}
	if _, err := e.Create(ctx, mailSpec, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Swap(ctx, "mail", time.Second); err != nil {
		t.Fatal(err)
	}
	st, _ := e.State(ctx, "mail")
	c, _ := f.ContainerInspect(ctx, "mail")
	if st.Phase != PhaseMigrated || c.HostConfig.RestartPolicy.Name != "unless-stopped" {
		t.Fatalf("new service: %+v, restart %v", st, c.HostConfig.RestartPolicy)
	}
	if _, err := e.Preflight(ctx, mailSpec); !errors.Is(err, ErrMigrated) {
		t.Fatalf("preflight of a migrated module: %v", err)
	}
	if err := e.Rollback(ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	if got := f.names(); len(got) != 0 {
		t.Fatalf("rollback of a new service leaves nothing: %v", got)
	}
}

func TestPruneThenNoRollbackFake(t *testing.T) {
	ctx := context.Background()
	f := newFake("mail:1", "mesh/mail:2")
	fakePredecessor(f)
	e := NewWith(f)
	if err := e.Prune(ctx, "mail"); err != nil {
		t.Fatalf("prune with nothing to prune: %v", err)
	}
	if err := cutover(ctx, e, mailSpec, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.Prune(ctx, "mail"); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.names(); !reflect.DeepEqual(got, []string{"mail*"}) || len(f.volumesGone) > 0 {
		t.Fatalf("after prune: %v, volumes removed %v", got, f.volumesGone)
	}
	if err := e.Rollback(ctx, "mail"); !errors.Is(err, ErrNoRollback) {
		t.Fatalf("rollback after prune: %v", err)
	}
	if got := f.names(); !reflect.DeepEqual(got, []string{"mail*"}) {
		t.Fatalf("a refused rollback changes nothing: %v", got)
	}
}

func TestPreflightRefusesFake(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		setup  func(f *fakeDocker)
		noPred bool
		spec   Spec
		want   error
		says   string
	}{
		"image missing": {spec: Spec{Name: "mail", Image: "mesh/mail:9"}, want: ErrImageMissing, says: "image mesh/mail:9 is not present on the node; load it"},
		"next not ours": {setup: func(f *fakeDocker) {
			f.add("mail.next", "other:1", container.HostConfig{}, nil, nil, false, nil)
		}, spec: mailSpec, want: ErrConflict, says: "mail.next"},
		"predecessor not in lineage": {setup: func(f *fakeDocker) {
			f.add("mail.predecessor", "other:1", container.HostConfig{}, nil, nil, false, nil)
		}, spec: mailSpec, want: ErrConflict, says: "mail.predecessor"},
		"unlinked predecessor alone": {setup: func(f *fakeDocker) {
			f.add("mail.predecessor", "other:1", container.HostConfig{}, nil, nil, false, nil)
		}, noPred: true, spec: mailSpec, want: ErrConflict, says: "no container of the mesh replaced it"},
		"another module's": {setup: func(f *fakeDocker) {
			f.add("mail", "mesh/x:1", container.HostConfig{}, nil, nil, true, map[string]string{LabelModule: "webmail"})
		}, noPred: true, spec: mailSpec, want: ErrConflict, says: `belongs to module "webmail"`},
		"port held by another container": {setup: func(f *fakeDocker) {
			f.add("relay", "relay:1", container.HostConfig{PortBindings: nat.PortMap{"25/tcp": {{HostPort: "2525"}}}}, nil, nil, true, nil)
		}, spec: mailSpec, want: ErrPortHeld, says: "published by container relay"},
		"bad port":      {spec: Spec{Name: "mail", Image: "mesh/mail:2", Ports: map[string]string{"25/tcp": "25/udp"}}, says: "differ in protocol"},
		"reserved name": {spec: Spec{Name: "mail.next", Image: "mesh/mail:2"}, says: "reserves"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake("mail:1", "mesh/mail:2")
			if !tc.noPred {
				fakePredecessor(f)
			}
			if tc.setup != nil {
				tc.setup(f)
			}
			before := f.names()
			_, err := NewWith(f).Preflight(ctx, tc.spec)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want %v saying %q", err, tc.want, tc.says)
			}
			if after := f.names(); !reflect.DeepEqual(before, after) {
				t.Fatalf("preflight changed the node: %v -> %v", before, after)
			}
		})
	}
}

func TestPortHeldOutsideDockerFake(t *testing.T) {
	f := newFake("mesh/web:1")
	e := NewWith(f)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = e.Preflight(context.Background(), Spec{Name: "web", Image: "mesh/web:1", Ports: map[string]string{fmt.Sprintf("127.0.0.1:%d/tcp", port): "80/tcp"}})
	if !errors.Is(err, ErrPortHeld) {
		t.Fatalf("got %v", err)
	}
}

func TestSwapRefusesAnotherPredecessorFake(t *testing.T) {
	ctx := context.Background()
	f := newFake("mail:1", "mesh/mail:2")
	id := fakePredecessor(f)
	e := NewWith(f)
	pred, _ := e.Preflight(ctx, mailSpec)
	if _, err := e.Create(ctx, mailSpec, pred); err != nil {
		t.Fatal(err)
	}
	// Someone replaces the predecessor between Create and Swap.
	_ = f.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	f.add("mail", "mail:1", container.HostConfig{}, nil, nil, true, nil)
	if err := e.Swap(ctx, "mail", time.Second); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "is not the predecessor") {
		t.Fatalf("got %v", err)
	}
}

func TestCreateReplacesStaleNextFake(t *testing.T) {
	ctx := context.Background()
	f := newFake("mail:1", "mesh/mail:2", "mesh/mail:3")
	fakePredecessor(f)
	e := NewWith(f)
	pred, _ := e.Preflight(ctx, mailSpec)
	if _, err := e.Create(ctx, mailSpec, pred); err != nil {
		t.Fatal(err)
	}
	first, _ := f.ContainerInspect(ctx, "mail.next")
	if _, err := e.Create(ctx, mailSpec, pred); err != nil {
		t.Fatal(err)
	}
	again, _ := f.ContainerInspect(ctx, "mail.next")
	if again.ID != first.ID {
		t.Fatal("an identical .next of ours must be reused")
	}
	fixed := mailSpec
	fixed.Image = "mesh/mail:3"
	if _, err := e.Create(ctx, fixed, pred); err != nil {
		t.Fatal(err)
	}
	third, _ := f.ContainerInspect(ctx, "mail.next")
	if third.ID == first.ID || third.Config.Image != "mesh/mail:3" || len(f.volumesGone) > 0 {
		t.Fatalf("a .next for another spec is replaced, volumes kept: %s %s %v", third.ID, third.Config.Image, f.volumesGone)
	}
}

func TestWaitHealthyFailsFastFake(t *testing.T) {
	ctx := context.Background()
	f := newFake("mail:1", "mesh/mail:2")
	fakePredecessor(f)
	e := NewWith(f)
	f.onStart = func(c *container.InspectResponse) {
		if c.Config.Image == "mesh/mail:2" {
			go func() {
				time.Sleep(200 * time.Millisecond)
				f.mu.Lock()
				c.State.Running, c.State.Status, c.State.ExitCode = false, "exited", 3
				f.mu.Unlock()
			}()
		}
	}
	start := time.Now()
	err := cutover(ctx, e, mailSpec, func(context.Context) error { return errors.New("connection refused") })
	if !errors.Is(err, ErrUnhealthy) || !strings.Contains(err.Error(), "exit code 3") || time.Since(start) > time.Second {
		t.Fatalf("got %v after %s", err, time.Since(start))
	}
}

func TestWaitHealthyUsesDockerHealthcheckFake(t *testing.T) {
	ctx := context.Background()
	f := newFake("mesh/mail:2")
	e := NewWith(f)
	spec := mailSpec
	spec.Healthcheck = &Healthcheck{Test: []string{"CMD", "check"}}
	f.onStart = func(c *container.InspectResponse) {
		go func() {
			time.Sleep(300 * time.Millisecond)
			f.mu.Lock()
			c.State.Health.Status = container.Unhealthy
			f.mu.Unlock()
		}()
	}
	// The probe says healthy; the container's own healthcheck wins.
	err := cutover(ctx, e, spec, func(context.Context) error { return nil })
	if !errors.Is(err, ErrUnhealthy) || !strings.Contains(err.Error(), "unhealthy by its healthcheck") {
		t.Fatalf("got %v", err)
	}
}

func TestProgressHeartbeats(t *testing.T) {
	f := newFake("mail:1", "mesh/mail:2")
	fakePredecessor(f)
	e := NewWith(f)
	var steps []string
	ctx := WithProgress(context.Background(), func(s string) { steps = append(steps, s) })
	if err := cutover(ctx, e, mailSpec, nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(steps, forwardSteps) {
		t.Fatalf("steps:\n got %v\nwant %v", steps, forwardSteps)
	}
}

func TestParse(t *testing.T) {
	ps, err := Spec{Ports: map[string]string{"127.0.0.1:8080/tcp": "80/tcp", "53/udp": "53/udp", "9000": "9000"}}.portMap()
	if err != nil || len(ps) != 3 || ps[0].hostPort != 53 || ps[1].hostIP != "127.0.0.1" || ps[2].port != "9000/tcp" {
		t.Fatalf("ports: %+v %v", ps, err)
	}
	for _, bad := range []map[string]string{{"x/tcp": "1/tcp"}, {"1/icmp": "1/icmp"}, {"nohost:80": "80"}, {"0": "80"}} {
		if _, err := (Spec{Ports: bad}).portMap(); err == nil {
			t.Errorf("ports %v accepted", bad)
		}
	}
	for _, s := range []string{"no", "always", "unless-stopped", "on-failure", "on-failure:3"} {
		r, err := parseRestart(s)
		if err != nil || formatRestart(r) != s {
			t.Errorf("restart %q: %v %v", s, formatRestart(r), err)
		}
	}
	for _, s := range []string{"sometimes", "always:3", "on-failure:x"} {
		if _, err := parseRestart(s); err == nil {
			t.Errorf("restart %q accepted", s)
		}
	}
}

// The window runs after the predecessor stopped and before the mesh's
// container starts, and at a rollback after the mesh's container stopped
// and before the predecessor starts; a swap resumed from a crash in the
// window runs it again, one resumed after the start does not.
func TestWindowOrderFake(t *testing.T) {
	f := newFake("mail:1", "mesh/mail:2")
	fakePredecessor(f)
	e := NewWith(f)
	var steps []string
	ctx := WithProgress(context.Background(), func(s string) { steps = append(steps, s) })
	ctx = WithWindow(ctx, func(context.Context) error {
		// Inside, neither instance runs.
		for _, n := range []string{"mail", "mail.predecessor"} {
			if c, err := f.ContainerInspect(ctx, n); err == nil && running(&c) {
				t.Errorf("%s runs inside the window", n)
			}
		}
		steps = append(steps, "in window")
		return nil
	})
	if err := cutover(ctx, e, mailSpec, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{StepPreflight, StepCreate, StepConnectNetworks, StepArmRestart, StepDisarmPredecessor,
		StepRenamePredecessor, StepRenameNext, StepStopPredecessor, StepWindow, "in window", StepStart, StepWaitHealthy}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("swap steps:\n got %v\nwant %v", steps, want)
	}
	steps = nil
	if err := e.Rollback(ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	want = []string{StepStopNew, StepRenameNew, StepRestorePredecessor, StepRollbackWindow, "in window", StepStartPredecessor, StepRemoveNew}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("rollback steps:\n got %v\nwant %v", steps, want)
	}
}

func TestWindowResumesFake(t *testing.T) {
	for _, at := range []string{StepWindow, StepStart} {
		t.Run(at, func(t *testing.T) {
			f := newFake("mail:1", "mesh/mail:2")
			fakePredecessor(f)
			e := NewWith(f)
			runs := 0
			failWindow := at == StepWindow
			ctx := WithWindow(context.Background(), func(context.Context) error {
				runs++
				if failWindow {
					failWindow = false
					return errCrash
				}
				return nil
			})
			if at == StepStart {
				crashAt(e, StepStart)
			}
			if err := cutover(ctx, e, mailSpec, nil); !errors.Is(err, errCrash) {
				t.Fatalf("crash at %s: %v", at, err)
			}
			e.beforeStep = nil
			if err := cutover(ctx, e, mailSpec, nil); err != nil {
				t.Fatalf("resume: %v (%v)", err, f.names())
			}
			// Crashed in the window: run again before the start. Crashed
			// at the start (after the window): the window ran once and
			// ran again, since the start had not happened.
			if runs != 2 {
				t.Fatalf("window ran %d times, want 2", runs)
			}
			// Resumed once more, the container runs: the window is closed.
			if err := e.Swap(ctx, "mail", time.Second); err != nil {
				t.Fatal(err)
			}
			if runs != 2 {
				t.Fatalf("a swap resumed after the start ran the window again (%d runs)", runs)
			}
		})
	}
}
