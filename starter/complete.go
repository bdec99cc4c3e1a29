// Shell completions (cobra's `adopt completion bash|zsh|fish|powershell`):
// every enum a flag takes, the nodes whose workflow runs for the NODE
// argument (asked of Temporal's visibility), and a node's modules for the
// MODULE argument (asked of its workflow), each with a short timeout.
package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/workflowservice/v1"

	"adoption/workflows/visibility"
)

// completeNodesTimeout bounds the visibility query a completion makes: a
// shell waits for it.
const completeNodesTimeout = 3 * time.Second

// withCompletions sets the completions of root's commands: the node names
// on every command whose first argument is a running node's (not start,
// whose node has no workflow yet), and the enums of the flags that take one.
func (x *cli) withCompletions(ctx context.Context, root *cobra.Command) {
	enums := map[string][]string{
		"phase":   phaseNames(),
		"state":   moduleStates,
		"genesis": genesisStates,
		"take":    takeSides,
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := strings.Fields(c.Use); len(f) > 1 && (f[1] == "NODE" || f[1] == "[NODE]") && f[0] != "start" {
			module := len(f) > 2 && strings.Trim(f[2], "[]") == "MODULE"
			c.ValidArgsFunction = func(_ *cobra.Command, a []string, prefix string) ([]string, cobra.ShellCompDirective) {
				switch {
				case len(a) == 0:
					return x.runningNodes(ctx, prefix), cobra.ShellCompDirectiveNoFileComp
				case len(a) == 1 && module:
					return x.nodeModules(ctx, a[0], prefix), cobra.ShellCompDirectiveNoFileComp
				}
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
		}
		for name, values := range enums {
			if c.LocalNonPersistentFlags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// runningNodes are the nodes whose workflow runs, starting with prefix;
// none when Temporal does not answer in time (a completion says nothing
// rather than an error).
func (x *cli) runningNodes(ctx context.Context, prefix string) []string {
	if err := x.dial(); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completeNodesTimeout)
	defer cancel()
	resp, err := x.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: visibility.Query(false, false), PageSize: 1000})
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range resp.Executions {
		if n := visibility.NodeOf(e); n != "" && strings.HasPrefix(n, prefix) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// nodeModules are node's modules, starting with prefix, as its workflow
// says; none when it does not answer in time.
func (x *cli) nodeModules(ctx context.Context, node, prefix string) []string {
	ctx, cancel := context.WithTimeout(ctx, completeNodesTimeout)
	defer cancel()
	ns, err := x.nodeStatus(ctx, node)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range ns.moduleNames() {
		if strings.HasPrefix(m, prefix) {
			out = append(out, m)
		}
	}
	return out
}

func phaseNames() []string {
	out := make([]string, 0, len(knownPhases))
	for _, p := range knownPhases {
		out = append(out, string(p))
	}
	return out
}
