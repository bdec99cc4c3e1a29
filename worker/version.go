// The build ID: which version of the Worker Deployment this binary is.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
)

// version is set at link time for a release build:
//
//	go build -ldflags "-X main.version=v1.2.3" ./worker
var version string

// buildID names this build for Worker Versioning. Two builds with different
// workflow code must never share a build ID (the server would send one's
// histories to the other as if they were the same code), so without a
// release version it is the VCS revision, and a build from a modified tree
// adds a hash of the executable itself.
func buildID() (string, error) {
	if version != "" {
		return version, nil
	}
	rev, dirty := "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && !dirty {
		return rev, nil
	}
	sum, err := selfHash()
	if err != nil {
		return "", err
	}
	if rev == "" {
		return "exe-" + sum, nil
	}
	return rev + "-dirty-" + sum, nil
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
