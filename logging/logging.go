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

// FormatKey and LevelKey are the configuration keys of the format and the
// lowest level written.
const (
	FormatKey = "log.format"
	LevelKey  = "log.level"
)

// Options say how the logger writes.
type Options struct {
	Format string // text (the default when empty) or json
	Level  string // debug, info (the default when empty), warn or error
	// Journal prefixes each line with its syslog priority (<3> for an
	// error), which journald reads from a unit's stderr, so that
	// `journalctl -p err` shows the errors. Set it when JOURNAL_STREAM is.
	Journal bool
}

// Levels are the accepted values of log.level.
var Levels = []string{"debug", "info", "warn", "error"}

// ParseLevel reads a log.level value; any other is an error naming the key.
func ParseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%s %q is unknown: use %s", LevelKey, s, strings.Join(Levels, ", "))
}

// New returns a logger writing to w as o says; an unknown format or level
// is an error naming the key.
func New(w io.Writer, o Options) (*slog.Logger, error) {
	level, err := ParseLevel(o.Level)
	if err != nil {
		return nil, err
	}
	var jw *journalWriter
	if o.Journal {
		jw = &journalWriter{w: w}
		w = jw
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch o.Format {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("%s %q is unknown: use text or json", FormatKey, o.Format)
	}
	if jw != nil {
		h = &journalHandler{Handler: h, w: jw}
	}
	return slog.New(h), nil
}

// Priority is the syslog priority journald gives a line prefixed "<N>".
func Priority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3 // err
	case l >= slog.LevelWarn:
		return 4 // warning
	case l >= slog.LevelInfo:
		return 6 // info
	}
	return 7 // debug
}

// journalWriter prefixes what it writes with the priority its handler set
// for the record being written; journalHandler holds mu across the write.
type journalWriter struct {
	mu   sync.Mutex
	w    io.Writer
	prio int
}

func (j *journalWriter) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(j.w, "<%d>%s", j.prio, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

type journalHandler struct {
	slog.Handler
	w *journalWriter
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	h.w.prio = Priority(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &journalHandler{Handler: h.Handler.WithAttrs(as), w: h.w}
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{Handler: h.Handler.WithGroup(name), w: h.w}
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
