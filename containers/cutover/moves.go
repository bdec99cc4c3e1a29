package cutover

// The three moves every cutover step is made of: stop a container, rename
// it, remove it. Each is skipped when Docker already shows it done, so a
// step that calls them can be called again after a crash.

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
)

// move is one container set aside: stopped (SIGTERM, SIGKILL after wait)
// when stop is set and it runs, then renamed to `to` when it has another
// name. The step names are reported before each sub-step that happens.
type move struct {
	c          *container.InspectResponse
	what       string // for errors: "predecessor", "the mesh's container"
	stop       bool
	stopStep   string
	wait       time.Duration
	to         string
	renameStep string
}

func (e *Engine) setAside(ctx context.Context, m move) error {
	name := strings.TrimPrefix(m.c.Name, "/")
	if m.stop && running(m.c) {
		if err := e.during(ctx, m.stopStep, func() error {
			return e.cli.ContainerStop(ctx, m.c.ID, stopOptions(m.wait))
		}); err != nil {
			return fmt.Errorf("stop %s %s: %w", m.what, name, err)
		}
	}
	if m.to == "" || m.to == name {
		return nil
	}
	if err := e.step(ctx, m.renameStep); err != nil {
		return err
	}
	if err := e.cli.ContainerRename(ctx, m.c.ID, m.to); err != nil {
		return fmt.Errorf("rename %s %s to %s: %w", m.what, name, m.to, err)
	}
	m.c.Name = "/" + m.to
	return nil
}

// remove removes c, never its volumes (they are the predecessor's data);
// one already gone is fine. force removes it even while it runs.
func (e *Engine) remove(ctx context.Context, step string, c *container.InspectResponse, force bool) error {
	if err := e.step(ctx, step); err != nil {
		return err
	}
	if err := e.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: force}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove %s: %w", strings.TrimPrefix(c.Name, "/"), err)
	}
	return nil
}

func stopOptions(d time.Duration) container.StopOptions {
	secs := int((d + time.Second - 1) / time.Second)
	return container.StopOptions{Timeout: &secs}
}
