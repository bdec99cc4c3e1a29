package tests

// This file points the end-to-end harness at a production-shaped Temporal
// (make cluster: Temporal's own server on PostgreSQL, mTLS on every
// connection) instead of a dev server of the test's own. ADOPT_E2E_CLUSTER
// names the cluster's directory (.adoption/cluster, where scripts/cluster.sh
// keeps its certificates); ADOPT_E2E_CLUSTER_ADDRESS its frontend
// (127.0.0.1:7233 unless set). Every process a test starts (agents, the
// orchestrator, the CLI) finds the namespace and the certificates in the
// node's configuration or in ADOPT_TEMPORAL_* variables the test sets; the
// fleet file carries them too. `make e2e-cluster` runs the tests that
// must pass there.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/durationpb"

	"adoption/config"
	temporalconn "adoption/connect"
	"adoption/sandbox"
)

// clusterEnv names the cluster's directory; clusterAddrEnv its frontend.
const (
	clusterEnv     = "ADOPT_E2E_CLUSTER"
	clusterAddrEnv = "ADOPT_E2E_CLUSTER_ADDRESS"
)

// cluster is the external Temporal a test runs against.
type cluster struct {
	addr, namespace string
	tls             config.TLS
}

// clusterNamespaces: the namespace of a test by the dynamic config it
// asks of its server. A cluster's dynamic config is its operator's, not a
// test's: scripts/cluster/dynamicconfig.yaml sets the one value a test
// asks for (continue-as-new suggested at 150 events) for its own
// namespace only.
var clusterNamespaces = map[string]string{
	"": "adoption-e2e",
	"--dynamic-config-value limit.historyCount.suggestContinueAsNew=150": "adoption-e2e-can150",
}

// clusterTarget is the cluster ADOPT_E2E_CLUSTER names, nil without it.
func clusterTarget(t *testing.T) *cluster {
	t.Helper()
	dir := os.Getenv(clusterEnv)
	if dir == "" {
		return nil
	}
	c := &cluster{addr: os.Getenv(clusterAddrEnv), namespace: os.Getenv("ADOPT_TEMPORAL_NAMESPACE")}
	if c.addr == "" {
		c.addr = "127.0.0.1:7233"
	}
	tlsDir := filepath.Join(dir, "tls")
	// The agents of reference nodes dial the cluster through the
	// management link's relay, by another address than the certificate's.
	c.tls = config.TLS{CA: filepath.Join(tlsDir, "ca.pem"), Cert: filepath.Join(tlsDir, "client.pem"),
		Key: filepath.Join(tlsDir, "client.key"), ServerName: "localhost"}
	for _, f := range []string{c.tls.CA, c.tls.Cert, c.tls.Key} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s=%s: %v: run `make cluster` first (or unset %s for a dev server of the test's own)", clusterEnv, dir, err, clusterEnv)
		}
	}
	return c
}

// joinCluster makes the test run against the cluster: its namespace
// (registered anew with the search attributes the workflows set), and the
// ADOPT_TEMPORAL_*
// variables every process the test starts inherits.
func joinCluster(t *testing.T, c *cluster, uiPort int, extra []string) *devServer {
	t.Helper()
	ns, ok := clusterNamespaces[strings.Join(extra, " ")]
	if !ok || uiPort != 0 {
		t.Fatalf("%s: this test asks its server for %q (Web UI port %d), which a shared cluster cannot give one test: run it on its own dev server (unset %s)",
			clusterEnv, extra, uiPort, clusterEnv)
	}
	c.namespace = ns
	for k, v := range map[string]string{
		"ADOPT_TEMPORAL_NAMESPACE": ns, "ADOPT_TEMPORAL_TLS_CA": c.tls.CA, "ADOPT_TEMPORAL_TLS_CERT": c.tls.Cert,
		"ADOPT_TEMPORAL_TLS_KEY": c.tls.Key, "ADOPT_TEMPORAL_TLS_SERVER_NAME": c.tls.ServerName,
	} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The namespace is registered from the cluster's default one: a client
	// of a namespace that does not exist yet is refused at its dial.
	admin := *c
	admin.namespace = "default"
	ac, err := admin.dial()
	if err != nil {
		t.Fatalf("dial the cluster at %s: %v", c.addr, err)
	}
	defer ac.Close()
	c.ensureNamespace(ctx, t, ac)
	return &devServer{t: t, cluster: c}
}

