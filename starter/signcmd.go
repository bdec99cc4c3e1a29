// `adopt sign ACTION NODE [MODULE]`: a request with the operator's signed
// intent, printed as the JSON input of the node workflow's signal of the
// same name, for the Web UI's Signal dialog or `temporal workflow signal
// --input`. It sends nothing; the key never leaves this machine.
package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"adoption/workflows"
)

// signSpec is one signable request: the signal's name, and whether it
// takes a module (0: none, 1: optional, 2: required).
type signSpec struct {
	name, use, short string
	module           int
}

// signable are the requests a node takes as signals, in the order help
// lists them.
var signable = []signSpec{
	{workflows.SignalMigrate, "migrate NODE MODULE", "Sign a migrate of MODULE", 2},
	{workflows.SignalRetry, "retry NODE [MODULE]", "Sign a retry of a failed cutover (or, without MODULE, of a failed adoption or genesis)", 1},
	{workflows.SignalFlip, "flip NODE", "Sign a flip (served only if its own preview approves)", 0},
	{workflows.SignalRelease, "release NODE", "Sign a release", 0},
	{workflows.SignalPrune, "prune NODE", "Sign a prune of the kept predecessors", 0},
	{workflows.SignalDriftAccept, "drift-accept NODE", "Sign accepting the node's drift", 0},
}

func (x *cli) signCommand(ctx context.Context) *cobra.Command {
	c := &cobra.Command{
		Use:   "sign ACTION NODE [MODULE]",
		Short: "Print a signed request as a signal's input, to send from the Web UI or the temporal CLI",
		Long: `Sign a request with the operator's key, as the request's own command would,
and print it as the JSON input of the node workflow's signal of that name,
without sending it. Paste it in the Web UI (the node's workflow page, Send a
Signal, the signal's name, the input) or give it to the temporal CLI. The
key stays on this machine: only the signed intent is printed. The intent
binds the node, the plan as signed, the action and its arguments, and
expires (--intent-ttl). With --config, the input carries that plan, as the
request's command sends it; without, it binds the plan the node's workflow
holds (asked of it). A node refuses a signal whose intent is missing or
does not verify, and says so on its workflow page.

Signals are queued as sent: nothing answers the sender. The request's own
command (an Update) answers at once and is refused before queueing when it
cannot run; docs/workflows.md says which to use when.`,
		Example: `  adopt sign retry n1 mail --config n1.yaml
  temporal workflow signal --workflow-id node-migration/n1 --name retry \
      --codec-endpoint http://127.0.0.1:8234 --input "$(adopt sign retry n1 mail)"`,
		Args: args(cobra.NoArgs),
	}
	for _, s := range signable {
		c.AddCommand(x.signActionCommand(ctx, s))
	}
	return c
}

func (x *cli) signActionCommand(ctx context.Context, s signSpec) *cobra.Command {
	n := cobra.ExactArgs(1)
	switch s.module {
	case 1:
		n = cobra.RangeArgs(1, 2)
	case 2:
		n = cobra.ExactArgs(2)
	}
	return &cobra.Command{
		Use: s.use, Short: s.short, Args: args(n),
		RunE: func(cmd *cobra.Command, a []string) error {
			mod := ""
			if len(a) == 2 {
				mod = a[1]
			}
			return x.printSigned(ctx, a[0], s.name, mod)
		},
	}
}

// printSigned prints request name for node as its signal's input: the
// same input, signed the same way, as the request's command sends.
func (x *cli) printSigned(ctx context.Context, node, name, module string) error {
	in, err := x.requestInput(ctx, node, name, module)
	if err != nil {
		return err
	}
	if in.Intent == nil {
		return usagef("nothing signed %s for node %s: give the operator's private key with --sign-key FILE (or operator.sign_key), or load it into ssh-agent; a node refuses a signal without the intent unless its file says authority.unsigned", describeRequest(name, module), node)
	}
	if !x.asJSON {
		fmt.Fprintf(x.stderr, "paste the input below as signal %q of workflow %s (Web UI: %s, Send a Signal), before its intent expires\n",
			name, workflows.WorkflowID(node), x.link(node))
	}
	return x.writeJSON(x.stdout, in)
}
