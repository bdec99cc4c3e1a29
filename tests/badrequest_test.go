package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

const badRequestPlan = `modules:
  - name: web
    ports: ["80/tcp"]
    holders: ["adopt-sandbox"]
    files:
      - path: /srv/web/web.conf
        content: "mesh web\n"
  - name: app
    ports: ["8080/tcp"]
flip:
  confirm_timeout: 30s
`

// badRequest is one case of tests/testdata/bad-requests: either a CLI
// command (arg lines, run with the node's configuration or another node's)
// or a raw signal with a payload as JSON.
type badRequest struct {
	args     []string
	config   string // "" (the node's), other, none
	exit     string // zero or nonzero
	expects  []string
	statuses []string // in last_error, once the request was served
	signal   string
	node     string
	payload  string
	events   []string
	errs     []string
	last     bool // run after every other case (a corrupt signal may stop the node taking signals)
}

func parseBadRequest(t *testing.T, raw string, r *strings.Replacer) badRequest {
	t.Helper()
	var c badRequest
	for _, line := range strings.Split(raw, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("corpus line %q is not 'key: value'", line)
		}
		val = r.Replace(val)
		switch key {
		case "arg":
			c.args = append(c.args, val)
		case "config":
			c.config = val
		case "exit":
			c.exit = val
		case "expect":
			c.expects = append(c.expects, val)
		case "status":
			c.statuses = append(c.statuses, val)
		case "signal":
			c.signal = val
		case "node":
			c.node = val
		case "payload":
			c.payload = val
		case "event":
			c.events = append(c.events, val)
		case "error":
			c.errs = append(c.errs, val)
		case "run":
			c.last = val == "last"
		default:
			t.Fatalf("unknown corpus key %q", key)
		}
	}
	if len(c.args) == 0 && c.signal == "" {
		t.Fatal("corpus case has neither arg nor signal lines")
	}
	if len(c.args) > 0 && c.exit == "" {
		t.Fatal("corpus case has no exit line")
	}
	return c
}

