package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// runbookBase is where the alerts' runbook links point: the project's home
// (scripts/deb.sh's DEB_HOMEPAGE) and a path under this repository.
const runbookBase = "https://github.com/adoption/adoption/blob/main/"

// The advice an alert gives works: every command quoted in `backticks` in
// its annotations resolves in the installed binaries' command trees (each
// `adopt`/`adopt-worker` command runs with --help, so an unknown command or
// flag exits non-zero, and the usage it prints must be that command's with
// an argument count it takes), each systemctl/journalctl command uses a
// verb or flag the real tool lists and a unit the packages ship, and every
// alert's runbook_url names an existing heading under docs/.
func TestAlertAdviceRuns(t *testing.T) {
	dir, _ := installed(t)
	bin := filepath.Join(dir, "..", "..", "..", "bin")
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Annotations map[string]string
			}
		}
	}
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	deb, err := os.ReadFile("../scripts/deb.sh")
	if err != nil {
		t.Fatal(err)
	}
	if home := strings.TrimSuffix(runbookBase, "/blob/main/"); !strings.Contains(string(deb), "DEB_HOMEPAGE:-"+home+"}") {
		t.Errorf("scripts/deb.sh's DEB_HOMEPAGE is not %s, where the runbook links point", home)
	}
	anchors := map[string]map[string]bool{}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			link := r.Annotations["runbook_url"]
			if err := checkRunbookLink(link, anchors); err != "" {
				t.Errorf("%s: runbook_url %q: %s", r.Alert, link, err)
			}
			for _, key := range []string{"summary", "description"} {
				for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(r.Annotations[key], -1) {
					n++
					if err := checkAdvice(bin, m[1]); err != "" {
						t.Errorf("%s: `%s`: %s", r.Alert, m[1], err)
					}
				}
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d commands quoted in the alerts: the extraction is broken", n)
	}
	// The check can fail: the advice the critical alert once gave, an
	// unknown subcommand, a wrong argument count, a unit nobody ships, a
	// link to no heading.
	for _, bad := range []string{"adopt flip n1 --confirm", "adopt drift acept n1", "adopt drift accept",
		"adopt-worker watchdog n1", "systemctl status adopt-nothing", "journalctl -u adopt-agent --since-boot"} {
		if checkAdvice(bin, bad) == "" {
			t.Errorf("`%s` passed the check", bad)
		}
	}
	if checkRunbookLink(runbookBase+"docs/operations.md#no-such-heading", anchors) == "" {
		t.Errorf("a link to no heading passed the check")
	}
}

// checkAdvice says what is wrong with one quoted command, or "".
func checkAdvice(bin, quoted string) string {
	quoted = strings.NewReplacer("{{ $labels.node }}", "n1", "{{ $labels.instance }}", "n1:9464").Replace(quoted)
	args := shellWords(quoted)
	if len(args) == 0 {
		return "empty"
	}
	switch args[0] {
	case "adopt", "adopt-worker":
		out, err := exec.Command(filepath.Join(bin, args[0]), append(args[1:], "--help")...).CombinedOutput()
		if err != nil {
			return err.Error() + ": " + strings.TrimSpace(string(out))
		}
		return usageTakes(string(out), args)
	case "systemctl", "journalctl":
		help, err := exec.Command(args[0], "--help").Output()
		if err != nil {
			return args[0] + " --help: " + err.Error()
		}
		units := 0
		for i := 1; i < len(args); i++ {
			a := args[i]
			switch {
			case args[0] == "systemctl" && i == 1:
				if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(a) + ` `).Match(help) {
					return "systemctl has no verb " + a
				}
			case args[0] == "systemctl" || a == "-u":
				if a == "-u" {
					i++
					if i == len(args) {
						return "-u without a unit"
					}
					a = args[i]
				}
				units++
				if _, err := os.Stat(filepath.Join("systemd", strings.TrimSuffix(a, ".service")+".service")); err != nil {
					return "no unit " + a + " in deploy/systemd"
				}
			case strings.HasPrefix(a, "-"):
				if !regexp.MustCompile(`(?m)^\s+(-\w )?`+regexp.QuoteMeta(a)+`[ =\[]`).Match(help) &&
					!regexp.MustCompile(`(?m)^\s+`+regexp.QuoteMeta(a)+` `).Match(help) {
					return "journalctl has no flag " + a
				}
				i++ // every journalctl flag quoted takes a value
			default:
				return "a stray argument " + a
			}
		}
		if units == 0 {
			return "names no unit"
		}
		return ""
	}
	return "not a command the alerts may advise: " + args[0]
}

// usageTakes checks the --help output is the usage of the command typed and
// that it takes the arguments given.
func usageTakes(help string, args []string) string {
	m := regexp.MustCompile(`(?m)^Usage:\n\s+(.+)$`).FindStringSubmatch(help)
	if m == nil {
		return "no usage in --help:\n" + help
	}
	use := strings.Fields(strings.TrimSuffix(m[1], " [flags]"))
	var words, pos []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--config" || args[i] == "-c":
			i++
		case strings.HasPrefix(args[i], "-"):
		default:
			words = append(words, args[i])
		}
	}
	i := 0
	for i < len(use) && i < len(words) && use[i] == words[i] {
		i++
	}
	pos = words[i:]
	need, may := 0, 0
	for _, u := range use[i:] {
		switch {
		case strings.HasPrefix(u, "["):
			may++
		case u == strings.ToUpper(u):
			need++
		default:
			return "resolves to `" + m[1] + "`, not the command typed"
		}
	}
	if len(pos) < need || len(pos) > need+may {
		return "`" + m[1] + "` takes " + strings.Join(use[i:], " ") + ", given " + strings.Join(pos, " ")
	}
	return ""
}

// shellWords splits a command line as sh would for the plain words and
// single quotes the alerts use.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	quoted, in := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				words = append(words, cur.String())
				cur.Reset()
			}
			in = false
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// checkRunbookLink says what is wrong with a runbook link, or "": it must
// point under runbookBase at a page of docs/ and a heading on it (GitHub's
// anchors: the heading lowercased, punctuation but - and _ dropped,
// spaces made -).
func checkRunbookLink(link string, anchors map[string]map[string]bool) string {
	rest, ok := strings.CutPrefix(link, runbookBase)
	if !ok {
		return "not under " + runbookBase
	}
	page, anchor, ok := strings.Cut(rest, "#")
	if !ok || !strings.HasPrefix(page, "docs/") {
		return "not a heading of a page under docs/"
	}
	if anchors[page] == nil {
		b, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			return err.Error()
		}
		anchors[page] = map[string]bool{}
		drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
		for _, line := range strings.Split(string(b), "\n") {
			if h, ok := strings.CutPrefix(line, "#"); ok {
				h = strings.TrimSpace(strings.TrimLeft(h, "#"))
				anchors[page][strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
			}
		}
	}
	if !anchors[page][anchor] {
		return "no heading #" + anchor + " in " + page
	}
	return ""
}
