package intake

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/decode"
	"sink/internal/offsets"
	"sink/internal/pipeline/dispatch"
	"sink/internal/route"
	"sink/internal/tables"
)

// Fan-out routing: when some route has when: conditions, or fanout is all,
// a record's routes are chosen per record. Its topic's candidate routes
// (the catalog's RoutesFor) are tested in configuration order; the first that matches
// takes it (fanout: first) or every one that matches does (fanout: all,
// one row per table even when two matching routes share a table). Each
// target appends its own row to its own table's open batch, and the
// tracker holds the record until every one of those batches is
// acknowledged (offsets.AddShared), so a target that fails holds the
// commit. A record one target cannot decode still goes to the others, and
// once to the dead-letter topic, whose produce is one more unit it waits
// for. A record no route takes is unrouted: counted and skipped, or sent to
// the dead-letter topic with errors.unrouted: dlq.

// fanState is the per-record scratch of fan-out routing, reused so that
// routing a record allocates nothing.
type fanState struct {
	eval    route.Evaluator
	targets []*tables.Route
	accs    []*dispatch.Open
	plans   []*decode.Plan // the plan that appended each of accs' rows
	units   []uint64
}

// unrouted handles a record no route takes.
func (in *Intake) unrouted(writeCtx context.Context, tp offsets.TP, r *kgo.Record) {
	in.topicMetrics(tp.Topic).Unrouted()
	if in.cfg.Errors.Unrouted == "dlq" {
		in.badRecord(writeCtx, tp, r, tables.UnroutedError(r), nil)
		return
	}
	// Nothing to write, so it is handled as soon as it is seen.
	in.skipped(tp, r)
}

// badTopic handles r as a bad record when err says that its topic's
// records go to no table (tables.TopicError: the name gives no table by
// its route's template, or a dead-letter table, or one that is missing or
// that the route cannot fill): whoever creates topics chooses the name, as
// whoever produces chooses a record. The route's dlq_table, when it has
// one, takes it. It reports false for any other error, which stops the
// connector.
func (in *Intake) badTopic(writeCtx context.Context, tp offsets.TP, r *kgo.Record, err error) bool {
	te := tables.TopicErrorOf(err)
	if te == nil {
		return false
	}
	in.badRecord(writeCtx, tp, r, err, te.Route)
	return true
}

// handleFanout routes one record by its routes' conditions. Like
// decodeRecord, held reports that the record waits for the schema registry
// or for a table's new column (nothing was done with it).
func (in *Intake) handleFanout(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) (_ error, held bool) {
	cands, err := in.cat.RoutesFor(writeCtx, r.Topic)
	if err != nil {
		if !in.badTopic(writeCtx, tp, r, err) {
			in.own.Fail(err) // a table cannot be resolved: stop before this record
		}
		return nil, false
	}
	if !in.fanTargets(cands, r) {
		in.unrouted(writeCtx, tp, r)
		return nil, false
	}
	bad, badRS, wait := in.fanAppend(writeCtx, now, tp, r)
	if wait != nil {
		return wait, true
	}
	in.fanTrack(writeCtx, now, tp, r, bad, badRS)
	return nil, false
}

// fanTargets picks r's targets among its topic's candidate routes, in
// configuration order: the first whose conditions match (fanout: first)
// or every one (fanout: all), one per table. It reports whether any does.
func (in *Intake) fanTargets(cands []*tables.Route, r *kgo.Record) bool {
	f := &in.fan
	f.eval.Reset(r)
	f.targets = f.targets[:0]
	for _, rs := range cands {
		if !f.eval.Match(rs.Config().Conditions()) || tableTaken(f.targets, rs.Table()) {
			continue
		}
		f.targets = append(f.targets, rs)
		if in.cfg.Fanout != config.FanoutAll {
			break
		}
	}
	return len(f.targets) > 0
}

// fanAppend appends r's row to every target's open batch. A target that
// cannot decode it gives bad (the first such error) and its route; wait
// says the record must be held (a schema not known yet, a column being
// added for one of its fields), every row appended taken back.
func (in *Intake) fanAppend(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) (bad error, badRS *tables.Route, wait error) {
	f := &in.fan
	f.accs, f.plans, f.units = f.accs[:0], f.plans[:0], f.units[:0]
	for _, rs := range f.targets {
		a := in.batches.Open(rs.Table(), tp)
		err := rs.Plan().Append(a.Block(), r)
		switch {
		case errors.Is(err, decode.ErrUnavailable):
			// A target needs a schema not known yet (its look-up is
			// running, or the registry is down): take back the rows the
			// targets before it appended (nothing else was done with
			// them yet) and hold the record like any other (held.go).
			f.unappend()
			return nil, nil, err
		case err != nil:
			if !errors.Is(err, decode.ErrSkip) && bad == nil {
				bad, badRS = err, rs
			}
			if errors.Is(err, decode.ErrTruncate) {
				in.truncs.Skipped(rs.Table(), tp, r) // fan-out routing never applies them
			}
			continue
		}
		if u := rs.Plan().LastUnmapped(); len(u) > 0 {
			if err := in.cat.Evolution().WaitFor(writeCtx, now, rs, u); err != nil {
				// A table is getting a column for a field of the record:
				// take back its rows in every table (nothing else was
				// done with it yet) and hold it (held.go).
				rs.Plan().Unappend(a.Block())
				f.unappend()
				return nil, nil, err
			}
		}
		f.accs = append(f.accs, a)
		f.plans = append(f.plans, rs.Plan())
		f.units = append(f.units, a.ID())
	}
	return bad, badRS, nil
}

// unappend takes back the rows appended so far.
func (f *fanState) unappend() {
	for i, done := range f.accs {
		f.plans[i].Unappend(done.Block())
	}
}

// fanTrack tracks r under every unit that holds it (the targets' batches,
// its dead-letter produce or row when a target found it bad), and only
// then lets their batches seal.
func (in *Intake) fanTrack(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record, bad error, badRS *tables.Route) {
	f := &in.fan
	var dacc *dispatch.Open // the dead-letter table's batch with the record's row
	if bad != nil {
		units, a, ok := in.divert(writeCtx, tp, r, bad, badRS, true)
		if !ok {
			// errors.tolerance none: stopping. The rows appended may
			// still be inserted by the flush, but the record is not
			// committed, so the restart meets it again.
			return
		}
		f.units, dacc = append(f.units, units...), a
	}
	switch len(f.units) {
	case 0:
		// Every target skipped it (a tombstone): no row, handled at once.
		in.skipped(tp, r)
		return
	case 1:
		in.tracker.Add(tp, r.Offset, r.LeaderEpoch, f.units[0])
	default:
		in.tracker.AddShared(tp, r.Offset, r.LeaderEpoch, f.units)
	}
	// Only now may a batch seal: the tracker must know the record first.
	for _, a := range f.accs {
		in.batches.Added(writeCtx, now, a, tp, r)
	}
	if dacc != nil {
		in.batches.Added(writeCtx, now, dacc, tp, r)
	}
}

func tableTaken(targets []*tables.Route, ts *tables.Table) bool {
	for _, t := range targets {
		if t.Table() == ts {
			return true
		}
	}
	return false
}
