// Client settings, read the way Temporal's own tools read them, through the
// SDK's envconfig. Precedence, highest first: --address/--namespace
// (--profile picks a profile); TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TEMPORAL_TLS_*, TEMPORAL_API_KEY; the profile of the Temporal config file;
// the node configuration's temporal.* (or the fleet file's); then
// 127.0.0.1:7233, namespace default. Each setting remembers where it came
// from, so an unreachable address or a missing namespace names the knob.
// The codec key (temporal.codec_key_file) comes from the configuration
// only: payloads are encrypted with it as the workers do.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"adoption/codec"
	"adoption/config"
	"adoption/connect"
)

// clientFlags are the global flags that point the client.
type clientFlags struct {
	address   string
	namespace string
	profile   string
}

// target is where the client points and why.
type target struct {
	address, namespace string
	addrFrom, nsFrom   string
	profile            envconfig.ClientConfigProfile
	// codec is the configuration's temporal.* whose codec key, if any,
	// encrypts payloads as the agents and the orchestrator do.
	codec config.Temporal
	// failures decodes failures read raw (pending activities' last
	// failure), whose message the codec encrypts; nil without a key.
	failures converter.FailureConverter
}

// resolveTarget layers the settings. tc may be nil (no configuration given).
func resolveTarget(f clientFlags, tc *config.Temporal, base string) (*target, error) {
	t := &target{address: "127.0.0.1:7233", namespace: "default", addrFrom: "the default", nsFrom: "the default"}
	if tc != nil {
		t.codec = *tc
		if tc.Address != "" {
			t.address, t.addrFrom = tc.Address, base
		}
		if tc.Namespace != "" {
			t.namespace, t.nsFrom = tc.Namespace, base
		}
		if tc.TLS.Enabled() {
			t.profile.TLS = &envconfig.ClientConfigTLS{ClientCertPath: tc.TLS.Cert, ClientKeyPath: tc.TLS.Key,
				ServerCACertPath: tc.TLS.CA, ServerName: tc.TLS.ServerName}
		}
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{ConfigFileProfile: f.profile})
	if err != nil {
		return nil, usagef("Temporal client settings (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE or --profile %q): %v", f.profile, err)
	}
	if prof.Address != "" {
		t.address, t.addrFrom = prof.Address, "TEMPORAL_ADDRESS or the Temporal profile"
	}
	if prof.Namespace != "" {
		t.namespace, t.nsFrom = prof.Namespace, "TEMPORAL_NAMESPACE or the Temporal profile"
	}
	if prof.TLS != nil {
		t.profile.TLS = prof.TLS
	}
	t.profile.APIKey, t.profile.GRPCMeta = prof.APIKey, prof.GRPCMeta
	if f.address != "" {
		t.address, t.addrFrom = f.address, "--address"
	}
	if f.namespace != "" {
		t.namespace, t.nsFrom = f.namespace, "--namespace"
	}
	t.profile.Address, t.profile.Namespace = t.address, t.namespace
	return t, nil
}

// dial connects and checks, within seconds, what the SDK would otherwise
// report obscurely or only at the first call: a host that does not resolve
// ("no children to pick from"), a server that does not answer, a namespace
// that does not exist.
func (t *target) dial() (client.Client, error) {
	host, _, err := net.SplitHostPort(t.address)
	if err != nil {
		return nil, usagef("Temporal address %q (from %s) is not HOST:PORT: %v", t.address, t.addrFrom, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if net.ParseIP(host) == nil {
		if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
			return nil, fmt.Errorf("cannot resolve host %q of the Temporal address %s (from %s): %v; check the name or set --address", host, t.address, t.addrFrom, err)
		}
	}
	opts, err := t.profile.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return nil, fmt.Errorf("the Temporal TLS settings: %w", err)
	}
	if err := connect.WithCodec(&opts, t.codec); err != nil {
		return nil, err
	}
	t.failures = opts.FailureConverter
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (from %s): %v; start it with `make dev-server` or set --address / TEMPORAL_ADDRESS / temporal.address", t.address, t.addrFrom, err)
	}
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: t.namespace})
	var nsnf *serviceerror.NamespaceNotFound
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nsnf), errors.As(err, &nf):
		c.Close()
		return nil, fmt.Errorf("namespace %q (from %s) does not exist on Temporal at %s: set --namespace, TEMPORAL_NAMESPACE or temporal.namespace (`temporal operator namespace list` lists them)", t.namespace, t.nsFrom, t.address)
	case err != nil && !isPermissionDenied(err):
		c.Close()
		return nil, fmt.Errorf("reaching Temporal at %s (from %s), namespace %s: %w", t.address, t.addrFrom, t.namespace, err)
	}
	return c, nil
}

// isPermissionDenied: a client allowed into its namespace but not to
// describe it still works for everything the CLI does.
func isPermissionDenied(err error) bool {
	var pd *serviceerror.PermissionDenied
	return errors.As(err, &pd)
}

// payloads says how the client treats payloads, for adopt status.
func (t *target) payloads() string {
	if t == nil {
		return "" // a client given, not dialled (tests)
	}
	if len(t.codec.Key) == 0 {
		return "not encrypted: " + config.CodecKeyFileKey + " is not set"
	}
	return "encrypted (codec key " + codec.KeyID(t.codec.Key) + ")"
}

// failureMessage is a raw failure's message, decrypted when the codec
// encrypted it (the raw message then reads "Encoded failure").
func (t *target) failureMessage(f *failurepb.Failure) string {
	if f == nil || f.GetEncodedAttributes() == nil || t == nil || t.failures == nil {
		return f.GetMessage()
	}
	err := t.failures.FailureToError(f)
	if ae, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return ae.Message()
	}
	return err.Error()
}
