package config

import (
	"encoding/json"
	"testing"

	"adoption/internal/testenv"
)

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nodeExample is the shipped node example with an operator's key in place
// of its placeholder.
func nodeExample(t *testing.T) string {
	t.Helper()
	return testenv.NodeExample(t, OperatorPlaceholder)
}
