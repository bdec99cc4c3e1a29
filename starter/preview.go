// `adopt preview NODE`: which open ports a flip would close, and whether
// it would be approved. It runs on the node, so it is sent only while the
// node's agent polls; it exits 2 when it refuses.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"adoption/firewall/flipwire"
	"adoption/workflows"
)

func (x *cli) previewCommand(ctx context.Context) *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "preview NODE",
		Short: "Say which open ports a flip would close, without flipping",
		Long: `Run the flip's preview on the node: every open port with its fate (kept, and
by whom, or closing, and why), and the verdict. Exit 0 when it approves,
2 when it refuses (with the reasons), or the workflow refuses the preview
itself; 1 when the node did not answer (an error, not a refusal).

` + exitCodesHelp,
		Example: `  adopt preview n1 --config n1.yaml
  adopt preview n1 --json | jq .reasons`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return x.preview(ctx, a[0], timeout)
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long the node may take to answer once the preview is accepted")
	return c
}

func (x *cli) preview(ctx context.Context, node string, timeout time.Duration) error {
	if err := x.dial(); err != nil {
		return err
	}
	ag := x.agents(ctx, node)
	if last, err := x.lastRun(ctx, node); err != nil || last == nil || !last.running {
		// send says what there is to say about a missing or ended workflow.
	} else if !ag.Node.alive() && !ag.Node.unknown() && ag.Workflow.alive() {
		return fmt.Errorf("not delivered: the preview runs on node %s, and %s; nothing was sent. Start the node's agent, then preview again", node, ag.Node.describe("agent"))
	}
	d, err := x.send(ctx, node, workflows.UpdatePreview, "", x.planInput(node, ""))
	if err != nil {
		return err
	}
	gctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var pv flipwire.Preview
	if err := d.handle.Get(gctx, &pv); err != nil {
		if timedOut(err) {
			return fmt.Errorf("the preview was accepted but node %s did not answer within %s (its agent may have stopped); it finishes when the agent is back and `adopt status %s` shows it as LAST PREVIEW", node, timeout, node)
		}
		return x.requestError(ctx, node, "preview", d.handle, err)
	}
	if x.asJSON {
		if err := x.writeJSON(x.stdout, pv); err != nil {
			return err
		}
	} else {
		printPreview(x.stdout, &pv, termWidth())
	}
	if !pv.Approved {
		return shownRefusal(fmt.Errorf("node %s: the preview refuses the flip", node), pv.Reasons)
	}
	return nil
}
