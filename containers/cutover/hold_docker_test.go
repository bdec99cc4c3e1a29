package cutover

// The port hold measured as a client outside the node sees it:
// a node with a Docker engine of its own (sandbox.EngineNode), a predecessor
// published on it, clients in a peer namespace connecting in a loop, each
// connect allowed to wait up to 3 s, while the cutover swaps the container.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"adoption/containers/hold"
)

// clientPatience is how long a test client waits for its connect, as curl or
// a browser would: far less than the kernel's two minutes of SYN resends,
// but longer than the engine's gap on a loaded 2-core host (3.2 s seen), so
// a held connect that is slow is not counted as lost. A refused or reset
// connect still fails at once, and the longest wait is reported.
const clientPatience = 15 * time.Second

func TestDockerSwapHoldsClientConnections(t *testing.T) {
	b := newEngineBed(t, "h13", 231, "-e", "SECRET_TOKEN="+carrySecret)
	ctx := context.Background()
	e := NewWith(b.cli).WithHold(hold.NewHold(b.n.NetnsPath(), "h13"))
	const name, port = svcName, svcPort
	spec := Spec{Name: name, Image: imageV2, Ports: map[string]string{fmt.Sprintf("%d/tcp", port): "8080/tcp"}}
	holdTable := func() string { return b.nft("inet", hold.HoldTable) }

	// A swap interrupted after it took the hold and stopped the
	// predecessor: the hold is there; a rollback removes it and the
	// predecessor serves again.
	pred, err := e.Preflight(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, spec, pred); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("worker killed")
	e.beforeStep = func(step string) error {
		if step == StepStart {
			return crash
		}
		return nil
	}
	if err := e.Swap(ctx, name, 5*time.Second); !errors.Is(err, crash) {
		t.Fatalf("swap: %v", err)
	}
	e.beforeStep = nil
	if got := holdTable(); !strings.Contains(got, hold.HoldComment("h13", name, port)) || !(strings.Contains(got, "queue num") || strings.Contains(got, "drop")) {
		t.Fatalf("no hold while the swap was interrupted:\n%s", got)
	}
	if err := e.Rollback(ctx, name); err != nil {
		t.Fatal(err)
	}
	if got := holdTable(); strings.Contains(got, "hold-") {
		t.Fatalf("the hold survived the rollback:\n%s", got)
	}
	b.waitVersion("v1")

	// The cutover with clients connecting in a loop from the peer.
	b.clientsDuring("swap", func() error {
		pred, err := e.Preflight(ctx, spec)
		if err != nil {
			return err
		}
		if _, err := e.Create(ctx, spec, pred); err != nil {
			return err
		}
		if err := e.Swap(ctx, name, 5*time.Second); err != nil {
			return err
		}
		if err := e.WaitHealthy(ctx, name, nil, 20*time.Second); err != nil {
			return err
		}
		return e.PortsAnswer(ctx, []uint16{port})
	})
	if got := holdTable(); strings.Contains(got, "hold-") {
		t.Fatalf("the hold survived the swap:\n%s", got)
	}
	// Rolled back (the operator decides against it): the swap back holds
	// the port too, and lets go of it.
	b.clientsDuring("rollback", func() error {
		if err := e.Rollback(ctx, name); err != nil {
			return err
		}
		b.waitVersion("v1")
		return nil
	})
	if got := holdTable(); strings.Contains(got, "hold-") {
		t.Fatalf("the hold survived the rollback:\n%s", got)
	}
	// Cut over again, for the checks below.
	pred, err = e.Preflight(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, spec, pred); err != nil {
		t.Fatal(err)
	}
	if err := e.Swap(ctx, name, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The environment came along, on the node's own engine too.
	if env := b.docker("inspect", "-f", "{{json .Config.Env}}", name); !strings.Contains(env, "SECRET_TOKEN="+carrySecret) || !strings.Contains(env, "SVC_VERSION=v2") {
		t.Fatalf("environment after the swap: %s", env)
	}
}
