package config

import (
	"errors"
	"strings"
	"testing"
)

// A non-loopback Temporal address without TLS is refused at validation,
// naming the key, the value and what to do, unless plain text is asked
// for explicitly (temporal.tls.mode: off, or `tls: off`).
func TestNonLoopbackTemporalNeedsTLSOrAnExplicitOff(t *testing.T) {
	for _, tc := range []struct {
		name, temporal string
		refused        string // "" when it must validate
	}{
		{"remote plain", "  address: 10.0.0.5:7233\n", `temporal.address: "10.0.0.5:7233" is invalid: not a loopback address, and no TLS is configured`},
		{"remote name plain", "  address: temporal.example:7233\n", `temporal.address: "temporal.example:7233" is invalid`},
		{"remote tls: off", "  address: 10.0.0.5:7233\n  tls: off\n", ""},
		{"remote mode off", "  address: 10.0.0.5:7233\n  tls: {mode: \"off\"}\n", ""},
		{"remote with a CA", "  address: 10.0.0.5:7233\n  tls: {ca: /etc/adoption/ca.pem}\n", ""},
		{"loopback v4", "  address: 127.0.0.1:7233\n", ""},
		{"loopback v6", "  address: \"[::1]:7233\"\n", ""},
		{"localhost", "  address: localhost:7233\n", ""},
		{"off beside a CA", "  address: 10.0.0.5:7233\n  tls: {mode: \"off\", ca: /etc/adoption/ca.pem}\n", `temporal.tls.mode: "off" is invalid: off contradicts`},
		{"unknown mode", "  address: 10.0.0.5:7233\n  tls: {mode: plain}\n", `temporal.tls.mode: "plain" is invalid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, "node: {name: n1}\ntemporal:\n"+tc.temporal))
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("want a refusal with %q, got %v", tc.refused, err)
			}
			if strings.Contains(tc.refused, "no TLS") && !strings.Contains(err.Error(), "temporal.tls.mode: off") {
				t.Fatalf("the refusal does not say how to ask for plain text: %v", err)
			}
		})
	}
}
