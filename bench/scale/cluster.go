package scale

// This file points the scale section at a running cluster (-scale-cluster:
// make cluster, Temporal's own server on PostgreSQL with mTLS) instead of a
// dev server of its own: its frontend and certificates, its server's
// process for the CPU and memory figures, its metrics endpoint when its
// config has one, a namespace of the run's own, and the writes its
// PostgreSQL counts (pg_stat_database, pg_stat_user_tables), which need no
// metrics endpoint.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.yaml.in/yaml/v4"

	"adoption/config"
	temporalconn "adoption/connect"
	"adoption/internal/clusterns"
)

// clusterConfig is what the bench reads of the cluster's server config
// (scripts/cluster/temporal.yaml as scripts/cluster.sh filled it in).
type clusterConfig struct {
	Global struct {
		Metrics struct {
			Prometheus struct {
				ListenAddress string `yaml:"listenAddress"`
			} `yaml:"prometheus"`
		} `yaml:"metrics"`
	} `yaml:"global"`
	Persistence struct {
		DefaultStore string `yaml:"defaultStore"`
		Datastores   map[string]struct {
			SQL struct {
				ConnectAddr string `yaml:"connectAddr"`
			} `yaml:"sql"`
		} `yaml:"datastores"`
	} `yaml:"persistence"`
}

// pgDatabases are the cluster's two databases: executions and history,
// and SQL visibility.
var pgDatabases = []string{"temporal", "temporal_visibility"}

