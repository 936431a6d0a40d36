package pipeline

import (
	"context"
	"time"

	"sink/config"
	"sink/internal/adapt"
	"sink/internal/batch"
	"sink/internal/chtable"
	"sink/internal/tables"
)

// batch.mode adaptive: each table has an adapt.Controller that the owner
// goroutine feeds with what it sees (each sealed batch's rows, bytes and
// age; each insert's duration; TOO_MANY_PARTS retries counted by the insert
// goroutines) and with the table's parts, which a probe goroutine reads
// from ClickHouse every partsInterval, every adaptive table at once (one
// PartsOf: three queries per server however many tables), and hands back
// as an event (partsRead). After each
// decision the table's accumulators get the new wait and rows ceiling.

// partsInterval is how often the adaptive tables' parts are read: three
// small queries on system tables for all of them, modest next to the
// inserts.
var partsInterval = 5 * time.Second

// adaptState is one table's controller and what it decided last.
type adaptState struct {
	ctl         *adapt.Controller
	target      adapt.Target
	parts       adapt.Parts // the last read
	tooManySeen int64       // the TOO_MANY_PARTS count the controller was last told about
}

// partsResult is a probe goroutine's answer, for the tables it read.
type partsResult struct {
	tables []*tables.Table
	parts  map[chtable.TableName]adapt.Parts
	err    error
}

func (p *Pipeline) adaptive() bool { return p.cfg.Batch.Mode == config.BatchAdaptive }

// adaptTable gives ts its controller in adaptive mode, and reports its
// target.
func (p *Pipeline) adaptTable(ts *tables.Table) {
	b := p.cfg.Batch
	if !p.adaptive() {
		pol := p.policy(ts)
		ts.Metrics().Target(pol.MaxRows, pol.MaxWait, 1, false, 0, "")
		return
	}
	maxLatency := b.MaxLatency
	if ts.MaxLatency() > 0 {
		maxLatency = ts.MaxLatency()
	}
	// A batch may hold max_bytes, and never more than its share of the
	// buffer: the one filling plus max_in_flight being inserted.
	share := min(int(b.MaxBytes), int(b.BufferMemory)/(p.cfg.ClickHouse.MaxInFlight+1))
	as := &adaptState{ctl: adapt.New(adapt.Settings{
		InsertsPerMinute: b.TargetInsertsPerMinute,
		MaxLatency:       maxLatency,
		Overhead:         p.cfg.Kafka.FetchMaxWait,
		MaxBatchBytes:    share,
	})}
	as.target = as.ctl.Target()
	if p.adapt == nil {
		p.adapt = map[*tables.Table]*adaptState{}
	}
	p.adapt[ts] = as
	ts.Metrics().Target(as.target.Rows, as.target.Wait, as.target.Pressure, as.target.OverLatency, as.target.Rate, string(as.target.Reason))
}

// policy is the triggers of ts's accumulators now.
func (p *Pipeline) policy(ts *tables.Table) batch.Policy {
	b := p.cfg.Batch
	as := p.adapt[ts]
	if as == nil {
		wait := b.MaxWait
		if ts.MaxLatency() > 0 {
			// The route's bound caps the wait: a record may have waited
			// fetch_max_wait in Kafka already.
			wait = min(wait, max(ts.MaxLatency()-p.cfg.Kafka.FetchMaxWait, time.Millisecond))
		}
		return batch.Policy{MaxRows: b.MaxRows, MaxBytes: int(b.MaxBytes), MaxWait: wait}
	}
	return batch.Policy{MaxRows: as.target.Rows, MaxBytes: as.ctl.Settings().MaxBatchBytes, MaxWait: as.target.Wait}
}

// adaptSealed feeds a sealed batch to ts's controller.
func (p *Pipeline) adaptSealed(ts *tables.Table, b *sealedBatch) {
	as := p.adapt[ts]
	if as == nil {
		return
	}
	// A batch sealed by a revoke, shutdown or schema change did not run
	// its course: its age says nothing about the rate.
	if b.Reason != batch.ReasonRows && b.Reason != batch.ReasonBytes && b.Reason != batch.ReasonWait {
		return
	}
	p.apply(ts, as.ctl.Sealed(b.Sealed, b.Rows(), b.Data.Bytes(), b.Sealed.Sub(b.Opened)))
}

