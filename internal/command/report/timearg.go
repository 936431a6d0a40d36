package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseTime reads a --since/--until/--split value: "now"; a duration back
// from now ("2h", "90m"); unix seconds ("1714557600"); RFC 3339; or a
// wall-clock time in loc: "2006-01-02 15:04[:05]" or, for today,
// "15:04[:05]".
func ParseTime(s string, now time.Time, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "now" {
		return now, nil
	}
	if s == "0" {
		// Go reads a bare 0 as a duration (now) and it looks like unix
		// seconds (the epoch): neither reading is safe to guess.
		return time.Time{}, fmt.Errorf("%q is ambiguous: write 0s for now, or a date for a fixed time", s)
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration means that long ago and must not be negative", s)
		}
		return now.Add(-d), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			y, m, d := now.In(loc).Date()
			return time.Date(y, m, d, t.Hour(), t.Minute(), t.Second(), 0, loc), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: use a duration ago (2h), unix seconds, RFC 3339, \"2006-01-02 15:04[:05]\" or \"15:04[:05]\"", s)
}
