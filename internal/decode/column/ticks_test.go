package column

import (
	"testing"
	"time"
)

// DateTime64 ticks over the type's whole range: 1900 and 2299 (where
// UnixNano, which the driver's own conversion uses, overflows) and a
// fraction before the epoch.
func TestTicks(t *testing.T) {
	f := func(s string, p int, want int64) {
		t.Helper()
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := toTicks(tm, p); got != want {
			t.Fatalf("toTicks(%s, %d) = %d, want %d", s, p, got, want)
		}
		back := fromTicks(want, p)
		if !back.Equal(tm.Truncate(time.Duration(pow10[9-p]))) || back.Location() != time.UTC {
			t.Fatalf("fromTicks(%d, %d) = %s, want %s", want, p, back, tm)
		}
	}
	f("1900-01-01T00:00:00Z", 3, -2208988800_000)
	f("2299-12-31T23:59:59.999Z", 3, 10413791999_999)
	f("2299-12-31T23:59:59.123456Z", 6, 10413791999_123456)
	f("1969-12-31T23:59:59.5Z", 6, -500_000)
	f("1969-12-31T23:59:59.5Z", 0, -1)
	f("2261-12-31T23:59:59.999999999Z", 9, 9214646399_999999999)
	f("1970-01-01T00:00:00.000000001Z", 9, 1)
}
