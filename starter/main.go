// adopt is the operator's CLI: it starts a node's migration workflow, shows
// status, and sends the requests (migrate, retry, preview, flip, release).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/connect"
	"adoption/firewall"
	"adoption/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "adopt:", err)
		os.Exit(1)
	}
}

// cli holds what every command needs: the configuration and, once dialled,
// the Temporal client.
type cli struct {
	cfgPath string
	uiURL   string
	stdout  io.Writer
	cfg     *config.Config
	c       client.Client
}

func (x *cli) load() error {
	if x.cfg != nil {
		return nil
	}
	cfg, err := config.Load(x.cfgPath)
	if err != nil {
		return err
	}
	x.cfg = cfg
	return nil
}

// loadTemporalOnly loads the config for commands that only talk to Temporal:
// they need temporal.* and nothing of a node, so a missing node.name is no
// reason to refuse (the operator's machine may have no node config).
func (x *cli) dial() error {
	if x.c != nil {
		return nil
	}
	cfg, err := config.Load(x.cfgPath)
	var ve *config.ValidationError
	if errors.As(err, &ve) && onlyNodeNameMissing(ve) {
		cfg, err = config.LoadWith(x.cfgPath, map[string]string{"node.name": "operator"})
	}
	if err != nil {
		return err
	}
	c, err := connect.Dial(cfg.Temporal, nil)
	if err != nil {
		return err
	}
	x.c = c
	return nil
}

func onlyNodeNameMissing(ve *config.ValidationError) bool {
	return len(ve.Problems) == 1 && strings.HasPrefix(ve.Problems[0], "node.name:")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	x := &cli{stdout: stdout}
	defer func() {
		if x.c != nil {
			x.c.Close()
		}
	}()
	root := &cobra.Command{
		Use:           "adopt",
		Short:         "Migrate a machine in use onto the mesh, one node and one module at a time",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&x.cfgPath, "config", "", "configuration file (default $ADOPT_CONFIG)")
	root.PersistentFlags().StringVar(&x.uiURL, "ui", envOr("ADOPT_UI", "http://127.0.0.1:8233"), "Temporal Web UI address, for links")

	var asJSON bool
	start := &cobra.Command{
		Use:   "start NODE",
		Short: "Start the node's migration workflow: probe, then adopt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return x.start(ctx, args[0])
		},
	}
	status := &cobra.Command{
		Use:   "status [NODE]",
		Short: "Show a node's state, or every node's phase",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return x.statusAll(ctx, asJSON)
			}
			return x.status(ctx, args[0], asJSON)
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON (stable, for scripts)")
	request := func(use, kind, short string, module bool) *cobra.Command {
		n := cobra.ExactArgs(1)
		if module {
			n = cobra.RangeArgs(1, 2)
		}
		return &cobra.Command{
			Use: use, Short: short, Args: n,
			RunE: func(cmd *cobra.Command, args []string) error {
				mod := ""
				if len(args) == 2 {
					mod = args[1]
				}
				if kind == workflows.UpdateMigrate && mod == "" {
					return fmt.Errorf("migrate needs NODE and MODULE")
				}
				return x.request(ctx, args[0], kind, mod)
			},
		}
	}
	preview := &cobra.Command{
		Use:   "preview NODE",
		Short: "Say which open ports a flip would close, without flipping",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return x.preview(ctx, args[0], asJSON)
		},
	}
	preview.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	driftCmd := &cobra.Command{Use: "drift", Short: "Drift found while adopted: a file or the found firewall changed since adoption"}
	driftCmd.AddCommand(request("accept NODE", workflows.SignalDriftAccept, "Record the node as it is now (custody renewed); the flip is no longer blocked", false))
	root.AddCommand(start, status, preview, x.fleetCommand(ctx), x.waitCommand(ctx),
		request("migrate NODE MODULE", workflows.UpdateMigrate, "Migrate a module: its container takes over the predecessor's", true),
		request("retry NODE [MODULE]", workflows.UpdateRetry, "Retry a failed cutover, or a failed adoption without MODULE", true),
		request("flip NODE", workflows.UpdateFlip, "Flip the node: preview, then replace the found firewall with the mesh's", false),
		request("release NODE", workflows.UpdateRelease, "Remove every marked rule and leave the node as found", false),
		driftCmd,
		request("prune NODE", workflows.UpdatePrune, "Remove the stopped predecessor containers kept for rollback (never their volumes)", false),
	)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

