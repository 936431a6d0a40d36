package dispatch

import (
	"context"
	"time"

	"sink/config"
	"sink/internal/batch"
	"sink/internal/pace"
	"sink/internal/status"
	"sink/internal/tables"
)

// Cadence decides when the open batches are sealed: each table's triggers
// (rows, bytes, wait), and past its wait whether a batch goes now. There
// are three, behind this one interface:
//
//   - fixed: a batch is sealed at its own triggers, batch.max_rows,
//     max_bytes, max_wait (capped by its routes' max_latency);
//   - adaptive (batch.mode adaptive, adaptive.go): each table's triggers
//     follow what ClickHouse says (adapt.Controller: the rate, the INSERTs'
//     durations, TOO_MANY_PARTS, the table's parts);
//   - budget (clickhouse.max_inserts_per_minute or a shared allowance,
//     budget.go): over one of the others, a batch past its wait goes when
//     its servers' budget has room, by its table's latency bound at the
//     latest (pace.Scheduler).
//
// Dispatch calls it at each step of a batch's life; only the owner
// goroutine does.
type Cadence interface {
	// Policy is the triggers of t's open batches now.
	Policy(t *tables.Table) batch.Policy
	// Added: t was resolved; Bounded: its latency bound tightened.
	Added(t *tables.Table)
	Bounded(t *tables.Table)
	// Opened: a got its first row at now (or its wait changed).
	Opened(a *Open, now time.Time)
	// Sealed: a was sealed as b. Inserted: b of t is in, its INSERT
	// took took, at now.
	Sealed(a *Open, b *Batch)
	Inserted(t *tables.Table, b *Batch, took time.Duration, now time.Time)
	// Forget: a is no longer open.
	Forget(a *Open)
	// Due seals with seal what is due at now; Next is how long until
	// something is.
	Due(now time.Time, seal func(a *Open, why batch.Reason))
	Next(now time.Time) time.Duration
	// Tick is the periodic look (the adaptive tables' parts).
	Tick(ctx context.Context)
	// Target is t's target for the status; Budgets adds the servers'
	// budgets to s.
	Target(t *tables.Table) status.Target
	Budgets(s *status.Snapshot)
}

// newCadence is the cadence cfg asks for, over d's open batches.
func newCadence(cfg *config.Config, d *Dispatch) Cadence {
	var c Cadence = &fixed{cfg: cfg, q: &d.q}
	if cfg.Batch.Mode == config.BatchAdaptive {
		c = newAdaptive(cfg, d)
	}
	allow := d.Allowance
	if allow == nil && cfg.ClickHouse.MaxInsertsPerMinute > 0 {
		allow = pace.Fixed(cfg.ClickHouse.MaxInsertsPerMinute)
	}
	if allow != nil {
		c = newBudget(cfg, d, c, allow)
	}
	return c
}

// fixed seals each batch at its own triggers: the configured ones, the
// wait capped by its routes' max_latency.
type fixed struct {
	cfg *config.Config
	q   *queues
}

// Policy is the configured triggers; a route's bound caps the wait, since
// a record may have waited fetch_max_wait in Kafka already. max_rows and
// max_bytes bound each INSERT: a batch placed on a cluster's shards by
// its key is full when its largest shard's part is, and holds in all no
// more than its share of the buffer (the one filling and max_in_flight
// being inserted), at least max_bytes.
func (f *fixed) Policy(t *tables.Table) batch.Policy {
	b := f.cfg.Batch
	wait := b.MaxWait
	if t.MaxLatency() > 0 {
		wait = min(wait, max(t.MaxLatency()-f.cfg.Kafka.FetchMaxWait, time.Millisecond))
	}
	return batch.Policy{MaxRows: b.MaxRows, MaxBytes: int(b.MaxBytes), MaxWait: wait,
		PerPart: true, MaxDataBytes: max(int(b.MaxBytes), bufferShare(f.cfg))}
}

// bufferShare is what one table's batch may hold of batch.buffer_memory:
// the batch filling and clickhouse.max_in_flight being inserted share it.
func bufferShare(cfg *config.Config) int {
	return int(cfg.Batch.BufferMemory) / (cfg.ClickHouse.MaxInFlight + 1)
}

// Added reports t's target, which never changes.
func (f *fixed) Added(t *tables.Table) {
	pol := f.Policy(t)
	t.Metrics().Target(pol.MaxRows, pol.MaxWait, 1, false, 0, "")
}

func (f *fixed) Bounded(t *tables.Table)                                  { f.Added(t) }
func (f *fixed) Opened(*Open, time.Time)                                  {}
func (f *fixed) Sealed(*Open, *Batch)                                     {}
func (f *fixed) Inserted(*tables.Table, *Batch, time.Duration, time.Time) {}
func (f *fixed) Forget(*Open)                                             {}
func (f *fixed) Tick(context.Context)                                     {}
func (f *fixed) Budgets(*status.Snapshot)                                 {}

// Due seals every batch whose wait has passed.
func (f *fixed) Due(now time.Time, seal func(a *Open, why batch.Reason)) {
	f.q.eachOpen(func(a *Open) {
		if d, ok := a.acc.UntilNext(now); ok && d <= 0 {
			seal(a, batch.ReasonWait)
		}
	})
}

// Next is how long until the first open batch's wait passes (an hour
// when none waits).
func (f *fixed) Next(now time.Time) time.Duration {
	next := time.Hour
	f.q.eachOpen(func(a *Open) {
		if d, ok := a.acc.UntilNext(now); ok && d < next {
			next = d
		}
	})
	return next
}

// Target is the fixed triggers.
func (f *fixed) Target(t *tables.Table) status.Target {
	pol := f.Policy(t)
	return status.Target{Mode: "fixed", Rows: pol.MaxRows, WaitSeconds: pol.MaxWait.Seconds()}
}
