// The predecessor's control daemons (predecessor.control) while the node is
// adopted: found by executable, named with their pid, user and user unit,
// and what stops each for good. One running refuses adoption, a module's
// migration and the flip, since it would rewrite the files and firewall the
// mesh holds; the agent's watch looks for them on every round (package
// watch) and reports them as a finding.
package activities

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
)

// ControlDaemon is nodewire.ControlDaemon.
type ControlDaemon = nodewire.ControlDaemon

// ControlResult is what checkControl found.
type ControlResult struct {
	Running []ControlDaemon `json:"running,omitempty"`
}

// checkControl looks for the predecessor's control daemons of the node's
// own plan now. It reads only.
func (a *Activities) checkControl(ctx context.Context, in DriftInput) (*ControlResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	return &ControlResult{Running: a.controlDaemons(auth)}, nil
}

// controlDaemons are the plan's control daemons running now.
func (a *Activities) controlDaemons(auth *authority.Authority) []ControlDaemon {
	if len(auth.Plan.Control) == 0 {
		return nil
	}
	var out []ControlDaemon
	for _, p := range a.Sockets.FindProcesses(auth.Plan.Control) {
		d := ControlDaemon{PID: p.PID, Exe: p.Exe, User: p.User, Unit: p.Unit}
		switch {
		case p.Unit != "" && p.User != "":
			d.Stop = fmt.Sprintf("systemctl --user -M %s@ disable --now %s; loginctl disable-linger %s", p.User, p.Unit, p.User)
		case p.User != "" && p.User != "root" && p.UID != 0:
			d.Stop = fmt.Sprintf("kill %d, then remove what starts it for user %s (systemctl --user -M %s@ disable UNIT; loginctl disable-linger %s; crontab -u %s -e)", p.PID, p.User, p.User, p.User, p.User)
		default:
			d.Stop = fmt.Sprintf("kill %d, then remove what starts it (a system unit: systemctl disable --now UNIT)", p.PID)
		}
		out = append(out, d)
	}
	return out
}

// refuseControl refuses what (a migration, a flip) while a control daemon
// runs, naming each.
func (a *Activities) refuseControl(auth *authority.Authority, what string) error {
	ds := a.controlDaemons(auth)
	if len(ds) == 0 {
		return nil
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.String()
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"%s refused: the predecessor's control daemon is running on node %s and would rewrite what the mesh holds: %s; nothing was changed; stop it, then run the request again",
		what, a.Node, strings.Join(names, "; ")), ErrControlRunning, nil, ds)
}
