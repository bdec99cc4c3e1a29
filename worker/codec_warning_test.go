package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without a codec key the orchestrator says so once, at start, before it
// dials; with one it does not.
func TestNoCodecKeyWarnsOnce(t *testing.T) {
	t.Setenv("ADOPT_TEMPORAL_ADDRESS", "127.0.0.1:1")
	var out, errb bytes.Buffer
	_ = run(context.Background(), []string{"orchestrate", "--build-id", "test"}, &out, &errb)
	if n := strings.Count(errb.String(), "temporal.codec_key_file is not set"); n != 1 {
		t.Fatalf("warned %d times:\n%s", n, errb.String())
	}

	key := filepath.Join(t.TempDir(), "codec.key")
	if err := os.WriteFile(key, bytes.Repeat([]byte{1}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ADOPT_TEMPORAL_CODEC_KEY_FILE", key)
	errb.Reset()
	err := run(context.Background(), []string{"orchestrate", "--build-id", "test"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "cannot reach Temporal") {
		t.Fatalf("with a key, the orchestrator did not get as far as dialling: %v", err)
	}
	if strings.Contains(errb.String(), "codec_key_file is not set") {
		t.Fatalf("warned with a key:\n%s", errb.String())
	}
}
