package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/decode"
	"sink/internal/offsets"
	"sink/internal/route"
)

// Fan-out routing: when some route has when: conditions, or fanout is all,
// a record's routes are chosen per record. Its topic's candidate routes
// (routesFor) are tested in configuration order; the first that matches
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
	targets []*routeState
	accs    []*accState
	plans   []*decode.Plan // the plan that appended each of accs' rows
	units   []uint64
}

func (p *Pipeline) initFanout() {
	p.rt.fanout = p.cfg.Fanout == config.FanoutAll
	for _, r := range p.cfg.Routes {
		p.rt.fanout = p.rt.fanout || len(r.Conditions()) > 0
	}
}

// errUnrouted is the dead-letter cause of a record no route takes.
var errUnrouted = errors.New("no route takes the record (errors.unrouted: dlq)")

// unroutedError is the dead-letter cause of r, which no route takes.
func unroutedError(r *kgo.Record) error {
	return fmt.Errorf("topic %q partition %d offset %d: %w", r.Topic, r.Partition, r.Offset, errUnrouted)
}

// unrouted handles a record no route takes.
func (p *Pipeline) unrouted(writeCtx context.Context, tp offsets.TP, r *kgo.Record) {
	p.topicMetrics(tp.Topic).Unrouted()
	if p.cfg.Errors.Unrouted == "dlq" {
		p.badRecord(writeCtx, tp, r, unroutedError(r), nil)
		return
	}
	// Nothing to write, so it is handled as soon as it is seen.
	p.stats.Skipped++
	p.topicMetrics(tp.Topic).Skipped()
	p.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
}

// handleFanout routes one record by its routes' conditions. Like
// decodeRecord, held reports that the record waits for the schema registry
// or for a table's new column (nothing was done with it).
func (p *Pipeline) handleFanout(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) (_ error, held bool) {
	cands, err := p.routesFor(writeCtx, r.Topic)
	if err != nil {
		if !p.badTopic(writeCtx, tp, r, err) {
			p.fatal = err // a table cannot be resolved: stop before this record
		}
		return nil, false
	}
	f := &p.rt.fan
	f.eval.Reset(r)
	f.targets = f.targets[:0]
	for _, rs := range cands {
		if !f.eval.Match(rs.route.Conditions()) || tableTaken(f.targets, rs.table) {
			continue
		}
		f.targets = append(f.targets, rs)
		if p.cfg.Fanout != config.FanoutAll {
			break
		}
	}
	if len(f.targets) == 0 {
		p.unrouted(writeCtx, tp, r)
		return nil, false
	}
	f.accs, f.plans, f.units = f.accs[:0], f.plans[:0], f.units[:0]
	var bad error
	var badRS *routeState
	for _, rs := range f.targets {
		a := p.accFor(rs.table, tp)
		if err := rs.plan.Append(a.acc.Data(), r); err != nil {
			if errors.Is(err, decode.ErrUnavailable) {
				// A target needs a schema not known yet (its look-up is
				// running, or the registry is down): take back the rows
				// the targets before it appended (nothing else was done
				// with them yet) and hold the record like any other
				// (held.go).
				for i, done := range f.accs {
					f.plans[i].Unappend(done.acc.Data())
				}
				return err, true
			}
			if !errors.Is(err, decode.ErrSkip) && bad == nil {
				bad, badRS = err, rs
			}
			p.truncateFanout(err, rs, tp, r)
			continue
		}
		if u := rs.plan.LastUnmapped(); len(u) > 0 {
			if err := p.schemaWaitFor(writeCtx, now, rs, u); err != nil {
				// A table is getting a column for a field of the record:
				// take back its rows in every table (nothing else was
				// done with it yet) and hold it (held.go).
				rs.plan.Unappend(a.acc.Data())
				for i, done := range f.accs {
					f.plans[i].Unappend(done.acc.Data())
				}
				return err, true
			}
		}
		f.accs = append(f.accs, a)
		f.plans = append(f.plans, rs.plan)
		f.units = append(f.units, a.id)
	}
	var dacc *accState // the dead-letter table's batch with the record's row
	if bad != nil {
		units, a, ok := p.divert(writeCtx, tp, r, bad, badRS, true)
		if !ok {
			// errors.tolerance none: stopping. The rows appended above
			// may still be inserted by the flush, but the record is not
			// committed, so the restart meets it again.
			return nil, false
		}
		f.units, dacc = append(f.units, units...), a
	}
	switch len(f.units) {
	case 0:
		// Every target skipped it (a tombstone): no row, handled at once.
		p.stats.Skipped++
		p.topicMetrics(tp.Topic).Skipped()
		p.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
		return nil, false
	case 1:
		p.tracker.Add(tp, r.Offset, r.LeaderEpoch, f.units[0])
	default:
		p.tracker.AddShared(tp, r.Offset, r.LeaderEpoch, f.units)
	}
	// Only now may a batch seal: the tracker must know the record first.
	for _, a := range f.accs {
		p.added(writeCtx, now, a, tp, r)
	}
	if dacc != nil {
		p.added(writeCtx, now, dacc, tp, r)
	}
	return nil, false
}

func tableTaken(targets []*routeState, ts *tableState) bool {
	for _, t := range targets {
		if t.table == ts {
			return true
		}
	}
	return false
}
