package tests

// The agent killed while it holds a swap's port with SYNs queued: the
// kernel drops what nobody reads any more, so clients retransmit. Started
// again at once, the agent completes the cutover and a waiting client
// connects on a retransmission; left dead, the hold's set element times
// out at its bound and a waiting client's retransmission is answered.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"adoption/containers/hold"
	"adoption/netns"
	"adoption/workflows"
)

// heldClient is one connect from the peer to a held port.
type heldClient struct {
	err     error
	wait    time.Duration
	retrans uint32 // SYNs sent again (known when it connected)
}

func (c heldClient) String() string {
	if c.err != nil {
		// Its first SYN went at once: an answer this late is to a
		// retransmission.
		return fmt.Sprintf("answered %v after %s", c.err, c.wait.Round(time.Millisecond))
	}
	return fmt.Sprintf("connected after %s, its SYN sent %d more times", c.wait.Round(time.Millisecond), c.retrans)
}

func TestCutoverAgentKilledWhileHolding(t *testing.T) {
	srv := startDevServer(t)
	const base, port0 = "e2ehkill", 18497
	names, ports := []string{base + "0", base + "1"}, []int{port0, port0 + 1}
	files := map[string]string{}
	var modules []string
	for i, name := range names {
		modules = append(modules, refModule(name, ports[i], ""))
		for k, v := range cutoverFiles(name) {
			files[k] = v
		}
	}
	r := upRefNodeWith(t, base, 129, srv, nil, files, refCutoverPlan(modules...))
	n := r.node
	binds, sums := map[int]string{}, map[int]string{}
	for i, name := range names {
		binds[i] = r.predecessor(t, name, ports[i])
		sums[i] = r.get(t, ports[i], "/sums")
	}
	w := startAgent(t, r)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	w.kill()

	set := func(name string) string {
		out, _ := exec.Command("ip", "netns", "exec", r.Netns, "nft", "list", "set", "inet", hold.HoldTable, "hold-"+name).CombinedOutput()
		return string(out)
	}
	// killHolding migrates module i with the agent dying once the port is
	// held and the predecessor stopped, before the new container starts,
	// and starts a client connecting to the held port then.
	killHolding := func(i int) (died time.Time, client chan heldClient) {
		t.Helper()
		w1 := startAgent(t, r, "ADOPT_FAILPOINTS=cutover:swap/start")
		if _, errs, code := adopt(t, "migrate", n.Name, names[i], "--config", n.cfg); code != 0 {
			t.Fatal(errs)
		}
		select {
		case <-w1.done:
		case <-time.After(90 * time.Second):
			t.Fatalf("the agent never reached cutover:swap/start:\n%s", w1.log)
		}
		died = time.Now()
		if s := set(names[i]); !strings.Contains(s, fmt.Sprint(ports[i])) {
			t.Fatalf("the dead agent's hold is not in force (want port %d in the set):\n%s", ports[i], s)
		}
		client = make(chan heldClient, 1)
		go func() {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			c, err := netns.Dial(ctx, "/run/netns/"+r.Peer, &net.Dialer{}, fmt.Sprintf("%s:%d", r.Addr, ports[i]))
			res := heldClient{err: err, wait: time.Since(start)}
			if err == nil {
				if rc, err := c.(*net.TCPConn).SyscallConn(); err == nil {
					_ = rc.Control(func(fd uintptr) {
						if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
							res.retrans = info.Total_retrans
						}
					})
				}
				c.Close()
			}
			client <- res
		}()
		return died, client
	}
	migrated := func(i int, w *workerProc) {
		t.Helper()
		st := waitFor(t, n, "the cutover to finish after the restart", func(st workflows.State) bool {
			s := moduleState(st, names[i])
			return s == workflows.ModuleMigrated || s == workflows.ModuleFailed
		})
		if s := moduleState(st, names[i]); s != workflows.ModuleMigrated {
			t.Fatalf("the cutover of %s did not complete after the restart: %s\n%s", names[i], s, w.log)
		}
		r.assertMigrated(t, names[i], ports[i], sums[i], binds[i])
		if s := set(names[i]); strings.Contains(s, fmt.Sprint(ports[i])) {
			t.Fatalf("port %d is still held after the cutover:\n%s", ports[i], s)
		}
	}

	// Started again at once: the waiting client connects on a
	// retransmission once the new container answers.
	_, client := killHolding(0)
	w2 := startAgent(t, r)
	res := <-client
	t.Logf("agent died holding port %d and was started again: a client that connected meanwhile %s", ports[0], res)
	if res.err != nil || res.retrans == 0 {
		t.Fatalf("a client held while the agent died and came back: %s; want connected on a retransmission", res)
	}
	migrated(0, w2)
	w2.kill()

	// Left dead: the hold goes by itself at its bound (stop_timeout 2 s +
	// 10 s + 5 s), and the waiting client's retransmission is answered
	// (refused: the predecessor is stopped and nothing else listens).
	died, client := killHolding(1)
	var gone time.Duration
	for deadline := died.Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if !strings.Contains(set(names[1]), fmt.Sprint(ports[1])) {
			gone = time.Since(died)
			break
		}
	}
	if gone == 0 {
		t.Fatalf("the dead agent's hold outlived its bound by far (60 s after the agent died):\n%s", set(names[1]))
	}
	res = <-client
	t.Logf("agent died holding port %d and stayed dead: the hold's element gone %s later; a client that connected meanwhile %s",
		ports[1], gone.Round(100*time.Millisecond), res)
	switch {
	case res.err == nil && res.retrans == 0:
		t.Fatal("the client held by a dead agent connected without retransmitting: its SYN was not held")
	case res.err != nil && (!errors.Is(res.err, syscall.ECONNREFUSED) || res.wait < time.Second):
		t.Fatalf("the client held by a dead agent: %s; want an answer to a retransmission (connected, or refused once the hold went)", res)
	}
	w3 := startAgent(t, r)
	defer w3.kill()
	migrated(1, w3)
}
