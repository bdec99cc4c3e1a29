package authority

// This file holds the checks of a request's fields against the node's own
// plan (and a cutover's predecessor against the one the node measures).
// Each refusal is non-retryable and says that nothing was changed.

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/containers/cutoverwire"
	"adoption/firewall/flipwire"
)

// CheckDigestKind refuses a request whose plan carries digests of another
// kind than the node's own configuration makes (a codec key on one side).
func CheckDigestKind(auth *Authority, req config.PlanRef) error {
	if req.DigestKind() == auth.Plan.DigestKind() {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"refused: the request's plan carries %s digests, node %s's own configuration %s makes %s digests; nothing was changed. "+
			"Give the operator's CLI, the orchestrator and the node the same %s (or none on all), then: adopt retry %s --config FILE",
		req.DigestKind(), auth.Plan.Node, auth.Source, auth.Plan.DigestKind(), config.CodecKeyFileKey, auth.Plan.Node),
		ErrPlanMismatch, nil)
}

// CheckPlan refuses a request made under a plan that is not the node's
// own. The request names its plan by hash only, so the refusal names both
// hashes (a whole plan from an older orchestrator is named by its own).
func CheckPlan(auth *Authority, req config.PlanRef) error {
	own := auth.Plan.Hash()
	if req.Hash == own {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"refused: the request's plan (sha256 %.12s) differs from node %s's own configuration %s (sha256 %.12s); nothing was changed. "+
			"The node's file is the authority: change it on the node (and the file the operator sends from to the same), then: adopt retry %s --config FILE",
		req.Hash, auth.Plan.Node, auth.Source, own, auth.Plan.Node),
		ErrPlanMismatch, nil)
}

// NotDeclared is the refusal of a request field the local plan does not
// declare.
func NotDeclared(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused: "+format+"; nothing was changed", args...), ErrNotDeclared, nil)
}

// CheckOwnerPorts refuses ports that are not the owner's own in the local
// plan: the foundation's (on any node that declares them) or a module's.
func CheckOwnerPorts(auth *Authority, owner string, ports []config.Port) error {
	if !config.ValidName(owner) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("owner %q is invalid: it must be %s", owner, config.NameRule), ErrBadOwner, nil)
	}
	declared, ok := ownerPorts(auth.Plan, owner)
	if !ok {
		return NotDeclared("owner %q is neither the foundation nor a module of node %s's configuration", owner, auth.Plan.Node)
	}
	for _, p := range ports {
		if !hasPort(declared, p) {
			return NotDeclared("port %s is not declared for %s in node %s's configuration (declared: %s)", p, owner, auth.Plan.Node, portsText(declared))
		}
	}
	return nil
}

// CheckOwnerForward refuses a forward-path opening that node's own
// configuration does not make: only a module's container publishes host
// ports, and only the ones its configuration lists.
func CheckOwnerForward(auth *Authority, owner string, forward []config.Port) error {
	if len(forward) == 0 {
		return nil
	}
	published := ownerPublished(auth.Plan, owner)
	if len(published) == 0 {
		return NotDeclared("%s asks to open published ports %s on the forward path, but node %s's configuration gives it no container that publishes ports", owner, portsText(forward), auth.Plan.Node)
	}
	for _, p := range forward {
		if !hasPort(published, p) {
			return NotDeclared("port %s is not published by %s's container in node %s's configuration (published: %s)", p, owner, auth.Plan.Node, portsText(published))
		}
	}
	return nil
}

