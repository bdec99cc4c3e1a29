package connect

import (
	"context"
	"strings"
	"testing"

	"adoption/config"
)

// A dial's error blames the setting the address came from (an ADOPT_*
// variable, not the file) and names only the settings this process has:
// --address for the CLI, never for the workers.
func TestDialHintNamesTheKnob(t *testing.T) {
	tc := &config.Temporal{Address: "nosuch.invalid:7233", Namespace: "default", AddressFrom: "ADOPT_TEMPORAL_ADDRESS", TLS: config.TLS{Mode: config.TLSOff}}
	for _, cli := range []bool{false, true} {
		tgt, err := Resolve(Flags{Command: cli}, tc, "temporal.* of n1.yaml")
		if err != nil {
			t.Fatal(err)
		}
		_, err = tgt.DialContext(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "(from ADOPT_TEMPORAL_ADDRESS)") || strings.Contains(err.Error(), "n1.yaml") ||
			strings.Contains(err.Error(), "--address") != cli || !strings.Contains(err.Error(), "TEMPORAL_ADDRESS, temporal.address or ADOPT_TEMPORAL_ADDRESS") {
			t.Errorf("cli=%v: %v", cli, err)
		}
	}
}
