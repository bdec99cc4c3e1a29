package main

import (
	"bytes"
	"strings"
	"testing"
)

// --version prints the build, as adopt and adopt-worker do.
func TestVersionFlag(t *testing.T) {
	r := root()
	var out bytes.Buffer
	r.SetOut(&out)
	r.SetArgs([]string{"--version"})
	if err := r.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "adopt-sandbox ") || !strings.Contains(out.String(), "(commit ") {
		t.Fatalf("--version: %q", out.String())
	}
}
