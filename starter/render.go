// Rendering in one place: the node's state as tables, JSON, small helpers.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"adoption/firewall"
	"adoption/workflows"
)

func printPreview(w io.Writer, pv *firewall.Preview) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tDIRECTION\tFAMILY\tFROM\tFATE\tBY")
	for _, f := range pv.Fates {
		o := f.Opening
		port := fmt.Sprintf("%d/%s", o.Port, o.Proto)
		if o.PortEnd != 0 {
			port = fmt.Sprintf("%d-%d/%s", o.Port, o.PortEnd, o.Proto)
		}
		fate, by := f.Fate, f.By
		if f.Fate == "closing" && f.Dropped {
			by = "flip.drop"
		}
		from := o.From
		if from == "" {
			from = "any"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", port, o.Direction, o.Family, from, fate, by)
	}
	tw.Flush()
	if pv.Approved {
		fmt.Fprintln(w, "\nAPPROVED: every port that would close is in flip.drop; `adopt flip NODE` may proceed")
	} else {
		fmt.Fprintln(w, "\nREFUSED:")
		for _, r := range pv.Reasons {
			fmt.Fprintf(w, "  - %s\n", r)
		}
	}
	fmt.Fprintf(w, "found ruleset %.23s, derived %.23s\n", pv.FoundFingerprint, pv.DerivedFingerprint)
}

func printState(w io.Writer, s *workflows.State) {
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
	}
	if len(s.Custody) > 0 {
		fmt.Fprintln(w, "\nFILES IN CUSTODY")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PATH\tFOUND\tSIZE\tMODE\tOWNER\tSHA256")
		for _, r := range s.Custody {
			fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%d:%d\t%.16s\n", r.Path, r.Found, r.Size, r.Mode, r.UID, r.GID, r.SHA256)
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
	}
	if r := s.LastReconcile; r != nil {
		fmt.Fprintf(w, "LAST RECONCILE: %s, %d present, %d put back %s\n", r.At.Format("15:04:05"), r.Present, len(r.Restored), r.Error)
	}
	if s.Waiting != "" {
		fmt.Fprintf(w, "WAITING: %s\n", s.Waiting)
	}
	if pv := s.LastPreview; pv != nil {
		verdict := "refused"
		if pv.Approved {
			verdict = "approved"
		}
		fmt.Fprintf(w, "LAST PREVIEW: %s %s\n", verdict, strings.Join(pv.Reasons, "; "))
	}
	if f := s.Flip; f != nil {
		fmt.Fprintf(w, "FLIP %s: %s %s %s\n", f.ID, f.State, f.Error, f.Listing)
	}
	if s.LastError != "" {
		fmt.Fprintf(w, "LAST ERROR: %s\n", s.LastError)
	}
	if len(s.Queue) > 0 {
		fmt.Fprintf(w, "QUEUED: %d request(s)\n", len(s.Queue))
	}
	fmt.Fprintf(w, "NEXT: %s\n", workflows.NextStep(s))
	if n := len(s.Events); n > 0 {
		fmt.Fprintln(w, "\nRECENT EVENTS")
		from := max(0, n-8)
		for _, e := range s.Events[from:] {
			fmt.Fprintf(w, "  %s  %s\n", e.At.Format("15:04:05"), e.Text)
		}
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
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
