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
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"adoption/config"
	temporalconn "adoption/connect"
	"adoption/internal/clusterns"
	"adoption/sandbox"
	"adoption/workflows"
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
// attributes, waiting until a start carrying them is taken
// (internal/clusterns). What an earlier run left there (workflows open or
// closed under the same IDs, its orchestrator's build as the deployment's
// current version) goes with the earlier namespace.
func (c *cluster) ensureNamespace(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	if err := clusterns.Delete(ctx, cl, c.namespace); err != nil {
		t.Fatalf("the cluster at %s: %v", c.addr, err)
	}
	if err := clusterns.Ensure(ctx, cl, c.namespace, "adoption-e2e-harness-probe", 72*time.Hour, c.dial); err != nil {
		t.Fatalf("the cluster at %s: %v", c.addr, err)
	}
	if err := clusterns.Settled(ctx, cl, c.namespace, workflows.DeploymentName); err != nil {
		t.Fatalf("the cluster at %s: %v", c.addr, err)
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

// cliArgs are the Temporal CLI's flags that reach srv.
func (s *devServer) cliArgs() []string {
	args := []string{"--address", s.Addr()}
	if c := s.cluster; c != nil {
		args = append(args, "--namespace", c.namespace, "--tls-ca-path", c.tls.CA, "--tls-cert-path", c.tls.Cert,
			"--tls-key-path", c.tls.Key, "--tls-server-name", c.tls.ServerName)
	}
	return args
}
