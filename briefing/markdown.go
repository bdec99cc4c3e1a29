// The briefing as Markdown: headings, tables and lists that read the same in
// a terminal and on a rendered page. Every cell is escaped, because names
// and reasons come from the node.
package briefing

import (
	"fmt"
	"io"
	"strings"
)

// Markdown writes b as a Markdown document.
func Markdown(w io.Writer, b Brief) error {
	m := &mdWriter{w: w}
	m.f("# Briefing: node %s\n\n", esc(b.Node))
	m.f("Role **%s**, phase **%s**. Generated %s from %s. Values of files and settings are never shown: files are named by path and a shortened hash.\n\n",
		esc(b.Role), esc(b.Phase), b.GeneratedAt(), esc(b.Source))

	m.f("## Risks that need a decision\n\n")
	if len(b.Risks) == 0 {
		m.f("None found.\n\n")
	}
	m.list(b.Risks)

	m.f("## The found firewall\n\n")
	m.f("Kind: **%s**.", esc(firstNonEmpty(b.FirewallKind, "unknown (no probe yet)")))
	if b.FirewallNote != "" {
		m.f(" %s", esc(b.FirewallNote))
	}
	m.f("\n\n")
	m.table([]string{"family", "table", "owner", "chains"}, len(b.Tables), func(i int) []string {
		t := b.Tables[i]
		return []string{t.Family, t.Name, t.Owner, t.Chains}
	})
	m.f("### Open ports\n\n")
	m.table([]string{"port", "family", "direction", "from", "held by", "certain"}, len(b.Open), func(i int) []string {
		o := b.Open[i]
		certain := "yes"
		if o.Uncertain {
			certain = "no: depends on a condition the evaluator cannot decide"
		}
		return []string{o.Port, o.Family, o.Direction, firstNonEmpty(o.From, "any"), firstNonEmpty(o.Holder, "nothing listens"), certain}
	})

	m.f("## Containers\n\n")
	if b.EngineNote != "" {
		m.f("The container engine: %s\n\n", esc(b.EngineNote))
	}
	m.table([]string{"name", "image", "state", "published", "mounts"}, len(b.Containers), func(i int) []string {
		c := b.Containers[i]
		return []string{c.Name, c.Image, c.State, c.Ports, strings.Join(c.Mounts, "; ")}
	})

	m.f("## Files in custody\n\n")
	m.table([]string{"path", "state", "mode", "owner", "sha256 (short)", "converged by"}, len(b.Files), func(i int) []string {
		f := b.Files[i]
		return []string{f.Path, f.State, f.Mode, f.Owner, f.Hash, f.Module}
	})

	m.f("## The foundation\n\n")
	if b.Role != "control" {
		m.f("A member node raises no foundation.\n\n")
	} else {
		if b.GenesisState != "" {
			m.f("Genesis: %s\n\n", esc(b.GenesisState))
		}
		if b.Frozen != "" {
			m.f("Note: %s.\n\n", esc(b.Frozen))
		}
		m.table([]string{"name", "port", "held by now"}, len(b.Foundation), func(i int) []string {
			f := b.Foundation[i]
			return []string{f.Name, f.Port, firstNonEmpty(f.Holder, "free")}
		})
	}

	m.f("## Modules\n\n")
	m.table([]string{"module", "state", "predecessor", "ports", "files", "conflicts"}, len(b.Modules), func(i int) []string {
		x := b.Modules[i]
		return []string{x.Name, x.State, firstNonEmpty(x.Predecessor, "none"), x.Ports, strings.Join(x.Files, "; "), firstNonEmpty(strings.Join(x.Conflicts, "; "), "none")}
	})

	m.f("## What a flip would do now\n\n")
	m.f("Preview: %s\n\n", esc(b.PreviewState))
	m.list(b.PreviewWhy)
	m.table([]string{"port", "family", "direction", "fate", "kept by"}, len(b.Fates), func(i int) []string {
		f := b.Fates[i]
		return []string{f.Port, f.Family, f.Direction, f.Fate, f.By}
	})
	if len(b.NodeFiles) > 0 {
		m.f("Node files, converged at the flip:\n\n")
		m.list(b.NodeFiles)
	}

	m.f("## Drift\n\n")
	if len(b.Drift) == 0 {
		m.f("None recorded.\n\n")
	}
	m.list(b.Drift)
	return m.err
}

type mdWriter struct {
	w   io.Writer
	err error
}

func (m *mdWriter) f(format string, a ...any) {
	if m.err == nil {
		_, m.err = fmt.Fprintf(m.w, format, a...)
	}
}

func (m *mdWriter) list(items []string) {
	for _, it := range items {
		m.f("- %s\n", esc(it))
	}
	if len(items) > 0 {
		m.f("\n")
	}
}

func (m *mdWriter) table(head []string, n int, row func(int) []string) {
	if n == 0 {
		m.f("(none)\n\n")
		return
	}
	m.f("| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for i := 0; i < n; i++ {
		cells := row(i)
		for j := range cells {
			cells[j] = esc(cells[j])
		}
		m.f("| %s |\n", strings.Join(cells, " | "))
	}
	m.f("\n")
}

// esc keeps a value from breaking a table or starting markup: pipes,
// backticks, angle brackets and line breaks.
func esc(s string) string {
	r := strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;", "`", "\\`", "*", `\*`, "_", `\_`)
	return r.Replace(s)
}
