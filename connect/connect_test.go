package connect

import (
	"strings"
	"testing"

	"adoption/config"
)

func options(t *testing.T, tc config.Temporal) (*Target, error) {
	t.Helper()
	tg, err := Resolve(Flags{}, &tc, "temporal.* of test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tg.Options(nil)
	return tg, err
}

// TestAnyTLSKeyEnablesTLS: server_name alone used to connect in plain
// text; every temporal.tls.* key now means TLS.
func TestAnyTLSKeyEnablesTLS(t *testing.T) {
	t.Setenv("TEMPORAL_CONFIG_FILE", t.TempDir()+"/none.toml")
	tg, _ := options(t, config.Temporal{Address: "temporal.example:7233", Namespace: "default",
		TLS: config.TLS{ServerName: "temporal.internal"}})
	opts, err := tg.Options(nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.ConnectionOptions.TLS == nil || opts.ConnectionOptions.TLS.ServerName != "temporal.internal" {
		t.Fatalf("server_name alone: TLS %+v, want TLS with that server name", opts.ConnectionOptions.TLS)
	}
	tg, _ = options(t, config.Temporal{Address: "127.0.0.1:7233", Namespace: "default"})
	opts, err = tg.Options(nil)
	if err != nil || opts.ConnectionOptions.TLS != nil || tg.plainText(opts) {
		t.Fatalf("no TLS key: TLS %+v, %v; want plain text for the dev server", opts.ConnectionOptions.TLS, err)
	}
	if _, err = options(t, config.Temporal{Address: "x:1", Namespace: "default", TLS: config.TLS{CA: "/nonexistent/ca.pem"}}); err == nil || !strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Fatalf("a missing CA file: %v", err)
	}
}

// TestWorkersReadTheClientEnvironment: the agent and the orchestrator
// dial through Resolve, so TEMPORAL_* and API keys reach them as they
// reach the temporal CLI, and each setting names where it came from.
func TestWorkersReadTheClientEnvironment(t *testing.T) {
	t.Setenv("TEMPORAL_CONFIG_FILE", t.TempDir()+"/none.toml")
	t.Setenv("TEMPORAL_ADDRESS", "ns.tmprl.example:7233")
	t.Setenv("TEMPORAL_NAMESPACE", "prod.a1b2c")
	t.Setenv("TEMPORAL_API_KEY", "k")
	tg, err := options(t, config.Temporal{Address: "127.0.0.1:7233", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if tg.Address != "ns.tmprl.example:7233" || tg.Namespace != "prod.a1b2c" || !strings.Contains(tg.AddrFrom, "TEMPORAL_ADDRESS") {
		t.Fatalf("environment not layered over the configuration: %+v", tg)
	}
	opts, err := tg.Options(nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Credentials == nil || opts.ConnectionOptions.TLS == nil || tg.plainText(opts) {
		t.Fatalf("an API key: credentials %v, TLS %+v; want both", opts.Credentials, opts.ConnectionOptions.TLS)
	}
}

// TestPlainTextAcrossTheNetworkRefused: a non-loopback address reached
// without TLS is refused before any connection, unless said on purpose.
func TestPlainTextAcrossTheNetworkRefused(t *testing.T) {
	t.Setenv("TEMPORAL_CONFIG_FILE", t.TempDir()+"/none.toml")
	t.Setenv("TEMPORAL_ADDRESS", "192.0.2.7:7233")
	tg, err := options(t, config.Temporal{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Dial(nil); err == nil || !strings.Contains(err.Error(), "192.0.2.7:7233 (from TEMPORAL_ADDRESS") || !strings.Contains(err.Error(), "no TLS") {
		t.Fatalf("plain text to 192.0.2.7: %v", err)
	}
	tg, _ = options(t, config.Temporal{TLS: config.TLS{Mode: config.TLSOff}})
	if opts, _ := tg.Options(nil); tg.plainText(opts) {
		t.Fatal("temporal.tls.mode: off says plain text on purpose; still refused")
	}
	t.Setenv("TEMPORAL_TLS", "false")
	tg, _ = options(t, config.Temporal{})
	if opts, _ := tg.Options(nil); tg.plainText(opts) {
		t.Fatal("TEMPORAL_TLS=false says plain text on purpose; still refused")
	}
}
