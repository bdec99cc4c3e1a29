package containerenv

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"adoption/activities/authority"
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
	n := Node{Name: "n1", Root: root}
	auth := &authority.Authority{Contents: map[string][]byte{sum("primary"): []byte("primary")}}
	m := config.ModulePlan{Name: "web", Container: &config.Container{Name: "web", Image: "web:2",
		EnvFile: "/etc/web/web.env", EnvSHA256: map[string]string{"MODE": sum("primary")}}}
	env, err := n.Module(auth, m)
	if err != nil {
		t.Fatal(err)
	}
	if env["MODE"] != "primary" || env["DB_URL"] != "postgres://x" || len(env) != 2 {
		t.Fatalf("env: %v", env)
	}

	// A value the node's configuration does not hold.
	m.Container.EnvSHA256 = map[string]string{"MODE": sum("other")}
	if _, err := n.Module(auth, m); err == nil || !strings.Contains(err.Error(), "modules[web].container.env.MODE") {
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
	if _, err := n.Module(auth, m); err == nil || !strings.Contains(err.Error(), "modules[web].container.env_file") {
		t.Fatalf("env_file outside node.root: %v", err)
	}

	// A bad line is named by its number, never shown.
	if err := os.WriteFile(filepath.Join(root, "etc/web/bad.env"), []byte("OK=1\n=hunter2-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Container.EnvFile = "/etc/web/bad.env"
	_, err = n.Module(auth, m)
	if err == nil || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad line: %v", err)
	}
}

// TestModuleEnvFileHeldToCustodyRules: env_file is read as custody reads:
// a FIFO is refused at once (the agent must not wait for a writer),
// /dev/zero (with node.root /, as in production) is refused as a device
// instead of read without bound, a file over the limit and a path through
// a symlinked directory are refused; each error names the key and why.
func TestModuleEnvFileHeldToCustodyRules(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/web"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "etc/web/fifo.env"), 0o600); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(root, "etc/web/big.env"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()
	if err := os.WriteFile(filepath.Join(root, "etc/web/real.env"), []byte("A=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("web", filepath.Join(root, "etc/linked")); err != nil {
		t.Fatal(err)
	}
	auth := &authority.Authority{}
	for _, c := range []struct{ root, file, want string }{
		{root, "/etc/web/fifo.env", "is a FIFO, not a regular file"},
		{"/", "/dev/zero", "is a character device, not a regular file"},
		{root, "/etc/web/big.env", "above custody's limit"},
		{root, "/etc/linked/real.env", "/etc/linked is a symlink (-> web)"},
	} {
		n := Node{Name: "n1", Root: c.root}
		m := config.ModulePlan{Name: "web", Container: &config.Container{Name: "web", Image: "web:2", EnvFile: c.file}}
		done := make(chan error, 1)
		go func() {
			_, err := n.Module(auth, m)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "modules[web].container.env_file") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("env_file %s under %s: %v, want a refusal saying %q", c.file, c.root, err, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("env_file %s under %s: the agent still waits after 5 s", c.file, c.root)
		}
	}
}
