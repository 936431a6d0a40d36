// Package adapt is the control law of batch.mode adaptive: from what the
// pipeline measures (the input rate, how long inserts take) and what
// ClickHouse says (active parts against parts_to_delay_insert and
// parts_to_throw_insert, TOO_MANY_PARTS errors) it decides how long a
// table's batch stays open and how many rows it may hold.
//
// The law, in one place (docs/sizing.md, "Adaptive batching", shows it at work):
//
//	interval  = 60s / target_inserts_per_minute
//	budget    = max_latency - overhead - insert time   (overhead: the fetch wait)
//	wait      = min(interval, budget) × pressure
//	rows      = 2 × measured rows/s × wait             (a ceiling; the wait seals in steady state)
//	pressure  = max(parts pressure, error pressure, slow-insert pressure), ≥ 1
//
// Pressure is 1 while ClickHouse is comfortable, so the batch closes at
// the target cadence or earlier when max_latency demands it. It exceeds 1
// only on ClickHouse's pushback, and only then may the wait pass the
// latency budget (Target.OverLatency says so). Pressure rises at once and
// falls slowly (asymmetric smoothing), the wait moves at most ×2 up or ÷2
// down per decision, and the rate estimate rises at once but falls by
// halves: a step or a 20× change of the input rate moves the target in a
// few batches without overshoot or oscillation (adapt_test.go shows the
// traces).
//
// The package does no I/O and reads no clock: callers pass the time in.
// Concurrency: a Controller is owned by one goroutine.
package adapt

import (
	"math"
	"time"
)

// Settings are a table's targets and limits.
type Settings struct {
	// InsertsPerMinute is the cadence to hold while nothing else forbids it.
	InsertsPerMinute float64
	// MaxLatency bounds record timestamp → row visible; 0: no bound.
	MaxLatency time.Duration
	// Overhead is the part of the latency spent before a record reaches a
	// batch (the Kafka fetch wait); the batch gets what is left.
	Overhead time.Duration
	// MaxBatchBytes is the most one batch may hold (the share of
	// buffer_memory a batch can have); the pipeline seals by bytes at it.
	MaxBatchBytes int
	// MinWait is the shortest wait ever chosen (default 100ms).
	MinWait time.Duration
	// MaxWait is the longest wait pressure may push to (default 10 minutes).
	MaxWait time.Duration
}

// Parts is one observation of the table's parts in ClickHouse.
type Parts struct {
	// Active is the largest number of active parts in one partition.
	Active int
	// DelayAt and ThrowAt are parts_to_delay_insert and
	// parts_to_throw_insert (the table's own settings or the server's).
	DelayAt, ThrowAt int
}

// Reason names what decided the current target.
type Reason string

const (
	ReasonTarget        Reason = "target"         // the target cadence
	ReasonLatency       Reason = "latency"        // max_latency shortened the wait
	ReasonParts         Reason = "parts"          // active parts near parts_to_delay_insert
	ReasonTooManyParts  Reason = "too_many_parts" // ClickHouse refused or delayed an insert
	ReasonSlowInsert    Reason = "slow_insert"    // inserts take a large share of the interval
	ReasonMemory        Reason = "memory"         // the rows ceiling is the memory share
	ReasonNotYetMeasure Reason = "starting"       // no batch measured yet
)

// Reasons lists every Reason, for metric labels.
var Reasons = []Reason{ReasonTarget, ReasonLatency, ReasonParts, ReasonTooManyParts, ReasonSlowInsert, ReasonMemory, ReasonNotYetMeasure}

// Target is the controller's decision for the next batches.
type Target struct {
	// Rows is the ceiling of rows per batch (sealed by rows at it).
	Rows int
	// Wait is how long a batch stays open at most.
	Wait time.Duration
	// Pressure is the factor ClickHouse's feedback stretches the wait by (1: none).
	Pressure float64
	// OverLatency: pressure made Wait longer than max_latency allows.
	OverLatency bool
	// Rate is the measured input, rows per second.
	Rate float64
	// Reason says what decided Wait.
	Reason Reason
}

