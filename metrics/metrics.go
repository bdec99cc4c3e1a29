// Package metrics serves what an operator scrapes at /metrics: the Temporal
// SDK's own series (temporal_*, through the SDK's metrics handler backed by
// OpenTelemetry and its Prometheus exporter) and adoption's own (adoption_*),
// all in one Prometheus registry. Nothing here is global: each process builds
// one Metrics and hands its parts to the client and the activities.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"

	"adoption/buildinfo"
	"adoption/codec"
)

// ListenKey is the configuration key that turns the endpoint on.
const ListenKey = "metrics.listen"

// Metrics is one process's registry: the SDK's handler and adoption's
// recorder write into it, the HTTP endpoint reads it.
type Metrics struct {
	reg      *prometheus.Registry
	provider *sdkmetric.MeterProvider
	sdk      client.MetricsHandler
	rec      *recorder
	dialled  prometheus.Gauge // the node agent's only
	mu       sync.Mutex
	hooks    []func()
}

// Option adds to what New builds.
type Option func(*options)

type options struct{ help map[string]string }

// WithHelp gives the series name, recorded through the SDK's handler (the
// workflow side), its HELP text.
func WithHelp(name, help string) Option {
	return func(o *options) { o.help[name] = help }
}

// sdkHelp is the HELP of the series recorded through the SDK's handler,
// which names them without a description: Prometheus' lint (promtool check
// metrics) wants one on every series.
const sdkHelp = "Temporal SDK series, see https://docs.temporal.io/references/sdk-metrics"

// describe is the view that gives every SDK-recorded series without a
// description its HELP: the one WithHelp gave, else sdkHelp for temporal_*,
// else a line saying where it is recorded.
func describe(help map[string]string) sdkmetric.View {
	return func(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
		if i.Description != "" {
			return sdkmetric.Stream{}, false
		}
		d, ok := help[i.Name]
		switch {
		case ok:
		case strings.HasPrefix(i.Name, "temporal_"):
			d = sdkHelp
		default:
			d = "Recorded by adoption's workflow code (" + i.Name + ")."
		}
		return sdkmetric.Stream{Name: i.Name, Description: d, Unit: i.Unit}, true
	}
}

// New builds the registry for a process that works for node (the agent;
// "" for the orchestrator, which labels per workflow instead).
func New(node string, log *slog.Logger, opts ...Option) (*Metrics, error) {
	o := options{help: map[string]string{}}
	for _, opt := range opts {
		opt(&o)
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: the Prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(describe(o.help)))
	sdk := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                provider.Meter("temporal-sdk-go"),
		UseMonotonicCounters: true,
		// The default panics; a metric that cannot be recorded must not
		// take the agent (and a flip in progress) down with it.
		OnError: func(err error) { log.Warn("metrics: the SDK's handler", "err", err) },
	})
	m := &Metrics{reg: reg, provider: provider, sdk: sdk}
	bi := buildinfo.Read()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "adoption_build_info",
		Help:        "1, labelled with the version and commit of the running binary.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.Commit}})
	build.Set(1)
	plain := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: PlaintextRefusedMetric,
		Help: "Payloads in clear this process refused to decode while temporal.codec_key_file is set (a heartbeat, query answer, input or result written without the key: a client missing the key file, or a forgery)."},
		func() float64 { return float64(codec.PlaintextRefused()) })
	for _, c := range []prometheus.Collector{build, plain} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	if node != "" { // the node's own series only where a node's activities run
		if m.rec, err = newRecorder(reg, node); err != nil {
			return nil, err
		}
		m.dialled = prometheus.NewGauge(prometheus.GaugeOpts{Name: DialledMetric, ConstLabels: prometheus.Labels{"node": node},
			Help: "1 once the node agent reached Temporal and its worker polls the node's queue; 0 while it dials (Temporal out of reach: the node's own watch runs on). " +
				"A connection lost after that is retried by the SDK's worker and shows in temporal_long_request_failure_total."})
		if err := reg.Register(m.dialled); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// SDK is the handler for client.Options.MetricsHandler: the temporal_*
// series, and the workflow-side adoption_* series (replay-safe, through
// workflow.GetMetricsHandler).
func (m *Metrics) SDK() client.MetricsHandler { return m.sdk }

// PlaintextRefusedMetric counts the payloads in clear the process's codec
// refused (codec.PlaintextRefused).
const PlaintextRefusedMetric = "adoption_codec_plaintext_refused_total"

// DialledMetric says whether the node agent has reached Temporal.
const DialledMetric = "adoption_temporal_dialled"

// Dialled sets adoption_temporal_dialled (a process that is no node's has
// none).
func (m *Metrics) Dialled(ok bool) {
	if m.dialled == nil {
		return
	}
	v := 0.0
	if ok {
		v = 1
	}
	m.dialled.Set(v)
}

// Recorder is what activities call for adoption's own series (Nop in a
// process that is no node's).
func (m *Metrics) Recorder() Recorder {
	if m.rec == nil {
		return Nop{}
	}
	return m.rec
}

// OnScrape runs f before each scrape, for series read from elsewhere (the
// flip record, which the watchdog process writes).
func (m *Metrics) OnScrape(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hooks = append(m.hooks, f)
}

// Handler serves the registry as Prometheus text.
func (m *Metrics) Handler() http.Handler {
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		m.mu.Lock()
		hooks := append([]func(){}, m.hooks...)
		m.mu.Unlock()
		for _, f := range hooks {
			f()
		}
		return m.reg.Gather()
	})
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: m.reg})
}

// Listen binds addr now, so that a bad or taken address fails the start
// naming the key before anything else runs, then serves /metrics until
// ctx ends. The returned stop closes the server and the meter provider.
func (m *Metrics) Listen(ctx context.Context, addr string, log *slog.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q cannot be bound: %w; set a free host:port (e.g. 127.0.0.1:9464) or leave it empty to serve no metrics", ListenKey, addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics: the /metrics endpoint stopped", "listen", addr, "err", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+l.Addr().String()+"/metrics")
	stopCtx, cancel := context.WithCancel(ctx)
	go func() {
		<-stopCtx.Done()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
	}()
	return func() {
		cancel()
		_ = m.provider.Shutdown(context.Background())
	}, nil
}
