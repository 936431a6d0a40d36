package adapt

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPartsPressure(t *testing.T) {
	for _, c := range []struct {
		p    Parts
		want float64
	}{
		{Parts{Active: 0, DelayAt: 150, ThrowAt: 300}, 1},
		{Parts{Active: 74, DelayAt: 150, ThrowAt: 300}, 1},
		{Parts{Active: 75, DelayAt: 150, ThrowAt: 300}, 1},
		{Parts{Active: 112, DelayAt: 150, ThrowAt: 300}, 1 + 8*(112.0/150-0.5)},
		{Parts{Active: 150, DelayAt: 150, ThrowAt: 300}, 5},
		{Parts{Active: 225, DelayAt: 150, ThrowAt: 300}, 20},
		{Parts{Active: 300, DelayAt: 150, ThrowAt: 300}, 80*0 + MaxPressure},
		{Parts{Active: 900, DelayAt: 150, ThrowAt: 300}, MaxPressure},
		{Parts{Active: 10, DelayAt: 0, ThrowAt: 0}, 1},    // thresholds unknown
		{Parts{Active: 30, DelayAt: 20, ThrowAt: 20}, 5},  // throw not above delay
		{Parts{Active: 15, DelayAt: 20, ThrowAt: 40}, 3},  // between half and delay
		{Parts{Active: 30, DelayAt: 20, ThrowAt: 40}, 20}, // halfway to throw
	} {
		if got := PartsPressure(c.p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("PartsPressure(%+v) = %g, want %g", c.p, got, c.want)
		}
	}
}

func TestInitialTarget(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Settings
		wait time.Duration
		why  Reason
	}{
		{"cadence", Settings{InsertsPerMinute: 6}, 10 * time.Second, ReasonNotYetMeasure},
		{"latency shortens", Settings{InsertsPerMinute: 6, MaxLatency: 5 * time.Second, Overhead: time.Second}, 4 * time.Second, ReasonLatency},
		{"latency not binding", Settings{InsertsPerMinute: 12, MaxLatency: time.Minute}, 5 * time.Second, ReasonNotYetMeasure},
		{"floor", Settings{InsertsPerMinute: 6, MaxLatency: time.Second, Overhead: 2 * time.Second}, 100 * time.Millisecond, ReasonLatency},
	} {
		got := New(c.s).Target()
		if got.Wait != c.wait || got.Reason != c.why || got.Pressure != 1 || got.OverLatency {
			t.Errorf("%s: %+v, want wait %s reason %s, pressure 1", c.name, got, c.wait, c.why)
		}
	}
}

// sim drives a controller with a simulated table: rows arrive at rate(t)
// per second, a batch seals at Target.Rows or Target.Wait, an insert takes
// insertTook and adds a part to one partition, merges remove mergeRate
// parts per second (0: merges stopped), and the parts are observed every
// pollEvery. It records what happened per batch.
type sim struct {
	c          *Controller
	rate       func(t time.Duration) float64
	rowBytes   int
	insertTook time.Duration
	mergeRate  float64
	delayAt    int
	throwAt    int
	pollEvery  time.Duration
	step       time.Duration

	batches []simBatch
	parts   float64
	thrown  time.Duration // when parts first reached throwAt (0: never)
}

type simBatch struct {
	at      time.Duration // insert acknowledged
	rows    int
	latency time.Duration // first row in → acknowledged
	target  Target        // decided after the seal
}

