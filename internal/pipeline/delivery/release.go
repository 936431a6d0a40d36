package delivery

import (
	"fmt"

	"sink/internal/batch"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// OnRelease forgets partitions revoked or lost and drops the work that can
// no longer be inserted as it is.
//
// A batch whose intent is recorded is left alone, also while its INSERT
// runs: the INSERT carries the batch's token, and whoever owns the given-up
// partitions next finds the intent and replays the batch with the same
// token, so ClickHouse keeps one copy (this member too, if the partitions
// come back while the INSERT still runs).
//
// A batch not yet recorded (sealed, waiting for its insert slot, for its
// intent commit's turn in the committer or for its retry) and an open
// batch can never be recorded once they hold records of a given-up
// partition: those records belong to the partition's next owner, who
// consumes them from the recorded offset. Such a batch is dropped, and
// with it the records it holds of partitions this member keeps. Except
// when an intent commit of the batch was sent and failed (none is out
// here: the pipeline settled it first): it may be recorded after all, so
// if it holds a partition this member keeps, the member stops rather than
// build those records into other batches (recovery reads the ledgers on
// restart); if it holds only partitions given up, it is dropped like the
// others, because the next owners settle it from the ledgers. Those
// partitions are sought back to the first offset the dropped batches hold
// of them, the offsets tracker forgets everything from there, and every
// other batch not yet recorded that holds records of them from there is
// dropped as well (and so on, for the partitions those hold). A table's
// batches are recorded in seal order, so no recorded batch holds anything
// past a seek point: what was recorded (offsets, intents, their ranges)
// stays exactly as it was, and the records from the seek point on are
// consumed and batched again as if for the first time.
func (e *Exactly) OnRelease(tps []offsets.TP) {
	for _, tp := range tps {
		delete(e.ledgers, tp)
		delete(e.start, tp)
		delete(e.covers, tp)
		delete(e.dlqCovers, tp)
	}
	plan := eos.PlanRelease(tps, e.unrecorded())
	if plan.Stop {
		e.Owner.Fail(fmt.Errorf("exactly-once: %s[%d] was given up while batch %d (with %s[%d]) retried its intent commit; whether that intent was recorded is unknown (docs/guarantees.md#partitions-given-up-with-work-in-progress)",
			plan.Lost.Topic, plan.Lost.Partition, plan.StopBatch, plan.Kept.Topic, plan.Kept.Partition))
		return
	}
	if len(plan.Drop) == 0 {
		return
	}
	rows, batches, opened := 0, 0, 0
	for _, d := range plan.Drop {
		if d.Open {
			rows += e.dropOpen(d.ID)
			opened++
		} else {
			rows += e.dropSealed(d.ID)
			batches++
		}
	}
	for tp, at := range plan.Seek {
		e.Tracker.Truncate(tp, at)
	}
	e.Log.Warn().Int("batches", batches).Int("open_batches", opened).Int("rows", rows).Int("partitions_sought_back", len(plan.Seek)).
		Msg("exactly-once: dropped batches not yet recorded that held records of partitions given up; their records of the partitions kept are consumed again")
	if len(plan.Seek) == 0 {
		return
	}
	if err := e.Owner.Seek(plan.Seek); err != nil {
		e.Owner.Fail(err)
	}
}

// unrecorded is every batch not recorded yet: the sealed ones whose
// intent is not recorded, and the open ones that hold rows.
func (e *Exactly) unrecorded() []eos.Unrecorded {
	var out []eos.Unrecorded
	e.Batches.EachSealed(func(_ *tables.Table, b *Batch) {
		if eb := e.batches[b.ID]; eb != nil && !eb.recorded {
			out = append(out, eos.Unrecorded{ID: b.ID, Tried: eb.tried, Ranges: eosRanges(b.Ranges)})
		}
	})
	e.Batches.EachOpen(func(id uint64, ranges []batch.Range) {
		out = append(out, eos.Unrecorded{ID: id, Open: true, Ranges: eosRanges(ranges)})
	})
	return out
}

// dropSealed drops sealed batch id, not recorded, and returns its rows.
func (e *Exactly) dropSealed(id uint64) int {
	// Out of the queue but not recorded (at -1): its intent commit
	// failed for good (the member was fenced, which the loss explains)
	// and the failure is on its way as an ack, which now finds no batch.
	// Withdraw frees its slot.
	ts, rows, at := e.Batches.Withdraw(id)
	if at == 0 {
		delete(e.retries, ts) // the backoff was this batch's
		if e.asked[ts] == id {
			delete(e.asked, ts) // its intent, not sent yet, is skipped
		}
	}
	delete(e.batches, id)
	return rows
}

// dropOpen drops open batch id and returns its rows.
func (e *Exactly) dropOpen(id uint64) int {
	delete(e.rows, id)
	return e.Batches.Discard(id)
}
