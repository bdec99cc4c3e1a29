package main

import (
	"strings"
	"testing"
)

// A release build's ID is its version; any other build's names its
// revision or its own bytes, never nothing (two builds of different code
// must not share an ID).
func TestBuildID(t *testing.T) {
	version = "v9.9.9"
	id, err := buildID()
	version = ""
	if err != nil || id != "v9.9.9" {
		t.Fatalf("with -X main.version: %q, %v", id, err)
	}
	id, err = buildID()
	if err != nil || id == "" {
		t.Fatalf("without a version: %q, %v", id, err)
	}
	if strings.HasPrefix(id, "exe-") || strings.Contains(id, "-dirty-") {
		sum, err := selfHash()
		if err != nil || !strings.HasSuffix(id, sum) {
			t.Fatalf("build ID %q does not end with the executable's hash %q (%v)", id, sum, err)
		}
	}
}
