package backoff

import (
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

// The steps grow by Factor from Initial and stop at Max; a Max below
// Initial, a Factor of 1 or less and a negative n do not unbound them.
func TestStep(t *testing.T) {
	f := func(p Policy, want ...time.Duration) {
		t.Helper()
		var got []time.Duration
		for n := range want {
			got = append(got, p.Step(n))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%+v: steps %v, want %v", p, got, want)
		}
	}
	f(Policy{Initial: 100 * ms, Max: 350 * ms}, 100*ms, 200*ms, 350*ms, 350*ms)
	f(Policy{Initial: 500 * ms, Max: 30 * time.Second}, 500*ms, time.Second, 2*time.Second, 4*time.Second, 8*time.Second, 16*time.Second, 30*time.Second)
	f(Policy{Initial: 100 * ms, Max: time.Second, Factor: 1.5}, 100*ms, 150*ms, 225*ms, 337500*time.Microsecond)
	f(Policy{Initial: 100 * ms, Max: time.Second, Factor: 0.5}, 100*ms, 200*ms) // ≤ 1: doubling
	f(Policy{Initial: 200 * ms, Max: 50 * ms}, 200*ms, 200*ms)                  // Max below Initial
	f(Policy{Initial: 200 * ms}, 200*ms, 200*ms)                                // no Max: Initial
	f(Policy{Max: time.Second}, 0, 0)                                           // no Initial: at once
	f(Policy{Initial: time.Second, Max: time.Hour}, time.Second, 2*time.Second)

	p := Policy{Initial: time.Second, Max: time.Hour}
	if got := p.Step(10_000); got != time.Hour {
		t.Fatalf("step 10000 = %v, want the cap %v", got, time.Hour)
	}
	if got := p.Step(-3); got != time.Second {
		t.Fatalf("step -3 = %v, want Initial", got)
	}
}

// With a fixed jitter source the waits are exact: the fixed part of the
// step plus the draw (capped at the top of the range the source is asked
// for). A Jitter outside [0, 1] is clamped.
func TestWaitDeterministic(t *testing.T) {
	f := func(p Policy, draw int64, n int, want time.Duration) {
		t.Helper()
		p.Rand = func(m int64) int64 { return min(draw, m-1) }
		if got := p.Wait(n); got != want {
			t.Fatalf("%+v (draw %d): wait %d = %v, want %v", p, draw, n, got, want)
		}
	}
	eq := Policy{Initial: 100 * ms, Max: 350 * ms, Jitter: EqualJitter}
	f(eq, 0, 0, 50*ms)                 // the low end: half the step
	f(eq, int64(50*ms), 0, 100*ms)     // the high end: the step
	f(eq, int64(25*ms), 1, 125*ms)     // step 200ms: 100ms fixed + 25ms
	f(eq, int64(time.Hour), 5, 350*ms) // never past Max
	full := Policy{Initial: 100 * ms, Max: time.Second, Jitter: 1}
	f(full, 0, 0, 0)
	f(full, 7, 0, 7)
	none := Policy{Initial: 100 * ms, Max: time.Second, Jitter: 0}
	f(none, 12345, 2, 400*ms)                                                    // no jitter: no draw
	f(Policy{Initial: 100 * ms, Max: time.Second, Jitter: 7}, 3, 0, 3)           // clamped to 1
	f(Policy{Initial: 100 * ms, Max: time.Second, Jitter: -1}, 12345, 0, 100*ms) // clamped to 0
}

// Every equal-jitter wait lies in [step/2, step], so Max bounds the pause
// between two attempts, and the draws of the default source spread over
// that range (they are jittered, not fixed).
func TestEqualJitterStaysWithinTheStep(t *testing.T) {
	f := func(step time.Duration) {
		t.Helper()
		p := Policy{Initial: step, Max: step, Jitter: EqualJitter}
		lo, hi := step, time.Duration(0)
		for range 20_000 {
			got := p.Wait(0)
			if got < step/2 || got > step {
				t.Fatalf("Wait for step %s = %s; want within [%s, %s]", step, got, step/2, step)
			}
			lo, hi = min(lo, got), max(hi, got)
		}
		// 20,000 uniform draws come within 1% of both ends.
		if spread := step / 2; step >= 100 && (lo-step/2 > spread/100 || step-hi > spread/100) {
			t.Fatalf("Wait for step %s drew only [%s, %s]: not spread over [%s, %s]", step, lo, hi, step/2, step)
		}
	}
	f(0)
	f(1)
	f(3)
	f(500 * ms)         // clickhouse.retry_initial's default
	f(30 * time.Second) // clickhouse.retry_max's default
}

// Next walks the steps and counts them; Reset starts over.
func TestBackoffNextReset(t *testing.T) {
	b := New(Policy{Initial: 100 * ms, Max: 350 * ms})
	var got []time.Duration
	for range 4 {
		got = append(got, b.Next())
	}
	if want := []time.Duration{100 * ms, 200 * ms, 350 * ms, 350 * ms}; !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	if b.Retries() != 4 {
		t.Fatalf("retries %d, want 4", b.Retries())
	}
	b.Reset()
	if w := b.Next(); w != 100*ms || b.Retries() != 1 {
		t.Fatalf("after Reset: wait %v (retries %d), want 100ms (1)", w, b.Retries())
	}
	var zero Backoff
	if w := zero.Next(); w != 0 {
		t.Fatalf("the zero Backoff waits %v, want 0", w)
	}
}
