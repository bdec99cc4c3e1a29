// `adopt-worker own`: root on the node names the workflow the node serves,
// when its owner record (workflow.json under node.state_dir) is gone. The
// agent never guesses it: an adopted node without the record serves no
// workflow until this is run (docs/access.md).
package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"adoption/activities/authority"
	"adoption/nodestate"
)

func ownCommand(_ context.Context, cfgPath *string, stdout io.Writer) *cobra.Command {
	var workflow, namespace string
	cmd := &cobra.Command{
		Use:   "own",
		Short: "Name the workflow an adopted node serves, when its owner record is missing",
		Long: `Records, as root on the node, the workflow the node serves (its owner record,
workflow.json under node.state_dir). An adopted node whose owner record is
missing serves no workflow at all: it refuses every request, naming this
command. Check which workflow should serve it first (adopt status NODE on the
operator's side). A node that already serves a workflow is refused: it serves
it until a release (adopt release NODE). The agent need not be stopped.`,
		Example: `  adopt-worker own --config /etc/adoption/node.yaml --workflow node-migration/n1
  adopt-worker own --config /etc/adoption/node.yaml --workflow node-migration/n1 --namespace adoption`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return own(*cfgPath, workflow, namespace, stdout)
		},
	}
	cmd.Flags().StringVar(&workflow, "workflow", "", "the workflow ID the node serves (node-migration/NODE)")
	cmd.Flags().StringVar(&namespace, "namespace", "", "its Temporal namespace (default: temporal.namespace of the node's file)")
	return cmd
}

func own(path, workflow, namespace string, stdout io.Writer) error {
	if err := authority.CheckWorkflowID(workflow); err != nil || workflow == "" {
		return usageError{fmt.Errorf("--workflow %q: give the workflow ID the node serves, 1-255 printable ASCII characters (node-migration/NODE for a node started by adopt start or a fleet); nothing was changed", workflow)}
	}
	cfg, err := loadNodeConfig(path)
	if err != nil {
		return err
	}
	if namespace == "" {
		namespace = cfg.Temporal.Namespace
	}
	if err := authority.CheckWorkflowID(namespace); err != nil {
		return usageError{fmt.Errorf("--namespace %q (or temporal.namespace in %s): give the namespace the workflow runs in; nothing was changed", namespace, configSource(path))}
	}
	d := nodestate.New(cfg.Node.StateDir)
	if cur, ok, err := d.Owner(); err != nil {
		return fmt.Errorf("read node %s's owner record %s: %w; nothing was changed", cfg.Node.Name, d.OwnerFile(), err)
	} else if ok {
		if cur.Workflow == workflow && cur.Namespace == namespace {
			fmt.Fprintf(stdout, "node %s already serves workflow %s (namespace %s), since %s; nothing changed\n", cfg.Node.Name, workflow, namespace, cur.At.Format(time.RFC3339))
			return nil
		}
		return usageError{fmt.Errorf("node %s serves workflow %s (namespace %s), since %s: it serves it until it is released (adopt release %s); nothing was changed",
			cfg.Node.Name, cur.Workflow, cur.Namespace, cur.At.Format(time.RFC3339), cfg.Node.Name)}
	}
	o, err := d.SetOwner(nodestate.Owner{Namespace: namespace, Workflow: workflow, At: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("record node %s's owner in %s: %w", cfg.Node.Name, d.OwnerFile(), err)
	}
	if o.Workflow != workflow || o.Namespace != namespace { // recorded meanwhile by a verified start
		return fmt.Errorf("node %s's owner was recorded meanwhile as workflow %s (namespace %s); nothing was changed", cfg.Node.Name, o.Workflow, o.Namespace)
	}
	fmt.Fprintf(stdout, "node %s serves workflow %s (namespace %s) from now on: recorded in %s\n", cfg.Node.Name, workflow, namespace, d.OwnerFile())
	return nil
}
