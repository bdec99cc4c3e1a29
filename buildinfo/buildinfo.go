// Package buildinfo says which build a binary is: the version and commit
// stamped at link time by `make build` (-ldflags -X), else what the Go
// toolchain recorded from the VCS (debug.ReadBuildInfo). Every binary
// prints it for --version, logs it at start and exports it as
// adoption_build_info; the orchestrator names its Worker Deployment
// version after it.
package buildinfo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

// Stamped at link time, e.g.
//
//	go build -ldflags "-X adoption/buildinfo.version=v1.2.3 -X adoption/buildinfo.commit=0123abcd" ./worker
var version, commit string

// Info is one build's identity.
type Info struct {
	Version string // v1.2.3, v1.2.3-4-g0123abcd, or "(devel)" when nothing was stamped
	Commit  string // the VCS revision, 12 hex digits; "" when unknown
	Dirty   bool   // built from a tree with uncommitted changes
	Go      string // the toolchain, e.g. go1.26.8
}

// Read returns this binary's Info.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return read(bi, version, commit)
}

func read(bi *debug.BuildInfo, stampedVersion, stampedCommit string) Info {
	in := Info{Version: stampedVersion, Commit: stampedCommit}
	if bi != nil {
		in.Go = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value
				}
			case "vcs.modified":
				in.Dirty = s.Value == "true"
			}
		}
		if in.Version == "" && bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
	}
	if strings.HasSuffix(in.Version, "-dirty") { // git describe --dirty
		in.Dirty = true
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	if len(in.Commit) > 12 {
		in.Commit = in.Commit[:12]
	}
	return in
}

// String is the --version line after the program's name:
// "v1.2.3 (commit 0123456789ab, go1.26.8)".
func (in Info) String() string {
	c := in.Commit
	if c == "" {
		c = "unknown"
	}
	if in.Dirty && !strings.HasSuffix(in.Version, "-dirty") {
		c += "+dirty"
	}
	return fmt.Sprintf("%s (commit %s, %s)", in.Version, c, in.Go)
}

// Stamped reports whether a version was set at link time or by the module
// system (not "(devel)").
func (in Info) Stamped() bool { return in.Version != "(devel)" }

// BuildID names this build for Temporal's Worker Versioning: the version.
// Two builds with different workflow code must never share a build ID (the
// server would hand one's histories to the other as the same code), so a
// build from a modified tree adds a hash of the executable, and a build
// with neither version nor commit is named by that hash alone.
func (in Info) BuildID() (string, error) {
	id := in.Version
	if !in.Stamped() {
		id = in.Commit
	}
	if id != "" && !in.Dirty {
		return id, nil
	}
	sum, err := selfHash()
	if err != nil {
		return "", err
	}
	if id == "" {
		return "exe-" + sum, nil
	}
	return strings.TrimSuffix(id, "-dirty") + "-dirty-" + sum, nil
}

// selfHash is the first 12 hex digits of the running executable's SHA-256.
func selfHash() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