// joinCluster readies the cluster in dir (frontend addr, 127.0.0.1:7233
// when ""): a namespace of the run's own, registered from the default one
// with the search attributes, and the server's process, config and
// database.
func joinCluster(ctx context.Context, dir, addr string) (*devServer, error) {
	if addr == "" {
		addr = "127.0.0.1:7233"
	}
	tlsDir := filepath.Join(dir, "tls")
	tls := config.TLS{CA: filepath.Join(tlsDir, "ca.pem"), Cert: filepath.Join(tlsDir, "client.pem"),
		Key: filepath.Join(tlsDir, "client.key"), ServerName: "localhost"}
	for _, f := range []string{tls.CA, tls.Cert, tls.Key} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("-scale-cluster %s: %v: run `make cluster` first, or name the cluster's directory (.adoption/cluster of the tree that started it)", dir, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "server.pid"))
	if err != nil {
		return nil, fmt.Errorf("-scale-cluster %s: the server's pid: %w (is the cluster running? `make cluster`)", dir, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("-scale-cluster %s: server.pid %q is not a pid", dir, strings.TrimSpace(string(b)))
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, fmt.Errorf("-scale-cluster %s: the server (pid %d) is not running: %w; start it with `make cluster`", dir, pid, err)
	}
	s := &devServer{name: "cluster server", addr: addr, pid: pid, stop: func() {}, version: "Temporal server"}
	if v, err := exec.Command(exe, "--version").Output(); err == nil {
		s.version = strings.TrimSpace(string(v))
	}
	cfgFile := filepath.Join(dir, "config", "development.yaml")
	cb, err := os.ReadFile(cfgFile)
	if err != nil {
		return nil, fmt.Errorf("-scale-cluster %s: the server's config: %w", dir, err)
	}
	var cfg clusterConfig
	if err := yaml.Unmarshal(cb, &cfg); err != nil {
		return nil, fmt.Errorf("-scale-cluster %s: %s: %w", dir, cfgFile, err)
	}
	if la := cfg.Global.Metrics.Prometheus.ListenAddress; la != "" {
		s.metrics = "http://" + la + "/metrics"
	}
	s.pg = cfg.Persistence.Datastores[cfg.Persistence.DefaultStore].SQL.ConnectAddr
	if s.pg == "" {
		return nil, fmt.Errorf("-scale-cluster %s: %s names no SQL connectAddr for its default store %q", dir, cfgFile, cfg.Persistence.DefaultStore)
	}
	if _, err := exec.LookPath("psql"); err != nil {
		return nil, fmt.Errorf("-scale-cluster: psql is not installed (it reads the cluster's PostgreSQL write counters): apt-get install postgresql-client")
	}
	ns := fmt.Sprintf("adoption-bench-%d", time.Now().Unix())
	s.cluster = &config.Temporal{Address: addr, Namespace: ns, TLS: tls}
	admin, err := dialTemporal(config.Temporal{Address: addr, Namespace: "default", TLS: tls}, nil)
	if err != nil {
		return nil, fmt.Errorf("dial the cluster at %s: %w", addr, err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := clusterns.Ensure(ctx, admin, ns, "adoption-bench-namespace-probe", 24*time.Hour,
		func() (client.Client, error) { return dialTemporal(*s.cluster, nil) }); err != nil {
		return nil, fmt.Errorf("the cluster at %s: %w", addr, err)
	}
	return s, nil
}

// dialTemporal is a client of cfg's namespace, its SDK log to logger
// (discarded when nil).
func dialTemporal(cfg config.Temporal, logger *slog.Logger) (client.Client, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return temporalconn.Dial(context.Background(), cfg, logger)
}

// env are the ADOPT_TEMPORAL_* variables that point a process at the
// server: the address, and on a cluster the namespace and TLS.
func (s *devServer) env() []string {
	env := []string{"ADOPT_TEMPORAL_ADDRESS=" + s.addr}
	if c := s.cluster; c != nil {
		env = append(env, "ADOPT_TEMPORAL_NAMESPACE="+c.Namespace, "ADOPT_TEMPORAL_TLS_CA="+c.TLS.CA, "ADOPT_TEMPORAL_TLS_CERT="+c.TLS.Cert,
			"ADOPT_TEMPORAL_TLS_KEY="+c.TLS.Key, "ADOPT_TEMPORAL_TLS_SERVER_NAME="+c.TLS.ServerName)
	}
	return env
}

// pgCounters are the cluster's PostgreSQL write counters so far: per
// database its committed transactions ("DB xact_commit") and per table
// the rows inserted, updated and deleted ("DB.table").
func (s *devServer) pgCounters(ctx context.Context) (map[string]float64, error) {
	host, port, err := net.SplitHostPort(s.pg)
	if err != nil {
		return nil, fmt.Errorf("the cluster's PostgreSQL address %q: %w", s.pg, err)
	}
	out := map[string]float64{}
	for _, db := range pgDatabases {
		cmd := exec.CommandContext(ctx, "psql", "-h", host, "-p", port, "-U", "temporal", "-d", db, "-X", "-A", "-t", "-F", "\t", "-c",
			"select 'xact_commit', xact_commit from pg_stat_database where datname = current_database() "+
				"union all select relname, n_tup_ins + n_tup_upd + n_tup_del from pg_stat_user_tables")
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("psql -h %s -p %s -d %s (the write counters): %w", host, port, db, err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			name, v, ok := strings.Cut(sc.Text(), "\t")
			if !ok {
				continue
			}
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("psql %s: line %q: %w", db, sc.Text(), err)
			}
			if name == "xact_commit" {
				out[db+" xact_commit"] = n
			} else {
				out[db+"."+name] = n
			}
		}
	}
	return out, nil
}

// pgSums are the committed transactions and the rows written (inserted,
// updated, deleted) in a difference of pgCounters.
func pgSums(d map[string]float64) (commits, rows float64) {
	for k, v := range d {
		if strings.HasSuffix(k, " xact_commit") {
			commits += v
		} else {
			rows += v
		}
	}
	return commits, rows
}

// PGBaseline is what the cluster's PostgreSQL committed and wrote per
// second in a window before the simulation's workers started: the load of
// the cluster's other users (and its own housekeeping), beside which the
// idle window's counts are read.
type PGBaseline struct {
	WindowS        float64 `json:"window_s"`
	CommitsPerS    float64 `json:"commits_per_s"`
	RowsPerS       float64 `json:"rows_written_per_s"`
	ServerCPUPerS  float64 `json:"server_cpu_ms_per_s"`
	OtherNamespace string  `json:"note"`
}

// clusterBaselineWindow is how long joinCluster reads the cluster's
// background writes before the simulation starts.
const clusterBaselineWindow = time.Minute

// joinCluster points the run at the cluster -scale-cluster names and
// reads its background writes for a minute.
func (r *scaleRun) joinCluster() error {
	var err error
	if r.srv, err = joinCluster(context.Background(), r.o.Cluster, r.o.ClusterAddr); err != nil {
		return err
	}
	r.d.Namespace = r.srv.cluster.Namespace
	metrics := "no metrics endpoint in its config (global.metrics.prometheus.listenAddress): the server's write requests are not counted, its PostgreSQL's are"
	if r.srv.metrics != "" {
		metrics = "metrics " + r.srv.metrics
	}
	r.d.Server = fmt.Sprintf("%s (make cluster, pid %d) on PostgreSQL at %s, mTLS; frontend %s, namespace %s (registered by the bench, retention 24 h); its own dynamic config (default task queue partitions); %s",
		r.srv.version, r.srv.pid, r.srv.pg, r.srv.addr, r.srv.cluster.Namespace, metrics)
	r.logf("cluster server on %s (%s, pid %d), namespace %s; reading its PostgreSQL's background writes for %s ...", r.srv.addr, r.srv.version, r.srv.pid, r.srv.cluster.Namespace, clusterBaselineWindow)
	ctx := context.Background()
	p0, err := r.srv.pgCounters(ctx)
	if err != nil {
		return err
	}
	cpu0, t0 := procCPU(r.srv.pid), time.Now()
	time.Sleep(clusterBaselineWindow)
	p1, err := r.srv.pgCounters(ctx)
	if err != nil {
		return err
	}
	w := time.Since(t0).Seconds()
	d, _ := writesBetween(p0, p1)
	commits, rows := pgSums(d)
	r.d.ClusterBaseline = &PGBaseline{WindowS: w, CommitsPerS: commits / w, RowsPerS: rows / w, ServerCPUPerS: (procCPU(r.srv.pid) - cpu0) * 1000 / w,
		OtherNamespace: "before the simulation's workers started: the cluster's other namespaces' load (e.g. e2e tests) and its own housekeeping; PostgreSQL's counters are per database, not per namespace"}
	r.logf("cluster background: %.1f commits/s, %.1f rows written/s, server CPU %.0f ms/s", r.d.ClusterBaseline.CommitsPerS, r.d.ClusterBaseline.RowsPerS, r.d.ClusterBaseline.ServerCPUPerS)
	return nil
}
