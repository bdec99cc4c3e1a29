// Reasons for people: grouped (one line for a port refused in both ip and
// ip6), saying why a port would close, and wrapped for a terminal.
package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"adoption/workflows"
)

// familyRe finds the family in a preview reason: "8080/tcp (input, ip) is
// open now and would close: ...".
var familyRe = regexp.MustCompile(`^(.*\(\w+, )(ip6?)((?:, [^)]*)?\).*)$`)

// groupFamilies merges reasons that differ only by their family into one
// line naming both ("(input, ip and ip6)"), keeping the first one's place.
func groupFamilies(reasons []string) []string {
	type group struct {
		prefix, suffix string
		fams           []string
	}
	var out []string
	idx := map[string]int{} // prefix+suffix -> index in groups
	var groups []*group
	order := []any{} // either a string (kept as is) or *group
	for _, r := range reasons {
		m := familyRe.FindStringSubmatch(r)
		if m == nil {
			order = append(order, r)
			continue
		}
		key := m[1] + "\x00" + m[3]
		if i, ok := idx[key]; ok {
			groups[i].fams = append(groups[i].fams, m[2])
			continue
		}
		idx[key] = len(groups)
		g := &group{prefix: m[1], suffix: m[3], fams: []string{m[2]}}
		groups = append(groups, g)
		order = append(order, g)
	}
	for _, o := range order {
		switch v := o.(type) {
		case string:
			out = append(out, v)
		case *group:
			out = append(out, v.prefix+strings.Join(v.fams, " and ")+v.suffix)
		}
	}
	return out
}

// portRe is the port a preview reason is about.
var portRe = regexp.MustCompile(`^(?:management port )?(\d+)(?:-(\d+))?/(tcp|udp)\b`)

// explainReasons groups the reasons and says why each port would close
// when the node's own plan explains it: a module that declares the port
// and is not migrated yet.
func explainReasons(reasons []string, s *workflows.State) []string {
	out := groupFamilies(reasons)
	for i, r := range out {
		m := portRe.FindStringSubmatch(r)
		if m == nil {
			continue
		}
		lo, _ := strconv.Atoi(m[1])
		hi := lo
		if m[2] != "" {
			hi, _ = strconv.Atoi(m[2])
		}
		for _, pm := range s.Plan.Modules {
			for _, p := range pm.Ports {
				if p.Proto != m[3] || int(p.Num) < lo || int(p.Num) > hi {
					continue
				}
				state := "pending"
				for _, ms := range s.Modules {
					if ms.Name == pm.Name {
						state = ms.State
					}
				}
				if state != workflows.ModuleMigrated {
					out[i] = fmt.Sprintf("%s (module %s declares %s but is %s, not migrated yet)", r, pm.Name, p, state)
				}
			}
		}
	}
	return out
}

// wrapLine wraps text to width after a prefix, indenting continuation
// lines under the text.
func wrapLine(prefix, text string, width int) string {
	if width <= 0 {
		return prefix + text // not a terminal: one line per item, for grep
	}
	indent := strings.Repeat(" ", len(prefix))
	avail := max(width-len(prefix), 30)
	var b strings.Builder
	b.WriteString(prefix)
	col := 0
	for i, word := range strings.Fields(text) {
		if i > 0 {
			if col+1+len(word) > avail {
				b.WriteString("\n" + indent)
				col = 0
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}

// termWidth is the terminal's width ($COLUMNS if the size cannot be read),
// or 0 when stdout is not a terminal: output for a pipe is not wrapped.
func termWidth() int {
	ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	if ws.Col >= 40 {
		return int(ws.Col)
	}
	if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c >= 40 {
		return c
	}
	return 100
}
