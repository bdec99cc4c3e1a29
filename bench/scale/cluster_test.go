package scale

// Tests of what the scale section reads of a cluster: its server config
// as scripts/cluster.sh fills it in, and the sums of its PostgreSQL
// counters.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// TestClusterConfigNamesMetricsAndDatabase: the cluster's server config
// names a metrics endpoint (the server's writes) and its database's
// address (PostgreSQL's writes), where joinCluster looks.
func TestClusterConfigNamesMetricsAndDatabase(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "cluster", "temporal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	filled := strings.NewReplacer("@PG_PORT@", "5433", "@PORT@", "7233", "@TLS@", "/c/tls", "@DIR@", "/c").Replace(string(b))
	var cfg clusterConfig
	if err := yaml.Unmarshal([]byte(filled), &cfg); err != nil {
		t.Fatalf("scripts/cluster/temporal.yaml, filled in: %v", err)
	}
	if got := cfg.Global.Metrics.Prometheus.ListenAddress; got != "127.0.0.1:7240" {
		t.Errorf("global.metrics.prometheus.listenAddress = %q, want 127.0.0.1:7240 (docs/operations.md)", got)
	}
	if got := cfg.Persistence.Datastores[cfg.Persistence.DefaultStore].SQL.ConnectAddr; got != "127.0.0.1:5433" {
		t.Errorf("the default store's connectAddr = %q, want 127.0.0.1:5433", got)
	}
}

func TestPGSumsSplitsCommitsFromRows(t *testing.T) {
	commits, rows := pgSums(map[string]float64{"temporal xact_commit": 10, "temporal_visibility xact_commit": 2,
		"temporal.timer_tasks": 7, "temporal_visibility.executions_visibility": 3})
	if commits != 12 || rows != 10 {
		t.Errorf("pgSums = %v commits, %v rows; want 12, 10", commits, rows)
	}
}
