package main

import (
	"strings"
	"testing"
)

// Flag help renders as meant: a bool flag shows no value name (pflag takes
// a `quoted` word of the usage for one), and --ui says its default once.
func TestFlagHelpRendering(t *testing.T) {
	f := listFake("adopted")
	_, out, errs := runCLI(t, f, "migrate", "--help")
	line := helpLine(out, "--wait ")
	if line == "" || strings.Contains(line, "--wait adopt") || !strings.Contains(line, "as adopt wait does") {
		t.Errorf("migrate --help: --wait renders as %q\n%s", line, errs)
	}
	line = helpLine(out, "--ui ")
	if line == "" || strings.Count(line, "default") != 1 || !strings.Contains(line, "$ADOPT_UI, else http://127.0.0.1:8233") {
		t.Errorf("--ui renders as %q", line)
	}
}

// --intent-ttl is held to operator.intent_ttl's bounds (config.Durations),
// before anything is signed or sent.
func TestIntentTTLFlagBounded(t *testing.T) {
	f := listFake("adopted")
	code, out, errs := runCLI(t, f, "status", "--intent-ttl", "5s")
	if code != exitUsage || out != "" || !strings.Contains(errs, `--intent-ttl 5s: operator.intent_ttl: "5s" is invalid: a duration from 1m to 24h`) {
		t.Errorf("--intent-ttl 5s: exit %d:\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, f, "status", "--intent-ttl", "2h"); code != exitOK {
		t.Errorf("--intent-ttl 2h: exit %d: %s", code, errs)
	}
}

// helpLine is the help's line for a flag (from its name to the next flag).
func helpLine(help, flag string) string {
	for _, l := range strings.Split(help, "\n") {
		if strings.Contains(l, flag) && strings.HasPrefix(strings.TrimSpace(l), "-") {
			return l
		}
	}
	return ""
}
