package testenv

import (
	"fmt"
	"strings"
	"testing"
)

func TestMissingNamesToolAndPackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	msg := Missing("ufw", "nft", "no-such-tool-x")
	for _, want := range []string{"ufw", "nft", "no-such-tool-x", "apt-get install -y ufw nftables", "make deps"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

func TestMissingEmptyWhenPresent(t *testing.T) {
	if msg := Missing("sh"); msg != "" {
		t.Errorf("sh is on PATH, got %q", msg)
	}
}

// A missing tool fails the test (not skips) unless ADOPT_UNIT_ONLY is set.
func TestNeedToolsFailsWithoutUnitOnly(t *testing.T) {
	t.Setenv(UnitOnlyVar, "")
	t.Setenv("PATH", t.TempDir())
	r := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		NeedTools(r, "ufw")
	}()
	if !r.failed || r.skipped || !strings.Contains(r.msg, "ufw") {
		t.Fatalf("want a failure naming ufw, got failed=%v skipped=%v %q", r.failed, r.skipped, r.msg)
	}
}

func TestNeedToolsSkipsOnlyWhenUnitOnly(t *testing.T) {
	t.Setenv(UnitOnlyVar, "1")
	t.Setenv("PATH", t.TempDir())
	r := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		NeedTools(r, "ufw")
	}()
	if r.failed || !r.skipped {
		t.Fatalf("want a skip under %s, got failed=%v skipped=%v", UnitOnlyVar, r.failed, r.skipped)
	}
}

// recorder catches Fatal/Skip without ending the real test.
type recorder struct {
	testing.TB
	failed, skipped bool
	msg             string
}

type stop struct{}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.failed, r.msg = true, sprint(args...)
	panic(stop{})
}
func (r *recorder) Fatalf(f string, args ...any) { r.Fatal(sprintf(f, args...)) }
func (r *recorder) Skipf(f string, args ...any) {
	r.skipped, r.msg = true, sprintf(f, args...)
	panic(stop{})
}

func sprint(args ...any) string            { return fmt.Sprint(args...) }
func sprintf(f string, args ...any) string { return fmt.Sprintf(f, args...) }
