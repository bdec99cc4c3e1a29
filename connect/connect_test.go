package connect

import (
	"strings"
	"testing"

	"adoption/config"
)

// TestAnyTLSKeyEnablesTLS: server_name alone used to connect in plain
// text; every temporal.tls.* key now means TLS.
func TestAnyTLSKeyEnablesTLS(t *testing.T) {
	opts, err := Options(config.Temporal{Address: "temporal.example:7233", Namespace: "default",
		TLS: config.TLS{ServerName: "temporal.internal"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.ConnectionOptions.TLS == nil || opts.ConnectionOptions.TLS.ServerName != "temporal.internal" {
		t.Fatalf("server_name alone: TLS %+v, want TLS with that server name", opts.ConnectionOptions.TLS)
	}
	opts, err = Options(config.Temporal{Address: "127.0.0.1:7233", Namespace: "default"}, nil)
	if err != nil || opts.ConnectionOptions.TLS != nil {
		t.Fatalf("no TLS key: TLS %+v, %v; want plain text for the dev server", opts.ConnectionOptions.TLS, err)
	}
	_, err = Options(config.Temporal{Address: "x:1", Namespace: "default", TLS: config.TLS{CA: "/nonexistent/ca.pem"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "temporal.tls.ca /nonexistent/ca.pem") {
		t.Fatalf("a missing CA file: %v", err)
	}
}
