// Package logging builds the one structured logger (log/slog) that every
// adopt-worker command writes through: the agent, the orchestrator, the
// watchdog and the Temporal SDK (through its slog adapter). Lines about a
// node carry node=..., lines about a cutover module=... and step=..., so a
// log pipeline can follow one node or one module.
package logging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// FormatKey is the configuration key of the format.
const FormatKey = "log.format"

// New returns a logger writing to w in format "text" (the default when
// empty) or "json"; any other format is an error naming the key.
func New(w io.Writer, format string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%s %q is unknown: use text or json", FormatKey, format)
}

// Lines adapts code that writes plain lines to an io.Writer (the watchdog)
// to the logger: each line becomes one record at level, with the logger's
// attributes. A line that starts with the writer's own prefix ("watchdog: ")
// has it dropped, since the record says where it comes from.
func Lines(l *slog.Logger, level slog.Level, prefix string) io.Writer {
	return &lines{l: l, level: level, prefix: prefix}
}

type lines struct {
	mu     sync.Mutex
	l      *slog.Logger
	level  slog.Level
	prefix string
	buf    bytes.Buffer
}

func (w *lines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil { // no full line yet: keep it for the next write
			w.buf.Reset()
			w.buf.WriteString(line)
			return len(p), nil
		}
		msg := strings.TrimPrefix(strings.TrimRight(line, "\n"), w.prefix)
		level := w.level
		if strings.Contains(msg, "FAILED") {
			level = slog.LevelError
		}
		w.l.Log(context.Background(), level, msg)
	}
}
