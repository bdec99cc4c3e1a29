// Package keyfile reads the configuration files whose meaning is a list of
// keys (sshd_config and its drop-ins, env files, INI files) well enough to
// merge them per key, so a module can name the settings of a found file that
// are load-bearing (files[].keep) and converge everything else.
//
// It never interprets values: a key's value is the exact text of its lines,
// so a merge keeps the node's bytes for a kept key, and a comparison is a
// comparison of text. Sections (INI's [name], sshd's Match blocks) scope the
// keys under them: a key is named "section.key" there, and plain "key" before
// the first section.
package keyfile

import (
	"fmt"
	"path"
	"strings"
)

// Format names a file syntax this package reads.
type Format string

const (
	// Spaced is "Key value" (sshd_config, ssh_config and drop-ins): keys
	// are case-insensitive and a key may repeat (Port 22, Port 2222).
	Spaced Format = "spaced"
	// Env is "KEY=value", optionally after "export ".
	Env Format = "env"
	// INI is "[section]" headers with "key = value" lines.
	INI Format = "ini"
)

// Formats lists the formats by name, for validation messages.
var Formats = []Format{Spaced, Env, INI}

// ParseFormat checks a configured format name.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("format %q is not one of spaced, env, ini", s)
}

// Infer guesses a file's format from its path, for files whose module did
// not name one. It recognises only the paths whose syntax is certain; an
// empty result means "unknown", which a keep list must not rely on.
func Infer(p string) Format {
	base := path.Base(p)
	dir := path.Base(path.Dir(p))
	switch {
	case base == "sshd_config" || base == "ssh_config" ||
		((dir == "sshd_config.d" || dir == "ssh_config.d") && strings.HasSuffix(base, ".conf")):
		return Spaced
	case base == ".env" || strings.HasSuffix(base, ".env") || dir == "default" && path.Base(path.Dir(path.Dir(p))) == "etc" ||
		base == "environment":
		return Env
	case strings.HasSuffix(base, ".ini"):
		return INI
	}
	return ""
}

// line is one line of a file: a key line (key set, the value is the rest), or
// anything else (comments, blanks, section headers) kept as it is.
type line struct {
	raw     string
	key     string // full key ("section.key"), "" for a non-key line
	section string // the section this line is in ("" before the first)
	header  bool   // the line opens a section
}

// File is a parsed file: its lines in order.
type File struct {
	format Format
	lines  []line
}

// Parse reads content in the given format. It does not fail: a line it
// cannot read as a key is kept as text and takes no part in a merge.
func Parse(f Format, content []byte) *File {
	out := &File{format: f}
	section := ""
	text := strings.TrimSuffix(string(content), "\n")
	if text == "" && len(content) == 0 {
		return out
	}
	for _, raw := range strings.Split(text, "\n") {
		l := line{raw: raw, section: section}
		trimmed := strings.TrimSpace(strings.TrimSuffix(raw, "\r"))
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#") || (f == INI && strings.HasPrefix(trimmed, ";")):
		case f == INI && strings.HasPrefix(trimmed, "[") && strings.HasSuffix(trimmed, "]"):
			section = strings.TrimSpace(trimmed[1 : len(trimmed)-1])
			l.section, l.header = section, true
		case f == Spaced:
			k, _, _ := strings.Cut(strings.Join(strings.Fields(trimmed), " "), " ")
			k = strings.ToLower(k)
			if k == "match" {
				// A Match block lasts to the next Match or the end: it is
				// a section named by its criteria.
				section = strings.ToLower(strings.Join(strings.Fields(trimmed)[1:], " "))
				l.section, l.header = section, true
				break
			}
			l.key = qualify(section, k)
		case f == Env:
			k, _, ok := strings.Cut(strings.TrimPrefix(trimmed, "export "), "=")
			if k = strings.TrimSpace(k); ok && k != "" {
				l.key = k
			}
		case f == INI:
			k, _, ok := strings.Cut(trimmed, "=")
			if k = strings.TrimSpace(k); ok && k != "" {
				l.key = qualify(section, k)
			}
		}
		out.lines = append(out.lines, l)
	}
	return out
}

func qualify(section, key string) string {
	if section == "" {
		return key
	}
	return section + "." + key
}

// NormalizeKey puts a key as an operator writes it (keep: [Port]) in the form
// Parse gives it: sshd's keys are case-insensitive.
func NormalizeKey(f Format, key string) string {
	if f != Spaced {
		return key
	}
	return strings.ToLower(key)
}

// Values maps each key to its value: the text of all its lines, in order
// (a repeated key is one value of several lines).
func (f *File) Values() map[string]string {
	out := map[string]string{}
	for _, l := range f.lines {
		if l.key == "" {
			continue
		}
		if v, ok := out[l.key]; ok {
			out[l.key] = v + "\n" + strings.TrimSpace(l.raw)
		} else {
			out[l.key] = strings.TrimSpace(l.raw)
		}
	}
	return out
}

// Keys lists the keys in file order, each once.
func (f *File) Keys() []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range f.lines {
		if l.key != "" && !seen[l.key] {
			seen[l.key] = true
			out = append(out, l.key)
		}
	}
	return out
}

// Bytes writes the file back.
func (f *File) Bytes() []byte {
	if len(f.lines) == 0 {
		return nil
	}
	var b strings.Builder
	for _, l := range f.lines {
		b.WriteString(l.raw)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}
