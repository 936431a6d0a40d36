package writer

import (
	"testing"
	"time"
)

// Every wait lies in [wait/2, wait], so clickhouse.retry_max bounds the
// pause between two attempts, and the draws spread over that range (they
// are jittered, not fixed).
func TestRetryWaitStaysWithinTheStep(t *testing.T) {
	f := func(wait time.Duration) {
		t.Helper()
		lo, hi := wait, time.Duration(0)
		for range 20_000 {
			got := RetryWait(wait)
			if got < wait/2 || got > wait {
				t.Fatalf("RetryWait(%s) = %s; want within [%s, %s]", wait, got, wait/2, wait)
			}
			lo, hi = min(lo, got), max(hi, got)
		}
		// 20,000 uniform draws come within 1% of both ends.
		if spread := wait / 2; wait >= 100 && (lo-wait/2 > spread/100 || wait-hi > spread/100) {
			t.Fatalf("RetryWait(%s) drew only [%s, %s]: not spread over [%s, %s]", wait, lo, hi, wait/2, wait)
		}
	}
	f(0)
	f(1)
	f(3)
	f(500 * time.Millisecond) // clickhouse.retry_initial's default
	f(30 * time.Second)       // clickhouse.retry_max's default
}
