package bootpath

import (
	"testing"
)

func TestUfwDisabled(t *testing.T) {
	for in, want := range map[string]string{
		"ENABLED=yes\n":               "ENABLED=no\n",
		"a=1\n  ENABLED = yes\nb=2\n": "a=1\nENABLED=no\nb=2\n",
		"LOGLEVEL=low":                "LOGLEVEL=low\nENABLED=no\n",
	} {
		if got := string(UfwDisabled([]byte(in))); got != want {
			t.Errorf("UfwDisabled(%q) = %q, want %q", in, got, want)
		}
	}
}