// Law constants. They are the tuning of the law, named so tests and the
// docs can refer to them.
const (
	// Headroom: the rows ceiling is this many intervals of the measured
	// rate, so in steady state the wait seals and a burst seals early.
	Headroom = 2.0
	// ErrorHalfLife is how fast the pressure of a TOO_MANY_PARTS decays.
	ErrorHalfLife = 60 * time.Second
	// PartsRelax is the share of the distance to a lower parts pressure
	// covered per observation (rises are immediate).
	PartsRelax = 0.2
	// MaxStep bounds the change of the wait per decision (×MaxStep, ÷MaxStep).
	MaxStep = 2.0
	// MaxPressure caps the pressure.
	MaxPressure = 64.0
	// SlowShare: inserts taking more than this share of the interval
	// stretch it (the server cannot keep the cadence).
	SlowShare = 0.5
)

// Controller holds one table's measurements and decision.
type Controller struct {
	s Settings

	rate     float64 // rows per second; 0 until the first batch
	rowBytes float64
	insert   float64 // EWMA of insert seconds

	partsP   float64
	errP     float64 // pressure at errAt, decaying from it
	errAt    time.Time
	slowP    float64
	lastWait time.Duration
	t        Target
}

// New starts a controller for s at now; before the first measurement the
// target is the configured cadence (within max_latency).
func New(s Settings) *Controller {
	if s.MinWait <= 0 {
		s.MinWait = 100 * time.Millisecond
	}
	if s.MaxWait <= 0 {
		s.MaxWait = 10 * time.Minute
	}
	if s.InsertsPerMinute <= 0 {
		s.InsertsPerMinute = 1
	}
	c := &Controller{s: s, partsP: 1, errP: 1, slowP: 1}
	c.decide(time.Time{})
	return c
}

// Target is the current decision.
func (c *Controller) Target() Target { return c.t }

// Settings are the controller's settings with defaults applied.
func (c *Controller) Settings() Settings { return c.s }

// Sealed reports a sealed batch: rows rows and bytes bytes collected over
// age (first row to seal). It updates the rate estimate and decides again.
func (c *Controller) Sealed(now time.Time, rows, bytes int, age time.Duration) Target {
	if rows > 0 {
		c.rowBytes = float64(bytes) / float64(rows)
		// A batch younger than MinWait says little about the rate
		// (a shutdown flush, a revoke): count it as MinWait old.
		inst := float64(rows) / max(age, c.s.MinWait).Seconds()
		switch {
		case c.rate == 0:
			c.rate = inst
		case inst > c.rate:
			// Rises at once: a batch that filled early measured the new rate.
			c.rate = inst
		default:
			c.rate += 0.5 * (inst - c.rate)
		}
	}
	return c.decide(now)
}

// Inserted reports a successful insert that took took (retries included).
func (c *Controller) Inserted(now time.Time, took time.Duration) Target {
	s := took.Seconds()
	if c.insert == 0 {
		c.insert = s
	} else {
		c.insert += 0.3 * (s - c.insert)
	}
	base := c.interval().Seconds()
	c.slowP = max(1, c.insert/(SlowShare*base))
	return c.decide(now)
}

// ObserveParts reports the table's parts; pressure starts at half of
// parts_to_delay_insert, reaches 5 at it, and grows geometrically to 80
// at parts_to_throw_insert.
func (c *Controller) ObserveParts(now time.Time, p Parts) Target {
	want := PartsPressure(p)
	if want >= c.partsP {
		c.partsP = want
	} else {
		c.partsP += PartsRelax * (want - c.partsP)
		if c.partsP < 1.01 {
			c.partsP = 1
		}
	}
	return c.decide(now)
}

// PartsPressure is the pressure a parts observation asks for.
func PartsPressure(p Parts) float64 {
	if p.DelayAt <= 0 {
		return 1
	}
	x := float64(p.Active) / float64(p.DelayAt)
	switch {
	case x < 0.5:
		return 1
	case x < 1 || p.ThrowAt <= p.DelayAt:
		return 1 + 8*(min(x, 1)-0.5)
	}
	y := float64(p.Active-p.DelayAt) / float64(p.ThrowAt-p.DelayAt)
	return min(5*math.Pow(16, min(y, 1)), MaxPressure)
}

