// The plan a request or an agent carries is checked before the workflow
// takes it: it must be this node's, in this node's role, and every module
// in it well formed (a name, ports, absolute clean paths, content hashes).
// A plan built by `adopt` from a validated file passes; one typed by hand
// into the Web UI or the stock temporal CLI may not.
package workflows

import (
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"adoption/config"
)

// checkPlan refuses a plan that is not node's with role, or whose modules
// are malformed. role "" accepts any (a node whose role is not known yet).
func checkPlan(p config.Plan, node, role string) error {
	if p.Node != node {
		return fmt.Errorf("the plan sent is node %q's, not %s's; pass node %s's configuration", p.Node, node, node)
	}
	if role != "" && p.Role != role {
		return fmt.Errorf("the plan sent gives node %s the role %q, but it is a %s node; a node's role does not change during its adoption", node, p.Role, role)
	}
	var problems []string
	seen := map[string]bool{}
	for i, m := range p.Modules {
		key := fmt.Sprintf("modules[%d]", i)
		switch {
		case !config.ValidName(m.Name):
			problems = append(problems, fmt.Sprintf("%s.name %q: a module name must be %s", key, m.Name, config.NameRule))
		case m.Name == "foundation":
			problems = append(problems, fmt.Sprintf("%s.name %q: reserved for the foundation's ports", key, m.Name))
		case seen[m.Name]:
			problems = append(problems, fmt.Sprintf("%s.name %q: another module has this name", key, m.Name))
		}
		seen[m.Name] = true
		for j, pt := range m.Ports {
			if pt.Num == 0 || (pt.Proto != "tcp" && pt.Proto != "udp") {
				problems = append(problems, fmt.Sprintf("%s.ports[%d] %q: PORT/PROTO with PORT 1-65535 and PROTO tcp or udp", key, j, pt.String()))
			}
		}
		for j, f := range m.Files {
			if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || strings.ContainsRune(f.Path, 0) {
				problems = append(problems, fmt.Sprintf("%s.files[%d].path %q: an absolute, clean path", key, j, f.Path))
			}
			if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != 32 {
				problems = append(problems, fmt.Sprintf("%s.files[%d].sha256 %q: 64 hex digits", key, j, f.SHA256))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the plan sent for node %s is malformed: %s; send the plan `adopt` builds from the node's configuration", node, strings.Join(problems, "; "))
	}
	return nil
}
