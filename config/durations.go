// This file holds every duration key of the configuration and the fleet
// file in one table: how a duration is written (always with its unit: a
// bare 120 would otherwise be read as 120 nanoseconds) and the bounds its
// value must lie in, with why. Loading refuses a value outside them.
package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"adoption/intent"
)

// DurationKey is one duration key and its bounds.
type DurationKey struct {
	// Key is the key as the file spells it ("[]" stands for a list's index).
	Key string
	// Min and Max bound the value, both included.
	Min, Max time.Duration
	// Zero is what 0 means where 0 is accepted ("off", "the default
	// 30s"); empty: 0 is below Min like any other.
	Zero string
	// Example is a sane value, for the messages.
	Example string
	// Why says what goes wrong outside the bounds.
	Why string
}

// Durations are the duration keys and their bounds: the one place they
// are decided (docs/configuration.md lists them).
var Durations = []DurationKey{
	{Key: "flip.confirm_timeout", Min: 10 * time.Second, Max: HardMaxConfirmTimeout, Example: "2m",
		Why: "under 10s a flip that works is reverted before an operator (or the orchestrator's witness) can reach the node and confirm it; it is also at most flip.max_confirm_timeout"},
	{Key: "flip.max_confirm_timeout", Min: 10 * time.Second, Max: HardMaxConfirmTimeout, Example: "30m",
		Why: "it bounds flip.confirm_timeout, whose floor is 10s; past a day a flip that cut the node off stays in force too long for its watchdog to matter"},
	{Key: "firewall.reconcile_interval", Min: time.Second, Max: 24 * time.Hour, Zero: "off", Example: "1m",
		Why: "each round lists the node's ruleset, so under a second the agent does little else; a rule removed by hand stays away until the next round"},
	{Key: "drift.interval", Min: time.Second, Max: 24 * time.Hour, Zero: "off", Example: "5m",
		Why: "each round reads every custody file and the found firewall, so under a second the agent does little else; past a day a change is seen too late to matter"},
	{Key: "cutover.stop_timeout", Min: time.Second, Max: 2 * time.Minute, Example: "10s",
		Why: "a container given less than a second to stop is killed mid-write; the cutover (stop, start, health) runs as one step bounded at 10 minutes, and new connections are held while the predecessor stops"},
	{Key: "modules[].health.timeout", Min: time.Second, Max: 5 * time.Minute, Zero: "the default, 30s", Example: "30s",
		Why: "the cutover (stop, start, health) runs as one step bounded at 10 minutes; under a second no service answers"},
	{Key: "operator.intent_ttl", Min: time.Minute, Max: intent.MaxLifetime, Example: "30m",
		Why: "the intent must reach the node and be checked there, on a clock that may differ by seconds, before it expires; an intent is a request for now, not a standing permission"},
	{Key: "operator.fleet_intent_ttl", Min: 10 * time.Minute, Max: intent.MaxLifetime, Example: "12h",
		Why: "one fleet intent covers every node the fleet starts, wave after wave; an intent is a request for now, not a standing permission"},
	{Key: "ask_after", Min: time.Second, Max: MaxAskAfter, Zero: "the default, 1h", Example: "10m",
		Why: "the fleet's first ask round comes that long after it began to wait on nodes it cannot see end"},
}

// durationKey is key's row; key may carry list indexes ("modules[3]...").
func durationKey(key string) DurationKey {
	general := listIndex.ReplaceAllString(key, "[]")
	for _, d := range Durations {
		if d.Key == general {
			return d
		}
	}
	panic("config: no bounds for duration key " + key)
}

// Bounds says what the key takes: "a duration from 10s to 24h, such as 2m".
func (d DurationKey) Bounds() string {
	s := "a duration from " + ShortDuration(d.Min) + " to " + ShortDuration(d.Max)
	if d.Zero != "" {
		s += ", or 0 for " + d.Zero
	}
	return s + ", such as " + d.Example
}

// check is why v is out of bounds for the key, "" when it is within.
func (d DurationKey) check(v time.Duration) string {
	if (v == 0 && d.Zero != "") || (v >= d.Min && v <= d.Max) {
		return ""
	}
	return d.Bounds() + ": " + d.Why
}

// CheckDuration checks a value given for key (a flag standing in for it,
// a plan's field) against the key's bounds: the error names the key, the
// value, the bounds and why.
func CheckDuration(key string, v time.Duration) error {
	if why := durationKey(key).check(v); why != "" {
		return fmt.Errorf("%s: %q is invalid: %s", key, v.String(), why)
	}
	return nil
}

// duration checks a decoded duration key.
func (v *validator) duration(key string, d time.Duration) {
	if why := durationKey(key).check(d); why != "" {
		v.add(key, d.String(), why)
	}
}

// ShortDuration writes d as a person would: 2m, 1h30m, 24h, 500ms (Go
// writes 2m0s, 1h30m0s, 24h0m0s).
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// DurationError is a duration written without its unit, or not a
// duration at all.
type DurationError struct {
	Raw    string
	NoUnit bool
}

func (e *DurationError) Error() string {
	if e.NoUnit {
		return e.Raw + " has no unit; write " + e.Raw + "s or " + minutes(e.Raw)
	}
	return strconv.Quote(e.Raw) + " is not a duration: write a number with its unit (ms, s, m, h), such as 90s, 2m or 1h30m"
}

// minutes is the number of seconds raw as minutes when it is a whole
// number of them (120: 2m), else raw read as minutes (30: 30m): the two
// readings an operator may have meant.
func minutes(raw string) string {
	if n, err := strconv.Atoi(raw); err == nil && n >= 60 && n%60 == 0 {
		return strconv.Itoa(n/60) + "m"
	}
	return raw + "m"
}

// ParseDuration reads a duration as the files and the environment give
// it: a string with its unit ("90s", "2m", "1h30m") or 0. A bare number
// (120, "120") is refused with a *DurationError saying what to write.
func ParseDuration(raw any) (time.Duration, error) {
	var s string
	switch t := raw.(type) {
	case time.Duration:
		return t, nil
	case string:
		s = strings.TrimSpace(t)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		s = fmt.Sprint(t)
	default:
		return 0, &DurationError{Raw: fmt.Sprint(raw)}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f == 0 {
			return 0, nil // zero is zero in every unit
		}
		return 0, &DurationError{Raw: s, NoUnit: true}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &DurationError{Raw: s}
	}
	return d, nil
}

// durationHook decodes every time.Duration field through ParseDuration.
func durationHook(_, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(time.Duration(0)) {
		return data, nil
	}
	return ParseDuration(data)
}

// durationProblems are the duration keys of a decode error that are
// written without a unit or are no duration, one problem each; the keys
// let the caller leave out mapstructure's own line for them.
func durationProblems(err error) (problems []string, keys map[string]bool) {
	keys = map[string]bool{}
	var walk func(error)
	walk = func(err error) {
		if de, ok := err.(*mapstructure.DecodeError); ok {
			if du, ok := de.Unwrap().(*DurationError); ok {
				key := yamlKey(de.Name())
				problems = append(problems, key+": "+du.Error())
				keys[key] = true
				return
			}
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		} else if u := errors.Unwrap(err); u != nil {
			walk(u)
		}
	}
	walk(err)
	return problems, keys
}

// listIndex is a list's index in a key, as in modules[3].
var listIndex = regexp.MustCompile(`\[[0-9]+\]`)
