package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"adoption/internal/testenv"
)

// Every file an operator writes has an example here: the orchestrator's
// is valid as shipped; the node's is refused until its operator
// placeholder is replaced, naming the key and what to do, and valid once
// it is; the fleet's names the node's example by its installed name and is
// refused and valid with it.
func TestExamplesAreValid(t *testing.T) {
	_, err := Load("node.example.yaml")
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.HasPrefix(ve.Problems[0], "authority.operators line 1: ") ||
		!strings.Contains(ve.Problems[0], "placeholder") || !strings.Contains(ve.Problems[0], "id_ed25519.pub") {
		t.Errorf("node.example.yaml as shipped: want only its operator placeholder refused, naming the key and what to paste; got %v", err)
	}
	node := testenv.NodeExample(t, OperatorPlaceholder)
	if _, err := Load(node); err != nil {
		t.Errorf("node.example.yaml with an operator's key: %v", err)
	}
	c, err := LoadWith("orchestrator.example.yaml", OrchestratorDefaults())
	if err != nil {
		t.Errorf("orchestrator.example.yaml: %v", err)
	} else if c.Metrics.Listen == "" || c.Log.Level != "info" {
		t.Errorf("orchestrator.example.yaml: metrics.listen=%q log.level=%q", c.Metrics.Listen, c.Log.Level)
	}
	if _, err := LoadFleet("fleet.example.yaml"); err == nil || !strings.Contains(err.Error(), "nodes[0] (node.example.yaml)") ||
		!strings.Contains(err.Error(), "placeholder") {
		t.Errorf("fleet.example.yaml with the node example as shipped: want its placeholder refused, got %v", err)
	}
	// As installed: both examples side by side, the placeholder replaced.
	dir := t.TempDir()
	for from, to := range map[string]string{"fleet.example.yaml": "fleet.example.yaml", node: "node.example.yaml"} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := LoadFleet(filepath.Join(dir, "fleet.example.yaml"))
	if err != nil {
		t.Errorf("fleet.example.yaml: %v", err)
	} else if len(f.Configs) != 1 || f.Configs[0].Node.Role != "control" {
		t.Errorf("fleet.example.yaml: want its one node, the control node first: %s", f.NodeNames())
	}
}

// Each example holds every key its file accepts (Keys, from the types the
// loader decodes into): the node's every key of a node file, the
// orchestrator's every key under what it reads (temporal, metrics, log),
// the fleet's every key of a fleet file.
func TestExamplesHoldEveryKey(t *testing.T) {
	var orchestrator []string
	for _, k := range Keys(Config{}) {
		if strings.HasPrefix(k, "temporal.") || strings.HasPrefix(k, "metrics.") || strings.HasPrefix(k, "log.") {
			orchestrator = append(orchestrator, k)
		}
	}
	for file, want := range map[string][]string{
		"node.example.yaml":         Keys(Config{}),
		"orchestrator.example.yaml": orchestrator,
		"fleet.example.yaml":        Keys(Fleet{}),
	} {
		if missing := missingKeys(t, file, want); len(missing) > 0 {
			t.Errorf("%s lacks %d key(s) the configuration accepts: %s", file, len(missing), strings.Join(missing, ", "))
		}
	}
	for _, k := range []string{"modules[].holders", "modules[].health.http", "modules[].container.keep",
		"foundation.containers[].image", "flip.witness.netns", "node_files[].keep", "foundation.ports", "authority.operators"} {
		if !slices.Contains(Keys(Config{}), k) {
			t.Errorf("Keys(Config{}) lacks %s: the key list is wrong", k)
		}
	}
	// The comparison can fail: an example without flip.witness.netns.
	b, err := os.ReadFile("node.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cut := regexp.MustCompile(`(?m)^\s+netns: "".*orchestrator's host.*\n`).ReplaceAll(b, nil)
	p := writeTemp(t, string(cut))
	if missing := missingKeys(t, p, Keys(Config{})); !slices.Equal(missing, []string{"flip.witness.netns"}) {
		t.Errorf("an example without flip.witness.netns: missing %v", missing)
	}
}

// missingKeys lists the keys of want that file does not hold, its lists'
// items written [] as Keys writes them.
func missingKeys(t *testing.T, file string, want []string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	leaf := map[string]bool{}
	for _, k := range want {
		leaf[k] = true
	}
	held := map[string]bool{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		if prefix != "" {
			held[prefix] = true
		}
		if leaf[prefix] {
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, prefix+"[]")
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i].Value
				if prefix != "" {
					key = prefix + "." + key
				}
				walk(n.Content[i+1], key)
			}
		}
	}
	walk(&doc, "")
	var missing []string
	for _, k := range want {
		if !held[k] {
			missing = append(missing, k)
		}
	}
	return missing
}

// A problem caused by an ADOPT_* variable names the variable, not only the
// file it overrides; a problem of the file alone does not.
func TestEnvProblemNamesTheVariable(t *testing.T) {
	t.Setenv("ADOPT_NODE_ROLE", "chief")
	_, err := Load(nodeExample(t))
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
	_, err := Load(nodeExample(t))
	if err == nil || !strings.Contains(err.Error(), `log.level: "loud" is invalid`) || !strings.Contains(err.Error(), "ADOPT_LOG_LEVEL") {
		t.Fatalf("got %v", err)
	}
	t.Setenv("ADOPT_LOG_LEVEL", "debug")
	if c, err := Load(nodeExample(t)); err != nil || c.Log.Level != "debug" {
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
