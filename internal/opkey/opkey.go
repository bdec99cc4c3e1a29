// Package opkey makes an operator's signing key for a sandbox, the demo
// and the tests: an ed25519 private key in OpenSSH's format (0600) and its
// authorized_keys line, the one to put in every node's authority.operators.
package opkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Key is a generated operator key.
type Key struct {
	Path   string // the private key file (0600)
	Public string // its authorized_keys line, with comment
}

// Generate writes a new key to dir/name (and dir/name.pub) with comment.
func Generate(dir, name, comment string) (Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return Key{}, err
	}
	spub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return Key{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Key{}, err
	}
	k := Key{Path: filepath.Join(dir, name), Public: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(spub))) + " " + comment}
	if err := os.WriteFile(k.Path, pem.EncodeToMemory(block), 0o600); err != nil {
		return Key{}, err
	}
	if err := os.WriteFile(k.Path+".pub", []byte(k.Public+"\n"), 0o644); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Load reads a key written by Generate (its .pub beside it).
func Load(path string) (Key, error) {
	b, err := os.ReadFile(path + ".pub")
	if err != nil {
		return Key{}, fmt.Errorf("operator key %s: %w", path, err)
	}
	return Key{Path: path, Public: strings.TrimSpace(string(b))}, nil
}

// YAML is the configuration that makes a node trust k and the CLI sign
// with it (authority.operators and operator.sign_key), to append to a
// node's file.
func (k Key) YAML() string {
	return fmt.Sprintf("authority:\n  operators:\n    - %q\noperator:\n  sign_key: %q\n", k.Public, k.Path)
}
