package testenv

// This file holds the shipped node example made usable by a test: its
// operator placeholder (which fails validation on purpose) replaced by a
// freshly generated operator key.

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// NodeExample writes config/node.example.yaml to a temporary file with
// every line that opens with placeholder (config.OperatorPlaceholder,
// passed in so that this package imports no configuration) replaced by a
// new operator's public key line, and returns its path. It fails the test
// when the example holds no such line: the example would then trust a key.
func NodeExample(t testing.TB, placeholder string) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "config", "node.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " test-operator"
	lines := strings.Split(string(b), "\n")
	n := 0
	for i, l := range lines {
		if rest := strings.TrimLeft(l, " "); strings.HasPrefix(rest, placeholder) {
			lines[i] = l[:len(l)-len(rest)] + key
			n++
		}
	}
	if n == 0 {
		t.Fatalf("config/node.example.yaml holds no %s line under authority.operators", placeholder)
	}
	p := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
