package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"adoption/codec"
	"adoption/config"
	temporalconn "adoption/connect"
)

// The dictionary an attacker with the history tries: five common
// passwords, the planted one among them.
var dictionary = []string{"letmein", "qwerty123", "hunter2", "trustno1", "changeme"}

const dictionaryNode = `
temporal: {address: ADDR, KEYLINE}
node: {name: db1, root: /, state_dir: /var/lib/adoption-codec-test}
authority: {unsigned: true}
modules:
  - name: db
    ports: ["5432/tcp"]
    container: {name: db, image: "postgres:16", env: ["POSTGRES_PASSWORD=hunter2", "POSTGRES_DB=app"]}
    files: [{path: /etc/db/password, content: "hunter2", mode: "0600"}]
`

// planEcho records a plan in a history as the product does: as a
// workflow's input, an activity's input and result, and the workflow's
// result.
func planEcho(ctx workflow.Context, p config.Plan) (config.Plan, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out config.Plan
	err := workflow.ExecuteActivity(ctx, "PlanEchoActivity", p).Get(ctx, &out)
	return out, err
}

func planEchoActivity(_ context.Context, p config.Plan) (config.Plan, error) {
	return p, nil
}

// TestCodecHistoryIsEncryptedAndDictionaryProof runs a workflow over a
// plan whose env holds POSTGRES_PASSWORD=hunter2 and whose declared file
// holds it too, on a dev server whose Web UI decodes through the codec
// server. With the codec key, the stored history is binary/encrypted, the
// codec server (and the CLI through it) decodes it, and a five-word
// dictionary recovers nothing from any string of it. Without the key the
// same attack recovers the password (the test can fail); with keyed
// digests but no encryption it recovers nothing.
func TestCodecHistoryIsEncryptedAndDictionaryProof(t *testing.T) {
	needE2E(t)
	keyPath := writeCodecKey(t, 0x5a)
	codecPort := freePort(t)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", codecPort)
	srv := startDevServerArgs(t, "--ui-codec-endpoint", endpoint)

	load := func(keyLine string) *config.Config {
		p := filepath.Join(t.TempDir(), "db1.yaml")
		body := strings.NewReplacer("ADDR", srv.Addr(), "KEYLINE", keyLine).Replace(dictionaryNode)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	keyed, plain := load("codec_key_file: "+keyPath), load("namespace: default")

	csLog := startCodecServer(t, keyPath, codecPort, "http://127.0.0.1:8233")

	run := func(name string, tc config.Temporal, plan config.Plan) string {
		t.Helper()
		c, err := temporalconn.Dial(context.Background(), tc, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		queue := "codec-test-" + name
		w := worker.New(c, queue, worker.Options{})
		w.RegisterWorkflowWithOptions(planEcho, workflow.RegisterOptions{Name: "PlanEcho"})
		w.RegisterActivityWithOptions(planEchoActivity, activity.RegisterOptions{Name: "PlanEchoActivity"})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		id := "codec-test/" + name
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "PlanEcho", plan)
		if err != nil {
			t.Fatal(err)
		}
		var back config.Plan
		if err := r.Get(ctx, &back); err != nil {
			t.Fatal(err)
		}
		if back.Hash() != plan.Hash() {
			t.Fatalf("%s: the plan came back changed", name)
		}
		return id
	}

	// With the codec key: encrypted, and nothing to guess.
	id := run("keyed", keyed.Temporal, keyed.Plan())
	raw := historyOf(t, srv.client(t), id)
	rawJSON, err := protojson.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	shown, errOut, code := runCmd(t, srv.spec.Bin, "workflow", "show", "--workflow-id", id, "--address", srv.Addr(), "--output", "json")
	if code != 0 {
		t.Fatalf("temporal workflow show: %s", errOut)
	}
	if !strings.Contains(shown, codec.Encoding) && !strings.Contains(shown, base64.StdEncoding.EncodeToString([]byte(codec.Encoding))) {
		t.Fatalf("the stored history shows no %s payload:\n%s", codec.Encoding, excerpt(shown, 2000))
	}
	history := string(rawJSON) + "\n" + shown
	if hits := dictionaryHits(history); len(hits) > 0 {
		t.Fatalf("with the codec key, the dictionary recovered: %v", hits)
	}
	if readable(history, "POSTGRES_PASSWORD") || readable(history, `"db1"`) {
		t.Fatal("with the codec key, the plan's names are readable in the history")
	}

	// The codec server decodes it for the UI's origin; the CLI reads it
	// through the codec server.
	var input *commonpb.Payloads
	for _, e := range raw.Events {
		if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			input = a.GetInput()
		}
	}
	body, _ := protojson.Marshal(input)
	req, _ := http.NewRequest(http.MethodPost, endpoint+"/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	req.Header.Set("Origin", "http://127.0.0.1:8233")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the codec server does not answer: %v\n%s", err, csLog.String())
	}
	var decoded commonpb.Payloads
	b := new(bytes.Buffer)
	_, _ = b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || protojson.Unmarshal(b.Bytes(), &decoded) != nil || len(decoded.Payloads) != 1 {
		t.Fatalf("codec server: %d %s", resp.StatusCode, b)
	}
	var p config.Plan
	if err := json.Unmarshal(decoded.Payloads[0].Data, &p); err != nil || p.Node != "db1" || p.Digests != config.DigestHMAC {
		t.Fatalf("the codec server's decoding is not the plan: %v %s", err, decoded.Payloads[0].Data)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "http://127.0.0.1:8233" {
		t.Fatalf("no CORS answer for the UI's origin: %v", resp.Header)
	}
	viaCodec, errOut, code := runCmd(t, srv.spec.Bin, "workflow", "show", "--workflow-id", id, "--address", srv.Addr(), "--output", "json", "--codec-endpoint", endpoint)
	if code != 0 || !readable(viaCodec, "POSTGRES_PASSWORD") || !readable(viaCodec, `"node":"db1"`) || strings.Contains(viaCodec, codec.Encoding) {
		t.Fatalf("temporal workflow show --codec-endpoint does not show the decoded plan (exit %d): %s\n%s", code, errOut, excerpt(viaCodec, 2000))
	}
	if hits := dictionaryHits(viaCodec); len(hits) > 0 {
		t.Fatalf("decoded, the plan still must carry keyed digests only; the dictionary recovered: %v", hits)
	}

	// Keyed digests alone (no encryption): the names show, no value does.
	id = run("digests-only", config.Temporal{Address: srv.Addr(), Namespace: "default"}, keyed.Plan())
	rawJSON, _ = protojson.Marshal(historyOf(t, srv.client(t), id))
	if hits := dictionaryHits(string(rawJSON)); len(hits) > 0 {
		t.Fatalf("with keyed digests, the dictionary recovered: %v", hits)
	}

	// Without a key the same attack succeeds: this is what the key prevents.
	id = run("plain", plain.Temporal, plain.Plan())
	rawJSON, _ = protojson.Marshal(historyOf(t, srv.client(t), id))
	hits := dictionaryHits(string(rawJSON))
	if len(hits) == 0 || !strings.Contains(strings.Join(hits, " "), "hunter2") {
		t.Fatalf("without a key the dictionary should recover hunter2 from the plain sha256 digests; it found %v", hits)
	}
	t.Logf("without a key the dictionary recovered: %v", hits)
}

// historyStrings is every string of a history's JSON, base64 payloads
// opened and the JSON inside them walked too.
func historyStrings(history string) []string {
	var strs []string
	var collect func(s string, depth int)
	collect = func(s string, depth int) {
		strs = append(strs, s)
		if depth > 3 {
			return
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding} {
			if b, err := enc.DecodeString(s); err == nil && len(b) > 0 {
				collect(string(b), depth+1)
				break
			}
		}
		var v any
		if json.Unmarshal([]byte(s), &v) == nil {
			walkStrings(v, func(x string) { collect(x, depth+1) })
		}
	}
	collect(history, 0) // one JSON document
	for _, line := range strings.Split(history, "\n") {
		collect(line, 0) // or several, one a line
	}
	return strs
}

// readable reports whether s is in some string of the history.
func readable(history, s string) bool {
	for _, x := range historyStrings(history) {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// dictionaryHits runs the dictionary against every string of a history:
// each word as itself, and its sha256 in hex and base64.
func dictionaryHits(history string, words ...string) []string {
	if len(words) == 0 {
		words = dictionary
	}
	strs := historyStrings(history)
	var hits []string
	for _, w := range words {
		sum := sha256.Sum256([]byte(w))
		forms := map[string]string{
			"sha256 hex":    hex.EncodeToString(sum[:]),
			"sha256 base64": base64.StdEncoding.EncodeToString(sum[:]),
			"sha256 raw64":  base64.RawURLEncoding.EncodeToString(sum[:]),
			"plain":         w,
		}
		for kind, f := range forms {
			for _, s := range strs {
				if strings.Contains(s, f) {
					hits = append(hits, fmt.Sprintf("%s (%s)", w, kind))
					break
				}
			}
		}
	}
	return hits
}

func walkStrings(v any, f func(string)) {
	switch t := v.(type) {
	case string:
		f(t)
	case []any:
		for _, e := range t {
			walkStrings(e, f)
		}
	case map[string]any:
		for k, e := range t {
			f(k)
			walkStrings(e, f)
		}
	}
}

// writeCodecKey writes a 0600 codec key file and returns its path.
func writeCodecKey(t *testing.T, fill byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "codec.key")
	if err := os.WriteFile(p, bytes.Repeat([]byte{fill}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startCodecServer runs adopt-worker codec-server as make dev-server does,
// with a configuration that names only the key, and waits until it
// answers the UI origin's preflight.
func startCodecServer(t *testing.T, keyPath string, port int, origin string) *bytes.Buffer {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "codec.yaml")
	if err := os.WriteFile(cfg, []byte("temporal: {codec_key_file: "+keyPath+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cs := exec.Command(filepath.Join(bin, "adopt-worker"), "codec-server", "--config", cfg,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--ui-origin", origin)
	log := &bytes.Buffer{}
	cs.Stdout, cs.Stderr = log, log
	if err := cs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Process.Kill(); _ = cs.Wait() })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodOptions, fmt.Sprintf("http://127.0.0.1:%d/decode", port), nil)
		req.Header.Set("Origin", origin)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return log
			}
		}
	}
	t.Fatalf("the codec server does not answer on 127.0.0.1:%d:\n%s", port, log)
	return nil
}
