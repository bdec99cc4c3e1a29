package activities

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"adoption/config"
	"adoption/sockets"
)

// A real process named as a control daemon, started by hand while the
// node is adopted: the watch's check finds it (pid, user, how to stop it),
// migrate and flip are refused naming it; stopped, they go on.
func TestControlDaemonRefusesMigrateAndFlipUntilStopped(t *testing.T) {
	a, _ := newActs(t)
	a.Sockets = sockets.Proc{Root: "/proc"}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal("sleep(1) is needed to stand in for a control daemon: install coreutils")
	}
	exe := filepath.Join(t.TempDir(), "predsyncd")
	src, err := os.Open(sleep)
	must(t, err)
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	must(t, err)
	_, err = io.Copy(dst, src)
	must(t, err)
	src.Close()
	must(t, dst.Close())
	cmd := exec.Command(exe, "600")
	must(t, cmd.Start())
	stopped := false
	stop := func() {
		if !stopped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			stopped = true
		}
	}
	defer stop()
	pid := strconv.Itoa(cmd.Process.Pid)
	plan := withPlan(a, config.Plan{Node: "n1", Control: []string{"predsyncd"}, Modules: []config.ModulePlan{{Name: "app"}}})
	ctx := context.Background()

	res, err := a.checkControl(ctx, DriftInput{Plan: plan.Ref()})
	must(t, err)
	if len(res.Running) != 1 || res.Running[0].PID != cmd.Process.Pid || res.Running[0].User == "" || res.Running[0].Stop == "" {
		t.Fatalf("the check found %+v; want pid %s with its user and how to stop it", res.Running, pid)
	}
	_, err = a.CutoverPreflight(ctx, ModuleInput{Plan: plan.Ref(), Module: "app"})
	msg := appErr(t, err, ErrControlRunning)
	if !strings.Contains(msg, "migrate app refused") || !strings.Contains(msg, "predsyncd (pid "+pid+", user ") || !strings.Contains(msg, "stop it for good") {
		t.Fatalf("migrate refusal: %s", msg)
	}
	auth, err := a.authorize(ctx, plan.Ref())
	must(t, err)
	why, err := a.flipGates(ctx, auth)
	must(t, err)
	if !strings.Contains(strings.Join(why, "\n"), "predsyncd (pid "+pid) {
		t.Fatalf("the flip's gates do not name the daemon: %v", why)
	}

	stop()
	res, err = a.checkControl(ctx, DriftInput{Plan: plan.Ref()})
	must(t, err)
	if len(res.Running) != 0 {
		t.Fatalf("stopped, the check still finds %+v", res.Running)
	}
	if _, err := a.CutoverPreflight(ctx, ModuleInput{Plan: plan.Ref(), Module: "app"}); err != nil {
		t.Fatalf("stopped, migrate is still refused: %v", err)
	}
	why, err = a.flipGates(ctx, auth)
	must(t, err)
	if strings.Contains(strings.Join(why, "\n"), "control daemon") {
		t.Fatalf("stopped, the flip's gates still name it: %v", why)
	}
}