func (s *sim) run(d time.Duration) {
	if s.step == 0 {
		s.step = 10 * time.Millisecond
	}
	if s.pollEvery == 0 {
		s.pollEvery = 5 * time.Second
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var pending float64 // fractional rows arrived
	var rows int
	var opened time.Duration
	nextPoll := s.pollEvery
	for now := time.Duration(0); now < d; now += s.step {
		pending += s.rate(now) * s.step.Seconds()
		if n := int(pending); n > 0 {
			if rows == 0 {
				opened = now
			}
			rows += n
			pending -= float64(n)
		}
		tg := s.c.Target()
		if rows > 0 && (rows >= tg.Rows || now-opened >= tg.Wait) {
			wall := start.Add(now)
			after := s.c.Sealed(wall, rows, rows*s.rowBytes, now-opened)
			ack := now + s.insertTook
			s.c.Inserted(start.Add(ack), s.insertTook)
			s.batches = append(s.batches, simBatch{at: ack, rows: rows, latency: ack - opened, target: after})
			s.parts++
			rows = 0
		}
		s.parts = max(s.parts-s.mergeRate*s.step.Seconds(), 1)
		if s.throwAt > 0 && s.thrown == 0 && s.parts >= float64(s.throwAt) {
			s.thrown = now
		}
		if now >= nextPoll {
			nextPoll += s.pollEvery
			if s.delayAt > 0 {
				s.c.ObserveParts(start.Add(now), Parts{Active: int(s.parts), DelayAt: s.delayAt, ThrowAt: s.throwAt})
			}
		}
	}
}

// perMinute counts the inserts acknowledged in each minute.
func (s *sim) perMinute(d time.Duration) []int {
	out := make([]int, int(d/time.Minute))
	for _, b := range s.batches {
		if i := int(b.at / time.Minute); i < len(out) {
			out[i]++
		}
	}
	return out
}

// profile is a piecewise-constant rate: rows/s for each duration.
func profile(steps ...any) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		var end time.Duration
		for i := 0; i+1 < len(steps); i += 2 {
			end += steps[i+1].(time.Duration)
			if t < end {
				return steps[i].(float64)
			}
		}
		return steps[len(steps)-2].(float64)
	}
}

// trace renders the batches for a failure message.
func (s *sim) trace() string {
	var b strings.Builder
	for _, x := range s.batches {
		fmt.Fprintf(&b, "%8s rows %7d lat %6s -> wait %6s rows≤%7d rate %8.0f p %.2f %s\n",
			x.at.Round(time.Second), x.rows, x.latency.Round(10*time.Millisecond), x.target.Wait.Round(10*time.Millisecond),
			x.target.Rows, x.target.Rate, x.target.Pressure, x.target.Reason)
	}
	return b.String()
}

// TestRateSteps holds the cadence through 20× rate changes up and down
// and a 4× step: every minute that does not contain a change stays within
// ±30% of the target, the minutes with a change within +50%, the wait never
// moves (the cadence is held by time), and the rows ceiling tracks the
// rate without overshooting it by more than the headroom.
func TestRateSteps(t *testing.T) {
	const target = 6.0
	for _, c := range []struct {
		name    string
		rate    func(time.Duration) float64
		changes []int // minutes that contain a rate change
		minutes time.Duration
	}{
		{"steady", profile(1000.0, 10*time.Minute), nil, 5},
		{"20x up and down", profile(250.0, 2*time.Minute, 5000.0, 2*time.Minute, 250.0, 2*time.Minute), []int{2, 4}, 6},
		{"20x down and up", profile(5000.0, 2*time.Minute, 250.0, 2*time.Minute, 5000.0, 2*time.Minute), []int{2, 4}, 6},
		{"4x step", profile(1000.0, 90*time.Second, 4000.0, 10*time.Minute), []int{1}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &sim{c: New(Settings{InsertsPerMinute: target, MaxLatency: time.Minute, Overhead: time.Second, MaxBatchBytes: 64 << 20}),
				rate: c.rate, rowBytes: 200, insertTook: 300 * time.Millisecond}
			d := c.minutes * time.Minute
			s.run(d)
			for i, n := range s.perMinute(d) {
				if i == 0 {
					continue // the first batch opens after the first row
				}
				limit := 1.3
				for _, m := range c.changes {
					if i == m {
						limit = 1.5
					}
				}
				if float64(n) > target*limit || float64(n) < target*0.7 {
					t.Errorf("minute %d: %d inserts, want %.0f (±30%%, +50%% in a minute with a rate change)\n%s", i, n, target, s.trace())
				}
			}
			peak := 0.0
			for at := time.Duration(0); at < d; at += time.Second {
				peak = max(peak, c.rate(at))
			}
			for i, b := range s.batches {
				if b.target.Wait != s.batches[0].target.Wait {
					t.Fatalf("batch %d: wait moved to %s without feedback\n%s", i, b.target.Wait, s.trace())
				}
				if b.latency > time.Minute {
					t.Errorf("batch %d: latency %s past max_latency", i, b.latency)
				}
				// Overshoot: a ceiling above the headroom over the fastest
				// rate of the profile (falls are followed by halves, which
				// is harmless: the wait seals those batches).
				if float64(b.target.Rows) > Headroom*peak*b.target.Wait.Seconds()*1.05 {
					t.Fatalf("batch %d: rows ceiling %d overshoots the peak %g rows/s\n%s", i, b.target.Rows, peak, s.trace())
				}
			}
		})
	}
}

