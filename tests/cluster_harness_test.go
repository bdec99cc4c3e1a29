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
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"adoption/config"
	temporalconn "adoption/connect"
	"adoption/internal/clusterns"
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
// (registered with the search attributes the workflows set, open
// workflows of an earlier run terminated), and the ADOPT_TEMPORAL_*
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
	s := &devServer{t: t, cluster: c}
	c.terminateOpen(ctx, t, s.client(t))
	return s
}

// ensureNamespace registers the namespace and the search attributes
// once, waiting until a start carrying them is taken (internal/clusterns).
func (c *cluster) ensureNamespace(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	if err := clusterns.Ensure(ctx, cl, c.namespace, "adoption-e2e-harness-probe", 72*time.Hour, c.dial); err != nil {
		t.Fatalf("the cluster at %s: %v", c.addr, err)
	}
}

// terminateOpen ends the workflows an earlier run left open in the
// namespace: node and fleet workflow IDs are the nodes' and fleets' names,
// which the next run uses again.
func (c *cluster) terminateOpen(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	var token []byte
	var ended []string
	for {
		resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, Query: "ExecutionStatus = 'Running'", NextPageToken: token})
		if err != nil {
			t.Fatalf("list the open workflows of %s: %v", c.namespace, err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			var gone *serviceerror.NotFound
			if err := cl.TerminateWorkflow(ctx, id, "", "an earlier test run left it open"); err != nil && !errors.As(err, &gone) {
				t.Fatalf("terminate %s: %v", id, err)
			}
			ended = append(ended, id)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if len(ended) > 0 {
		slices.Sort(ended)
		t.Logf("cluster namespace %s: terminated %d workflow(s) an earlier run left open: %s", c.namespace, len(ended), strings.Join(ended, ", "))
	}
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
