// The requests (migrate, retry, flip, release, prune, drift accept): each
// is an Update to the node's workflow, delivered as deliver.go describes.
// The commands themselves are in their own files.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"adoption/config"
	"adoption/workflows"
)

// requestSpec describes one request command.
type requestSpec struct {
	use, name, short, long, example string
	module                          int // 0: none, 1: optional, 2: required
	// waitFor, when set, gives the command --wait: what `adopt wait`
	// waits for once the request is accepted, and what that wait is
	// called in the help.
	waitFor  func(module string) waitGoal
	waitWhat string
}

func (x *cli) requestCommand(ctx context.Context, s requestSpec) *cobra.Command {
	n := cobra.ExactArgs(1)
	switch s.module {
	case 1:
		n = cobra.RangeArgs(1, 2)
	case 2:
		n = func(cmd *cobra.Command, a []string) error {
			if len(a) != 2 {
				return fmt.Errorf("%s needs NODE and MODULE", s.name)
			}
			return nil
		}
	}
	o := &requestOpts{}
	c := &cobra.Command{
		Use: s.use, Short: s.short, Long: s.long + "\n\n" + exitCodesHelp, Example: s.example, Args: args(n),
		RunE: func(_ *cobra.Command, a []string) error { return x.runRequest(ctx, s, o, a) },
	}
	if s.waitFor != nil {
		c.Flags().BoolVar(&o.wait, "wait", false, "once accepted, wait until "+s.waitWhat+", showing progress on stderr as it changes, as adopt wait does")
		c.Flags().DurationVar(&o.waitTimeout, "wait-timeout", 15*time.Minute, "with --wait: give up after this long, every query included")
	}
	return c
}

// requestOpts are a request command's flags (--wait, for those that have
// it).
type requestOpts struct {
	wait        bool
	waitTimeout time.Duration
}

// runRequest delivers request s for NODE [MODULE] and, with --wait, waits
// for its goal.
func (x *cli) runRequest(ctx context.Context, s requestSpec, o *requestOpts, a []string) error {
	mod := ""
	if len(a) == 2 {
		mod = a[1]
	}
	if !o.wait {
		return x.request(ctx, a[0], s.name, mod)
	}
	return x.requestAndWait(ctx, a[0], s.name, mod, s.waitFor(mod), o.waitTimeout)
}

// requestAndWait delivers the request, then waits for its goal as `adopt
// wait` does. Text: the acceptance, then the wait's outcome; JSON: one
// document holding both.
func (x *cli) requestAndWait(ctx context.Context, node, name, module string, g waitGoal, timeout time.Duration) error {
	out, err := x.deliver(ctx, node, name, module)
	if err != nil {
		return err
	}
	if !x.asJSON {
		x.printOutcome(out)
		return x.wait(ctx, node, g, timeout)
	}
	res, err := x.waitQuiet(ctx, node, g, timeout)
	if err != nil {
		return err
	}
	return x.writeJSON(x.stdout, struct {
		Request requestOutcome `json:"request"`
		Wait    waitResult     `json:"wait"`
	}{out, res})
}

// requestOutcome is what a delivered request prints (--json).
type requestOutcome struct {
	Node     string `json:"node"`
	Request  string `json:"request"`
	Module   string `json:"module,omitempty"`
	Accepted bool   `json:"accepted"`
	Queued   int    `json:"queued,omitempty"` // position in the node's queue, 1 = next
	// AgentPolling is false when the node's agent does not poll its queue:
	// the request is queued and runs when the agent is back.
	AgentPolling bool   `json:"agent_polling"`
	Note         string `json:"note,omitempty"`
	Link         string `json:"link"`
}

func (x *cli) request(ctx context.Context, node, name, module string) error {
	out, err := x.deliver(ctx, node, name, module)
	if err != nil {
		return err
	}
	if x.asJSON {
		return x.writeJSON(x.stdout, out)
	}
	x.printOutcome(out)
	return nil
}

// deliver sends the request and says how it was received.
func (x *cli) deliver(ctx context.Context, node, name, module string) (requestOutcome, error) {
	in, err := x.requestInput(ctx, node, name, module)
	if err != nil {
		return requestOutcome{}, err
	}
	if err := x.dial(); err != nil {
		return requestOutcome{}, err
	}
	d, err := x.send(ctx, node, name, module, in)
	if err != nil {
		return requestOutcome{}, err
	}
	out := requestOutcome{Node: node, Request: name, Module: module, Accepted: true, AgentPolling: d.agents.Node.alive() || d.agents.Node.unknown(), Link: x.link(node)}
	// The handler only queues, so its result follows acceptance at once;
	// if it does not, acceptance is what counts.
	// A refusal also comes back from Get: the Accepted stage returns at
	// once with the outcome when the validator rejected the request.
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	var res workflows.RequestResult
	err = d.handle.Get(gctx, &res)
	cancel()
	switch {
	case err == nil:
		out.Queued = res.Queued
	case !timedOut(err):
		return requestOutcome{}, x.requestError(ctx, node, describeRequest(name, module), d.handle, err)
	}
	if !out.AgentPolling {
		out.Note = fmt.Sprintf("accepted; it runs when node %s's agent is back (%s)", node, d.agents.Node.describe("agent", x.zone()))
	}
	return out, nil
}

// printOutcome is a delivered request's text.
func (x *cli) printOutcome(out requestOutcome) {
	what := describeRequest(out.Request, out.Module)
	if out.Queued > 0 {
		fmt.Fprintf(x.stdout, "node %s: accepted and queued %s (position %d)\n", out.Node, what, out.Queued)
	} else {
		fmt.Fprintf(x.stdout, "node %s: accepted %s\n", out.Node, what)
	}
	if out.Note != "" {
		fmt.Fprintf(x.stdout, "%s\n", out.Note)
	}
	fmt.Fprintf(x.stdout, "follow it with `adopt status %s` or %s\n", out.Node, out.Link)
}

func describeRequest(name, module string) string {
	if module == "" {
		return name
	}
	return name + " " + module
}

// requestInput builds a request. The configuration is the plan's source of
// truth: when it describes this node, the request carries it, so a fixed
// port, module or flip.drop reaches the running workflow, and the
// operator's intent signed for that plan (sign.go).
func (x *cli) requestInput(ctx context.Context, node, name, module string) (workflows.RequestInput, error) {
	in := x.planInput(node, module)
	var err error
	in.Intent, err = x.nodeIntent(ctx, node, name, func(p config.Plan) map[string]string { return requestArgs(name, module, p) })
	return in, err
}

// planInput is a read-only request (preview, rehearse): the plan, when
// the configuration describes the node, and nothing signed.
func (x *cli) planInput(node, module string) workflows.RequestInput {
	in := workflows.RequestInput{Module: module}
	if x.configGiven() && x.load() == nil && x.cfg.Node.Name == node {
		p := x.cfg.Plan()
		in.Plan = &p
	}
	return in
}
