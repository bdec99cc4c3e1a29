// `adopt status` with no node: every node's phase, from visibility.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"adoption/workflows"

	"go.temporal.io/api/workflowservice/v1"
)

// NodeSummary is one line of `adopt status` for every node.
type NodeSummary struct {
	Node     string `json:"node"`
	Phase    string `json:"phase"`
	Migrated int    `json:"migrated"`
	Modules  int    `json:"modules"`
	Running  bool   `json:"running"`
	Note     string `json:"note,omitempty"`
}

func (x *cli) statusAll(ctx context.Context, asJSON bool) error {
	if err := x.dial(); err != nil {
		return err
	}
	latest := map[string]NodeSummary{}
	var token []byte
	for {
		resp, err := x.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowType = '%s'", workflows.NodeWorkflow), NextPageToken: token,
		})
		if err != nil {
			return fmt.Errorf("list node workflows: %w", err)
		}
		for _, e := range resp.Executions {
			id := e.GetExecution().GetWorkflowId()
			node, ok := strings.CutPrefix(id, "node-migration/")
			if !ok {
				continue
			}
			running := e.GetStatus().String() == "Running"
			if prev, seen := latest[node]; seen && prev.Running {
				continue // the open run wins over runs closed by continue-as-new
			}
			sum := NodeSummary{Node: node, Running: running}
			if st, err := x.state(ctx, node); err == nil {
				sum.Phase, sum.Migrated, sum.Modules = string(st.Phase), st.MigratedCount(), len(st.Modules)
			} else {
				sum.Phase = phaseAttr(e.GetSearchAttributes().GetIndexedFields()["AdoptionPhase"].GetData())
				sum.Note = "no worker answered; phase from visibility"
			}
			latest[node] = sum
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	nodes := make([]string, 0, len(latest))
	for n := range latest {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	out := make([]NodeSummary, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, latest[n])
	}
	if asJSON {
		return writeJSON(x.stdout, out)
	}
	tw := tabwriter.NewWriter(x.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPHASE\tMODULES MIGRATED\tNOTE")
	for _, s := range out {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\n", s.Node, s.Phase, s.Migrated, s.Modules, s.Note)
	}
	if len(out) == 0 {
		fmt.Fprintln(tw, "(no node workflows; start one with `adopt start NODE`)")
	}
	return tw.Flush()
}

// phaseAttr decodes a Keyword search attribute payload (a JSON string).
func phaseAttr(data []byte) string {
	var s string
	if json.Unmarshal(data, &s) != nil {
		return "unknown"
	}
	return s
}
