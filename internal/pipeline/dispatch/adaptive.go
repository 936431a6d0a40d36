package dispatch

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/adapt"
	"sink/internal/batch"
	"sink/internal/chtable"
	"sink/internal/status"
	"sink/internal/tables"
)

// batch.mode adaptive: each table has an adapt.Controller that the owner
// goroutine feeds with what it sees (each sealed batch's rows, bytes and
// age; each insert's duration; TOO_MANY_PARTS retries counted by the insert
// goroutines) and with the table's parts, which a probe goroutine reads
// from ClickHouse every PartsInterval, every adaptive table at once (one
// PartsOf: three queries per server however many tables), and hands back
// as an event (PartsRead). After each decision the table's open batches
// get the new wait and rows ceiling. A batch is sealed at its triggers,
// as with fixed ones.

// PartsInterval is how often the adaptive tables' parts are read: three
// small queries on system tables for all of them, modest next to the
// inserts.
var PartsInterval = 5 * time.Second

// PartsReader is the Sink's optional ability to read tables' parts
// (writer.Writer has it; writer.Cluster reads every replica of every shard
// and gives the most pressed one's); without it the adaptive controller
// works from the rate, insert durations and errors alone. Called from a
// probe goroutine.
type PartsReader interface {
	PartsOf(ctx context.Context, tables []chtable.TableName) (map[chtable.TableName]adapt.Parts, error)
}

// adaptive is the cadence of batch.mode adaptive.
type adaptive struct {
	fixed   // the waits are the batches' own, as with fixed triggers
	d       *Dispatch
	tables  map[*tables.Table]*adaptState
	probing bool // a parts read is running
	log     zerolog.Logger
}

// adaptState is one table's controller and what it decided last.
type adaptState struct {
	ctl         *adapt.Controller
	target      adapt.Target
	parts       adapt.Parts // the last read
	tooManySeen int64       // the TOO_MANY_PARTS count the controller was last told about
}

func newAdaptive(cfg *config.Config, d *Dispatch) *adaptive {
	return &adaptive{fixed: fixed{cfg: cfg, q: &d.q}, d: d, tables: map[*tables.Table]*adaptState{}, log: d.Log}
}

// Added gives t its controller, and reports its target.
func (c *adaptive) Added(t *tables.Table) {
	b := c.cfg.Batch
	maxLatency := b.MaxLatency
	if t.MaxLatency() > 0 {
		maxLatency = t.MaxLatency()
	}
	// A batch may hold max_bytes, and never more than its share of the
	// buffer: the one filling plus max_in_flight being inserted.
	share := min(int(b.MaxBytes), bufferShare(c.cfg))
	as := &adaptState{ctl: adapt.New(adapt.Settings{
		InsertsPerMinute: b.TargetInsertsPerMinute,
		MaxLatency:       maxLatency,
		Overhead:         c.cfg.Kafka.FetchMaxWait,
		MaxBatchBytes:    share,
	})}
	as.target = as.ctl.Target()
	c.tables[t] = as
	t.Metrics().Target(as.target.Rows, as.target.Wait, as.target.Pressure, as.target.OverLatency, as.target.Rate, string(as.target.Reason))
}

// Bounded rebuilds t's controller with its new bound.
func (c *adaptive) Bounded(t *tables.Table) { c.Added(t) }

// Policy is t's target now.
func (c *adaptive) Policy(t *tables.Table) batch.Policy {
	as := c.tables[t]
	if as == nil {
		return c.fixed.Policy(t)
	}
	return batch.Policy{MaxRows: as.target.Rows, MaxBytes: as.ctl.Settings().MaxBatchBytes, MaxWait: as.target.Wait}
}

// Sealed feeds a sealed batch to its table's controller.
func (c *adaptive) Sealed(a *Open, b *Batch) {
	t := a.key.table
	as := c.tables[t]
	// A batch sealed by a revoke, shutdown or schema change did not run
	// its course: its age says nothing about the rate.
	if as == nil || (b.Reason != batch.ReasonRows && b.Reason != batch.ReasonBytes && b.Reason != batch.ReasonWait) {
		return
	}
	c.apply(t, as.ctl.Sealed(b.Sealed, b.Rows(), b.Data.Bytes(), b.Sealed.Sub(b.Opened)))
}

// Inserted feeds an acknowledged insert to t's controller, with the
// TOO_MANY_PARTS retries seen since the last time.
func (c *adaptive) Inserted(t *tables.Table, _ *Batch, took time.Duration, now time.Time) {
	as := c.tables[t]
	if as == nil {
		return
	}
	c.errors(t, as)
	c.apply(t, as.ctl.Inserted(now, took))
}

