// A request the node refused for its signed intent: the refusal says, on
// the workflow page, why and how to send the request signed.

package workflows

import (
	"errors"
	"fmt"
	"strings"

	"adoption/activities/nodewire"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Refusal is the last request the node refused for its intent.
type Refusal struct {
	Kind   string `json:"kind"`
	Module string `json:"module,omitempty"`
	// Why is the node's reason and how to sign the request.
	Why string `json:"why"`
}

// signHint adds to a refusal of the request's intent how to send the
// request signed, records it in the state (the Web UI's current details
// show it) and returns it; any other error passes unchanged.
func (n *node) signHint(ctx workflow.Context, err error) error {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != nodewire.ErrIntentRefused {
		return err
	}
	kind, module := n.serving.Kind, n.serving.Module
	if kind == "" { // the adoption itself, under the start's intent
		kind = "start"
	}
	why := ae.Message() + "; " + HowToSign(n.s.Node, kind, module)
	n.s.Refused = &Refusal{Kind: kind, Module: module, Why: why}
	n.event(ctx, "refused "+describe(kind, module)+": "+why)
	return temporal.NewNonRetryableApplicationError(why, nodewire.ErrIntentRefused, err)
}

// HowToSign says how to send request kind (of module) to node signed.
func HowToSign(node, kind, module string) string {
	args := strings.TrimSpace(node + " " + module)
	if kind == "start" {
		return fmt.Sprintf("the node acts only on a request signed by a key in its authority.operators: start it with `adopt start %s --config FILE` and the operator's key", node)
	}
	cmd := kind
	if kind == SignalDriftAccept {
		cmd = "drift accept"
	}
	return fmt.Sprintf("the node acts only on a request signed by a key in its authority.operators: `adopt sign %s %s` prints it signed, to paste as the %q signal's input (Web UI: Send a Signal; or temporal workflow signal --input), or `adopt %s %s` sends it signed",
		kind, args, kind, cmd, args)
}
