// `adopt migrate NODE MODULE`: a module's container takes over the
// predecessor's. With --dry-run, the rehearsal: every step the cutover
// would take and every refusal it would hit, changing nothing.
package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"adoption/activities/nodewire"
	"adoption/workflows"
)

func (x *cli) migrateCommand(ctx context.Context) *cobra.Command {
	cmd := x.requestCommand(ctx, requestSpec{
		use: "migrate NODE MODULE", name: workflows.UpdateMigrate, module: 2,
		short: "Migrate a module: its container takes over the predecessor's",
		long: `Queue the migration of one module on the node. Refused at once (exit 2) when
the module is unknown, already migrated, failed (use retry) or the node is
flipping, converged or released.

With --dry-run, nothing is queued and nothing changes: the node runs the
cutover's checks and says every step it would take, in order, with what it
would touch (the predecessor and what is carried over, ports and holders,
marked rules, each file's keys with values masked) and the refusals it would
hit (exit 2 when there is one).`,
		example: `  adopt migrate n1 mail --config n1.yaml
  adopt migrate n1 mail --dry-run
  adopt migrate n1 mail --config n1.yaml --wait
  adopt migrate n1 mail --config n1.yaml --json`,
		waitFor:  func(module string) waitGoal { return waitGoal{module: module, state: workflows.ModuleMigrated} },
		waitWhat: "the module is migrated (it ends at once, non-zero, if the module fails)",
	})
	var dry bool
	cmd.Flags().BoolVar(&dry, "dry-run", false, "rehearse the cutover on the node: print what it would do, change nothing")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, a []string) error {
		if dry {
			return x.rehearse(ctx, a[0], a[1])
		}
		return run(c, a)
	}
	return cmd
}

func (x *cli) rehearse(ctx context.Context, node, module string) error {
	if err := x.dial(); err != nil {
		return err
	}
	in := x.planInput(node, module)
	// The rehearsal runs on the node: bounded by its own 20 s wait for the
	// agent plus the checks, so the CLI gives it a minute.
	giveUp := time.Now().Add(x.accept + time.Minute)
	in.NotAfter = time.Now().Add(x.accept).Add(-skew).UTC()
	wctx, cancel := context.WithDeadline(ctx, giveUp)
	defer cancel()
	h, err := x.c.UpdateWorkflow(wctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.WorkflowID(node),
		UpdateName:   workflows.UpdateRehearse,
		Args:         []any{in},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	what := "migrate " + module + " --dry-run"
	if err != nil {
		if timedOut(err) {
			return fmt.Errorf("no rehearsal: node %s's workflow did not answer in time; see `adopt status %s`", node, node)
		}
		return x.requestError(ctx, node, what, nil, err)
	}
	var r nodewire.Rehearsal
	if err := h.Get(wctx, &r); err != nil {
		return x.requestError(ctx, node, what, h, err)
	}
	if x.asJSON {
		if err := x.writeJSON(x.stdout, r); err != nil {
			return err
		}
	} else {
		printRehearsal(x, &r)
	}
	if len(r.Refusals) > 0 {
		return shownRefusal(fmt.Errorf("the cutover of %s would be refused", module), r.Refusals)
	}
	return nil
}

func printRehearsal(x *cli, r *nodewire.Rehearsal) {
	w := x.stdout
	fmt.Fprintf(w, "REHEARSAL of migrate %s on node %s (nothing was changed)\n\n", r.Module, r.Node)
	for i, s := range r.Steps {
		fmt.Fprintf(w, "%d. %s\n", i+1, s.Name)
		for _, t := range s.Touches {
			fmt.Fprintf(w, "     %s\n", t)
		}
	}
	if len(r.Holders) > 0 {
		fmt.Fprintln(w, "\nPORTS HELD NOW")
		for _, h := range r.Holders {
			fmt.Fprintf(w, "  %s by %s\n", h.Port, h.Holder)
		}
	}
	if p := r.Predecessor; p != nil && (len(p.Env) > 0 || len(p.Labels) > 0 || len(p.Replaces) > 0) {
		fmt.Fprintln(w, "\nCARRIED OVER (names only, values stay on the node)")
		if len(p.Env) > 0 {
			fmt.Fprintf(w, "  environment: %s\n", strings.Join(p.Env, ", "))
		}
		if len(p.Labels) > 0 {
			fmt.Fprintf(w, "  labels: %s\n", strings.Join(p.Labels, ", "))
		}
		for _, rp := range p.Replaces {
			fmt.Fprintf(w, "  replaces container %s (kept stopped as %s.predecessor for rollback)\n", rp.Name, rp.Name)
		}
	}
	if len(r.Refusals) > 0 {
		fmt.Fprintln(w, "\nWOULD BE REFUSED")
		for _, s := range r.Refusals {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	} else {
		fmt.Fprintf(w, "\nIt would go ahead: `adopt migrate %s %s`\n", r.Node, r.Module)
	}
	fmt.Fprintf(w, "\nWeb UI: %s\n", x.link(r.Node))
}