// errors tells the controller about TOO_MANY_PARTS retries that insert
// goroutines counted since the last look.
func (c *adaptive) errors(t *tables.Table, as *adaptState) {
	if n := c.d.q.stats(t).tooManyParts.Load(); n > as.tooManySeen {
		as.tooManySeen = n
		c.apply(t, as.ctl.TooManyParts(c.d.Now()))
	}
}

// PartsRead is a probe goroutine's answer, for the tables it read.
type PartsRead struct {
	c      *adaptive
	tables []*tables.Table
	parts  map[chtable.TableName]adapt.Parts
	err    error
}

// Apply hands the parts to the controllers.
func (e PartsRead) Apply(context.Context) { e.c.parts(e) }

// Tick lets every controller decide again (pressures decay with time) and
// starts one parts read for every adaptive table, unless one is running.
func (c *adaptive) Tick(ctx context.Context) {
	pr, _ := c.d.Sink.(PartsReader)
	var tabs []*tables.Table
	var names []chtable.TableName
	c.d.Catalog.EachTable(func(t *tables.Table) {
		as := c.tables[t]
		if as == nil {
			return
		}
		c.errors(t, as)
		c.apply(t, as.ctl.Tick(c.d.Now()))
		tabs = append(tabs, t)
		names = append(names, chtable.TableName{Database: t.Target().Database, Name: t.Target().Name})
	})
	if pr == nil || c.probing || len(tabs) == 0 {
		return
	}
	c.probing = true
	timeout := c.cfg.ClickHouse.QueryTimeout
	c.d.Owner.Spawn(func() {
		qctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		parts, err := pr.PartsOf(qctx, names)
		c.d.Owner.Post(PartsRead{c: c, tables: tabs, parts: parts, err: err})
	})
}

// parts applies a parts read.
func (c *adaptive) parts(r PartsRead) {
	c.probing = false
	if r.err != nil {
		c.log.Warn().Int("tables", len(r.tables)).Err(r.err).Msg("adaptive batching: reading the tables' parts failed; deciding without them")
		return
	}
	for _, t := range r.tables {
		parts, ok := r.parts[chtable.TableName{Database: t.Target().Database, Name: t.Target().Name}]
		as := c.tables[t]
		if !ok || as == nil {
			continue
		}
		t.Metrics().Parts(parts.Active, parts.DelayAt)
		as.parts = parts
		c.apply(t, as.ctl.ObserveParts(c.d.Now(), parts))
	}
}

// apply makes tg t's target: the open batches' triggers, the metrics, and
// a log line when what decides changes (always when ClickHouse's pushback
// makes batches wait past max_latency, and when that ends).
func (c *adaptive) apply(t *tables.Table, tg adapt.Target) {
	as := c.tables[t]
	prev := as.target
	as.target = tg
	if tg.Rows != prev.Rows || tg.Wait != prev.Wait {
		c.d.repolicy(t)
	}
	t.Metrics().Target(tg.Rows, tg.Wait, tg.Pressure, tg.OverLatency, tg.Rate, string(tg.Reason))
	ev := c.log.Debug()
	switch {
	case tg.OverLatency && !prev.OverLatency:
		ev = c.log.Warn()
	case !tg.OverLatency && prev.OverLatency:
		ev = c.log.Info()
	case tg.Reason != prev.Reason:
		ev = c.log.Info()
	case tg.Wait == prev.Wait:
		return
	}
	ev.Str("table", t.Name()).Str("reason", string(tg.Reason)).Dur("wait", tg.Wait).Int("rows", tg.Rows).
		Float64("pressure", tg.Pressure).Bool("over_max_latency", tg.OverLatency).Float64("rows_per_sec", tg.Rate).
		Int("active_parts", as.parts.Active).Int("parts_to_delay_insert", as.parts.DelayAt).Int("parts_to_throw_insert", as.parts.ThrowAt).
		Msg(targetMessage(tg, prev))
}

func targetMessage(t, prev adapt.Target) string {
	switch {
	case t.OverLatency && !prev.OverLatency:
		return "adaptive batching: ClickHouse pushes back, batches wait past max_latency"
	case !t.OverLatency && prev.OverLatency:
		return "adaptive batching: back within max_latency"
	}
	return "adaptive batching: new target"
}

// Target is t's target, adaptive.
func (c *adaptive) Target(t *tables.Table) status.Target {
	pol := c.Policy(t)
	tg := status.Target{Mode: "fixed", Rows: pol.MaxRows, WaitSeconds: pol.MaxWait.Seconds()}
	if as := c.tables[t]; as != nil {
		tg.Mode, tg.Reason = "adaptive", string(as.target.Reason)
	}
	return tg
}