// TestNoOscillation: under a constant rate the rows ceiling settles and
// then changes monotonically toward the new rate after a step; it never
// alternates direction (a damped law, no limit cycle).
func TestNoOscillation(t *testing.T) {
	s := &sim{c: New(Settings{InsertsPerMinute: 12, MaxLatency: time.Minute}),
		rate: profile(5000.0, 2*time.Minute, 250.0, 3*time.Minute), rowBytes: 200, insertTook: 200 * time.Millisecond}
	s.run(5 * time.Minute)
	dirs := 0
	last := 0
	for i := 1; i < len(s.batches); i++ {
		d := s.batches[i].target.Rows - s.batches[i-1].target.Rows
		// Changes below 2% are rounding and the rate's noise.
		if math.Abs(float64(d)) < 0.02*float64(s.batches[i-1].target.Rows) {
			continue
		}
		dir := 1
		if d < 0 {
			dir = -1
		}
		if last != 0 && dir != last {
			dirs++
		}
		last = dir
	}
	if dirs > 0 {
		t.Errorf("the rows ceiling changed direction %d times\n%s", dirs, s.trace())
	}
	// Settled on the new rate: within 5% of 2×250×5s.
	final := s.batches[len(s.batches)-1].target.Rows
	if want := Headroom * 250 * 5; math.Abs(float64(final)-want) > 0.05*want {
		t.Errorf("settled at %d rows, want about %.0f\n%s", final, want, s.trace())
	}
}

// TestLatencyBound: when the cadence would wait past max_latency, the
// wait is shortened so that first row → acknowledged stays within it.
func TestLatencyBound(t *testing.T) {
	s := &sim{c: New(Settings{InsertsPerMinute: 2, MaxLatency: 5 * time.Second, Overhead: 500 * time.Millisecond}),
		rate: profile(1000.0, 3*time.Minute), rowBytes: 200, insertTook: 400 * time.Millisecond}
	s.run(3 * time.Minute)
	for i, b := range s.batches {
		// The first batch is sealed before any insert time is known.
		if i > 0 && b.latency > 5*time.Second-500*time.Millisecond {
			t.Errorf("batch %d: %s from first row to ack, past max_latency minus the fetch overhead\n%s", i, b.latency, s.trace())
		}
		if b.target.Reason != ReasonLatency || b.target.OverLatency {
			t.Errorf("batch %d: reason %s over %v, want latency", i, b.target.Reason, b.target.OverLatency)
		}
	}
}

// TestMemoryCap: the rows ceiling never lets a batch pass the memory share.
func TestMemoryCap(t *testing.T) {
	s := &sim{c: New(Settings{InsertsPerMinute: 1, MaxBatchBytes: 1 << 20}),
		rate: profile(5000.0, 3*time.Minute), rowBytes: 200, insertTook: 100 * time.Millisecond}
	s.run(3 * time.Minute)
	for i, b := range s.batches[1:] {
		if b.rows*200 > 1<<20+200*int(5000*s.step.Seconds()+1) {
			t.Errorf("batch %d: %d bytes past the 1MiB share", i+1, b.rows*200)
		}
		if b.target.Reason != ReasonMemory {
			t.Errorf("batch %d: reason %s, want memory", i+1, b.target.Reason)
		}
	}
}

