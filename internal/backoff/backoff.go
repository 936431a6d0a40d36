// Package backoff is the one retry schedule of the sink: the wait before
// each retry starts at Initial, grows by Factor per retry and never exceeds
// Max, and a Jitter fraction of it is drawn at random, so that several sinks
// (or several batches) that failed together do not retry in lockstep. The
// INSERT retries, the dead-letter produces, the exactly-once intent commits
// and recovery reads, and the records held for the schema registry all wait
// by it, each with its own Policy.
//
// The model is VictoriaMetrics' lib/backoff: a value that says how long to
// wait next, reset after a success; the caller sleeps (a timer, a due time
// on the owner goroutine's clock), so the package does no I/O and keeps no
// goroutine.
//
// Concurrency: a Policy is an immutable value, safe to share. A Backoff
// holds the count of retries so far and belongs to one goroutine (or to the
// owner of the state it is part of), like the retry loop it paces. The
// default jitter source, math/rand/v2's global generator, is safe for
// concurrent use; a Rand given for a test is called by the goroutine that
// calls Wait or Next.
package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// EqualJitter draws the wait in [w/2, w] for a step w ("equal jitter"): the
// fixed half keeps the backoff growing, so a server that is merging away
// TOO_MANY_PARTS gets time; the random half spreads the retries; and the
// wait never exceeds w, so Max is the longest pause between two attempts.
const EqualJitter = 0.5

// Policy describes a schedule: step n (the wait before retry n+1) is
// Initial × Factor^n, capped at Max; of each step, the fraction Jitter is
// drawn at random, the rest is fixed.
type Policy struct {
	Initial time.Duration // the first step; ≤ 0: retry at once
	// Max caps every step; a Max below Initial is taken as Initial, so a
	// schedule is always bounded.
	Max time.Duration
	// Factor is the growth per retry; ≤ 1 (the zero value too) means 2,
	// doubling.
	Factor float64
	// Jitter is the random fraction of each step, in [0, 1]: 0 waits exactly
	// the step, EqualJitter half fixed and half random, 1 anywhere in
	// [0, step]. Values outside [0, 1] are clamped.
	Jitter float64
	// Rand returns a uniform draw in [0, n) for n > 0; nil is math/rand/v2.
	// Tests give a fixed source to get exact waits.
	Rand func(n int64) int64
}

// Step is the un-jittered wait before retry n+1 (n counts the retries
// already waited for, from 0): Initial × Factor^n, at most Max.
func (p Policy) Step(n int) time.Duration {
	if p.Initial <= 0 {
		return 0
	}
	limit := max(p.Max, p.Initial)
	factor := p.Factor
	if factor <= 1 {
		factor = 2
	}
	step := float64(p.Initial) * math.Pow(factor, float64(max(n, 0)))
	if step >= float64(limit) || math.IsNaN(step) {
		return limit
	}
	return time.Duration(step)
}

// Wait is the wait before retry n+1: Step(n) with its Jitter fraction drawn
// at random. It lies in [Step(n)·(1−Jitter), Step(n)].
func (p Policy) Wait(n int) time.Duration {
	step := p.Step(n)
	j := min(max(p.Jitter, 0), 1)
	if step <= 0 || j == 0 {
		return step
	}
	fixed := time.Duration(float64(step) * (1 - j))
	draw := p.Rand
	if draw == nil {
		draw = rand.Int64N
	}
	return fixed + time.Duration(draw(int64(step-fixed)+1))
}

// Backoff is a Policy with the count of retries waited for so far: Next
// gives the wait before the next retry, Reset starts over after a success.
// The zero value waits nothing; build one from a Policy.
type Backoff struct {
	Policy
	n int
}

// New starts a schedule of p.
func New(p Policy) Backoff { return Backoff{Policy: p} }

// Next returns the wait before the next retry and counts it.
func (b *Backoff) Next() time.Duration {
	w := b.Wait(b.n)
	b.n++
	return w
}

// Retries is the number of waits Next has handed out since the last Reset.
func (b *Backoff) Retries() int { return b.n }

// Reset starts the schedule over: the next wait is the first step again.
func (b *Backoff) Reset() { b.n = 0 }
