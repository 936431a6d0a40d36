package dispatch

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"sink/internal/chtable"
	"sink/internal/status"
	"sink/internal/tables"
)

// insertFailure is a table's last failed INSERT attempt, stored by insert
// goroutines.
type insertFailure struct {
	msg  string
	code int32
	at   time.Time
}

func newInsertFailure(at chtable.Attempt, now time.Time) *insertFailure {
	return &insertFailure{msg: at.Err.Error(), code: at.Code, at: now}
}

// histAdd counts an acknowledged batch of rows in the status history: as
// one INSERT, or as the INSERTs of its shard parts, each in its shard's
// history too.
func (st *tableStats) histAdd(at time.Time, rows int, shards []shardPart) {
	if len(shards) == 0 {
		st.hist.Add(at, rows)
		return
	}
	if st.shardHist == nil {
		st.shardHist = map[int]*status.History{}
	}
	for _, sp := range shards {
		st.hist.Add(at, sp.rows)
		h := st.shardHist[sp.shard]
		if h == nil {
			h = &status.History{}
			st.shardHist[sp.shard] = h
		}
		h.Add(at, sp.rows)
	}
}

// Status fills what dispatch knows of ts at now into t: its open, queued
// and in-flight batches, its INSERTs of the last minutes (per shard for a
// target local table), the last one, its target, its last failed attempt.
func (d *Dispatch) Status(ts *tables.Table, now time.Time, t *status.Table) {
	d.q.eachOpenOf(ts, func(a *Open) {
		if !a.acc.Empty() {
			t.OpenBatches++
			t.OpenRows += a.acc.Data().Rows()
		}
	})
	t.QueuedBatches, t.InFlightBatches = d.q.queued(ts), d.q.inserting(ts)
	st := d.q.stats(ts)
	t.History = st.hist.Series(now)
	t.Rows1m, t.Inserts1m = st.hist.Sums(now, time.Minute)
	t.Rows15m, t.Inserts15m = st.hist.Sums(now, status.Window)
	for _, shard := range slices.Sorted(maps.Keys(st.shardHist)) {
		h := st.shardHist[shard]
		sh := status.ShardInserts{Shard: shard}
		sh.Rows1m, sh.Inserts1m = h.Sums(now, time.Minute)
		sh.Rows15m, sh.Inserts15m = h.Sums(now, status.Window)
		t.Shards = append(t.Shards, sh)
	}
	if !st.lastInsert.IsZero() {
		at := st.lastInsert
		t.LastInsert = &at
	}
	t.Target = d.cadence.Target(ts)
	if f := st.lastFail.Load(); f != nil {
		t.LastError = &status.InsertError{Message: f.msg, Code: f.code, At: f.at, Retries: st.retries.Load()}
	}
}

// Budgets adds the servers' budgets of INSERTs to s (none without one).
func (d *Dispatch) Budgets(s *status.Snapshot) { d.cadence.Budgets(s) }

// Totals are the run's rows inserted and INSERTs; Retries, the INSERT
// attempts that failed and were retried, over every table.
func (d *Dispatch) Totals() (rows, inserts int64) { return d.totalRows, d.totalInserts }

func (d *Dispatch) Retries() int64 {
	var n int64
	d.Catalog.EachTable(func(ts *tables.Table) { n += d.q.stats(ts).retries.Load() })
	return n
}

// StuckOn names the oldest INSERT not answered yet, with its retries and
// last error ("nothing" when none), for the shutdown_timeout line.
func (d *Dispatch) StuckOn() string {
	first := d.q.oldest()
	if first == nil {
		return "nothing"
	}
	msg := fmt.Sprintf("the INSERT of %d rows into %s", first.b.Rows(), first.table.Name())
	st := d.q.stats(first.table)
	if e := st.lastFail.Load(); e != nil {
		msg += fmt.Sprintf(" (%d retries, last error: %s)", st.retries.Load(), e.msg)
	}
	return msg
}
