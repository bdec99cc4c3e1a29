// The CLI's Temporal client: where it points is resolved by connect.Resolve
// (flags, then TEMPORAL_* and the Temporal profile, then the configuration's
// temporal.*), which the agent and the orchestrator share; this file adds
// what only the CLI shows of it: whether payloads are encrypted, and
// failures read raw, decrypted.
package main

import (
	"errors"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/codec"
	"adoption/config"
	"adoption/connect"
)

// target is where the client points and why.
type target struct{ *connect.Target }

// resolveTarget layers the settings. tc may be nil (no configuration given).
func resolveTarget(f connect.Flags, tc *config.Temporal, base string) (*target, error) {
	f.Command = true // hints name --address and --namespace
	t, err := connect.Resolve(f, tc, base)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return &target{Target: t}, nil
}

// dial connects, with connect's checks (host, server, namespace).
func (t *target) dial() (client.Client, error) {
	c, err := t.Dial(nil)
	if errors.Is(err, connect.ErrSettings) {
		return nil, usagef("%v", err)
	}
	return c, err
}

// payloads says how the client treats payloads, for adopt status.
func (t *target) payloads() string {
	if t == nil || t.Target == nil {
		return "" // a client given, not dialled (tests)
	}
	if len(t.Codec.Key) == 0 {
		return "not encrypted: " + config.CodecKeyFileKey + " is not set"
	}
	return "encrypted (codec key " + codec.KeyID(t.Codec.Key) + ")"
}

// failureMessage is a raw failure's message, decrypted when the codec
// encrypted it (the raw message then reads "Encoded failure").
func (t *target) failureMessage(f *failurepb.Failure) string {
	if f == nil || f.GetEncodedAttributes() == nil || t == nil || t.Target == nil || t.Failures == nil {
		return f.GetMessage()
	}
	err := t.Failures.FailureToError(f)
	if ae, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return ae.Message()
	}
	return err.Error()
}
