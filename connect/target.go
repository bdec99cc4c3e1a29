// Where a process points its Temporal client, layered the way Temporal's own
// tools read it, through the SDK's envconfig. Precedence, highest first: the
// command line's flags (the CLI's --address/--namespace, --profile picking a
// profile); TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TLS_*,
// TEMPORAL_API_KEY; the profile of the Temporal config file; the
// configuration's temporal.*; then 127.0.0.1:7233, namespace default. Each
// setting remembers where it came from, so an unreachable address or a
// missing namespace names the knob. The codec key comes from the
// configuration only. The agent, the orchestrator and the CLI all resolve here.
package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"adoption/config"
)

// Flags are what a command line sets on top of the environment.
type Flags struct {
	Address, Namespace, Profile string
	// Command says the process has --address and --namespace (the CLI):
	// hints then name them; the workers have no such flags.
	Command bool
}

// Target is where the client points and why.
type Target struct {
	Address, Namespace string
	AddrFrom, NsFrom   string
	// Codec is the configuration's temporal.*, whose codec key, if any,
	// encrypts payloads.
	Codec config.Temporal
	// Failures, set by Dial, decodes failures read raw (a pending
	// activity's last failure), whose message the codec encrypts; nil
	// without a codec key.
	Failures converter.FailureConverter
	profile  envconfig.ClientConfigProfile
	plain    bool   // temporal.tls.mode: off, said in the configuration
	tlsFrom  string // where the TLS settings came from
	command  bool   // Flags.Command
}

// ErrSettings marks client settings that cannot be used as given (an
// unreadable Temporal config file or profile, an address that is not
// HOST:PORT): a usage error of whoever set them.
var ErrSettings = errors.New("the Temporal client settings")

// Resolve layers the settings. tc may be nil (no configuration given); base
// names where tc came from.
func Resolve(f Flags, tc *config.Temporal, base string) (*Target, error) {
	t := &Target{Address: "127.0.0.1:7233", Namespace: "default", AddrFrom: "the default", NsFrom: "the default", command: f.Command}
	if tc != nil {
		t.Codec = *tc
		t.plain = tc.TLS.Mode == config.TLSOff
		if tc.Address != "" {
			t.Address, t.AddrFrom = tc.Address, from(tc.AddressFrom, base)
		}
		if tc.Namespace != "" {
			t.Namespace, t.NsFrom = tc.Namespace, from(tc.NamespaceFrom, base)
		}
		if tc.TLS.Enabled() {
			t.profile.TLS = &envconfig.ClientConfigTLS{ClientCertPath: tc.TLS.Cert, ClientKeyPath: tc.TLS.Key,
				ServerCACertPath: tc.TLS.CA, ServerName: tc.TLS.ServerName}
			t.tlsFrom = base
		}
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{ConfigFileProfile: f.Profile})
	if err != nil {
		return nil, fmt.Errorf("%w (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE or --profile %q): %v", ErrSettings, f.Profile, err)
	}
	if prof.Address != "" {
		t.Address, t.AddrFrom = prof.Address, "TEMPORAL_ADDRESS or the Temporal profile"
	}
	if prof.Namespace != "" {
		t.Namespace, t.NsFrom = prof.Namespace, "TEMPORAL_NAMESPACE or the Temporal profile"
	}
	if prof.TLS != nil {
		t.profile.TLS, t.tlsFrom = prof.TLS, "TEMPORAL_TLS_* or the Temporal profile"
	}
	t.profile.APIKey, t.profile.GRPCMeta = prof.APIKey, prof.GRPCMeta
	if f.Address != "" {
		t.Address, t.AddrFrom = f.Address, "--address"
	}
	if f.Namespace != "" {
		t.Namespace, t.NsFrom = f.Namespace, "--namespace"
	}
	t.profile.Address, t.profile.Namespace = t.Address, t.Namespace
	return t, nil
}

// from is where a configuration's setting came from: what Load recorded
// (the file, an ADOPT_* variable), else base.
func from(recorded, base string) string {
	if recorded != "" {
		return recorded
	}
	return base
}

// knobs lists what sets the address (or the namespace) for this process,
// highest first: the CLI's flag, Temporal's variable, the configuration's
// key and its ADOPT_* variable.
func (t *Target) knobs(flag, env, key string) string {
	s := env + ", " + key + " or " + config.EnvVar(key)
	if t.command {
		s = flag + ", " + s
	}
	return s
}

// Options are the client options the target resolves to, payloads
// encrypted when the configuration holds a codec key.
func (t *Target) Options(logger *slog.Logger) (client.Options, error) {
	opts, err := t.profile.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return opts, fmt.Errorf("the Temporal TLS settings (from %s): %w", t.tlsFrom, err)
	}
	if logger != nil {
		opts.Logger = tlog.NewStructuredLogger(logger)
	}
	err = WithCodec(&opts, t.Codec)
	return opts, err
}

