// `adopt-worker probe`: what the node holds, read-only and without
// Temporal, the same report the workflow's first activity records.
package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"adoption/activities"
	"adoption/output"
	"adoption/timefmt"
)

func probeCommand(ctx context.Context, cfgPath *string, stdout, stderr io.Writer) *cobra.Command {
	var out output.Flags
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Probe the node read-only, without Temporal, and print what was found",
		Example: `  adopt-worker probe --config /etc/adoption/node.yaml
  adopt-worker probe --config /etc/adoption/node.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.Resolve(""); err != nil {
				return usageError{err}
			}
			cfg, err := loadNodeConfig(*cfgPath)
			if err != nil {
				return err
			}
			r, err := nodeActivities(cfg, *cfgPath, stderr).Probe(ctx, activities.ProbeInput{Plan: cfg.Plan().Ref()})
			if err != nil {
				return err
			}
			if out.IsJSON() {
				return out.Write(stdout, r)
			}
			printProbe(stdout, r, out.Local)
			return nil
		},
	}
	out.Register(cmd.Flags())
	return cmd
}

func printProbe(w io.Writer, r *activities.ProbeReport, local bool) {
	fmt.Fprintf(w, "node %s, probed %s\n", r.Node, timefmt.Format(r.At, local))
	fmt.Fprintf(w, "firewall: %s", r.Firewall.Kind)
	if r.Firewall.Unsupported != "" {
		fmt.Fprintf(w, " (UNSUPPORTED: %s)", r.Firewall.Unsupported)
	}
	if r.Firewall.Error != "" {
		fmt.Fprintf(w, " (error: %s)", r.Firewall.Error)
	}
	fmt.Fprintln(w)
	for _, t := range r.Firewall.Tables {
		fmt.Fprintf(w, "  table %s %s: %d chains, %s\n", t.Family, t.Name, len(t.Chains), t.Ownership.Text())
		for _, c := range t.Chains {
			if c.Ownership != t.Ownership {
				fmt.Fprintf(w, "    chain %s: %s\n", c.Name, c.Ownership.Text())
			}
		}
	}
	if r.Firewall.NodeError != "" {
		fmt.Fprintf(w, "  (%s)\n", r.Firewall.NodeError)
	}
	fmt.Fprintf(w, "open ports: %d\n", len(r.Firewall.Open))
	for _, o := range r.Firewall.Open {
		port := fmt.Sprint(o.Port)
		if o.PortEnd != 0 {
			port = fmt.Sprintf("%d-%d", o.Port, o.PortEnd)
		}
		extra := ""
		if o.From != "" {
			extra += " from " + o.From
		}
		if o.To != "" {
			extra += " at " + o.To
		}
		if o.Via != "" {
			extra += " -> " + o.Via
			if name := r.Behind[o.Via]; name != "" {
				extra += " (container " + name + ")"
			}
		}
		if o.Uncertain {
			extra += " (uncertain)"
		}
		if o.Reason != "" {
			extra += ": " + o.Reason
		}
		fmt.Fprintf(w, "  %-6s %s/%s %s%s\n", o.Family, port, o.Proto, o.Direction, extra)
	}
	fmt.Fprintf(w, "other traffic classes open: %d\n", len(r.Firewall.Classes))
	for _, o := range r.Firewall.Classes {
		extra := ""
		if o.Port != 0 {
			extra += fmt.Sprintf(" port %d", o.Port)
		}
		if o.To != "" {
			extra += " to " + o.To
		}
		if o.From != "" {
			extra += " from " + o.From
		}
		if o.Uncertain {
			extra += " (uncertain)"
		}
		fmt.Fprintf(w, "  %-6s %s %s%s\n", o.Family, o.Class, o.Proto, extra)
	}
	fmt.Fprintf(w, "open to containers (from their bridges to the node): %d\n", len(r.Firewall.Containers))
	for _, o := range r.Firewall.Containers {
		port := fmt.Sprint(o.Port)
		if o.PortEnd != 0 {
			port = fmt.Sprintf("%d-%d", o.Port, o.PortEnd)
		}
		extra := ""
		if o.From != "" {
			extra += " from " + o.From
		}
		if o.Uncertain {
			extra += " (uncertain)"
		}
		fmt.Fprintf(w, "  %-6s %s/%s in on %s%s\n", o.Family, port, o.Proto, o.In, extra)
	}
	fmt.Fprintf(w, "listeners: %d\n", len(r.Sockets))
	for _, l := range r.Sockets {
		fmt.Fprintf(w, "  %s %s:%d  %s\n", l.Proto, l.Addr, l.Port, l.Holder())
	}
	if r.Containers.Available {
		fmt.Fprintf(w, "containers: %d\n", len(r.Containers.Containers))
	} else {
		fmt.Fprintf(w, "containers: UNKNOWN (%s)\n", r.Containers.Error)
	}
	fmt.Fprintf(w, "declared files: %d\n", len(r.Files))
	for _, f := range r.Files {
		state := "absent"
		if f.Exists {
			state = fmt.Sprintf("%d bytes, mode %s, uid %d, digest %.12s", f.Size, f.Mode, f.UID, strings.TrimPrefix(f.Digest, "hmac-sha256:"))
			if f.Link != "" {
				state = fmt.Sprintf("symlink -> %s, uid %d", f.Link, f.UID)
			}
		}
		if f.Error != "" {
			state = "error: " + f.Error
		}
		fmt.Fprintf(w, "  %s: %s\n", f.Path, state)
	}
	fmt.Fprintf(w, "predecessor control daemons running: %d\n", len(r.Control))
	for _, p := range r.Control {
		fmt.Fprintf(w, "  pid %d %s\n", p.PID, p.Exe)
	}
	fmt.Fprintf(w, "adopted marker: %v\n", r.Adopted)
	if len(r.Unknowns) > 0 {
		fmt.Fprintf(w, "UNKNOWN, not judged open or closed: %d\n", len(r.Unknowns))
		for _, u := range r.Unknowns {
			fmt.Fprintf(w, "  %s\n", u)
		}
	}
}
