package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/nodestate"
)

// checkRun runs adopt-worker with args, returning stdout, the error's text
// and the exit status.
func checkRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	msg := errb.String()
	if err != nil {
		msg += err.Error()
	}
	return out.String(), msg, exitStatus(err)
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// check passes a good node file (exit 0, saying what it checked), and
// refuses a bad one with exit 78 and every problem at once: the file's
// keys, the Temporal settings and the node's paths.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", "node: {name: n1, root: "+dir+", state_dir: "+dir+"/state}\nauthority: {unsigned: true}\n")
	out, msg, code := checkRun(t, "check", "--config", good)
	if code != 0 || !strings.Contains(out, good+": ok: node n1 (member)") || !strings.Contains(out, "Temporal at 127.0.0.1:7233") {
		t.Fatalf("a good file: exit %d, %q %q", code, out, msg)
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
		t.Fatalf("check created node.state_dir: %v", err)
	}
	badKeys := writeFile(t, dir, "keys.yaml", "node: {name: n1, role: chief}\nflip: {confirm_timeout: 120}\nauthority: {unsigned: true}\n")
	_, msg, code = checkRun(t, "check", "--config", badKeys)
	if code != exitConfig || !strings.Contains(msg, "node.role") || !strings.Contains(msg, "flip.confirm_timeout: 120 has no unit") {
		t.Fatalf("bad keys: exit %d, %s", code, msg)
	}
	badHost := writeFile(t, dir, "host.yaml", "node: {name: n1, root: "+dir+"/none, netns: /run/netns/adopt-check-none, state_dir: /nonexistent/a/b}\n"+
		"temporal: {tls: {ca: "+dir+"/no-ca.pem}}\nauthority: {unsigned: true}\n")
	_, msg, code = checkRun(t, "check", "--config", badHost)
	for _, want := range []string{"has 4 problem(s)", "no-ca.pem", "node.root: \"" + dir + "/none\" is not a directory", "node.netns: \"/run/netns/adopt-check-none\" does not exist", "node.state_dir: \"/nonexistent/a/b\" does not exist"} {
		if code != exitConfig || !strings.Contains(msg, want) {
			t.Errorf("bad host: exit %d, want %q in:\n%s", code, want, msg)
		}
	}
	// A flip awaiting confirmation: the agent must start to re-arm its
	// watchdog, so a problem outside the file exits 0, saying so.
	state := filepath.Join(dir, "pending")
	if err := nodestate.New(state).UpdateFlip(func(*nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		return &nodestate.FlipRecord{ID: "n1-1", Node: "n1", State: nodestate.FlipApplying, Deadline: time.Now().Add(time.Minute)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	pending := writeFile(t, dir, "pending.yaml", "node: {name: n1, root: "+dir+"/none, state_dir: "+state+"}\nauthority: {unsigned: true}\n")
	_, msg, code = checkRun(t, "check", "--config", pending)
	if code != 0 || !strings.Contains(msg, "node.root") || !strings.Contains(msg, "flip n1-1 awaits confirmation") {
		t.Errorf("pending flip: exit %d, %s", code, msg)
	}
	// The orchestrator's file needs no node.
	orch := writeFile(t, dir, "orch.yaml", "temporal: {address: 127.0.0.1:7233}\n")
	if out, msg, code := checkRun(t, "check", "--orchestrator", "--config", orch); code != 0 || !strings.Contains(out, "ok: the orchestrator's configuration") {
		t.Errorf("orchestrator: exit %d, %q %s", code, out, msg)
	}
}

// Without --config (nor ADOPT_CONFIG, nor ADOPT_NODE_NAME) every node
// command says no configuration was given, with the flag and the file to
// try, rather than the first key an empty configuration lacks.
func TestNoConfigurationGiven(t *testing.T) {
	t.Setenv("ADOPT_CONFIG", "")
	os.Unsetenv("ADOPT_NODE_NAME")
	for _, cmd := range []string{"check", "run", "probe", "brief", "watchdog"} {
		_, msg, code := checkRun(t, cmd)
		if code != exitConfig || !strings.Contains(msg, "no configuration given: pass the node's configuration with --config FILE") ||
			!strings.Contains(msg, "/etc/adoption/node.yaml") || strings.Contains(msg, "node.name") {
			t.Errorf("%s: exit %d, %s", cmd, code, msg)
		}
	}
}
