package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadPrefersTheStamp(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "aaaaaaaaaaaaaaaaaaaa"}, {Key: "vcs.modified", Value: "false"}}}
	in := read(bi, "v1.2.3", "0123456789abcdef")
	if in.Version != "v1.2.3" || in.Commit != "0123456789ab" || in.Dirty {
		t.Fatalf("stamped: %+v", in)
	}
	if got, want := in.String(), "v1.2.3 (commit 0123456789ab, go1.26.8)"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	if id, err := in.BuildID(); err != nil || id != "v1.2.3" {
		t.Fatalf("a clean stamped build's ID is its version: %q, %v", id, err)
	}
}

func TestReadFallsBackToVCS(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "bbbbbbbbbbbbbbbbbbbb"}}}
	in := read(bi, "", "")
	if in.Stamped() || in.Commit != "bbbbbbbbbbbb" {
		t.Fatalf("vcs: %+v", in)
	}
	if id, err := in.BuildID(); err != nil || id != "bbbbbbbbbbbb" {
		t.Fatalf("an unstamped clean build's ID is its commit: %q, %v", id, err)
	}
}

// A dirty build never shares an ID with another: the executable's hash is
// part of it, whether the tree was found dirty by git describe or by Go.
func TestDirtyBuildIDCarriesTheHash(t *testing.T) {
	sum, err := selfHash()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []Info{
		read(nil, "v1.2.3-4-g0123abcd-dirty", "0123abcd"),
		read(&debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}}, "v1.2.3", "0123abcd"),
		read(nil, "", ""),
	} {
		id, err := in.BuildID()
		if err != nil || !strings.HasSuffix(id, sum) || strings.Count(id, "dirty") > 1 {
			t.Fatalf("%+v: build ID %q, want one ending with the executable's hash %s (%v)", in, id, sum, err)
		}
	}
}