// TestBadRequestChangesNothing runs every request of the bad-request corpus
// against an adopted node: an unknown node, a flip before the node is
// ready, a retry of a module that did not fail, names built to inject into
// rule comments, container names or paths, a start with another node's
// configuration, raw signals with hostile or corrupt payloads. Each gets a
// clear answer naming the thing and what to do (a refused CLI request exits
// non-zero; a refused signal is recorded as an event), the node keeps
// taking requests, and the node's state (ruleset, files under the root,
// state_dir) hashes the same before and after.
func TestBadRequestChangesNothing(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNodeWith(t, sandbox.Spec{Name: "e2eifbad", Index: 180,
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp", "8080/tcp"}),
		Files:   map[string]string{"/srv/web/web.conf": "predecessor web\n"}}, srv.Addr(), badRequestPlan)
	const other = "e2eifother"
	b, err := os.ReadFile(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	otherCfg := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(otherCfg, []byte(strings.Replace(string(b), "name: "+n.Name, "name: "+other, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	startWorker(t, n)
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("start: %s%s", out, errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	c := srv.client(t)

	files, err := filepath.Glob("testdata/bad-requests/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad-request corpus: %v", err)
	}
	long := strings.Repeat("a", 300)
	repl := strings.NewReplacer("{{NODE}}", n.Name, "{{OTHER}}", other, "{{LONG}}", long)
	type corpusCase struct {
		name string
		bc   badRequest
	}
	var cases, last []corpusCase
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cc := corpusCase{strings.TrimSuffix(filepath.Base(f), ".txt"), parseBadRequest(t, string(raw), repl)}
		if cc.bc.last {
			last = append(last, cc)
		} else {
			cases = append(cases, cc)
		}
	}
	for _, cc := range append(cases, last...) {
		bc := cc.bc
		t.Run(cc.name, func(t *testing.T) {
			before := stateHash(t, n)
			sent := time.Now()
			if len(bc.args) > 0 {
				args := append([]string(nil), bc.args...)
				switch bc.config {
				case "":
					args = append(args, "--config", n.cfg)
				case "other":
					args = append(args, "--config", otherCfg)
				case "none":
				default:
					t.Fatalf("unknown config %q", bc.config)
				}
				out, errs, code := adopt(t, args...)
				if (bc.exit == "zero") != (code == 0) {
					t.Errorf("adopt %q: exit %d, want %s:\n%s%s", args, code, bc.exit, out, errs)
				}
				for _, e := range bc.expects {
					if !strings.Contains(out+errs, e) {
						t.Errorf("adopt %q: answer lacks %q:\n%s%s", args, e, out, errs)
					}
				}
				if len(bc.statuses) > 0 {
					waitFor(t, n, "the request to be served and refused", func(st workflows.State) bool {
						for _, s := range bc.statuses {
							if !strings.Contains(st.LastError, s) {
								return false
							}
						}
						return true
					})
				}
				waitEvents(t, n, sent, bc.events)
			} else {
				node := n.Name
				if bc.node != "" {
					node = bc.node
				}
				err := c.SignalWorkflow(context.Background(), workflows.WorkflowID(node), "", bc.signal, json.RawMessage(bc.payload))
				for _, e := range bc.errs {
					if err == nil || !strings.Contains(strings.ToLower(err.Error()), e) {
						t.Errorf("signal %s to %s: error %v, want one saying %q", bc.signal, node, err, e)
					}
				}
				if len(bc.errs) == 0 && err != nil {
					t.Fatalf("signal %s: %v", bc.signal, err)
				}
				waitEvents(t, n, sent, bc.events)
			}
			// The node keeps taking requests of every kind: a signal the
			// node refuses at once, by its own rules, shows as an event.
			canary := time.Now()
			if err := c.SignalWorkflow(context.Background(), workflows.WorkflowID(n.Name), "", workflows.SignalDriftAccept, workflows.RequestInput{}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				st, err := status(t, n)
				if err == nil && eventSince(st, canary, "refused drift-accept: node "+n.Name+" has no drift to accept") {
					if st.Phase != workflows.PhaseAdopted || st.MigratedCount() != 0 || len(st.Queue) != 0 {
						t.Errorf("the node moved: phase %s, %d migrated, queue %+v", st.Phase, st.MigratedCount(), st.Queue)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after this request the node no longer takes signals: a valid drift-accept signal sent at %s was never answered (err %v, last events %+v)",
						canary.UTC().Format(time.StampMilli), err, st.Events[max(0, len(st.Events)-4):])
				}
				time.Sleep(300 * time.Millisecond)
			}
			if after := stateHash(t, n); after != before {
				t.Fatalf("a bad request changed the node:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	if _, err := status(t, &node{Node: sandbox.New(sandbox.Spec{Name: other}), cfg: otherCfg}); err == nil || !strings.Contains(err.Error(), "no migration workflow") {
		t.Errorf("a bad request started a workflow for %s: %v", other, err)
	}
}

// eventSince says whether an event containing text was recorded at or
// after since (the workflow's clock is the server's, on this host).
func eventSince(st workflows.State, since time.Time, text string) bool {
	for _, e := range st.Events {
		if !e.At.Before(since) && strings.Contains(e.Text, text) {
			return true
		}
	}
	return false
}

func waitEvents(t *testing.T, n *node, since time.Time, events []string) {
	t.Helper()
	if len(events) == 0 {
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := status(t, n)
		ok := err == nil
		for _, e := range events {
			ok = ok && eventSince(st, since, e)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event %q since %s (err %v); last events %+v", events, since.UTC().Format(time.StampMilli), err, st.Events[max(0, len(st.Events)-4):])
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// stateHash is nodeHash (ruleset, files under the root) with every file
// under state_dir (custody store, markers) added.
func stateHash(t *testing.T, n *node) string {
	t.Helper()
	h := sha256.New()
	h.Write([]byte(nodeHash(t, n, n.StateDir)))
	hashTree(t, h, n.StateDir)
	return hex.EncodeToString(h.Sum(nil))
}
