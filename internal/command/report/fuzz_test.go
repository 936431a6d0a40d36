package report

import (
	"strings"
	"testing"
	"time"
)

// No --since/--until/--split value makes ParseTime panic; an error is one
// line; a duration reads as that long before now, never after it; and a
// time it returns (years 1..9999) reads back the same from RFC 3339.
func FuzzParseTime(f *testing.F) {
	for _, c := range parseTimeCases {
		f.Add(c.in)
	}
	for _, s := range badTimes {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s, parseTimeNow, parseTimeLoc)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseTime(%q): error of several lines: %q", s, err)
			}
			return
		}
		if _, derr := time.ParseDuration(strings.TrimSpace(s)); derr == nil && got.After(parseTimeNow) {
			t.Fatalf("ParseTime(%q) = %v: a duration ago lies after now %v", s, got, parseTimeNow)
		}
		if y := got.Year(); y >= 1 && y <= 9999 {
			back, err := ParseTime(got.Format(time.RFC3339Nano), parseTimeNow, parseTimeLoc)
			if err != nil || !back.Equal(got) {
				t.Fatalf("ParseTime(%q) = %v, which reads back as %v, %v", s, got, back, err)
			}
		}
	})
}

// No request makes Options panic; a request it accepts has since before
// until and the split inside that range; every refusal names its flag.
func FuzzRequestOptions(f *testing.F) {
	for _, c := range requestCases {
		f.Add(c.table, c.since, c.until, c.split, c.format)
	}
	f.Fuzz(func(t *testing.T, table, since, until, split, format string) {
		r := Request{Table: table, Database: "default", Since: since, Until: until, Split: split, Format: format, Loc: parseTimeLoc}
		o, err := r.Options(parseTimeNow)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--") {
				t.Fatalf("%+v: error %q names no flag", r, err)
			}
			return
		}
		if !o.Since.Before(o.Until) || (o.Split != nil && (o.Split.Before(o.Since) || o.Split.After(o.Until))) {
			t.Fatalf("%+v: accepted the range %v .. %v, split %v", r, o.Since, o.Until, o.Split)
		}
		if o.Target.Database == "" || o.Target.Table == "" {
			t.Fatalf("%+v: accepted the target %+v", r, o.Target)
		}
	})
}
