// Package output is the one vocabulary of output both binaries speak:
// -o/--output text|json|jsonl for the format (--json, kept for scripts
// that use it, is -o json), --out FILE for a file, --local for times in
// the host's zone. It parses and checks the flags and writes JSON; what
// each command renders as text stays with the command.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// The formats of -o/--output.
const (
	Text  = "text"
	JSON  = "json"
	JSONL = "jsonl"
)

// Formats are -o's values, for help and completion.
var Formats = []string{Text, JSON, JSONL}

// Flags are the output flags as parsed.
type Flags struct {
	Format string // -o/--output
	JSON   bool   // --json: -o json, kept for scripts
	Local  bool   // --local: times in the host's zone
	fs     *pflag.FlagSet
}

// Register adds -o/--output, --json and --local to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVarP(&f.Format, "output", "o", Text, "output format: "+strings.Join(Formats, ", ")+" (json is stable, for scripts; jsonl is one JSON document a line)")
	fs.BoolVar(&f.JSON, "json", false, "the same as -o json (kept for scripts; prefer -o json)")
	fs.BoolVar(&f.Local, "local", false, "show times in this host's zone, with its offset (default UTC, with Z)")
}

// Resolve checks the flags and settles the format: an unknown format, or
// --json beside another -o, is an error naming both; hint is added to an
// unknown format's error (what the command writes to files with).
func (f *Flags) Resolve(hint string) error {
	switch f.Format {
	case Text, JSON, JSONL:
	default:
		msg := fmt.Sprintf("--output %q: want one of %s", f.Format, strings.Join(Formats, ", "))
		if hint != "" {
			msg += " (" + hint + ")"
		}
		return fmt.Errorf("%s", msg)
	}
	if f.JSON {
		if f.fs != nil && f.fs.Changed("output") && f.Format != JSON {
			return fmt.Errorf("--json and --output %s contradict each other: --json is -o json; give one", f.Format)
		}
		f.Format = JSON
	}
	return nil
}

// IsJSON says whether the format is json or jsonl.
func (f *Flags) IsJSON() bool { return f.Format == JSON || f.Format == JSONL }

// Write writes v as the format asks: indented (json), one line (jsonl).
func (f *Flags) Write(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	if f.Format != JSONL {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// AsksJSON says whether args ask for JSON, for an error reported before
// the flags parsed.
func AsksJSON(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--json" || a == "--json=true":
			return true
		case a == "-o" || a == "--output":
			if i+1 < len(args) && strings.HasPrefix(args[i+1], "json") {
				return true
			}
		case strings.HasPrefix(a, "--output=json") || strings.HasPrefix(a, "-ojson") || strings.HasPrefix(a, "-o=json"):
			return true
		}
	}
	return false
}

// ExitCode is one row of a binary's exit-code table: its status and what
// it means (lines after the first indented under it).
type ExitCode struct {
	Code    int
	Meaning string
}

// ExitCodesHelp is a binary's exit-code table as every --help ends.
func ExitCodesHelp(codes []ExitCode) string {
	width := 0
	for _, e := range codes {
		width = max(width, len(fmt.Sprint(e.Code)))
	}
	var b strings.Builder
	b.WriteString("Exit codes:")
	for _, e := range codes {
		fmt.Fprintf(&b, "\n  %-*d  %s", width, e.Code, strings.ReplaceAll(e.Meaning, "\n", "\n"+strings.Repeat(" ", width+4)))
	}
	return b.String()
}
