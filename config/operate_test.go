package config

import (
	"strings"
	"testing"
)

func TestOperateSettings(t *testing.T) {
	t.Setenv("ADOPT_METRICS_LISTEN", "127.0.0.1:9464")
	t.Setenv("ADOPT_LOG_FORMAT", "json")
	c, err := Load(nodeExample(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metrics.Listen != "127.0.0.1:9464" || c.Log.Format != "json" {
		t.Fatalf("metrics.listen=%q log.format=%q", c.Metrics.Listen, c.Log.Format)
	}
	if h := c.Plan(); strings.Contains(toJSON(t, h), "9464") {
		t.Fatalf("metrics.listen leaked into the plan: %s", toJSON(t, h))
	}
}

// Bad values are named by key and value, with what to write instead.
func TestOperateBadInput(t *testing.T) {
	for _, tc := range []struct{ listen, format, want string }{
		{"9464", "text", `metrics.listen: "9464" is invalid: HOST:PORT`},
		{"127.0.0.1:99999", "text", `metrics.listen: "127.0.0.1:99999" is invalid`},
		{"metrics.example:9464", "text", `metrics.listen: "metrics.example:9464" is invalid: the host must be an IP address`},
		{"", "yaml", `log.format: "yaml" is invalid: either text or json`},
	} {
		t.Setenv("ADOPT_METRICS_LISTEN", tc.listen)
		t.Setenv("ADOPT_LOG_FORMAT", tc.format)
		_, err := Load(nodeExample(t))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("listen=%q format=%q: want %q, got %v", tc.listen, tc.format, tc.want, err)
		}
	}
}
