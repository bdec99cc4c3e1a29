package activities

// This file holds the node's authority over what its agent does. Anyone
// who can reach Temporal can put a task on adoption-node-<node>, so a
// request is only a choice among what the node's own configuration file
// declares: every activity first derives the plan from that file and
// refuses a request whose plan differs (by the canonical hash, naming the
// first difference); then it acts on the local plan, and checks each other
// field of the request (owners, ports, the mesh's ruleset, flip IDs,
// paths, the confirm timeout) against it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/containers"
	"adoption/firewall/flip"
	"adoption/intent"
)

// Error types of the authority checks. None is retried: the request will
// not change by itself, and nothing was changed on the node.
const (
	// ErrPlanMismatch: the request's plan is not the node's own.
	ErrPlanMismatch = "PlanMismatch"
	// ErrNotDeclared: the request asks for something (a port, an owner, a
	// path, a ruleset, a timeout) the node's configuration does not declare.
	ErrNotDeclared = "NotDeclared"
	// ErrBadRequest: a malformed identifier (a flip ID, a workflow ID).
	ErrBadRequest = "BadRequest"
	// ErrLocalConfig: the node's own configuration cannot be read.
	ErrLocalConfig = "LocalConfig"
)

// Authority is what the node's own configuration says: the plan, the
// declared files' content (looked up by the hash the plan carries) and the
// limits the agent enforces whatever it is asked.
type Authority struct {
	Plan     config.Plan
	Contents map[string][]byte
	// MaxConfirmTimeout is flip.max_confirm_timeout.
	MaxConfirmTimeout time.Duration
	// EnableBootService is flip.enable_boot_service: the commit may enable
	// nftables.service (and switch off netfilter-persistent) itself.
	EnableBootService bool
	// Source names where it was read from, for messages ("/etc/adoption/n1.yaml").
	Source string
	// Operators are the keys whose signed intents the node acts on
	// (authority.operators); Unsigned, said explicitly with none listed,
	// lets it act on requests without one (intent.go).
	Operators *intent.Operators
	Unsigned  bool
	// Fleet is authority.fleet: the fleet whose workflow may read the plan.
	Fleet string
	// Intents is the directory of the intents' nonces (under state_dir).
	Intents string
}

// FromConfig is the authority of a loaded, validated configuration.
func FromConfig(c *config.Config, source string) *Authority {
	ops, _ := c.Authority.Keys() // validated at load; a nil set trusts no key
	return &Authority{Plan: c.Plan(), Contents: c.Contents(), MaxConfirmTimeout: c.Flip.MaxConfirmTimeout, Source: source,
		EnableBootService: c.Flip.EnableBootService, Operators: ops, Unsigned: c.Authority.Unsigned, Fleet: c.Authority.Fleet, Intents: IntentsDir(c.Node.StateDir)}
}

// Fixed is an authority that never changes and takes unsigned requests
// (tests, benchmarks).
func Fixed(p config.Plan, contents map[string][]byte, maxConfirm time.Duration) func() (*Authority, error) {
	return func() (*Authority, error) {
		return &Authority{Plan: p, Contents: contents, MaxConfirmTimeout: maxConfirm, Source: "fixed plan", Unsigned: true}, nil
	}
}

// authorize is the first thing every activity does: the node's own
// configuration, read now (so an operator's edit of the file applies at
// the next retry), must derive exactly the plan the request carries.
func (a *Activities) authorize(ctx context.Context, req config.Plan) (*Authority, error) {
	if err := a.checkNode(req.Node); err != nil {
		return nil, err
	}
	if err := a.checkCaller(ctx); err != nil {
		return nil, err
	}
	if a.Local == nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("node %s's agent has no local configuration to check requests against; start adopt-worker with --config", a.Node), ErrLocalConfig, nil)
	}
	auth, err := a.Local()
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"node %s's own configuration cannot be read, so no request is served: %v; fix the file on the node, then: adopt retry %s", a.Node, err, a.Node),
			ErrLocalConfig, nil)
	}
	if auth.Plan.Node != a.Node {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"node.name in %s is now %q, but this agent serves node %q; restart adopt-worker after renaming a node", auth.Source, auth.Plan.Node, a.Node),
			ErrLocalConfig, nil)
	}
	if req.DigestKind() != auth.Plan.DigestKind() {
		heartbeat(ctx, "refused: digest kinds differ")
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"refused: the request's plan carries %s digests, node %s's own configuration %s makes %s digests; nothing was changed. "+
				"Give the operator's CLI, the orchestrator and the node the same %s (or none on all), then: adopt retry %s --config FILE",
			req.DigestKind(), a.Node, auth.Source, auth.Plan.DigestKind(), config.CodecKeyFileKey, a.Node),
			ErrPlanMismatch, nil)
	}
	if d := config.Diff(req, auth.Plan); d != nil {
		heartbeat(ctx, "refused: plan mismatch")
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"refused: the request's plan (sha256 %.12s) differs from node %s's own configuration %s (sha256 %.12s) at %s: the request says %s, the node says %s; nothing was changed. "+
				"The node's file is the authority: change it on the node (and the file the operator sends from to the same), then: adopt retry %s --config FILE",
			req.Hash(), a.Node, auth.Source, auth.Plan.Hash(), d.Key, d.A, d.B, a.Node),
			ErrPlanMismatch, nil)
	}
	return auth, nil
}