// ensureNamespace registers the namespace afresh and the search
// attributes, waiting until the frontend lists them (a new namespace reaches
// its cache within seconds).
func (c *cluster) ensureNamespace(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	// What an earlier run left (workflows open or closed under the same
	// IDs, its orchestrator's build as the deployment's current version)
	// goes with its namespace: the server renames a deleted namespace at
	// once and removes its data in the background, so the name is free.
	_, err := cl.OperatorService().DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: c.namespace})
	var gone *serviceerror.NamespaceNotFound
	if err != nil && !errors.As(err, &gone) {
		t.Fatalf("delete namespace %s (an earlier run's) on %s: %v", c.namespace, c.addr, err)
	}
	for {
		_, err = cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: c.namespace, WorkflowExecutionRetentionPeriod: durationpb.New(72 * time.Hour)})
		var exists *serviceerror.NamespaceAlreadyExists
		if err == nil || !errors.As(err, &exists) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("namespace %s on %s: still there after its deletion: %v", c.namespace, c.addr, err)
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		t.Fatalf("register namespace %s on %s: %v", c.namespace, c.addr, err)
	}
	for {
		_, err := cl.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: c.namespace})
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("namespace %s on %s was registered but is not described: %v", c.namespace, c.addr, err)
		case <-time.After(time.Second):
		}
	}
	want := map[string]enumspb.IndexedValueType{}
	for _, a := range []string{"AdoptionNode", "AdoptionPhase", "AdoptionAttention"} {
		want[a] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	var last error
	for ctx.Err() == nil {
		got, err := cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: c.namespace})
		if err == nil && hasAll(got.GetCustomAttributes(), want) {
			// Listed is not yet known to every service: the history
			// service refuses a start that sets them ("no mapping
			// defined") until its namespace cache has them.
			if last = c.startsWith(ctx, want); last == nil {
				return
			}
		}
		_, last = cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: c.namespace, SearchAttributes: want})
		if last == nil {
			last = err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	t.Fatalf("namespace %s on %s: the search attributes are not usable: %v", c.namespace, c.addr, last)
}

// startsWith starts and terminates a workflow that sets every attribute
// in want: nil once the namespace takes them.
func (c *cluster) startsWith(ctx context.Context, want map[string]enumspb.IndexedValueType) error {
	nc, err := c.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	var attrs []temporal.SearchAttributeUpdate
	for a := range want {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(a).ValueSet("harness-probe"))
	}
	run, err := nc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "adoption-e2e-harness-probe", TaskQueue: "adoption-e2e-harness-probe",
		TypedSearchAttributes: temporal.NewSearchAttributes(attrs...)}, "HarnessProbe")
	if err != nil {
		return err
	}
	return nc.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "the harness's check that the search attributes are usable")
}

func hasAll(got, want map[string]enumspb.IndexedValueType) bool {
	for k := range want {
		if _, ok := got[k]; !ok {
			return false
		}
	}
	return true
}

// dial is a client of the cluster's namespace over mTLS.
func (c *cluster) dial() (client.Client, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return temporalconn.Dial(context.Background(), config.Temporal{Address: c.addr, Namespace: c.namespace, TLS: c.tls}, quiet)
}

// onCluster fills in a sandbox node's namespace and TLS when the test runs
// against the cluster.
func onCluster(t *testing.T, spec *sandbox.Spec) {
	t.Helper()
	if c := clusterTarget(t); c != nil {
		if c.namespace == "" {
			t.Fatalf("%s is set but the test has not joined the cluster: start its server (startDevServer) before its nodes", clusterEnv)
		}
		spec.Namespace, spec.TLS = c.namespace, c.tls
	}
}

// temporalYAML is a fleet file's temporal section for srv.
func temporalYAML(srv *devServer) string {
	out := fmt.Sprintf("temporal:\n  address: %s\n", srv.Addr())
	if c := srv.cluster; c != nil {
		out += fmt.Sprintf("  namespace: %s\n  tls: {ca: %q, cert: %q, key: %q, server_name: %q}\n",
			c.namespace, c.tls.CA, c.tls.Cert, c.tls.Key, c.tls.ServerName)
	}
	return out
}

// cliArgs are the Temporal CLI's flags that reach srv.
func (s *devServer) cliArgs() []string {
	args := []string{"--address", s.Addr()}
	if c := s.cluster; c != nil {
		args = append(args, "--namespace", c.namespace, "--tls-ca-path", c.tls.CA, "--tls-cert-path", c.tls.Cert,
			"--tls-key-path", c.tls.Key, "--tls-server-name", c.tls.ServerName)
	}
	return args
}
