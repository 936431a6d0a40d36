package testenv

import (
	"testing"
	"time"
)

func TestIsStale(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"pg_testx_20261204t080000_0123abcd", true},  // 4 h old
		{"pg_testx_20261204t100000_0123abcd", false}, // 2 h old
		{"pg__20261201t000000_0123abcd", true},       // a test name of no [a-z0-9]
		{"pg_testx_20261204t080000_0123abcdef", false},
		{"pg_testx_20261304t080000_0123abcd", false}, // month 13
		{"app_20261204t080000_0123abcd", false},      // not a test's
		{"postgres", false},
	} {
		if got := isStale(tc.name, now); got != tc.want {
			t.Errorf("isStale(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	// The names Postgres makes match the pattern, and are fresh.
	name := shortUniqueName(t, "pg", 63)
	if !staleDatabase.MatchString(name) || isStale(name, time.Now()) {
		t.Errorf("%q: want a fresh name of the pattern %s", name, staleDatabase)
	}
}
