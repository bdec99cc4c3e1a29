package activities

// A module container's variables and labels in conflict with its
// predecessor's, as the cutover's steps ask them: the decisions on them
// travel beside the file decisions (path: the module's name, key:
// env:NAME or label:NAME); a conflict refuses like a file's, by key,
// with the node's keyed digests in place of the values.

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/containers/cutover"
)

// containerTakes are the decisions on m's container, by key.
func containerTakes(m config.ModulePlan, ds []FileDecision) map[string]string {
	var takes map[string]string
	for _, d := range ds {
		if d.Path == m.Name {
			if takes == nil {
				takes = map[string]string{}
			}
			takes[d.Key] = d.Take
		}
	}
	return takes
}

// fileDecisions are ds less those on m's container.
func fileDecisions(m config.ModulePlan, ds []FileDecision) []FileDecision {
	var out []FileDecision
	for _, d := range ds {
		if d.Path != m.Name {
			out = append(out, d)
		}
	}
	return out
}

// valueConflicts turns the engine's refusal on conflicting values into the
// refusal on conflicting keys (ErrFileConflict, the conflicts in its
// details, as the workflow records them); nil for any other error.
func (a *Activities) valueConflicts(m config.ModulePlan, err error) error {
	var vc *cutover.ValueConflicts
	if !errors.As(err, &vc) {
		return nil
	}
	var cs []FileConflict
	var keys []string
	for _, c := range vc.Conflicts {
		cs = append(cs, FileConflict{Path: m.Name, Key: c.Key, Why: c.Why()})
		keys = append(keys, c.Key)
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"module %s's container: %s set by its predecessor's container to another value than the module's (values masked); keep the predecessor's with modules[%s].container.keep, or decide each with `adopt resolve %s %s KEY --take node|mesh`, then `adopt retry %s %s`; nothing was changed",
		m.Name, strings.Join(keys, ", "), m.Name, a.Node, m.Name, a.Node, m.Name), ErrFileConflict, nil, cs)
}
