package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"adoption/config"
	"adoption/internal/opkey"
)

// TestNodesTrustTheRunsKey: a sandbox node's configuration trusts the
// run's operator key and names it for the CLI, unless its plan part says
// its own authority.
func TestNodesTrustTheRunsKey(t *testing.T) {
	k, err := opkey.Generate(t.TempDir(), "operator", "test-operator")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(OperatorKeyEnv, k.Path)
	body, err := withOperator("node:\n  name: n1\n", "demo")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Authority.Operators) != 1 || c.Authority.Operators[0] != k.Public || c.Operator.SignKey != k.Path || c.Authority.Fleet != "demo" {
		t.Fatalf("authority %+v, operator %+v; want the run's key %s", c.Authority, c.Operator, k.Public)
	}
	if fi, err := os.Stat(k.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the private key: %v %v", fi, err)
	}
	own := "node:\n  name: n1\nauthority:\n  unsigned: true\n"
	if got, _ := withOperator(own, "demo"); got != own {
		t.Errorf("a plan with its own authority was changed:\n%s", got)
	}
}
