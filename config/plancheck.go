// The rules a configuration and a plan share, and the check of a plan a
// request or an agent carries. Config.Validate checks the configuration's
// text with these rules; CheckPlan checks a decoded Plan with the same ones.
// CheckPlan runs in workflow code: everything here is deterministic.
package config

import (
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

// foundationName is the owner name of the foundation's ports; no module
// may take it.
const foundationName = "foundation"

// moduleNameProblem is why name cannot name a module, "" when it can.
// taken says another module already has the name.
func moduleNameProblem(name string, taken bool) string {
	switch {
	case !ValidName(name):
		return "a module name must be " + NameRule
	case name == foundationName:
		return "'foundation' is the owner name of the foundation's ports; choose another module name"
	case taken:
		return "another module has this name; names are unique"
	}
	return ""
}

// pathProblem is why p cannot be a declared path, "" when it can: it must
// be absolute, clean, without "..", so that it names a place under
// node.root. Symlinks are resolved at run time through os.Root.
func pathProblem(p string) string {
	switch {
	case p == "":
		return "required: an absolute path under node.root, e.g. /etc/hosts"
	case !path.IsAbs(p):
		return "must be absolute (it is taken under node.root), e.g. /etc/hosts"
	case strings.Contains(p, "\x00"):
		return "must not contain NUL"
	case path.Clean(p) != p || strings.Contains(p, ".."):
		return "must be a clean path without '..' so it cannot leave node.root"
	case p == "/":
		return "must name a file, not the root"
	}
	return ""
}

// CheckPlan refuses a plan that is not node's with role, or whose modules
// are malformed. role "" accepts any (a node whose role is not known yet).
// A plan built by Config.Plan from a validated configuration passes; one
// typed by hand (the Web UI, the stock temporal CLI) may not.
func CheckPlan(p Plan, node, role string) error {
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
		if why := moduleNameProblem(m.Name, seen[m.Name]); why != "" {
			problems = append(problems, fmt.Sprintf("%s.name %q: %s", key, m.Name, why))
		}
		seen[m.Name] = true
		for j, pt := range m.Ports {
			if err := pt.Validate(); err != nil {
				problems = append(problems, fmt.Sprintf("%s.ports[%d] %q: %v; PORT/PROTO with PORT 1-65535 and PROTO tcp or udp", key, j, pt.String(), err))
			}
		}
		for j, f := range m.Files {
			if why := pathProblem(f.Path); why != "" {
				problems = append(problems, fmt.Sprintf("%s.files[%d].path %q: %s", key, j, f.Path, why))
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
