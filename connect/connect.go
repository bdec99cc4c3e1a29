// Package connect dials Temporal from the configuration, with TLS for a real
// cluster. The worker and the CLI both use it; the CLI and the orchestrator
// dial once, the node agent until Temporal answers (Unreachable).
package connect

import (
	"context"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"

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

// Dial connects to the Temporal frontend cfg names, under the client
// environment (TEMPORAL_*, the Temporal profile) as Resolve layers it.
func Dial(ctx context.Context, cfg config.Temporal, logger *slog.Logger, options ...Option) (client.Client, error) {
	t, err := Resolve(Flags{}, &cfg, "temporal.* of the configuration")
	if err != nil {
		return nil, err
	}
	return t.DialContext(ctx, logger, options...)
}

// WithCodec makes the client encrypt every payload (and failures' messages)
// with the codec key cfg holds; without one it leaves opts as they are.
func WithCodec(opts *client.Options, cfg config.Temporal) error {
	if len(cfg.Key) == 0 {
		return nil
	}
	dc, err := DataConverter(cfg)
	if err != nil {
		return err
	}
	opts.DataConverter = dc
	opts.FailureConverter = codec.FailureConverter(opts.DataConverter)
	return nil
}

// DataConverter is the data converter a client dialled with cfg uses: the
// codec's with a key, else the SDK's default. It decodes payloads read
// outside the SDK's own calls (a pending activity's heartbeat).
func DataConverter(cfg config.Temporal) (converter.DataConverter, error) {
	if len(cfg.Key) == 0 {
		return converter.GetDefaultDataConverter(), nil
	}
	c, err := codec.New(cfg.Key, cfg.OlderKeys...)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", config.CodecKeyFileKey, cfg.CodecKeyFile, err)
	}
	return codec.DataConverter(c), nil
}

// NoCodecWarning is what a process that dials Temporal without a codec key
// logs once at start.
const NoCodecWarning = "temporal.codec_key_file is not set: payloads (plans, progress, errors) are stored in Temporal unencrypted and the plan's digests of environment values and declared files are plain sha256, which a dictionary can reverse; " +
	"set it to a 0600 file of 32 random bytes, the same on the agents, the orchestrator and the operator's side"