func ownerPorts(p config.Plan, owner string) ([]config.Port, bool) {
	if owner == flipwire.OwnerFoundation {
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

// CheckSpec refuses a mesh ruleset the local plan does not derive: another
// node's, one that opens a port no owner declares, one that forwards to a
// port no migrated container publishes, or one without every management
// port (node.management_ports are always kept by a flip).
func CheckSpec(auth *Authority, spec flipwire.MeshSpec) error {
	p := auth.Plan
	if spec.Node != p.Node {
		return NotDeclared("the mesh ruleset asked for is node %q's, not node %s's", spec.Node, p.Node)
	}
	for _, mp := range p.ManagementPorts {
		kept := false
		for _, in := range spec.Input {
			kept = kept || (in.Owner == "management" && in.Port == mp)
		}
		if !kept {
			return NotDeclared("the mesh ruleset asked for does not keep management port %s (node.management_ports); a flip always keeps the node's management ports", mp)
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
				return NotDeclared("the mesh ruleset opens %s for %q, which is neither management, the foundation nor a module of node %s", in.Port, in.Owner, p.Node)
			}
		}
		if !hasPort(declared, in.Port) {
			return NotDeclared("the mesh ruleset opens %s for %s, which node %s's configuration does not declare for it (declared: %s)", in.Port, in.Owner, p.Node, portsText(declared))
		}
	}
	for _, fw := range spec.Forward {
		if !hasPort(ownerPublished(p, fw.Owner), fw.Port) {
			return NotDeclared("the mesh ruleset forwards %s for %q, which no container of node %s's configuration publishes", fw.Port, fw.Owner, p.Node)
		}
	}
	if config.Diff(config.Plan{Drop: spec.Drop}, config.Plan{Drop: p.Drop}) != nil {
		return NotDeclared("the mesh ruleset's dropped ports (%s) are not flip.drop of node %s (%s)", portsText(spec.Drop), p.Node, portsText(p.Drop))
	}
	if config.Diff(config.Plan{Widen: spec.Widen}, config.Plan{Widen: p.Widen}) != nil {
		return NotDeclared("the mesh ruleset's widened ports (%s) are not flip.widen of node %s (%s)", portsText(spec.Widen), p.Node, portsText(p.Widen))
	}
	if d := config.Diff(config.Plan{DropClasses: spec.DropClasses, WidenClasses: spec.WidenClasses}, config.Plan{DropClasses: p.DropClasses, WidenClasses: p.WidenClasses}); d != nil {
		return NotDeclared("the mesh ruleset's declared traffic classes differ from flip.drop and flip.widen of node %s (%s: %s, declared %s)", p.Node, d.Key, d.A, d.B)
	}
	return nil
}

// ownerPublished are the host ports the owner's containers publish: a
// module's container, or on the control node the foundation's containers
// (those of their ports that are foundation ports).
func ownerPublished(p config.Plan, owner string) []config.Port {
	if owner == flipwire.OwnerFoundation {
		if p.Role != "control" {
			return nil
		}
		declared, _ := ownerPorts(p, owner)
		var out []config.Port
		for i := range p.FoundationContainers {
			for _, h := range publishedPorts(&p.FoundationContainers[i]) {
				if hasPort(declared, h) {
					out = append(out, h)
				}
			}
		}
		return out
	}
	if m, ok := p.Module(owner); ok && m.Container != nil {
		return publishedPorts(m.Container)
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

// CheckFlipID refuses an ID that is not one of this node's flips: it
// becomes part of a file name under state_dir.
func CheckFlipID(node, id string) error {
	if !config.ValidFlipID(id) || !strings.HasPrefix(id, node+"-") || strings.Trim(strings.TrimPrefix(id, node+"-"), "0123456789") != "" {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"refused: flip ID %q is not one of node %s's (%s-N, matching ^[a-z0-9_-]+-[0-9]+$); nothing was changed", id, node, node), ErrBadRequest, nil)
	}
	return nil
}

// CheckConfirmTimeout refuses a confirmation window other than the node's
// own flip.confirm_timeout, or past flip.max_confirm_timeout.
func CheckConfirmTimeout(auth *Authority, d time.Duration) error {
	if d != auth.Plan.ConfirmTimeout {
		return NotDeclared("confirm timeout %s is not node %s's flip.confirm_timeout (%s)", d, auth.Plan.Node, auth.Plan.ConfirmTimeout)
	}
	if d <= 0 || (auth.MaxConfirmTimeout > 0 && d > auth.MaxConfirmTimeout) {
		return NotDeclared("confirm timeout %s is outside (0, flip.max_confirm_timeout = %s]", d, auth.MaxConfirmTimeout)
	}
	return nil
}

// CheckDeclared refuses a path the local plan does not declare.
func CheckDeclared(auth *Authority, path string) error {
	for _, p := range auth.Plan.DeclaredPaths() {
		if p == path {
			return nil
		}
	}
	return NotDeclared("path %q is not declared in node %s's configuration; only declared paths are inspected, taken or restored", path, auth.Plan.Node)
}

// CheckWorkflowID refuses a workflow ID that cannot be written into the
// adopted marker as it is.
func CheckWorkflowID(id string) error {
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

// PredecessorDiff names the first way a request's predecessor differs from
// the one measured on the node, in what the new container would inherit.
func PredecessorDiff(req, node *cutoverwire.Predecessor) string {
	if req == nil {
		return ""
	}
	if node == nil {
		return fmt.Sprintf("the request names predecessor %s (%.12s), the node has none", req.Name, req.ID)
	}
	for _, f := range []struct {
		what       string
		reqV, node any
	}{
		{"id", req.ID, node.ID},
		{"mounts", req.Mounts, node.Mounts},
		{"networks", req.Networks, node.Networks},
		{"aliases", req.Aliases, node.Aliases},
	} {
		a, _ := json.Marshal(f.reqV)
		b, _ := json.Marshal(f.node)
		if string(a) != string(b) && !(isEmptyJSON(a) && isEmptyJSON(b)) {
			return fmt.Sprintf("%s: the request says %s, the node has %s", f.what, a, b)
		}
	}
	return ""
}

func isEmptyJSON(b []byte) bool {
	s := string(b)
	return s == "null" || s == "[]" || s == "{}" || s == `""`
}
