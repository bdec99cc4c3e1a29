package cutover

// Predecessors of other names (Spec.Replaces): a module may take
// over containers that are not called like it, e.g. a reverse proxy holding
// its ports. They follow the module's own predecessor through the cutover:
// the swap sets each aside as <its name>.predecessor, stopped; a rollback
// renames it back and starts it if it ran; the prune removes it. The mesh's
// container lists them in its adoption.replaced label by ID, so every step
// finds them wherever they are, and a resumed step only does what is left.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
)

// replacedRef is one predecessor of another name, as the mesh's container
// records it: what a rollback needs to put it back as it was.
type replacedRef struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	Running bool   `json:"running"`
	Restart string `json:"restart"`
}

// replacedOf reads the adoption.replaced label of the mesh's container.
func replacedOf(c *container.InspectResponse) ([]replacedRef, error) {
	v := labels(c)[LabelReplaced]
	if v == "" {
		return nil, nil
	}
	var out []replacedRef
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("container %s: label %s is not what the mesh wrote: %w", strings.TrimPrefix(c.Name, "/"), LabelReplaced, err)
	}
	for _, r := range out {
		if !validName.MatchString(r.Name) {
			return nil, fmt.Errorf("container %s: label %s names %q, which is not a container name", strings.TrimPrefix(c.Name, "/"), LabelReplaced, r.Name)
		}
	}
	return out, nil
}

// byID inspects a container by ID; nil when it is gone.
func (e *Engine) byID(ctx context.Context, id string) (*container.InspectResponse, error) {
	c, err := e.cli.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", short(id), err)
	}
	if c.ContainerJSONBase == nil || c.ID != id {
		return nil, nil
	}
	return &c, nil
}

// resolveReplaces finds spec.Replaces on the node, before the swap: each
// must exist and must not belong to another module. A claim (the mesh's
// .next, from an earlier Create) gives their state before the cutover.
func (e *Engine) resolveReplaces(ctx context.Context, spec Spec) ([]replacedRef, []*container.InspectResponse, error) {
	var refs []replacedRef
	var cs []*container.InspectResponse
	for i, name := range spec.Replaces {
		key := fmt.Sprintf("container.replaces[%d]", i)
		if err := checkName(name); err != nil || name == spec.Name {
			return nil, nil, fmt.Errorf("module %s: %s = %q: a container name other than the module's own, without .next or .predecessor: %w", spec.Name, key, name, ErrBadSpec)
		}
		c, err := e.inspect(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		if c == nil {
			return nil, nil, fmt.Errorf("module %s: %s = %q: no container of that name on the node; fix modules[%s].container.replaces (docker ps -a lists them), nothing was changed: %w",
				spec.Name, key, name, spec.Name, ErrBadSpec)
		}
		if m := labels(c)[LabelModule]; m != "" {
			return nil, nil, fmt.Errorf("module %s: %s = %q: that container belongs to module %q (label %s); a module replaces only predecessors, nothing was changed: %w",
				spec.Name, key, name, m, LabelModule, ErrBadSpec)
		}
		p := readPredecessor(c)
		refs = append(refs, replacedRef{Name: name, ID: c.ID, Running: p.Running, Restart: p.RestartPolicy})
		cs = append(cs, c)
	}
	return refs, cs, nil
}

// replacedNow is each recorded predecessor of another name as Docker shows
// it now (nil when gone).
func (e *Engine) replacedNow(ctx context.Context, refs []replacedRef) ([]*container.InspectResponse, error) {
	out := make([]*container.InspectResponse, len(refs))
	for i, r := range refs {
		c, err := e.byID(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// restoreReplaced puts the predecessors of other names back, after the
// mesh's container was stopped: restart policy as it was, own name, started
// if it ran.
func (e *Engine) restoreReplaced(ctx context.Context, refs []replacedRef) error {
	cs, err := e.replacedNow(ctx, refs)
	if err != nil {
		return err
	}
	for i, r := range refs {
		c := cs[i]
		if c == nil {
			continue // checked gone before the rollback began: refused there
		}
		if want, perr := parseRestart(r.Restart); perr == nil && c.HostConfig != nil && c.HostConfig.RestartPolicy != want {
			if err := e.step(ctx, StepRestorePredecessor); err != nil {
				return err
			}
			if err := e.setRestart(ctx, c.ID, want); err != nil {
				return fmt.Errorf("restore restart policy of %s to %s: %w", r.Name, r.Restart, err)
			}
		}
		if err := e.setAside(ctx, move{c: c, what: "predecessor", to: r.Name, renameStep: StepRestorePredecessor}); err != nil {
			return err
		}
		if r.Running && !running(c) {
			if err := e.step(ctx, StepStartPredecessor); err != nil {
				return err
			}
			if err := e.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
				return fmt.Errorf("start predecessor %s: %w", r.Name, err)
			}
		}
	}
	return nil
}

// pruneReplaced removes the predecessors of other names kept stopped for a
// rollback.
func (e *Engine) pruneReplaced(ctx context.Context, refs []replacedRef) error {
	cs, err := e.replacedNow(ctx, refs)
	if err != nil {
		return err
	}
	for i, r := range refs {
		c := cs[i]
		if c == nil {
			continue
		}
		if name := strings.TrimPrefix(c.Name, "/"); name != r.Name+PredecessorSuffix {
			return fmt.Errorf("prune %s refused: the predecessor it replaced (%s) is called %s, not %s%s: the swap is not done: %w",
				r.Name, short(r.ID), name, r.Name, PredecessorSuffix, ErrConflict)
		}
		if running(c) {
			return fmt.Errorf("prune %s%s refused: it is running; stop it first: %w", r.Name, PredecessorSuffix, ErrConflict)
		}
		if err := e.remove(ctx, StepRemovePredecessor, c, false); err != nil {
			return err
		}
	}
	return nil
}