// notDeclared is the refusal of a request field the local plan does not
// declare.
func notDeclared(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused: "+format+"; nothing was changed", args...), ErrNotDeclared, nil)
}

// checkOwnerPorts refuses ports that are not the owner's own in the local
// plan: the foundation's (on any node that declares them) or a module's.
func checkOwnerPorts(auth *Authority, owner string, ports []config.Port) error {
	if !config.ValidName(owner) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("owner %q is invalid: it must be %s", owner, config.NameRule), ErrBadOwner, nil)
	}
	declared, ok := ownerPorts(auth.Plan, owner)
	if !ok {
		return notDeclared("owner %q is neither the foundation nor a module of node %s's configuration", owner, auth.Plan.Node)
	}
	for _, p := range ports {
		if !hasPort(declared, p) {
			return notDeclared("port %s is not declared for %s in node %s's configuration (declared: %s)", p, owner, auth.Plan.Node, portsText(declared))
		}
	}
	return nil
}

// checkOwnerForward refuses a forward-path opening that node's own
// configuration does not make: only a module's container publishes host
// ports, and only the ones its configuration lists.
func checkOwnerForward(auth *Authority, owner string, forward []config.Port) error {
	if len(forward) == 0 {
		return nil
	}
	m, ok := auth.Plan.Module(owner)
	if !ok || m.Container == nil {
		return notDeclared("%s asks to open published ports %s on the forward path, but node %s's configuration gives it no container that publishes ports", owner, portsText(forward), auth.Plan.Node)
	}
	published := publishedPorts(m.Container)
	for _, p := range forward {
		if !hasPort(published, p) {
			return notDeclared("port %s is not published by %s's container in node %s's configuration (published: %s)", p, owner, auth.Plan.Node, portsText(published))
		}
	}
	return nil
}

func ownerPorts(p config.Plan, owner string) ([]config.Port, bool) {
	if owner == flip.OwnerFoundation {
		out := make([]config.Port, 0, len(p.Foundation))
		for _, fp := range p.Foundation {
			out = append(out, fp.Port)
		}
		return out, true
	}
	if m, ok := p.Module(owner); ok {
		return m.Ports, true
	}
	return nil, false
}

// checkSpec refuses a mesh ruleset the local plan does not derive: another
// node's, one that opens a port no owner declares, one that forwards to a
// port no migrated container publishes, or one without every management
// port (node.management_ports are always kept by a flip).
func checkSpec(auth *Authority, spec flip.MeshSpec) error {
	p := auth.Plan
	if spec.Node != p.Node {
		return notDeclared("the mesh ruleset asked for is node %q's, not node %s's", spec.Node, p.Node)
	}
	for _, mp := range p.ManagementPorts {
		kept := false
		for _, in := range spec.Input {
			kept = kept || (in.Owner == "management" && in.Port == mp)
		}
		if !kept {
			return notDeclared("the mesh ruleset asked for does not keep management port %s (node.management_ports); a flip always keeps the node's management ports", mp)
		}
	}
	for _, in := range spec.Input {
		var declared []config.Port
		switch in.Owner {
		case "management":
			declared = p.ManagementPorts
		default:
			var ok bool
			if declared, ok = ownerPorts(p, in.Owner); !ok {
				return notDeclared("the mesh ruleset opens %s for %q, which is neither management, the foundation nor a module of node %s", in.Port, in.Owner, p.Node)
			}
		}
		if !hasPort(declared, in.Port) {
			return notDeclared("the mesh ruleset opens %s for %s, which node %s's configuration does not declare for it (declared: %s)", in.Port, in.Owner, p.Node, portsText(declared))
		}
	}
	for _, fw := range spec.Forward {
		m, ok := p.Module(fw.Owner)
		if !ok || m.Container == nil || !hasPort(publishedPorts(m.Container), fw.Port) {
			return notDeclared("the mesh ruleset forwards %s for %q, which no container of node %s's configuration publishes", fw.Port, fw.Owner, p.Node)
		}
	}
	if config.Diff(config.Plan{Drop: spec.Drop}, config.Plan{Drop: p.Drop}) != nil {
		return notDeclared("the mesh ruleset's dropped ports (%s) are not flip.drop of node %s (%s)", portsText(spec.Drop), p.Node, portsText(p.Drop))
	}
	if config.Diff(config.Plan{Widen: spec.Widen}, config.Plan{Widen: p.Widen}) != nil {
		return notDeclared("the mesh ruleset's widened ports (%s) are not flip.widen of node %s (%s)", portsText(spec.Widen), p.Node, portsText(p.Widen))
	}
	if d := config.Diff(config.Plan{DropClasses: spec.DropClasses, WidenClasses: spec.WidenClasses}, config.Plan{DropClasses: p.DropClasses, WidenClasses: p.WidenClasses}); d != nil {
		return notDeclared("the mesh ruleset's declared traffic classes differ from flip.drop and flip.widen of node %s (%s: %s, declared %s)", p.Node, d.Key, d.A, d.B)
	}
	return nil
}

