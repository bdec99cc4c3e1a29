package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/cli.md's command table has a row for every command of the installed
// adopt (its manual pages, written by `adopt man` as the packages' build
// does, name each one: adopt-fleet-flip.1 is `adopt fleet flip`).
func TestCLIDocsListEveryCommand(t *testing.T) {
	dir, _ := installed(t)
	man := t.TempDir()
	if out, err := exec.Command(filepath.Join(dir, "..", "..", "..", "bin", "adopt"), "man", man).CombinedOutput(); err != nil {
		t.Fatalf("adopt man: %v\n%s", err, out)
	}
	pages, err := filepath.Glob(filepath.Join(man, "adopt-*.1"))
	if err != nil || len(pages) < 20 {
		t.Fatalf("adopt man wrote %d pages: %v", len(pages), err)
	}
	b, err := os.ReadFile("../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `adopt ([^`]+)`").FindAllStringSubmatch(string(b), -1) {
		rows = append(rows, m[1])
	}
	listed := func(cmd string) bool {
		for _, r := range rows {
			// A row names the command's words, then its arguments or its
			// subcommands as alternatives (completion bash|zsh).
			words := strings.Fields(strings.ReplaceAll(r, `\|`, "|"))
			var path []string
			for _, w := range words {
				for _, alt := range strings.Split(w, "|") {
					if alt == cmd || strings.Join(append(slices.Clone(path), alt), " ") == cmd {
						return true
					}
				}
				path = append(path, w)
				if strings.Join(path, " ") == cmd {
					return true
				}
			}
		}
		return false
	}
	for _, p := range pages {
		cmd := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "adopt-"), ".1"), "-", " ")
		if !listed(cmd) {
			t.Errorf("docs/cli.md's command table has no row for `adopt %s`", cmd)
		}
	}
	// The check can fail: a command nobody documented.
	if listed("fleet frobnicate") {
		t.Errorf("the table check found a row for a command that does not exist")
	}
}

// docs/operations.md lists the agent's capabilities as its unit bounds
// them: every one, and none more.
func TestOperationsDocListsTheAgentsCapabilities(t *testing.T) {
	unit := parseUnit(t, "systemd/adopt-agent.service")
	want := strings.Fields(unit["Service.CapabilityBoundingSet"])
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### `adopt-agent.service`")
	if !ok {
		t.Fatal("docs/operations.md has no section ### `adopt-agent.service`")
	}
	section, _, _ = strings.Cut(section, "\n#")
	var got []string
	for _, m := range regexp.MustCompile("`(CAP_[A-Z_]+)`").FindAllStringSubmatch(section, -1) {
		got = append(got, m[1])
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) < 5 || !slices.Equal(slices.Compact(got), want) {
		t.Errorf("docs/operations.md lists %v, the unit's CapabilityBoundingSet= is %v", got, want)
	}
}

// docs/access.md's threat-model table is the single statement of who can
// do what: each row names exactly one test that shows it, and each named
// test exists (a func of that name in a _test.go file of the repository).
func TestAccessTableNamesATestPerRow(t *testing.T) {
	b, err := os.ReadFile("../docs/access.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| who | can | cannot |\n")
	if !ok {
		t.Fatal("docs/access.md has no table | who | can | cannot |")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	defined := map[string]bool{}
	err = filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`).FindAllStringSubmatch(string(src), -1) {
				defined[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`(Test\\w+)`")
	rows := 0
	for _, row := range strings.Split(table, "\n") {
		if !strings.HasPrefix(row, "| ") {
			continue
		}
		rows++
		who, _, _ := strings.Cut(strings.TrimPrefix(row, "| "), " |")
		tests := named.FindAllStringSubmatch(row, -1)
		if len(tests) != 1 {
			t.Errorf("row %q names %d tests, want one", who, len(tests))
			continue
		}
		if !defined[tests[0][1]] {
			t.Errorf("row %q names %s, which no _test.go defines", who, tests[0][1])
		}
	}
	if rows < 10 {
		t.Fatalf("read %d rows of the table: the check would prove nothing", rows)
	}
	// The check can fail: a name nobody defined.
	if defined["TestNobodyDefinedThis"] || !defined["TestAccessTableNamesATestPerRow"] {
		t.Error("the lookup of defined tests is wrong")
	}
}
