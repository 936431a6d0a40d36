package column

import (
	"testing"
	"time"
)

// dayCacheSeeds are timestamps of one stream in the order it sends them:
// the same date again, the next date, a date that is not one, zones.
var dayCacheSeeds = []string{
	"2024-05-17T12:00:00Z", "2024-05-17 23:59:59", "2024-05-17T00:00:01.5+02:00", "2024-05-18T00:00:00Z",
	"2024-02-29T10:00:00Z", "2023-02-29T10:00:00Z", "2024-05-17T24:00:00Z", "2024-05-17", "2024-05-17x",
	"1969-12-31T23:59:59Z", "2024-05-1", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999-23:59",
}

// TestDayCache: read through one dayCache, each text of a stream parses as
// it does alone, in UTC and in a zone.
func TestDayCache(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	for _, loc := range []*time.Location{nil, ny} {
		var dc dayCache
		for round := range 2 {
			for _, s := range dayCacheSeeds {
				sec, nsec, ok := dc.parseDateTimeText([]byte(s), loc)
				wsec, wnsec, wok := parseDateTimeText([]byte(s), loc)
				if sec != wsec || nsec != wnsec || ok != wok {
					t.Fatalf("round %d, %v, %q: cached %d %d %v, alone %d %d %v", round, loc, s, sec, nsec, ok, wsec, wnsec, wok)
				}
			}
		}
	}
}

// FuzzDayCache: a text read after another through one dayCache parses as
// it does alone.
func FuzzDayCache(f *testing.F) {
	for i, s := range dayCacheSeeds {
		f.Add(dayCacheSeeds[(i+1)%len(dayCacheSeeds)], s)
	}
	f.Fuzz(func(t *testing.T, before, s string) {
		var dc dayCache
		dc.parseDateTimeText([]byte(before), nil)
		sec, nsec, ok := dc.parseDateTimeText([]byte(s), nil)
		wsec, wnsec, wok := parseDateTimeText([]byte(s), nil)
		if sec != wsec || nsec != wnsec || ok != wok {
			t.Fatalf("after %q, %q: cached %d %d %v, alone %d %d %v", before, s, sec, nsec, ok, wsec, wnsec, wok)
		}
	})
}