// TestMergesStopped: merges stopped, so every insert adds a part. The
// controller stretches the wait as the parts approach
// parts_to_delay_insert, so parts_to_throw_insert (where ClickHouse
// throws TOO_MANY_PARTS) comes far later than with the fixed cadence, and
// it was slowing down well before.
func TestMergesStopped(t *testing.T) {
	const delay, throw = 20, 40
	run := func(adaptive bool) *sim {
		s := &sim{rate: profile(1000.0, time.Hour), rowBytes: 200, insertTook: 200 * time.Millisecond,
			delayAt: delay, throwAt: throw}
		s.c = New(Settings{InsertsPerMinute: 12, MaxLatency: 10 * time.Second})
		if !adaptive {
			s.delayAt = 0 // a fixed cadence ignores the parts
		}
		s.run(30 * time.Minute)
		return s
	}
	fixed, adaptive := run(false), run(true)
	if fixed.thrown == 0 {
		t.Fatalf("the fixed cadence never reached %d parts", throw)
	}
	if adaptive.thrown != 0 && adaptive.thrown < 5*fixed.thrown {
		t.Errorf("adaptive reached parts_to_throw_insert after %s, fixed after %s: want at least 5× later\n%s", adaptive.thrown, fixed.thrown, adaptive.trace())
	}
	// Slowing down before the delay threshold: the batch that made the
	// delay-th part was sealed with a wait at least twice the cadence's.
	for i, b := range adaptive.batches {
		if i+1 == delay {
			if b.target.Wait < 10*time.Second || b.target.Reason != ReasonParts || !b.target.OverLatency {
				t.Errorf("at %d parts: %+v, want the wait stretched by parts pressure past max_latency\n%s", delay, b.target, adaptive.trace())
			}
		}
	}
	t.Logf("parts_to_throw_insert reached: fixed after %s, adaptive after %s (0: not in 30m); adaptive inserts %d, fixed %d",
		fixed.thrown.Round(time.Second), adaptive.thrown.Round(time.Second), len(adaptive.batches), len(fixed.batches))
}

// TestTooManyPartsDecays: an error doubles the pressure (the wait grows at
// most ×2 per decision), the wait passes max_latency and says so, and the
// pressure decays back to 1 once the errors stop.
func TestTooManyPartsDecays(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(Settings{InsertsPerMinute: 12, MaxLatency: 6 * time.Second})
	c.Sealed(at, 1000, 200_000, 5*time.Second)
	var waits []time.Duration
	for i := 0; i < 3; i++ {
		tg := c.TooManyParts(at)
		waits = append(waits, tg.Wait)
		if tg.Reason != ReasonTooManyParts || !tg.OverLatency {
			t.Fatalf("after error %d: %+v, want too_many_parts over latency", i+1, tg)
		}
	}
	if waits[0] != 10*time.Second || waits[1] != 20*time.Second || waits[2] != 40*time.Second {
		t.Errorf("waits after 1, 2, 3 errors: %v, want 10s 20s 40s", waits)
	}
	prev := waits[2]
	for s := 10; s <= 600; s += 10 {
		tg := c.Tick(at.Add(time.Duration(s) * time.Second))
		if tg.Wait > prev {
			t.Fatalf("wait grew to %s at +%ds without an error", tg.Wait, s)
		}
		prev = tg.Wait
	}
	if tg := c.Target(); tg.Pressure != 1 || tg.Wait != 5*time.Second || tg.OverLatency {
		t.Errorf("10 minutes after the last error: %+v, want pressure 1, wait 5s", tg)
	}
}

// TestSlowInserts: inserts that take most of the interval stretch it, so
// the server is not asked for more than it can take.
func TestSlowInserts(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(Settings{InsertsPerMinute: 30})
	for i := 0; i < 20; i++ {
		c.Inserted(at, 4*time.Second)
	}
	tg := c.Target()
	if tg.Reason != ReasonSlowInsert || tg.Wait < 7*time.Second {
		t.Errorf("inserts of 4s at a 2s cadence: %+v, want the wait stretched to about 8s", tg)
	}
}

func TestMostPressed(t *testing.T) {
	calm := Parts{Active: 10, DelayAt: 150, ThrowAt: 300}
	near := Parts{Active: 120, DelayAt: 150, ThrowAt: 300}
	over := Parts{Active: 200, DelayAt: 150, ThrowAt: 300}
	// A server with lower thresholds is more pressed at fewer parts.
	strict := Parts{Active: 60, DelayAt: 50, ThrowAt: 100}
	for _, c := range []struct {
		name string
		in   []Parts
		want Parts
	}{
		{"none", nil, Parts{}},
		{"one", []Parts{near}, near},
		{"the most pressed shard wins, wherever it is", []Parts{calm, over, near}, over},
		{"pressure, not the count, decides", []Parts{near, strict}, strict},
		{"ties below pressure go to more parts", []Parts{{Active: 3, DelayAt: 150, ThrowAt: 300}, calm}, calm},
	} {
		if got := MostPressed(c.in); got != c.want {
			t.Errorf("%s: MostPressed = %+v, want %+v", c.name, got, c.want)
		}
	}
}