func (x *cli) start(ctx context.Context, node string) error {
	if err := x.load(); err != nil {
		return err
	}
	if !config.ValidName(node) {
		return fmt.Errorf("node name %q is invalid: it must be %s", node, config.NameRule)
	}
	if x.cfg.Node.Name != node {
		return fmt.Errorf("the configuration (%s) describes node %q, not %q: pass that node's configuration with --config", orDefault(x.cfgPath), x.cfg.Node.Name, node)
	}
	if err := x.dial(); err != nil {
		return err
	}
	id := workflows.WorkflowID(node)
	run, err := x.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                workflows.TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true, // a node has one migration at a time
		StaticSummary:                            fmt.Sprintf("adoption of node %s (%s), %d module(s)", node, x.cfg.Node.Role, len(x.cfg.Modules)),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrNode.ValueSet(node), workflows.AttrPhase.ValueSet(string(workflows.PhaseProbing))),
	}, workflows.NodeWorkflow, workflows.Input{Plan: x.cfg.Plan()})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return fmt.Errorf("node %s already has a migration workflow (%s); see `adopt status %s`", node, id, node)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	fmt.Fprintf(x.stdout, "started %s (run %s)\nwatch it: %s\n", id, run.GetRunID(), x.link(node))
	return nil
}

func (x *cli) link(node string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(x.uiURL, "/"),
		url.PathEscape(x.namespace()), url.PathEscape(workflows.WorkflowID(node)))
}

func (x *cli) namespace() string {
	if x.cfg != nil {
		return x.cfg.Temporal.Namespace
	}
	return "default"
}

// state asks the node's workflow for its state: a query while it runs, its
// result once it has completed.
func (x *cli) state(ctx context.Context, node string) (*workflows.State, error) {
	if err := x.dial(); err != nil {
		return nil, err
	}
	id := workflows.WorkflowID(node)
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := x.c.QueryWorkflow(qctx, id, "", workflows.QueryStatus)
	var st workflows.State
	if err == nil {
		if err := v.Get(&st); err != nil {
			return nil, err
		}
		return &st, nil
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("node %s has no migration workflow; start it with `adopt start %s`", node, node)
	}
	// A completed workflow answers with its result.
	if gerr := x.c.GetWorkflow(ctx, id, "").Get(qctx, &st); gerr == nil {
		return &st, nil
	}
	return nil, fmt.Errorf("status of %s: %w (is adopt-worker running? queries are answered by a worker)", id, err)
}

func (x *cli) status(ctx context.Context, node string, asJSON bool) error {
	st, err := x.state(ctx, node)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(x.stdout, st)
	}
	printState(x.stdout, st)
	fmt.Fprintf(x.stdout, "\nWeb UI: %s\n", x.link(node))
	return nil
}

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

func (x *cli) request(ctx context.Context, node, kind, module string) error {
	if err := x.dial(); err != nil {
		return err
	}
	h, err := x.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.WorkflowID(node),
		UpdateName:   kind,
		Args:         []any{x.requestInput(node, module)},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return requestError(node, kind, module, err)
	}
	var res workflows.RequestResult
	if err := h.Get(ctx, &res); err != nil {
		return requestError(node, kind, module, err)
	}
	fmt.Fprintf(x.stdout, "node %s: queued %s (position %d); follow it with `adopt status %s` or %s\n", node, res.Accepted, res.Queued, node, x.link(node))
	return nil
}

// requestInput builds a request. The configuration is the plan's source of
// truth: when it describes this node, the request carries it, so a fixed
// port, module or flip.drop reaches the running workflow.
func (x *cli) requestInput(node, module string) workflows.RequestInput {
	in := workflows.RequestInput{Module: module}
	if x.load() == nil && x.cfg.Node.Name == node {
		p := x.cfg.Plan()
		in.Plan = &p
	}
	return in
}

func (x *cli) preview(ctx context.Context, node string, asJSON bool) error {
	if err := x.dial(); err != nil {
		return err
	}
	h, err := x.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.WorkflowID(node),
		UpdateName:   workflows.UpdatePreview,
		Args:         []any{x.requestInput(node, "")},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return requestError(node, "preview", "", err)
	}
	var pv firewall.Preview
	if err := h.Get(ctx, &pv); err != nil {
		return requestError(node, "preview", "", err)
	}
	if asJSON {
		return writeJSON(x.stdout, pv)
	}
	printPreview(x.stdout, &pv)
	return nil
}

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

func requestError(node, kind, module string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("node %s has no running migration workflow; start it with `adopt start %s`", node, node)
	}
	what := kind
	if module != "" {
		what += " " + module
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return fmt.Errorf("node %s refused %s: %s", node, what, ae.Message())
	}
	return fmt.Errorf("node %s: %s: %w", node, what, err)
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
		fmt.Fprintln(tw, "PATH\tFOUND\tSIZE\tMODE\tOWNER\tDIGEST")
		for _, r := range s.Custody {
			// The node's keyed digest (older histories: the plain sha256).
			d := strings.TrimPrefix(r.Digest, "hmac-sha256:")
			if d == "" {
				d = r.SHA256
			}
			if r.Link != "" {
				d = "symlink -> " + r.Link
			}
			fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%d:%d\t%.16s\n", r.Path, r.Found, r.Size, r.Mode, r.UID, r.GID, d)
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
