package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

const unitBase = "node: {name: n1}\nauthority: {unsigned: true}\n"

// A duration written without its unit is refused, naming the key, the
// value and what to write, once; it is never read as nanoseconds.
func TestDurationWithoutUnitRefused(t *testing.T) {
	for body, want := range map[string]string{
		"flip: {confirm_timeout: 120}\n":        "flip.confirm_timeout: 120 has no unit; write 120s or 2m",
		"flip: {confirm_timeout: \"120\"}\n":    "flip.confirm_timeout: 120 has no unit; write 120s or 2m",
		"drift: {interval: 300}\n":              "drift.interval: 300 has no unit; write 300s or 5m",
		"cutover: {stop_timeout: 10}\n":         "cutover.stop_timeout: 10 has no unit; write 10s or 10m",
		"firewall: {reconcile_interval: 1.5}\n": "firewall.reconcile_interval: 1.5 has no unit; write 1.5s or 1.5m",
		"operator: {intent_ttl: 30}\n":          "operator.intent_ttl: 30 has no unit; write 30s or 30m",
		"flip: {max_confirm_timeout: soon}\n":   `flip.max_confirm_timeout: "soon" is not a duration: write a number with its unit`,
		"modules:\n  - name: web\n    ports: [\"8080/tcp\"]\n    health: {tcp: \"127.0.0.1:8080\", timeout: 45}\n": "modules[0].health.timeout: 45 has no unit; write 45s or 45m",
	} {
		_, err := Load(writeTemp(t, unitBase+body))
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.HasPrefix(ve.Problems[0], want) {
			t.Errorf("%q: want the one problem %q, got %v", body, want, err)
		}
	}
	// From the environment: the variable is named.
	t.Setenv("ADOPT_FLIP_CONFIRM_TIMEOUT", "120")
	_, err := Load(writeTemp(t, unitBase))
	if err == nil || !strings.Contains(err.Error(), "flip.confirm_timeout: 120 has no unit; write 120s or 2m") || !strings.Contains(err.Error(), "ADOPT_FLIP_CONFIRM_TIMEOUT") {
		t.Errorf("from the environment: %v", err)
	}
}

// 0 needs no unit: it is 0 in every unit, and turns a periodic check off.
func TestDurationZeroNeedsNoUnit(t *testing.T) {
	c, err := Load(writeTemp(t, unitBase+"firewall: {reconcile_interval: 0}\ndrift: {interval: \"0\"}\n"))
	if err != nil || c.Firewall.ReconcileInterval != 0 || c.Drift.Interval != 0 {
		t.Fatalf("0 without a unit: %+v %v", c, err)
	}
}

// Every duration key of a node's file is held to its bounds from
// Durations: the floor and the ceiling are accepted, a millisecond past
// either is refused naming the key, the value, the bounds and why.
func TestDurationBounds(t *testing.T) {
	// Each key's neighbour, where one bounds the other.
	beside := map[string]string{
		"flip.confirm_timeout":     "ADOPT_FLIP_MAX_CONFIRM_TIMEOUT=24h",
		"flip.max_confirm_timeout": "ADOPT_FLIP_CONFIRM_TIMEOUT=10s",
	}
	tested := 0
	for _, d := range Durations {
		if d.Key == "ask_after" || strings.Contains(d.Key, "[]") {
			continue // the fleet file's and a module's: below
		}
		tested++
		for _, v := range []time.Duration{d.Min, d.Max, d.Min - time.Millisecond, d.Max + time.Millisecond} {
			t.Run(d.Key+"="+v.String(), func(t *testing.T) {
				if kv, ok := beside[d.Key]; ok {
					k, val, _ := strings.Cut(kv, "=")
					t.Setenv(k, val)
				}
				t.Setenv(EnvVar(d.Key), v.String())
				_, err := Load(writeTemp(t, unitBase))
				if v == d.Min || v == d.Max {
					if err != nil {
						t.Errorf("refused: %v", err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), d.Key+`: "`+v.String()+`" is invalid: a duration from `+ShortDuration(d.Min)+" to "+ShortDuration(d.Max)) ||
					!strings.Contains(err.Error(), d.Why) {
					t.Errorf("want refused with its bounds and why, got %v", err)
				}
			})
		}
	}
	if tested < 7 {
		t.Fatalf("only %d keys of Durations were tested", tested)
	}
	health := func(v string) error {
		_, err := Load(writeTemp(t, unitBase+"modules:\n  - name: web\n    ports: [\"8080/tcp\"]\n    health: {tcp: \"127.0.0.1:8080\", timeout: "+v+"}\n"))
		return err
	}
	if err := health("0"); err != nil {
		t.Errorf("health.timeout 0 (the default): %v", err)
	}
	if err := health("6m"); err == nil || !strings.Contains(err.Error(), `modules[0].health.timeout: "6m0s" is invalid: a duration from 1s to 5m`) {
		t.Errorf("health.timeout 6m: %v", err)
	}
}

// The confirm window's floor says why; operator.intent_ttl's refusal names
// the key at load, not an intent that "expires before it is issued" later.
func TestShortWindowsRefusedWithWhy(t *testing.T) {
	_, err := Load(writeTemp(t, unitBase+"flip: {confirm_timeout: 5s}\noperator: {intent_ttl: 30s}\n"))
	if err == nil || !strings.Contains(err.Error(), `flip.confirm_timeout: "5s" is invalid: a duration from 10s to 24h, such as 2m: under 10s a flip that works is reverted before`) ||
		!strings.Contains(err.Error(), `operator.intent_ttl: "30s" is invalid: a duration from 1m to 24h`) {
		t.Fatalf("got %v", err)
	}
}

// CheckDuration, for a flag standing in for a key, says the same.
func TestCheckDuration(t *testing.T) {
	if err := CheckDuration("operator.intent_ttl", 10*time.Second); err == nil || !strings.Contains(err.Error(), "from 1m to 24h") {
		t.Errorf("10s: %v", err)
	}
	if err := CheckDuration("operator.intent_ttl", time.Hour); err != nil {
		t.Errorf("1h: %v", err)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{2 * time.Minute: "2m", 24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 500 * time.Millisecond: "500ms", 90 * time.Second: "1m30s"} {
		if got := ShortDuration(d); got != want {
			t.Errorf("%s: %q, want %q", d, got, want)
		}
	}
}

// docs/configuration.md's table of durations says what Durations does.
func TestDurationsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Durations {
		zero := "refused"
		if d.Zero != "" {
			zero = d.Zero
		}
		row := fmt.Sprintf("| `%s`", d.Key)
		i := strings.Index(string(b), row)
		if i < 0 {
			t.Errorf("docs/configuration.md has no row for %s", d.Key)
			continue
		}
		line, _, _ := strings.Cut(string(b[i:]), "\n")
		if want := fmt.Sprintf("| %s | %s | %s |", ShortDuration(d.Min), ShortDuration(d.Max), zero); !strings.Contains(line, want) {
			t.Errorf("docs/configuration.md: %s's row %q lacks %q", d.Key, line, want)
		}
	}
}
