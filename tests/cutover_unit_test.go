package tests

// A predecessor that is a system unit, handed over on the reference node:
// a resolver on the node itself (the stand-in service's -dns mode, run
// under the stand-in supervisor of package units, since systemd is not PID
// 1 in these namespaces) answering UDP and TCP 53 to clients in the peer
// namespace; the module's resolver container (the same service, built
// FROM scratch here, as v2) takes it over with `adopt migrate`, and a
// failed start rolls back to the unit, while clients query throughout.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"adoption/config"
	"adoption/containers/hold"
	"adoption/internal/wait"
	"adoption/netns"
	"adoption/sandbox"
	"adoption/sockets"
	"adoption/units"
	"adoption/workflows"
)

const resolverUnitFile = "[Unit]\nDescription=the predecessor's resolver\n[Service]\nExecStart=/usr/local/bin/svc -dns :53\n"

// resolverPlan is module resolver replacing the host predecessor that
// replaces names ("replaces_unit: ..." or "replaces_exe: ..."); cmd is its
// container's command.
func resolverPlan(replaces, cmd string) string {
	return fmt.Sprintf(`modules:
  - name: resolver
    ports: ["53/udp", "53/tcp"]
    %s
    container:
      name: resolver
      image: %s
      cmd: [%s]
      ports: {"53/udp": "53/udp", "53/tcp": "53/tcp"}
    health:
      tcp: 127.0.0.1:53
      timeout: 5s
cutover:
  stop_timeout: 2s
`, replaces, svcV2, cmd)
}

// dnsHammer queries the node's resolver from the peer namespace for d.
type dnsHammer struct {
	cmd      *exec.Cmd
	out      strings.Builder
	answered firstWrite // the hammer's stderr: it says "answered" at its first answer
}

// firstWrite keeps what is written to it and says whether "answered" was.
type firstWrite struct {
	mu  sync.Mutex
	out strings.Builder
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.Write(p)
}

func (f *firstWrite) said() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Contains(f.out.String(), "answered"), f.out.String()
}

// waitAnswered waits until the hammer has had its first answer: what the
// test does next falls within its run.
func (h *dnsHammer) waitAnswered(t *testing.T) {
	t.Helper()
	wait.Until(t, answeredWithin, "the dnshammer's first answer", h.answered.said)
}

func (r *refNode) dnsHammer(t *testing.T, d time.Duration) *dnsHammer {
	t.Helper()
	h := &dnsHammer{}
	h.cmd = r.InPeer(filepath.Join(bin, "adopt-sandbox"), "dnshammer", net.JoinHostPort(r.Addr, "53"), "--every", "5ms", "--clients", "4", "--for", d.String())
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.answered
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
	})
	return h
}

func (h *dnsHammer) wait(t *testing.T) sandbox.DNSHammerResult {
	t.Helper()
	return loadResult[sandbox.DNSHammerResult](t, "dnshammer", h.cmd, &h.out)
}

// hostResolver raises the predecessor's resolver on the node (binary svc,
// the stand-in service built static) and says how to read it: running,
// enabled; env is what the agent needs to reach it.
type hostResolver func(t *testing.T, r *refNode, svc string, ready func() error) (state func() (active, enabled bool), env []string)

