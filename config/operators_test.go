package config

import (
	"errors"
	"strings"
	"testing"
)

const (
	keyAlice = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHuPfRsd33kNfAfcDQP0vip5/aOR4qj7YTiAsVhmNJQf alice@laptop"
	nodeBody = "node:\n  name: n1\n"
)

// TestOperatorsBlockAndList: authority.operators is read as a block
// string and as a list, and the keys parse.
func TestOperatorsBlockAndList(t *testing.T) {
	for name, body := range map[string]string{
		"block": nodeBody + "authority:\n  operators: |\n    # the operators\n    " + keyAlice + "\n\n",
		"list":  nodeBody + "authority:\n  operators:\n    - " + keyAlice + "\n",
	} {
		c, err := Load(write(t, body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ops, err := c.Authority.Keys()
		if err != nil || ops.Len() != 1 {
			t.Fatalf("%s: %d key(s), %v", name, ops.Len(), err)
		}
	}
}

// TestOperatorsRequired: a node without operators is refused unless it
// says unsigned explicitly; a bad line is named with what to do.
func TestOperatorsRequired(t *testing.T) {
	problems := func(body string) string {
		_, err := Load(write(t, body))
		var ve *ValidationError
		if !errors.As(err, &ve) {
			return ""
		}
		return strings.Join(ve.Problems, "\n")
	}
	if p := problems(nodeBody + "authority:\n  operators: []\n"); !strings.Contains(p, "authority.operators:") || !strings.Contains(p, "authority.unsigned: true") {
		t.Errorf("no operators: %q", p)
	}
	if p := problems(nodeBody + "authority:\n  unsigned: true\n"); p != "" {
		t.Errorf("unsigned said explicitly: %q", p)
	}
	p := problems(nodeBody + "authority:\n  operators:\n    - " + keyAlice + "\n    - ssh-ed25519 AAAAnotakey bob\n")
	if !strings.Contains(p, "authority.operators line 2") || !strings.Contains(p, "copy the operator's public key line") {
		t.Errorf("bad second line: %q", p)
	}
	if p := problems(nodeBody + "authority:\n  operators: [\"command=\\\"x\\\" " + keyAlice + "\"]\n"); !strings.Contains(p, "options") {
		t.Errorf("options refused: %q", p)
	}
	if p := problems(nodeBody + "authority:\n  unsigned: true\noperator:\n  intent_ttl: 48h\n"); !strings.Contains(p, "operator.intent_ttl") {
		t.Errorf("ttl: %q", p)
	}
}