// MostPressed is the observation, of several servers' parts of one table
// (the shards and replicas of a cluster), that asks for the most pressure:
// ClickHouse refuses an INSERT on the server it lands on, so the table is as
// pressed as its most pressed server. Ties go to the one with more active
// parts; no observations give Parts{}.
func MostPressed(ps []Parts) Parts {
	var worst Parts
	for i, p := range ps {
		if i == 0 {
			worst = p
			continue
		}
		pp, wp := PartsPressure(p), PartsPressure(worst)
		if pp > wp || (pp == wp && p.Active > worst.Active) {
			worst = p
		}
	}
	return worst
}

// TooManyParts reports that ClickHouse refused (TOO_MANY_PARTS) or
// delayed an insert: the error pressure doubles (at least 2) and then
// halves every ErrorHalfLife.
func (c *Controller) TooManyParts(now time.Time) Target {
	c.errP = min(max(2*c.errorPressure(now), 2), MaxPressure)
	c.errAt = now
	return c.decide(now)
}

func (c *Controller) errorPressure(now time.Time) float64 {
	if c.errP <= 1 || c.errAt.IsZero() {
		return 1
	}
	half := now.Sub(c.errAt).Seconds() / ErrorHalfLife.Seconds()
	p := 1 + (c.errP-1)*math.Pow(0.5, half)
	if p < 1.01 {
		return 1
	}
	return p
}

// interval is the wait of the target cadence.
func (c *Controller) interval() time.Duration {
	return time.Duration(float64(time.Minute) / c.s.InsertsPerMinute)
}

// Tick decides again at now without a new measurement (the error
// pressure decays with time).
func (c *Controller) Tick(now time.Time) Target { return c.decide(now) }

func (c *Controller) decide(now time.Time) Target {
	base, reason := c.interval(), ReasonTarget
	budget := time.Duration(math.MaxInt64)
	if c.s.MaxLatency > 0 {
		budget = max(c.s.MaxLatency-c.s.Overhead-time.Duration(c.insert*float64(time.Second)), c.s.MinWait)
		if budget < base {
			base, reason = budget, ReasonLatency
		}
	}
	pressure := 1.0
	for _, p := range []struct {
		v float64
		r Reason
	}{{c.partsP, ReasonParts}, {c.errorPressure(now), ReasonTooManyParts}, {c.slowP, ReasonSlowInsert}} {
		if p.v > pressure {
			pressure, reason = p.v, p.r
		}
	}
	want := time.Duration(float64(base) * pressure)
	want = min(max(want, c.s.MinWait), max(c.s.MaxWait, base))
	wait := want
	if c.lastWait > 0 { // smooth: at most ×MaxStep per decision
		wait = min(max(want, time.Duration(float64(c.lastWait)/MaxStep)), time.Duration(float64(c.lastWait)*MaxStep))
	}
	c.lastWait = wait
	t := Target{Wait: wait, Pressure: pressure, Rate: c.rate, Reason: reason, OverLatency: wait > budget}
	// The rows ceiling: Headroom intervals of the measured rate, never
	// above the memory share (rows of the measured size).
	rows := math.MaxInt32 / 2
	if c.rate > 0 {
		rows = int(math.Ceil(Headroom * c.rate * wait.Seconds()))
	} else if reason == ReasonTarget {
		t.Reason = ReasonNotYetMeasure
	}
	if c.s.MaxBatchBytes > 0 && c.rowBytes > 0 {
		if mem := int(float64(c.s.MaxBatchBytes) / c.rowBytes); mem < rows {
			rows = mem
			if c.rate > 0 && float64(mem) < c.rate*wait.Seconds() {
				t.Reason = ReasonMemory // the memory share seals before the wait
			}
		}
	}
	t.Rows = max(rows, 1)
	c.t = t
	return t
}