// TestCutoverHostResolverUnit: `adopt migrate resolver` whose container
// exits at start rolls back to the predecessor's unit, started and
// enabled again, 0 failed queries; fixed and retried, the module's
// container takes the resolver over, the unit stopped and disabled only
// once the cutover is confirmed, 0 failed queries.
func TestCutoverHostResolverUnit(t *testing.T) {
	resolverHandOver(t, "e2eunit", 216, "replaces_unit: resolver.service", func(t *testing.T, r *refNode, svc string, ready func() error) (func() (bool, bool), []string) {
		// Run by the stand-in supervisor as resolver.service.
		sock := filepath.Join(t.TempDir(), "units.sock")
		sup, err := units.NewSupervisor(sock, map[string]units.Service{"resolver.service": {
			Cmd:     []string{"nsenter", "--net=" + r.NetnsPath(), "--", "env", "SVC_VERSION=v1", svc, "-dns", ":53"},
			Enabled: true, FragmentPath: "/etc/systemd/system/resolver.service", Ready: ready,
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sup.Close)
		if err := sup.StartUnit("resolver.service"); err != nil {
			t.Fatal(err)
		}
		return func() (bool, bool) {
			st, err := (units.StandIn{Socket: sock}).Unit(context.Background(), "resolver.service")
			if err != nil {
				t.Fatal(err)
			}
			return st.Active, st.Enabled
		}, []string{units.EnvSocket + "=" + sock}
	})
}

// TestCutoverHostResolverExe: the same with a resolver run by no unit
// (replaces_exe), started by hand on the node: stopped by signal at the
// swap, started again from its kept command line by the rollback.
func TestCutoverHostResolverExe(t *testing.T) {
	resolverHandOver(t, "e2eexe", 217, "replaces_exe: predecessor-dns", func(t *testing.T, r *refNode, svc string, ready func() error) (func() (bool, bool), []string) {
		exe := filepath.Join(filepath.Dir(svc), "predecessor-dns")
		if err := os.Rename(svc, exe); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("nsenter", "--net="+r.NetnsPath(), "--", "env", "SVC_VERSION=v1", exe, "-dns", ":53")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = cmd.Wait() }() // reaped once the swap stops it
		procs := units.Processes{Proc: sockets.Proc{Root: "/proc"}, Dir: t.TempDir()}
		t.Cleanup(func() { _ = procs.Stop(context.Background(), "exe:predecessor-dns") })
		wait.For(t, 10*time.Second, "the predecessor's resolver to answer on the node", func() bool { return ready() == nil })
		return func() (bool, bool) {
			st, err := procs.Unit(context.Background(), "exe:predecessor-dns")
			if err != nil {
				t.Fatal(err)
			}
			return st.Active, true
		}, nil
	})
}

// resolverHandOver runs the hand-over of the predecessor's resolver, as
// up raises it, to module resolver: a failed start rolled back, then the
// fixed retry, clients querying from the peer namespace throughout.
func resolverHandOver(t *testing.T, name string, index int, replaces string, up hostResolver) {
	srv := startDevServer(t)
	r := upRefNodeSpec(t, sandbox.RefSpec{
		Spec: sandbox.Spec{Name: name, Index: index, Dir: t.TempDir(), Binary: filepath.Join(bin, "adopt-sandbox"),
			Allowed: config.MustPorts([]string{"22/tcp"}), Files: map[string]string{"/etc/systemd/system/resolver.service": resolverUnitFile}},
		Images: []string{svcV1, svcV2}, Temporal: srv.Addr(),
	}, resolverPlan(replaces, `"-dns", ":53", "-fail", "exit"`))
	n := r.node
	// The predecessor's operator allowed the resolver in its firewall.
	r.ufw(t, "allow", "53/udp")
	r.ufw(t, "allow", "53/tcp")

	// The predecessor's resolver: the stand-in service, static, on the
	// node itself.
	svc := filepath.Join(t.TempDir(), "svc")
	if out, err := exec.Command("go", "build", "-o", svc, "../containers/testdata/svc").CombinedOutput(); err != nil {
		t.Fatalf("build the resolver: %v %s", err, out)
	}
	// Ready once it answers on the node, past the cutover's hold (as a
	// unit's start job is done once it runs, whatever its clients see).
	ready := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, hold.HoldBypassMark)
			}); err != nil {
				return err
			}
			return serr
		}}
		c, err := netns.Dial(ctx, r.NetnsPath(), &d, "127.0.0.1:53")
		if err != nil {
			return err
		}
		return c.Close()
	}
	state, env := up(t, r, svc, ready)
	if res := r.dnsHammer(t, 300*time.Millisecond).wait(t); res.Failed() != 0 || res.Answers["10.0.0.1"] == 0 {
		t.Fatalf("the predecessor's resolver does not answer clients: %+v", res)
	}

	w := startAgent(t, r, env...)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	noHoldWarning(t, w)

	// A failed start: the container exits at once. Rolled back to the
	// unit, clients querying all the while.
	h := r.dnsHammer(t, 25*time.Second)
	h.waitAnswered(t) // queries before the cutover too
	started := time.Now()
	if out, errs, code := adopt(t, "migrate", n.Name, "resolver", "--config", n.cfg); code != 0 {
		t.Fatalf("migrate: %s%s", out, errs)
	}
	st := waitFor(t, n, "the cutover to fail", func(st workflows.State) bool { return st.Modules[0].State == workflows.ModuleFailed })
	t.Logf("failed cutover and rollback took %s: %s", time.Since(started).Round(time.Millisecond), st.Modules[0].LastError)
	if active, enabled := state(); !active || !enabled {
		t.Fatalf("after the rollback the predecessor is running %v, enabled %v: want both", active, enabled)
	}
	res := h.wait(t)
	t.Logf("queries through a failed start and its rollback: %d UDP and %d TCP answered, %d UDP and %d TCP failed (%d refused), answers %v, slowest %s, failures %v",
		res.UDP, res.TCP, res.UDPFailed, res.TCPFailed, res.Refused, res.Answers, res.Slowest.Round(time.Millisecond), res.FailureSamples)
	if res.Failed() != 0 {
		t.Errorf("%d queries failed through the failed start and its rollback", res.Failed())
	}
	if len(res.Answers) != 1 || res.Answers["10.0.0.1"] == 0 {
		t.Errorf("answers %v: want only the predecessor's resolver", res.Answers)
	}

	// Fixed and retried: the module's container takes the resolver over.
	cfg, _ := os.ReadFile(n.cfg)
	if err := os.WriteFile(n.cfg, []byte(strings.Replace(string(cfg), `, "-fail", "exit"]`, `]`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	h = r.dnsHammer(t, 20*time.Second)
	h.waitAnswered(t)
	started = time.Now()
	if out, errs, code := adopt(t, "retry", n.Name, "resolver", "--config", n.cfg); code != 0 {
		t.Fatalf("retry: %s%s", out, errs)
	}
	st = waitFor(t, n, "the retried cutover", func(st workflows.State) bool {
		return st.Modules[0].State == workflows.ModuleMigrated || st.Modules[0].State == workflows.ModuleFailed
	})
	if st.Modules[0].State != workflows.ModuleMigrated {
		t.Fatalf("retry failed: %q\n%s", st.Modules[0].LastError, w.log)
	}
	t.Logf("hand-over took %s; hold: %v", time.Since(started).Round(time.Millisecond), st.Modules[0].Hold)
	if active, enabled := state(); active || (enabled && strings.HasPrefix(replaces, "replaces_unit")) {
		t.Errorf("after the confirmed cutover the predecessor is running %v, enabled %v: want it stopped (and a unit disabled)", active, enabled)
	}
	res = h.wait(t)
	t.Logf("queries through the hand-over: %d UDP and %d TCP answered, %d UDP and %d TCP failed (%d refused), answers %v, slowest %s, failures %v",
		res.UDP, res.TCP, res.UDPFailed, res.TCPFailed, res.Refused, res.Answers, res.Slowest.Round(time.Millisecond), res.FailureSamples)
	if res.Failed() != 0 {
		t.Errorf("%d queries failed through the hand-over", res.Failed())
	}
	if res.Answers["10.0.0.1"] == 0 || res.Answers["10.0.0.2"] == 0 {
		t.Errorf("answers %v: the clients did not see both the unit and the module's container", res.Answers)
	}
	if res := r.dnsHammer(t, 300*time.Millisecond).wait(t); res.Failed() != 0 || len(res.Answers) != 1 || res.Answers["10.0.0.2"] == 0 {
		t.Fatalf("after the hand-over: %+v, want the module's container answering", res)
	}
}
