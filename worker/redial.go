// This file is how the node agent waits for Temporal: it dials until the
// server answers, so that a node cut off from Temporal keeps running its
// own watch (started before the first dial) instead of exiting. Only a
// failure that a later try may get past (connect.Unreachable) is retried,
// each after a capped, jittered backoff and with one log line; a setting
// that cannot be used stops the start at once as a configuration error.
// After the dial the SDK's worker retries lost polls by itself.
package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.temporal.io/sdk/client"

	"adoption/connect"
)

// dialBackoff is the agent's wait between two dials (cenkalti/backoff):
// 1 s doubling to 1 min, each wait drawn at random between half of it and
// all of it, so that agents cut off together do not dial together. The
// library draws around a centre, so the centre is three quarters of that
// (0.75 s doubling to 45 s) give or take a third.
func dialBackoff() backoff.BackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 750 * time.Millisecond, RandomizationFactor: 1.0 / 3,
		Multiplier: 2, MaxInterval: 45 * time.Second}
}

// dialer is one dial of Temporal.
type dialer func(context.Context) (client.Client, error)

// dialUntil dials until it has a client or ctx ends (nil, ctx's error).
// Each unreachable try is one warning naming the address, the error and
// the next try, and one call of waiting; any other error is returned at
// once as a configuration error.
func dialUntil(ctx context.Context, dial dialer, b backoff.BackOff, addr string, log *slog.Logger, waiting func(attempt int, err error, next time.Duration)) (client.Client, error) {
	for n := 1; ; n++ {
		c, err := dial(ctx)
		if ctx.Err() != nil {
			if c != nil {
				c.Close()
			}
			return nil, ctx.Err()
		}
		if err == nil {
			if n > 1 {
				log.Info("reached Temporal", "temporal", addr, "attempts", n)
			}
			return c, nil
		}
		if !connect.Unreachable(err) {
			return nil, configError{err}
		}
		next := b.NextBackOff()
		log.Warn("Temporal is out of reach: the node's own watch runs on, the dial is retried", "temporal", addr,
			"attempt", n, "err", err.Error(), "retry_in", next.Round(time.Millisecond).String())
		if waiting != nil {
			waiting(n, err, next)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(next):
		}
	}
}
