package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Every file an operator writes has an example here, and each is valid as
// shipped: the node's, the orchestrator's and the fleet's.
func TestExamplesAreValid(t *testing.T) {
	if _, err := Load("example.yaml"); err != nil {
		t.Errorf("example.yaml: %v", err)
	}
	c, err := LoadWith("orchestrator.example.yaml", OrchestratorDefaults())
	if err != nil {
		t.Errorf("orchestrator.example.yaml: %v", err)
	} else if c.Metrics.Listen == "" || c.Log.Level != "info" {
		t.Errorf("orchestrator.example.yaml: metrics.listen=%q log.level=%q", c.Metrics.Listen, c.Log.Level)
	}
	f, err := LoadFleet("fleet.example.yaml")
	if err != nil {
		t.Errorf("fleet.example.yaml: %v", err)
	} else if len(f.Configs) != 1 || f.Configs[0].Node.Role != "control" {
		t.Errorf("fleet.example.yaml: want its one node, the control node first: %s", f.NodeNames())
	}
}

// A problem caused by an ADOPT_* variable names the variable, not only the
// file it overrides; a problem of the file alone does not.
func TestEnvProblemNamesTheVariable(t *testing.T) {
	t.Setenv("ADOPT_NODE_ROLE", "chief")
	_, err := Load("example.yaml")
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.Contains(ve.Problems[0], "node.role") ||
		!strings.Contains(ve.Problems[0], "ADOPT_NODE_ROLE") {
		t.Fatalf("want the one node.role problem naming ADOPT_NODE_ROLE, got %v", err)
	}
	os.Unsetenv("ADOPT_NODE_ROLE")
	_, err = LoadWith(writeTemp(t, "node: {role: chief}\n"), OrchestratorDefaults())
	if err == nil || strings.Contains(err.Error(), "ADOPT_NODE_ROLE") {
		t.Fatalf("a problem of the file blames the environment: %v", err)
	}
}

// A top-level key the configuration does not know is refused, naming it.
func TestUnknownTopLevelKeyRefused(t *testing.T) {
	_, err := LoadWith(writeTemp(t, "labels: {site: a}\n"), OrchestratorDefaults())
	if err == nil || !strings.Contains(err.Error(), "labels: unknown key") {
		t.Fatalf("want labels refused as an unknown key, got %v", err)
	}
}

// log.level is validated and read.
func TestLogLevel(t *testing.T) {
	t.Setenv("ADOPT_LOG_LEVEL", "loud")
	_, err := Load("example.yaml")
	if err == nil || !strings.Contains(err.Error(), `log.level: "loud" is invalid`) || !strings.Contains(err.Error(), "ADOPT_LOG_LEVEL") {
		t.Fatalf("got %v", err)
	}
	t.Setenv("ADOPT_LOG_LEVEL", "debug")
	if c, err := Load("example.yaml"); err != nil || c.Log.Level != "debug" {
		t.Fatalf("log.level debug: %v", err)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := t.TempDir() + "/c.yaml"
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