// publishedPorts are a container's host ports ([IP:]PORT/PROTO keys).
func publishedPorts(c *config.Container) []config.Port {
	var out []config.Port
	for h := range c.Ports {
		if p, ok := config.HostPort(h); ok {
			out = append(out, p)
		}
	}
	return out
}

// checkFlipID refuses an ID that is not one of this node's flips: it
// becomes part of a file name under state_dir.
func checkFlipID(node, id string) error {
	if !config.ValidFlipID(id) || !strings.HasPrefix(id, node+"-") || strings.Trim(strings.TrimPrefix(id, node+"-"), "0123456789") != "" {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"refused: flip ID %q is not one of node %s's (%s-N, matching ^[a-z0-9_-]+-[0-9]+$); nothing was changed", id, node, node), ErrBadRequest, nil)
	}
	return nil
}

// checkConfirmTimeout refuses a confirmation window other than the node's
// own flip.confirm_timeout, or past flip.max_confirm_timeout.
func checkConfirmTimeout(auth *Authority, d time.Duration) error {
	if d != auth.Plan.ConfirmTimeout {
		return notDeclared("confirm timeout %s is not node %s's flip.confirm_timeout (%s)", d, auth.Plan.Node, auth.Plan.ConfirmTimeout)
	}
	if d <= 0 || (auth.MaxConfirmTimeout > 0 && d > auth.MaxConfirmTimeout) {
		return notDeclared("confirm timeout %s is outside (0, flip.max_confirm_timeout = %s]", d, auth.MaxConfirmTimeout)
	}
	return nil
}

// checkDeclared refuses a path the local plan does not declare.
func checkDeclared(auth *Authority, path string) error {
	for _, p := range auth.Plan.DeclaredPaths() {
		if p == path {
			return nil
		}
	}
	return notDeclared("path %q is not declared in node %s's configuration; only declared paths are inspected, taken or restored", path, auth.Plan.Node)
}

// checkWorkflowID refuses a workflow ID that cannot be written into the
// adopted marker as it is.
func checkWorkflowID(id string) error {
	ok := id != "" && len(id) <= 255
	for _, r := range id {
		ok = ok && r < unicode.MaxASCII && unicode.IsPrint(r) && r != ' '
	}
	if !ok {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused: workflow ID %q is not 1-255 printable ASCII characters", id), ErrBadRequest, nil)
	}
	return nil
}

func hasPort(ps []config.Port, p config.Port) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func portsText(ps []config.Port) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, 0, len(ps))
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}

// withheld turns an error that may carry a container's own output (its
// logs, its healthcheck's output: possibly secrets) into a short reason for
// the workflow history, and writes the whole of it to the agent's log.
func (a *Activities) withheld(ctx context.Context, what string, err error) string {
	var oe *containers.OutputError
	if !errors.As(err, &oe) {
		return fmt.Sprintf("%s: %v", what, err)
	}
	logger(ctx).Error(what, "error", err.Error())
	return fmt.Sprintf("%s: %s; %s is withheld from the workflow history: it is in the agent's log on node %s (adopt-worker's output, e.g. journalctl -u adopt-worker), logged as %q",
		what, oe.Reason, oe.What, a.Node, what)
}

// logger is the activity's logger (the worker's log), or stderr outside one.
func logger(ctx context.Context) interface {
	Error(msg string, keyvals ...any)
} {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}
