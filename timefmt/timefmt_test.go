package timefmt

import (
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = time.FixedZone("CET", 3600)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct{ got, want string }{
		{Format(at, false), "2026-01-02 03:04:05Z"},
		{Format(at.In(time.Local), false), "2026-01-02 03:04:05Z"},
		{Format(at, true), "2026-01-02 04:04:05+01:00"},
		{Clock(at, false), "03:04:05Z"},
		{Clock(at, true), "04:04:05+01:00"},
		{Format(time.Time{}, false), "-"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}