// plainText reports whether opts would talk to a non-loopback address
// without TLS, which nobody asked for (temporal.tls.mode: off, or
// TEMPORAL_TLS=false).
func (t *Target) plainText(opts client.Options) bool {
	said := t.plain || t.profile.TLS != nil && t.profile.TLS.Disabled
	return opts.ConnectionOptions.TLS == nil && !said && !config.LoopbackAddress(t.Address)
}

// Check checks, without dialling, what a dial would refuse before it
// reaches out: an address that is not HOST:PORT, TLS files that cannot be
// read or used, a codec key that does not make a codec, plain text to a
// non-loopback address nobody asked for.
func (t *Target) Check() error {
	_, err := t.options(nil)
	return err
}

// options are Options after Check's checks.
func (t *Target) options(logger *slog.Logger) (client.Options, error) {
	if _, _, err := net.SplitHostPort(t.Address); err != nil {
		return client.Options{}, fmt.Errorf("%w: the Temporal address %q (from %s) is not HOST:PORT: %v", ErrSettings, t.Address, t.AddrFrom, err)
	}
	opts, err := t.Options(logger)
	if err != nil {
		return opts, err
	}
	if t.plainText(opts) {
		return opts, fmt.Errorf("the Temporal address %s (from %s) is not a loopback address and no TLS is set: set temporal.tls.* or TEMPORAL_TLS=true (with TEMPORAL_TLS_* or TEMPORAL_API_KEY), or say plain text on purpose with temporal.tls.mode: off or TEMPORAL_TLS=false", t.Address, t.AddrFrom)
	}
	return opts, nil
}

// Dial is DialContext for a process that dials once, at its start.
func (t *Target) Dial(logger *slog.Logger, options ...Option) (client.Client, error) {
	return t.DialContext(context.Background(), logger, options...)
}

// DialContext connects and checks, within seconds, what the SDK would
// otherwise report obscurely or only at the first call: a host that does
// not resolve, a server that does not answer, a namespace that does not
// exist. Those that a later try may get past are Unreachable; the others
// are settings to fix. ctx ending stops the dial at once.
func (t *Target) DialContext(ctx context.Context, logger *slog.Logger, options ...Option) (client.Client, error) {
	opts, err := t.options(logger)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(t.Address)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if net.ParseIP(host) == nil {
		if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
			// A node cut off from the network is cut off from its resolver
			// too: a name that does not resolve now may later.
			return nil, unreachable{fmt.Errorf("cannot resolve host %q of the Temporal address %s (from %s): %v; check the name (set by %s), or set %s", host, t.Address, t.AddrFrom, err, t.AddrFrom, t.knobs("--address", "TEMPORAL_ADDRESS", "temporal.address"))}
		}
	}
	for _, o := range options {
		o(&opts)
	}
	t.Failures = opts.FailureConverter
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		werr := fmt.Errorf("cannot reach Temporal at %s (from %s): %v; is the server running there? Else set %s", t.Address, t.AddrFrom, err, t.knobs("--address", "TEMPORAL_ADDRESS", "temporal.address"))
		if notAnswering(ctx, err) {
			werr = unreachable{werr}
		}
		return nil, werr
	}
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: t.Namespace})
	var nsnf *serviceerror.NamespaceNotFound
	var nf *serviceerror.NotFound
	var pd *serviceerror.PermissionDenied
	switch {
	case errors.As(err, &nsnf), errors.As(err, &nf):
		c.Close()
		// A server that is starting answers before its namespaces are
		// registered, and a namespace created later needs no restart.
		return nil, unreachable{fmt.Errorf("namespace %q (from %s) does not exist on Temporal at %s: set %s (`temporal operator namespace list` lists them)", t.Namespace, t.NsFrom, t.Address, t.knobs("--namespace", "TEMPORAL_NAMESPACE", "temporal.namespace"))}
	case err != nil && !errors.As(err, &pd): // allowed in but not to describe: still works
		c.Close()
		werr := fmt.Errorf("reaching Temporal at %s (from %s), namespace %s: %w", t.Address, t.AddrFrom, t.Namespace, err)
		if notAnswering(ctx, err) {
			werr = unreachable{werr}
		}
		return nil, werr
	}
	return c, nil
}

// unreachable marks a dial that failed for want of a server that answers:
// a later try may succeed.
type unreachable struct{ error }

func (u unreachable) Unwrap() error { return u.error }

// Unreachable reports whether err is a dial's failure that a later try may
// get past: the host does not resolve, nothing answers at the address (or
// the TLS handshake fails, which gRPC reports alike), the server is busy or
// starting, the namespace is not there yet. Anything else the dial returns
// (a setting that cannot be used, credentials refused) wants a fix first.
func Unreachable(err error) bool {
	return errors.As(err, new(unreachable))
}

// notAnswering says whether a call's err means no server answered it in
// time, or one that could not serve it yet: gRPC's codes as the SDK passes
// them on (a status, or the service error made of one).
func notAnswering(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	code := codes.Unknown
	if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	var se interface{ Status() *status.Status }
	if errors.As(err, &se) && se.Status() != nil {
		code = se.Status().Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Internal, codes.Aborted, codes.Canceled:
		return true
	}
	return false
}
