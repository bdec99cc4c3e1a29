package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adoption/config"
)

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func TestModuleEnv(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/web"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/web/web.env"), []byte("# comment\nMODE=replica\nexport DB_URL=postgres://x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Activities{Node: "n1", Root: root}
	auth := &Authority{Contents: map[string][]byte{sum("primary"): []byte("primary")}}
	m := config.ModulePlan{Name: "web", Container: &config.Container{Name: "web", Image: "web:2",
		EnvFile: "/etc/web/web.env", EnvSHA256: map[string]string{"MODE": sum("primary")}}}
	env, err := a.moduleEnv(auth, m)
	if err != nil {
		t.Fatal(err)
	}
	if env["MODE"] != "primary" || env["DB_URL"] != "postgres://x" || len(env) != 2 {
		t.Fatalf("env: %v", env)
	}

	// A value the node's configuration does not hold.
	m.Container.EnvSHA256 = map[string]string{"MODE": sum("other")}
	if _, err := a.moduleEnv(auth, m); err == nil || !strings.Contains(err.Error(), "modules[web].container.env.MODE") {
		t.Fatalf("missing value: %v", err)
	}
	m.Container.EnvSHA256 = nil

	// A symlink leaving node.root.
	outside := filepath.Join(t.TempDir(), "outside.env")
	if err := os.WriteFile(outside, []byte("LEAK=outside-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "etc/web/link.env")); err != nil {
		t.Fatal(err)
	}
	m.Container.EnvFile = "/etc/web/link.env"
	if _, err := a.moduleEnv(auth, m); err == nil || !strings.Contains(err.Error(), "modules[web].container.env_file") {
		t.Fatalf("env_file outside node.root: %v", err)
	}

	// A bad line is named by its number, never shown.
	if err := os.WriteFile(filepath.Join(root, "etc/web/bad.env"), []byte("OK=1\n=hunter2-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Container.EnvFile = "/etc/web/bad.env"
	_, err = a.moduleEnv(auth, m)
	if err == nil || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad line: %v", err)
	}
}
