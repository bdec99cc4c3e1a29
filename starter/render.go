// Rendering in one place: the node's state as tables, JSON, small helpers.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"adoption/firewall"
	"adoption/firewall/flipwire"
	"adoption/timefmt"
	"adoption/workflows"
)

func printPreview(w io.Writer, pv *flipwire.Preview, width int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tDIRECTION\tFAMILY\tFROM\tFATE\tBY")
	for _, f := range pv.Fates {
		o := f.Opening
		port := firewall.PortText(o)
		fate, by := f.Fate, f.By
		if f.Fate == "closing" && f.Dropped {
			by = "flip.drop"
		}
		if f.Fate == flipwire.FateWidening && f.Declared {
			by = "flip.widen"
		}
		from := o.From
		if from == "" {
			from = "any"
		}
		if o.Direction == firewall.HookOutput && o.To != "" {
			from = "to " + o.To
		}
		dir := o.Direction
		if o.In != "" {
			dir += " in on " + o.In // a container reaching the node
		}
		if o.Out != "" {
			dir += " out by " + o.Out // the found output chain names the interface
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", port, dir, o.Family, from, fate, by)
	}
	tw.Flush()
	if len(pv.Undecoded) > 0 {
		fmt.Fprintln(w, "\nNOT DECODED (the evaluator cannot tell what these rules let through):")
		for _, u := range pv.Undecoded {
			fmt.Fprintln(w, wrapLine("  - ", u.Text(), width))
		}
	}
	if len(pv.NodeFiles) > 0 {
		fmt.Fprintln(w, "\nNODE FILES (converged at the flip):")
		for _, f := range pv.NodeFiles {
			fmt.Fprintln(w, wrapLine("  - ", f.Text(), width))
		}
	}
	if pv.Approved {
		fmt.Fprintln(w, "\nAPPROVED: every port that would close is in flip.drop, every one that would widen in flip.widen; `adopt flip NODE` may proceed")
	} else {
		fmt.Fprintln(w, "\nREFUSED:")
		for _, r := range groupFamilies(pv.Reasons) {
			fmt.Fprintln(w, wrapLine("  - ", r, width))
		}
	}
	fmt.Fprintf(w, "found ruleset %.23s, derived %.23s\n", pv.FoundFingerprint, pv.DerivedFingerprint)
}

// printStatus prints `adopt status NODE`: the state, then what is missing
// for it to move, then NEXT.
func printStatus(w io.Writer, ns *nodeStatus, width int) {
	if ns.StateFrom == "visibility" {
		fmt.Fprintf(w, "NODE %s: phase %s (from visibility: the workflow did not answer, so no details)\n", ns.Node, orUnknown(string(ns.Phase)))
	} else {
		printState(w, &ns.State, width)
	}
	if ns.Run.Status != "running" {
		fmt.Fprintf(w, "\nRUN: %s at %s\n", ns.Run.Status, stamp(ns.Run.Closed))
	}
	if ns.Agents != nil {
		fmt.Fprintln(w)
		for _, q := range []struct {
			h        queueHealth
			who, tag string
		}{{ns.Agents.Workflow, "worker", "WORKER"}, {ns.Agents.Node, "agent", "AGENT"}} {
			fmt.Fprintln(w, wrapLine(q.tag+": ", q.h.describe(q.who), width))
		}
	}
	for _, p := range ns.Pending {
		line := fmt.Sprintf("step %s, %s, attempt %d", p.Type, p.State, p.Attempt)
		if !p.Scheduled.IsZero() {
			line += fmt.Sprintf(", waiting since %s (%s)", clock(p.Scheduled), time.Since(p.Scheduled).Round(time.Second))
		}
		if p.LastFailure != "" {
			line += "; last failure: " + p.LastFailure
		}
		fmt.Fprintln(w, wrapLine("PENDING: ", line, width))
	}
	if ns.Payloads != "" {
		fmt.Fprintln(w, wrapLine("PAYLOADS: ", ns.Payloads, width))
	}
	if ns.Stuck != "" {
		fmt.Fprintln(w, wrapLine("STUCK: ", ns.Stuck, width))
	}
	fmt.Fprintln(w, wrapLine("NEXT: ", ns.Next, width))
	if n := len(ns.Events); n > 0 {
		fmt.Fprintln(w, "\nRECENT EVENTS")
		for _, e := range ns.Events[max(0, n-8):] {
			fmt.Fprintln(w, wrapLine("  "+clock(e.At)+"  ", e.Text, width))
		}
	}
	fmt.Fprintf(w, "\nWeb UI: %s\n", ns.Link)
}

func printState(w io.Writer, s *workflows.State, width int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPHASE\tMODULES MIGRATED\tFIREWALL\tCUSTODY\tMARKED RULES")
	fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%d file(s)\t%d\n", s.Node, s.Phase, s.MigratedCount(), len(s.Modules), orNone(s.FirewallKind), len(s.Custody), len(s.Marks))
	tw.Flush()
	if len(s.Modules) > 0 {
		fmt.Fprintln(w, "\nMODULES")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MODULE\tSTATE\tATTEMPTS\tLAST ERROR")
		for _, m := range s.Modules {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", m.Name, m.State, m.Attempts, m.LastError)
		}
		tw.Flush()
		for _, m := range s.Modules {
			// A hold that dropped instead of queueing cost its clients a
			// retransmission: said, never silent.
			if m.Hold != nil && !m.Hold.Queued {
				fmt.Fprintf(w, "module %s: %s\n", m.Name, m.Hold)
			}
		}
	}
	if len(s.Custody) > 0 {
		fmt.Fprintln(w, "\nFILES IN CUSTODY")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PATH\tFOUND\tSIZE\tMODE\tOWNER\tDIGEST")
		for _, r := range s.Custody {
			// The node's keyed digest (older histories: the plain sha256).
			d := strings.TrimPrefix(r.Digest, "hmac-sha256:")
			if d == "" {
				d = r.SHA256
			}
			if r.Link != "" {
				d = "symlink -> " + r.Link
			}
			fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%d:%d\t%.16s\n", r.Path, r.Found, r.Size, r.Mode, r.UID, r.GID, d)
		}
		tw.Flush()
	}
	if s.Probe != nil {
		fmt.Fprintf(w, "\nFOUND FIREWALL: %s, %d table(s), %d open port range(s)\n", s.Probe.Firewall.Kind, len(s.Probe.Firewall.Tables), len(s.Probe.Firewall.Open))
	}
	if s.Genesis.State != "" {
		fmt.Fprintf(w, "GENESIS: %s %s\n", s.Genesis.State, s.Genesis.Error)
	}
	if len(s.Marks) > 0 {
		fmt.Fprintln(w, "\nMARKED RULES (the mesh's own, inside the found firewall)")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MARK\tFAMILY\tTABLE\tCHAIN\tHANDLE")
		for _, m := range s.Marks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", m.Mark.Comment(), m.Family, m.Table, m.Chain, m.Handle)
		}
		tw.Flush()
		// Where a mark's place could not be decided (a source deny it
		// cannot be put after, a rule before it that may drop its port).
		for _, m := range s.Marks {
			if m.Placement != "" {
				fmt.Fprintf(w, "  ! %s (%s %s %s): %s\n", m.Mark.Comment(), m.Family, m.Table, m.Chain, m.Placement)
			}
		}
	}
	if r := s.LastReconcile; r != nil {
		fmt.Fprintf(w, "LAST RECONCILE: %s, %d present, %d put back %s\n", clock(r.At), r.Present, len(r.Restored), r.Error)
	}
	if s.Waiting != "" {
		fmt.Fprintf(w, "WAITING: %s\n", s.Waiting)
	}
	if pv := s.LastPreview; pv != nil {
		if pv.Approved {
			fmt.Fprintln(w, "LAST PREVIEW: approved")
		} else {
			fmt.Fprintln(w, "LAST PREVIEW: refused")
			for _, r := range explainReasons(pv.Reasons, s) {
				fmt.Fprintln(w, wrapLine("  - ", r, width))
			}
		}
	}
	if f := s.Flip; f != nil {
		fmt.Fprintf(w, "FLIP %s: %s %s %s\n", f.ID, f.State, f.Error, f.Listing)
	}
	if s.LastError != "" {
		fmt.Fprintln(w, wrapLine("LAST ERROR: ", s.LastError, width))
	}
	if len(s.Queue) > 0 {
		fmt.Fprintf(w, "QUEUED: %d request(s)\n", len(s.Queue))
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSON writes v as --output asks: indented (json) or one line (jsonl).
func (x *cli) writeJSON(w io.Writer, v any) error { return x.out.Write(w, v) }

// setOutput applies --output (and --json, its alias for json).
func (x *cli) setOutput() error {
	if err := x.out.Resolve("adopt brief writes to a file with --out"); err != nil {
		return usagef("%v", err)
	}
	x.asJSON = x.out.IsJSON()
	showLocal = x.out.Local
	return nil
}

// showLocal is --local of the command line being run (setOutput sets it
// before any command runs): times in the host's zone rather than UTC.
var showLocal bool

// stamp is a moment in full, as timefmt writes every time: UTC with Z, or
// with --local the host's zone with its offset.
func stamp(t time.Time) string { return timefmt.Format(t, showLocal) }

// clock is a time of day within the next hours, as timefmt writes it.
func clock(t time.Time) string { return timefmt.Clock(t, showLocal) }

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orDefault(p string) string {
	if p == "" {
		return "$ADOPT_CONFIG"
	}
	return p
}

// age is how long ago t was, as kubectl's AGE column shows it: 45s, 12m,
// 3h, 5d; "?" when unknown.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
