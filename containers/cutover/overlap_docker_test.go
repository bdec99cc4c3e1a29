package cutover

// The overlap cutover as a client outside the node sees it: a node with a
// Docker engine of its own, a predecessor published on it, clients in a
// peer namespace connecting in a loop while the new container starts
// beside the old one and the port is steered to it; then the rollback,
// which moves the port back the same way. A connection made to the old
// container before the move is answered by it after the move, and one
// that never closes is cut at the drain bound. A refused overlap (an
// exclusive volume) changes nothing.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"adoption/containers/hold"
	"adoption/containers/steer"
	"adoption/sandbox"
)

func TestDockerOverlapMovesClientConnections(t *testing.T) {
	b := newEngineBed(t, "h29o", 233)
	ctx := context.Background()
	n, cli, addr := b.n, b.cli, b.addr
	e := NewWith(cli).WithHold(hold.NewHold(n.NetnsPath(), "h29o")).WithSteer(steer.New(n.NetnsPath(), "h29o"))
	const name, port = svcName, svcPort
	docker, waitVersion := b.docker, b.waitVersion
	names := func() string { return docker("ps", "-a", "--format", "{{.Names}} {{.State}}") }

	// Refused at preflight: the volume is declared exclusive. Nothing
	// changes.
	spec := Spec{Name: name, Image: imageV2, Ports: map[string]string{fmt.Sprintf("%d/tcp", port): "8080/tcp"}, Cutover: CutoverOverlap}
	before := names()
	bad := spec
	bad.Exclusive = []string{"svcdata"}
	if _, err := e.Preflight(ctx, bad); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "volume svcdata at /named") || !strings.Contains(err.Error(), "container.exclusive") {
		t.Fatalf("an exclusive volume was not refused at preflight, naming it: %v", err)
	}
	if err := e.Overlap(ctx, bad, 5*time.Second); !errors.Is(err, ErrConflict) {
		t.Fatalf("overlap before Create: %v", err)
	}
	if after := names(); after != before {
		t.Fatalf("a refused overlap changed the node:\n%s\nthen\n%s", before, after)
	}

	// The overlap with clients connecting in a loop from the peer.
	run := b.clientsDuring
	// A client connected to the old container before the move sends its
	// request only after the move: the predecessor is not stopped before
	// it has answered and the client has closed.
	held, err := sandbox.DialFrom(ctx, n.PeerPath(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldAnswer := make(chan string, 1)
	var drained []DrainReport
	run("overlap", func() error {
		pred, err := e.Preflight(ctx, spec)
		if err != nil {
			return err
		}
		if _, err := e.Create(ctx, spec, pred); err != nil {
			return err
		}
		moved := make(chan struct{})
		var once sync.Once
		sctx := WithDrainReport(WithProgress(ctx, func(step string) {
			if step == StepDrainConnections {
				once.Do(func() { close(moved) })
			}
		}), func(r DrainReport) { drained = append(drained, r) })
		go func() {
			<-moved
			time.Sleep(300 * time.Millisecond) // well into the drain
			heldAnswer <- askAndClose(held)
		}()
		// Swap, as the agent's activity calls it.
		if err := e.Swap(sctx, name, 20*time.Second); err != nil {
			return err
		}
		if err := e.WaitHealthy(ctx, name, nil, 20*time.Second); err != nil {
			return err
		}
		return e.PortsAnswer(ctx, []uint16{port})
	})
	waitVersion("v2")
	if got := names(); !strings.Contains(got, name+" running") || !strings.Contains(got, name+PredecessorSuffix+" exited") {
		t.Fatalf("after the overlap, want %s running and %s%s kept stopped:\n%s", name, name, PredecessorSuffix, got)
	}
	select {
	case got := <-heldAnswer:
		if got != "v1" {
			t.Fatalf("a connection made to the old container before the move, asked after it: %q, want v1", got)
		}
	default:
		t.Fatal("the overlap returned before the held connection was asked")
	}
	if len(drained) != 1 || drained[0].Left != 0 || drained[0].Unread != "" {
		t.Fatalf("drain reports %+v: want one, with no connection left", drained)
	}
	t.Logf("overlap: %s", drained[0])
	// The node's own clients at 127.0.0.1 reach the new container too.
	if got := getOnNode(t, n, port); got != "v2" {
		t.Fatalf("127.0.0.1:%d from the node after the overlap: %q, want v2", port, got)
	}
	steered := func() string { return b.nft("ip", steer.Table) }
	if got := steered(); !strings.Contains(got, steer.Comment("h29o", name, port)) {
		t.Fatalf("no steering after the overlap:\n%s", got)
	}

	// The container restarted (the engine may give it another address)
	// and the steering lost, as a reboot loses it: Resteer, which the agent
	// runs from its start on, points the port at the container again, and
	// writes nothing more while nothing changes.
	docker("restart", "-t", "2", name)
	if out, err := exec.Command("ip", "netns", "exec", n.Netns, "nft", "delete", "table", "ip", steer.Table).CombinedOutput(); err != nil {
		t.Fatalf("delete the steering: %v: %s", err, out)
	}
	agent := NewWith(cli).WithHold(hold.NewHold(n.NetnsPath(), "h29o")).WithSteer(steer.New(n.NetnsPath(), "h29o"))
	if moved, err := agent.Resteer(ctx); err != nil || len(moved) != 1 || moved[0] != name {
		t.Fatalf("resteer after a restart and a lost steering: %v %v, want [%s]", moved, err, name)
	}
	waitVersion("v2")
	if got := getOnNode(t, n, port); got != "v2" {
		t.Fatalf("127.0.0.1:%d from the node after the resteer: %q, want v2", port, got)
	}
	if moved, err := agent.Resteer(ctx); err != nil || len(moved) != 0 {
		t.Fatalf("a second resteer with nothing changed: %v %v", moved, err)
	}

	// Rolled back: the port moves back the same way.
	run("rollback", func() error { return e.Rollback(ctx, name) })
	waitVersion("v1")
	if got := getOnNode(t, n, port); got != "v1" {
		t.Fatalf("127.0.0.1:%d from the node after the rollback: %q, want v1", port, got)
	}
	if got := steered(); strings.Contains(got, "pre-"+name) {
		t.Fatalf("the steering survived the rollback:\n%s", got)
	}
	if got := names(); strings.Contains(got, NextSuffix) || strings.Contains(got, PredecessorSuffix) || !strings.Contains(got, name+" running") {
		t.Fatalf("after the rollback, want %s alone and running:\n%s", name, got)
	}

	// A client that never closes: the predecessor is stopped at the drain
	// bound, the connection reported as left.
	stuck, err := sandbox.DialFrom(ctx, n.PeerPath(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	pred, err := e.Preflight(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, spec, pred); err != nil {
		t.Fatal(err)
	}
	drained = nil
	if err := e.Swap(WithDrainReport(ctx, func(r DrainReport) { drained = append(drained, r) }), name, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(drained) != 1 || drained[0].Left != 1 || drained[0].Unread != "" {
		t.Fatalf("drain reports %+v: want one, with the stuck connection left", drained)
	}
	t.Logf("overlap with a client that never closes: %s", drained[0])
	waitVersion("v2")
	if got := names(); !strings.Contains(got, name+" running") || !strings.Contains(got, name+PredecessorSuffix+" exited") {
		t.Fatalf("after the drain bound, want %s running and %s%s stopped:\n%s", name, name, PredecessorSuffix, got)
	}
}

// askAndClose GETs /version on an open connection and closes it.
func askAndClose(c net.Conn) string {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /version HTTP/1.0\r\nHost: svc\r\n\r\n"); err != nil {
		return err.Error()
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return err.Error()
	}
	_, body, _ := strings.Cut(string(b), "\r\n\r\n")
	return strings.TrimSpace(body)
}

// getOnNode GETs /version at 127.0.0.1:port from the node's namespace.
func getOnNode(t *testing.T, n *sandbox.EngineNode, port int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := sandbox.DialFrom(ctx, n.NetnsPath(), fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "GET /version HTTP/1.0\r\nHost: svc\r\n\r\n")
	b, _ := io.ReadAll(c)
	_, body, _ := strings.Cut(string(b), "\r\n\r\n")
	return strings.TrimSpace(body)
}
