// Details: what the operator reads about a node (the Web UI's current
// details and the next step to take), derived from the state alone.

package workflows

import (
	"fmt"
	"strings"
)

// Details is the short markdown the Web UI shows for the node.
func Details(s *State) string {
	// Sprintf into a Builder, not Fprintf: workflowcheck cannot tell that
	// Fprintf's writer is a Builder and flags it as non-deterministic I/O.
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**Node %s**: phase **%s**\n\n", s.Node, s.Phase))
	// The next step first: the Web UI's details pane is short.
	if r := s.Refused; r != nil {
		b.WriteString(fmt.Sprintf("**Refused %s:** %s\n\n", describe(r.Kind, r.Module), r.Why))
	}
	b.WriteString(fmt.Sprintf("**Now:** %s\n\n", Now(s)))
	b.WriteString(fmt.Sprintf("**Next step:** %s\n\n", NextStep(s)))
	b.WriteString(fmt.Sprintf("- modules migrated: %d of %d\n", s.MigratedCount(), len(s.Modules)))
	for _, m := range s.Modules {
		if m.State == ModuleFailed {
			b.WriteString(fmt.Sprintf("- module %s FAILED (attempt %d): %s; fix it, then `adopt retry %s %s` (from the Web UI: the retry signal, its input from `adopt sign retry %s %s`)\n",
				m.Name, m.Attempts, m.LastError, s.Node, m.Name, s.Node, m.Name))
		}
	}
	if s.FirewallKind != "" {
		b.WriteString(fmt.Sprintf("- found firewall: %s, kept in force; %d marked rule(s)\n", s.FirewallKind, len(s.Marks)))
	}
	b.WriteString(fmt.Sprintf("- files in custody: %d\n", len(s.Custody)))
	if s.Genesis.State != "" {
		b.WriteString(fmt.Sprintf("- genesis: %s %s\n", s.Genesis.State, s.Genesis.Error))
	}
	if r := s.LastReconcile; r != nil && (len(r.Restored) > 0 || r.Error != "") {
		b.WriteString(fmt.Sprintf("- last reconcile (%s): %d marked rule(s) put back %s\n", r.At.Format("15:04:05"), len(r.Restored), r.Error))
	}
	if s.LastPreview != nil {
		verdict := "refused"
		if s.LastPreview.Approved {
			verdict = "approved"
		}
		b.WriteString(fmt.Sprintf("- last preview: %s %s\n", verdict, strings.Join(s.LastPreview.Reasons, "; ")))
	}
	if f := s.Flip; f != nil {
		b.WriteString(fmt.Sprintf("- flip %s: %s %s\n", f.ID, f.State, f.Error))
	}
	for _, d := range s.Drift {
		b.WriteString(fmt.Sprintf("- DRIFT: %s\n", d.What))
	}
	for _, m := range s.Modules {
		for _, c := range m.Conflicts {
			b.WriteString(fmt.Sprintf("- CONFLICT in module %s: %s %s (%s)\n", m.Name, c.Path, c.Key, c.Why))
		}
	}
	if len(s.Queue) > 0 {
		b.WriteString(fmt.Sprintf("- queued: %d request(s), next %s %s\n", len(s.Queue), s.Queue[0].Kind, s.Queue[0].Module))
	}
	if s.Waiting != "" {
		b.WriteString(fmt.Sprintf("- waiting: %s\n", s.Waiting))
	}
	if s.LastError != "" {
		b.WriteString(fmt.Sprintf("- last error: %s\n", s.LastError))
	}
	// The whole picture (firewall, containers, files, fates, risks) is the
	// briefing; the details pane is too short for it.
	b.WriteString(fmt.Sprintf("\nBriefing: `adopt brief %s` (Markdown) or `adopt brief %s --html --out %s.html`\n", s.Node, s.Node, s.Node))
	return b.String()
}

// Now says what the workflow is doing and what it waits for.
func Now(s *State) string {
	if s.Waiting != "" {
		return "waiting for the node's agent: " + s.Waiting
	}
	switch s.Phase {
	case PhaseProbing:
		return "probing the node and adopting its firewall (waits for the node's agent to answer each step)"
	case PhaseMigrating:
		for _, m := range s.Modules {
			if m.State == ModuleMigrating {
				return fmt.Sprintf("cutting module %s over, step %q (attempt %d)", m.Name, m.Step, m.Attempts)
			}
		}
		return "cutting a module over"
	case PhaseFlipping:
		if s.Flip != nil {
			return fmt.Sprintf("flip %s: %s", s.Flip.ID, s.Flip.State)
		}
		return "flipping"
	case PhaseFailed:
		return "waiting for a person: the adoption failed (" + s.LastError + ")"
	case PhaseConverged, PhaseReleased:
		return "nothing: the workflow is complete"
	}
	if len(s.Queue) > 0 {
		return fmt.Sprintf("about to serve %s (%d request(s) queued)", describe(s.Queue[0].Kind, s.Queue[0].Module), len(s.Queue))
	}
	if a := Attention(s); a != "" {
		return "waiting for a person (" + a + "): see the next step"
	}
	return "idle, waiting for a request; the node's agent keeps its marked rules and looks for drift"
}

// NextStep tells the operator what to do next.
func NextStep(s *State) string {
	switch s.Phase {
	case PhaseProbing:
		return "wait: the node is being probed and adopted"
	case PhaseFailed:
		return fmt.Sprintf("fix the cause above, then `adopt retry %s` (or `adopt release %s`)", s.Node, s.Node)
	case PhaseMigrating:
		return "wait: a module is cutting over"
	case PhaseFlipping:
		if s.Flip != nil && s.Flip.State == FlipStateCommitting {
			return fmt.Sprintf("the flip is confirmed and in force, its commit failed (%s): fix the cause, then `adopt retry %s`", s.Flip.Error, s.Node)
		}
		return "wait: the flip is being applied and confirmed"
	case PhaseConverged, PhaseReleased:
		return "none: the workflow is complete"
	}
	if s.Genesis.State == "failed" {
		return fmt.Sprintf("fix the genesis error above in the configuration, then `adopt retry %s`", s.Node)
	}
	if len(s.Control) > 0 {
		return fmt.Sprintf("stop the predecessor's control daemon (%d running; migrate and flip are refused meanwhile): %s", len(s.Control), s.Control[0])
	}
	for _, m := range s.Modules {
		if len(m.Conflicts) > 0 {
			c := m.Conflicts[0]
			return fmt.Sprintf("decide %s %s (module %s, %d conflict(s)): `adopt resolve %s %s %s --take node|mesh`, then `adopt retry %s %s`",
				c.Path, c.Key, m.Name, len(m.Conflicts), s.Node, c.Path, c.Key, s.Node, m.Name)
		}
	}
	for _, m := range s.Modules {
		if m.State == ModuleFailed {
			return fmt.Sprintf("`adopt retry %s %s` after fixing: %s", s.Node, m.Name, m.LastError)
		}
	}
	for _, m := range s.Modules {
		if m.State == ModulePending {
			return fmt.Sprintf("`adopt migrate %s %s`", s.Node, m.Name)
		}
	}
	return fmt.Sprintf("`adopt preview %s`, then `adopt flip %s`", s.Node, s.Node)
}
