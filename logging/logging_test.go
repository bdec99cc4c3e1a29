package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestJSONLinesCarryTheNode(t *testing.T) {
	var b bytes.Buffer
	l, err := New(&b, "json")
	if err != nil {
		t.Fatal(err)
	}
	w := Lines(l.With("node", "n1"), slog.LevelInfo, "watchdog: ")
	_, _ = w.Write([]byte("watchdog: flip n1-1 is confirmed; standing down\nwatchdog: REVERT OF FLIP n1-2 FAILED: x\npartial"))
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		recs = append(recs, m)
	}
	if len(recs) != 2 {
		t.Fatalf("want 2 records (the partial line waits), got %d: %s", len(recs), b.String())
	}
	if recs[0]["node"] != "n1" || recs[0]["msg"] != "flip n1-1 is confirmed; standing down" || recs[0]["level"] != "INFO" {
		t.Errorf("first record: %v", recs[0])
	}
	if recs[1]["level"] != "ERROR" {
		t.Errorf("a failed revert must be an error: %v", recs[1])
	}
}

func TestUnknownFormatNamesTheKey(t *testing.T) {
	_, err := New(&bytes.Buffer{}, "yaml")
	if err == nil || !strings.Contains(err.Error(), `log.format "yaml"`) {
		t.Fatalf("got %v", err)
	}
	if l, err := New(&bytes.Buffer{}, ""); err != nil || l == nil {
		t.Fatalf("empty format is text: %v", err)
	}
}
