package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file that is not YAML is refused naming the line and the column of the
// problem, and those of the construct it breaks.
func TestSyntaxErrorHasLineAndColumn(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"node:\n  name: n1\n  role: [control\n", "YAML syntax error at line 4, column 1: did not find expected ',' or ']' (while parsing a flow sequence that starts at line 3, column 9)"},
		{"node:\n  name: n1\n\trole: control\n", "YAML syntax error at line 3, column 1: found a tab character that violates indentation"},
		{"node:\n  name: n1\n   role: control\n", "YAML syntax error at line 3, column 8: mapping values are not allowed in this context"},
	} {
		p := filepath.Join(t.TempDir(), "node.yaml")
		if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "config file "+p+": ") {
			t.Errorf("%q: got %v\nwant %q", tc.body, err, tc.want)
		}
	}
	// A missing file is no syntax error.
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil || strings.Contains(err.Error(), "syntax") {
		t.Errorf("a missing file: %v", err)
	}
}

// A value of the wrong form that comes from the environment (a duration
// that is none) names the variable too, not only a range problem.
func TestEnvDecodeProblemNamesTheVariable(t *testing.T) {
	t.Setenv("ADOPT_FLIP_CONFIRM_TIMEOUT", "soon")
	_, err := Load(nodeExample(t))
	if err == nil || !strings.Contains(err.Error(), "flip.confirm_timeout") || !strings.Contains(err.Error(), "ADOPT_FLIP_CONFIRM_TIMEOUT") {
		t.Fatalf("want flip.confirm_timeout refused naming ADOPT_FLIP_CONFIRM_TIMEOUT, got %v", err)
	}
}
