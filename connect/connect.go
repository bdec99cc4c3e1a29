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
	tlog "go.temporal.io/sdk/log"

	"adoption/config"
)

// Dial connects to the Temporal frontend named in cfg.
func Dial(cfg config.Temporal, logger *slog.Logger) (client.Client, error) {
	opts, err := Options(cfg, logger)
	if err != nil {
		return nil, err
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
	return opts, nil
}

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
