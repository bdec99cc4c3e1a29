// This file holds the keys: the operators a node trusts (authorized_keys
// lines from authority.operators) and the signer an operator signs with
// (a private key file, or the first matching key of ssh-agent).

package intent

import (
	"bytes"
	"crypto/sha512"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func sha512sum(b []byte) [64]byte { return sha512.Sum512(b) }

// Operator is one trusted key and its comment.
type Operator struct {
	Key     ssh.PublicKey
	Comment string
}

// Operators is the set of keys whose intents a node accepts.
type Operators struct {
	list []Operator
}

// ParseOperators reads authorized_keys-style lines ("ssh-ed25519 AAAA...
// alice@laptop"); blank lines and # comments are skipped. Options before
// the key type are refused: a restriction this code would not enforce must
// not look as if it were.
func ParseOperators(text string) (*Operators, error) {
	ops := &Operators{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, comment, options, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("authority.operators line %d: %v: it must be a public key line as in authorized_keys (ssh-ed25519 AAAA... name)", i+1, err)
		}
		if len(options) > 0 {
			return nil, fmt.Errorf("authority.operators line %d: options %q are not supported: give the key type, the key and a comment only", i+1, strings.Join(options, ","))
		}
		ops.list = append(ops.list, Operator{Key: key, Comment: comment})
	}
	return ops, nil
}

// Len is the number of trusted keys.
func (o *Operators) Len() int {
	if o == nil {
		return 0
	}
	return len(o.list)
}

func (o *Operators) find(k ssh.PublicKey) (Operator, bool) {
	if o == nil || k == nil {
		return Operator{}, false
	}
	want := k.Marshal()
	for _, op := range o.list {
		if bytes.Equal(op.Key.Marshal(), want) {
			return op, true
		}
	}
	return Operator{}, false
}

// SignerFromFile reads an unencrypted private key (ssh-keygen's format).
// An encrypted key is refused with the way out: load it into ssh-agent.
func SignerFromFile(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("signing key %s is encrypted: add it to ssh-agent (ssh-add %s) and sign with the agent", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	return s, nil
}

// SignerFromAgent is the ssh-agent key at socket whose public key is pub
// (an authorized_keys line or a .pub file's content); with pub empty, the
// agent must hold exactly one key.
func SignerFromAgent(socket, pub string) (ssh.Signer, func() error, error) {
	if socket == "" {
		return nil, nil, errors.New("no ssh-agent: SSH_AUTH_SOCK is not set; give a key file (--sign-key FILE) or start ssh-agent")
	}
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh-agent at %s: %w", socket, err)
	}
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("ssh-agent at %s: %w", socket, err)
	}
	if pub == "" {
		if len(signers) != 1 {
			conn.Close()
			return nil, nil, fmt.Errorf("ssh-agent holds %d keys: name the one to sign with (--sign-key FILE.pub)", len(signers))
		}
		return signers[0], conn.Close, nil
	}
	want, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pub))
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("public key to sign with: %w", err)
	}
	for _, s := range signers {
		if bytes.Equal(s.PublicKey().Marshal(), want.Marshal()) {
			return s, conn.Close, nil
		}
	}
	conn.Close()
	return nil, nil, fmt.Errorf("ssh-agent at %s does not hold key %s (ssh-add it)", socket, ssh.FingerprintSHA256(want))
}
