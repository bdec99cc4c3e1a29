// Package connect dials Temporal from the configuration, with TLS for a real
// cluster. The worker and the CLI both use it; each dials once.
package connect

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"

	"adoption/codec"
	"adoption/config"
)

// Option adds to the client's options what a process brings of its own:
// its metrics handler, its interceptors.
type Option func(*client.Options)

// WithMetrics sends the SDK's metrics (temporal_*) to h.
func WithMetrics(h client.MetricsHandler) Option {
	return func(o *client.Options) { o.MetricsHandler = h }
}

// WithInterceptors adds interceptors; those that are worker interceptors
// apply to every worker built on the client.
func WithInterceptors(is ...interceptor.ClientInterceptor) Option {
	return func(o *client.Options) { o.Interceptors = append(o.Interceptors, is...) }
}

// Dial connects to the Temporal frontend named in cfg.
func Dial(cfg config.Temporal, logger *slog.Logger, options ...Option) (client.Client, error) {
	opts, err := Options(cfg, logger)
	if err != nil {
		return nil, err
	}
	for _, o := range options {
		o(&opts)
	}
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %s): %w; start it with `make dev-server` or set temporal.address", cfg.Address, cfg.Namespace, err)
	}
	return c, nil
}

// Options are the client options for cfg. Any temporal.tls.* key turns TLS
// on (server_name alone included: it then verifies the server against the
// system's roots under that name), so a setting meant for TLS never results
// in a plain-text connection.
func Options(cfg config.Temporal, logger *slog.Logger) (client.Options, error) {
	opts := client.Options{HostPort: cfg.Address, Namespace: cfg.Namespace}
	if logger != nil {
		opts.Logger = tlog.NewStructuredLogger(logger)
	}
	if cfg.TLS.Enabled() {
		tc, err := tlsConfig(cfg.TLS)
		if err != nil {
			return opts, err
		}
		opts.ConnectionOptions.TLS = tc
	}
	err := WithCodec(&opts, cfg)
	return opts, err
}

// WithCodec makes the client encrypt every payload (and failures' messages)
// with the codec key cfg holds; without one it leaves opts as they are.
func WithCodec(opts *client.Options, cfg config.Temporal) error {
	if len(cfg.Key) == 0 {
		return nil
	}
	c, err := codec.New(cfg.Key)
	if err != nil {
		return fmt.Errorf("%s %s: %w", config.CodecKeyFileKey, cfg.CodecKeyFile, err)
	}
	opts.DataConverter = codec.DataConverter(c)
	opts.FailureConverter = codec.FailureConverter(opts.DataConverter)
	return nil
}

// NoCodecWarning is what a process that dials Temporal without a codec key
// logs once at start.
const NoCodecWarning = "temporal.codec_key_file is not set: payloads (plans, progress, errors) are stored in Temporal unencrypted and the plan's digests of environment values and declared files are plain sha256, which a dictionary can reverse; " +
	"set it to a 0600 file of 32 random bytes, the same on the agents, the orchestrator and the operator's side"

func tlsConfig(t config.TLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("temporal.tls.cert %s / temporal.tls.key %s: %w", t.Cert, t.Key, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("temporal.tls.ca %s: %w", t.CA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal.tls.ca %s: no PEM certificate found", t.CA)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
