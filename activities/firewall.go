package activities

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/firewall"
	"adoption/sockets"
)

// Marks opens ports through the found firewall as rules marked as the
// mesh's own, and removes only those.
type Marks interface {
	Open(node, owner string, ports []config.Port) (added, present []firewall.MarkedRule, err error)
	Close(node, owner string) ([]firewall.MarkedRule, error)
	Release(node string) ([]firewall.MarkedRule, error)
	List(node string) ([]firewall.MarkedRule, error)
}

// Error types of the firewall steps.
const (
	ErrPortCollision = "PortCollision"
	ErrBadOwner      = "BadOwner"
)

// OwnerFoundation owns the foundation's marked rules.
const OwnerFoundation = "foundation"

// Collision is a foundation port held by something else on the node.
type Collision struct {
	Name   string      `json:"name"`
	Port   config.Port `json:"port"`
	Holder string      `json:"holder"`
	Key    string      `json:"key"`
}

func (c Collision) String() string {
	return fmt.Sprintf("foundation port %s %s is held by %s; set %s to a free port", c.Name, c.Port, c.Holder, c.Key)
}

// CheckPortsResult lists what the genesis check found.
type CheckPortsResult struct {
	Checked    int         `json:"checked"`
	Collisions []Collision `json:"collisions,omitempty"`
}

// CheckFoundationPorts checks, before anything is raised, that every
// foundation port is free on the node: no listening socket in the node's
// namespace (on any address, loopback included) and no container publishing
// it. Every collision is reported at once, naming its holder and the key to
// change; then the step fails non-retryably and nothing was changed.
func (a *Activities) CheckFoundationPorts(ctx context.Context, in ProbeInput) (*CheckPortsResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	ls, err := a.Sockets.Listeners()
	if err != nil {
		return nil, fmt.Errorf("list listening sockets: %w", err)
	}
	ls = attributePublished(ls, a.Engine.Report(ctx))
	res := &CheckPortsResult{Checked: len(auth.Plan.Foundation)}
	for _, fp := range auth.Plan.Foundation {
		if h := holders(ls, fp.Port); h != "" {
			res.Collisions = append(res.Collisions, Collision{Name: fp.Name, Port: fp.Port, Holder: h, Key: "foundation.ports." + fp.Name})
		}
	}
	if len(res.Collisions) > 0 {
		msgs := make([]string, 0, len(res.Collisions))
		for _, c := range res.Collisions {
			msgs = append(msgs, c.String())
		}
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%d foundation port(s) collide; nothing was opened or started: %s", len(msgs), strings.Join(msgs, "; ")),
			ErrPortCollision, nil, res)
	}
	return res, nil
}

// holders names everything holding port, or "".
func holders(ls []sockets.Listener, p config.Port) string {
	seen := map[string]bool{}
	var out []string
	for _, l := range ls {
		if l.Port == p.Num && l.Proto == p.Proto && !seen[l.Holder()] {
			seen[l.Holder()] = true
			out = append(out, l.Holder())
		}
	}
	sort.Strings(out)
	return strings.Join(out, " and ")
}

// RulesInput asks for an owner's ports to be opened (or closed).
type RulesInput struct {
	Plan  config.Plan   `json:"plan"`
	Owner string        `json:"owner"`
	Ports []config.Port `json:"ports"`
}

// RulesResult lists the marked rules an operation added, found or removed.
type RulesResult struct {
	Added   []firewall.MarkedRule `json:"added,omitempty"`
	Present []firewall.MarkedRule `json:"present,omitempty"`
	Removed []firewall.MarkedRule `json:"removed,omitempty"`
}

// OpenRules opens an owner's ports through the found firewall as marked
// rules. It is idempotent: a mark already present is not added again.
func (a *Activities) OpenRules(ctx context.Context, in RulesInput) (*RulesResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	if err := checkOwnerPorts(auth, in.Owner, in.Ports); err != nil {
		return nil, err
	}
	if err := a.refuseUnsupported(ctx); err != nil {
		return nil, err
	}
	added, present, err := a.Marks.Open(auth.Plan.Node, in.Owner, in.Ports)
	if err != nil {
		return nil, fmt.Errorf("open %s's ports %v through the found firewall: %w", in.Owner, in.Ports, err)
	}
	a.Failpoints.Hit("open-rules")
	return &RulesResult{Added: added, Present: present}, nil
}

// CloseRules removes an owner's marked rules, and only those.
func (a *Activities) CloseRules(ctx context.Context, in RulesInput) (*RulesResult, error) {
	if _, err := a.authorize(ctx, in.Plan); err != nil {
		return nil, err
	}
	// Closing removes only the mesh's own marks, so an owner no longer
	// declared (a module taken out of the file) can still be closed.
	if !config.ValidName(in.Owner) {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("owner %q is invalid: it must be %s", in.Owner, config.NameRule), ErrBadOwner, nil)
	}
	removed, err := a.Marks.Close(in.Plan.Node, in.Owner)
	if err != nil {
		return nil, fmt.Errorf("close %s's marked rules: %w", in.Owner, err)
	}
	return &RulesResult{Removed: removed}, nil
}

// ReconcileInput lists every owner's ports that should be open now.
type ReconcileInput struct {
	Plan   config.Plan              `json:"plan"`
	Owners map[string][]config.Port `json:"owners"`
}

// Reconcile puts back marked rules that vanished (the found firewall was
// reloaded by its own boot-time service, or someone deleted one by hand).
func (a *Activities) Reconcile(ctx context.Context, in ReconcileInput) (*RulesResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	owners := make([]string, 0, len(in.Owners))
	for o := range in.Owners {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, o := range owners {
		if err := checkOwnerPorts(auth, o, in.Owners[o]); err != nil {
			return nil, err
		}
	}
	if err := a.refuseUnsupported(ctx); err != nil {
		return nil, err
	}
	res := &RulesResult{}
	for _, o := range owners {
		heartbeat(ctx, "reconcile "+o)
		added, present, err := a.Marks.Open(auth.Plan.Node, o, in.Owners[o])
		if err != nil {
			return nil, fmt.Errorf("reassert %s's marked rules: %w", o, err)
		}
		res.Added = append(res.Added, added...)
		res.Present = append(res.Present, present...)
	}
	return res, nil
}

// ReleaseResult lists the marked rules removed.
type ReleaseResult struct {
	Removed []firewall.MarkedRule `json:"removed"`
}

// Release removes every marked rule of the node, leaving the found firewall
// exactly as found, and clears the adopted marker.
func (a *Activities) Release(ctx context.Context, in ProbeInput) (*ReleaseResult, error) {
	if _, err := a.authorize(ctx, in.Plan); err != nil {
		return nil, err
	}
	removed, err := a.Marks.Release(in.Plan.Node)
	if err != nil {
		return nil, fmt.Errorf("remove marked rules: %w", err)
	}
	a.Failpoints.Hit("release-removed")
	if err := a.State.ClearAdopted(); err != nil {
		return nil, fmt.Errorf("clear the adopted marker: %w", err)
	}
	return &ReleaseResult{Removed: removed}, nil
}

func (a *Activities) refuseUnsupported(ctx context.Context) error {
	fw, err := a.Firewall.Inspect(ctx)
	if err != nil {
		return fmt.Errorf("inspect the found firewall: %w", err)
	}
	if fw.Unsupported != "" {
		return temporal.NewNonRetryableApplicationError(fw.Unsupported, ErrUnsupportedFW, nil)
	}
	return nil
}
