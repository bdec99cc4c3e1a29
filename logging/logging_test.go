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
	l, err := New(&b, Options{Format: "json"})
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
	_, err := New(&bytes.Buffer{}, Options{Format: "yaml"})
	if err == nil || !strings.Contains(err.Error(), `log.format "yaml"`) {
		t.Fatalf("got %v", err)
	}
	if l, err := New(&bytes.Buffer{}, Options{}); err != nil || l == nil {
		t.Fatalf("empty format is text: %v", err)
	}
}

// Under journald each line carries its priority, so that journalctl -p err
// shows a failed revert; log.level drops what is below it.
func TestJournalPrioritiesAndLevel(t *testing.T) {
	var b bytes.Buffer
	l, err := New(&b, Options{Level: "info", Journal: true})
	if err != nil {
		t.Fatal(err)
	}
	w := Lines(l.With("node", "n1"), slog.LevelInfo, "watchdog: ")
	_, _ = w.Write([]byte("watchdog: flip n1-1 is due\nwatchdog: REVERT OF FLIP n1-1 FAILED: x\n"))
	l.Debug("not shown")
	l.Warn("careful")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{"<6>", "<3>", "<4>"}
	if len(lines) != len(want) {
		t.Fatalf("want %d lines, got %q", len(want), lines)
	}
	for i, p := range want {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d %q does not start with %s", i, lines[i], p)
		}
	}
	if !strings.Contains(lines[1], "REVERT OF FLIP n1-1 FAILED") {
		t.Errorf("the failed revert is not the error line: %q", lines[1])
	}
	if _, err := New(&b, Options{Level: "verbose"}); err == nil || !strings.Contains(err.Error(), LevelKey) {
		t.Errorf("an unknown level: %v", err)
	}
}