// adaptInserted feeds an acknowledged insert to ts's controller, with the
// TOO_MANY_PARTS retries seen since the last time.
func (p *Pipeline) adaptInserted(ts *tables.Table, took time.Duration) {
	as := p.adapt[ts]
	if as == nil {
		return
	}
	p.adaptErrors(ts, as)
	p.apply(ts, as.ctl.Inserted(p.now(), took))
}

// adaptErrors tells the controller about TOO_MANY_PARTS retries that insert
// goroutines counted since the last look.
func (p *Pipeline) adaptErrors(ts *tables.Table, as *adaptState) {
	if n := p.disp.stats(ts).tooManyParts.Load(); n > as.tooManySeen {
		as.tooManySeen = n
		p.apply(ts, as.ctl.TooManyParts(p.now()))
	}
}

// probeParts starts one parts read for every adaptive table, unless one
// is running, and lets every controller decide again (pressures decay
// with time).
func (p *Pipeline) probeParts(ctx context.Context) {
	pr, _ := p.w.(partsReader)
	var tabs []*tables.Table
	var names []chtable.TableName
	p.cat.EachTable(func(ts *tables.Table) {
		as := p.adapt[ts]
		if as == nil {
			return
		}
		p.adaptErrors(ts, as)
		p.apply(ts, as.ctl.Tick(p.now()))
		tabs = append(tabs, ts)
		names = append(names, chtable.TableName{Database: ts.Target().Database, Name: ts.Target().Name})
	})
	if pr == nil || p.probingParts || len(tabs) == 0 {
		return
	}
	p.probingParts = true
	p.spawn(func() {
		qctx, cancel := context.WithTimeout(ctx, p.cfg.ClickHouse.QueryTimeout)
		defer cancel()
		parts, err := pr.PartsOf(qctx, names)
		p.post(partsRead{p: p, r: partsResult{tables: tabs, parts: parts, err: err}})
	})
}

// handleParts applies a parts read.
func (p *Pipeline) handleParts(r partsResult) {
	p.probingParts = false
	if r.err != nil {
		p.log.Warn().Int("tables", len(r.tables)).Err(r.err).Msg("adaptive batching: reading the tables' parts failed; deciding without them")
		return
	}
	for _, ts := range r.tables {
		parts, ok := r.parts[chtable.TableName{Database: ts.Target().Database, Name: ts.Target().Name}]
		as := p.adapt[ts]
		if !ok || as == nil {
			continue
		}
		ts.Metrics().Parts(parts.Active, parts.DelayAt)
		as.parts = parts
		p.apply(ts, as.ctl.ObserveParts(p.now(), parts))
	}
}

// apply makes t ts's target: the accumulators' triggers, the metrics, and
// a log line when what decides changes (always when ClickHouse's pushback
// makes batches wait past max_latency, and when that ends).
func (p *Pipeline) apply(ts *tables.Table, t adapt.Target) {
	as := p.adapt[ts]
	prev := as.target
	as.target = t
	if t.Rows != prev.Rows || t.Wait != prev.Wait {
		pol := p.policy(ts)
		p.disp.eachOpenOf(ts, func(a *accState) {
			a.acc.SetPolicy(pol)
			if p.sched != nil && !a.acc.Empty() {
				p.budgetOpened(a, p.now()) // the new wait; opened stays
			}
		})
	}
	ts.Metrics().Target(t.Rows, t.Wait, t.Pressure, t.OverLatency, t.Rate, string(t.Reason))
	ev := p.log.Debug()
	switch {
	case t.OverLatency && !prev.OverLatency:
		ev = p.log.Warn()
	case !t.OverLatency && prev.OverLatency:
		ev = p.log.Info()
	case t.Reason != prev.Reason:
		ev = p.log.Info()
	case t.Wait == prev.Wait:
		return
	}
	ev.Str("table", ts.Name()).Str("reason", string(t.Reason)).Dur("wait", t.Wait).Int("rows", t.Rows).
		Float64("pressure", t.Pressure).Bool("over_max_latency", t.OverLatency).Float64("rows_per_sec", t.Rate).
		Int("active_parts", as.parts.Active).Int("parts_to_delay_insert", as.parts.DelayAt).Int("parts_to_throw_insert", as.parts.ThrowAt).
		Msg(targetMessage(t, prev))
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
