// Package timefmt is how every command writes a moment for people: in UTC
// with its Z, or, when the operator asks (--local), in the host's zone with
// its offset. Both are RFC 3339 with a space for the T. Machine output
// (JSON) keeps encoding/json's RFC 3339 form and needs nothing here.
package timefmt

import "time"

const (
	utcLayout   = "2006-01-02 15:04:05Z"
	localLayout = "2006-01-02 15:04:05-07:00"
	utcClock    = "15:04:05Z"
	localClock  = "15:04:05-07:00"
)

// Format writes t in full: 2026-01-02 03:04:05Z, or with local
// 2026-01-02 04:04:05+01:00. The zero time is "-".
func Format(t time.Time, local bool) string {
	if t.IsZero() {
		return "-"
	}
	if local {
		return t.Local().Format(localLayout)
	}
	return t.UTC().Format(utcLayout)
}

// Clock writes t's time of day only, for a line stamped while one watches:
// 03:04:05Z, or with local 04:04:05+01:00.
func Clock(t time.Time, local bool) string {
	if local {
		return t.Local().Format(localClock)
	}
	return t.UTC().Format(utcClock)
}
