package pipeline

// Unit tests of the dead-letter table under exactly-once, on the fakes of
// exactly_fake_unit_test.go: a crash leaves batches of the route's table
// and of the dead-letter table recorded, landed or not, over overlapping
// offsets (a bad record lies between good ones); the next run must end
// with every good record a row of the table once and every bad record a
// row of the dead-letter table once.

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	"sink/config"
	"sink/internal/eos"
	"sink/internal/offsets"
)

const eoDLQ = "db.t_dead"

// eoDLQConfig is eoRecoverConfig with errors.dlq_table, its batches sealed
// by max_wait too (a dead-letter batch rarely fills).
func eoDLQConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := unitConfig(t, "errors: {tolerance: all, dlq_table: t_dead}\n")
	cfg.Batch.MaxRows = 3
	cfg.Batch.MaxWait = 100 * time.Millisecond
	cfg.ClickHouse.RetryInitial, cfg.ClickHouse.RetryMax = 10*time.Millisecond, 40*time.Millisecond
	return cfg
}

// dlqWorld is a world with a dead-letter table whose partitions 0 and 1
// hold records 0..5 each; offset 1 of partition 0 and offset 4 of
// partition 1 are bad (not JSON).
func dlqWorld() *eoWorld {
	w := newEOWorld()
	w.dlq = eoDLQ
	for _, tp := range []offsets.TP{eoP0, eoP1} {
		w.produce(tp, 6)
	}
	w.log[eoP0][1] = "not json 1"
	w.log[eoP1][4] = "not json 4"
	return w
}

// tokenIn is the token of a batch of ranges into table, and each
// partition's ledger entry for it.
func tokenIn(table string, ranges ...eos.Range) (string, map[offsets.TP]eos.Entry) {
	tok := eos.Token(table, ranges)
	out := map[offsets.TP]eos.Entry{}
	for _, r := range ranges {
		out[r.TP] = eos.Entry{Token: tok, First: r.First, Last: r.Last, N: len(ranges)}
	}
	return tok, out
}

// landedAt puts the given offsets of tp into rows as one block of token
// (already kept by the table when token is not "").
func (w *eoWorld) landedAt(rows map[offsets.TP]map[int64]int, token string, tp offsets.TP, offs ...int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range offs {
		addRow(rows, tp, o)
	}
	if token != "" {
		w.tokens = append(w.tokens, token)
	}
	w.kept++
}

// holds fails t unless rows hold exactly offs of tp, each once.
func (w *eoWorld) holds(t *testing.T, what string, rows map[offsets.TP]map[int64]int, tp offsets.TP, offs ...int64) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var got []string
	for o, n := range rows[tp] {
		got = append(got, fmt.Sprintf("%d×%d", o, n))
	}
	var want []string
	for _, o := range offs {
		want = append(want, fmt.Sprintf("%d×1", o))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s of %s[%d]: %v; want %v", what, tp.Topic, tp.Partition, got, want)
	}
}

// runToEnd feeds both partitions from their committed offsets, waits
// until both are committed at the log's end (6) and stops the run.
func runToEnd(t *testing.T, w *eoWorld, r *eoRun) {
	t.Helper()
	r.resume(t, w, eoP0)
	r.resume(t, w, eoP1)
	eventually(t, 2*time.Second, "both partitions committed at 6", func() bool {
		return r.src.committed(eoP0) == 6 && r.src.committed(eoP1) == 6
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestUnitExactlyDLQTableRecover: a run crashed with the batches below
// recorded in the ledgers; the next run recovers, consumes both partitions
// to their end, and each record is a row of one table once.
func TestUnitExactlyDLQTableRecover(t *testing.T) {
	// The route's batch over 0..2 of both partitions: offset 1 of
	// partition 0 is in its range but not one of its rows.
	tRanges := []eos.Range{{TP: eoP0, First: 0, Last: 2}, {TP: eoP1, First: 0, Last: 2}}
	tTok, tEntries := tokenIn("db.t", tRanges...)
	// The dead-letter batch of that bad record.
	dRange := eos.Range{TP: eoP0, First: 1, Last: 1}
	dTok, dEntries := tokenIn(eoDLQ, dRange)
	// A dead-letter batch of both bad records, partition 1 committed past
	// it (so its entry there is gone, and the intent is incomplete).
	bRanges := []eos.Range{{TP: eoP0, First: 1, Last: 1}, {TP: eoP1, First: 4, Last: 4}}
	bTok, bEntries := tokenIn(eoDLQ, bRanges...)

	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, w *eoWorld)
		// kept and dropped are the INSERTs of the recovery (replays)
		kept, dropped int
	}{
		{"the route's batch landed, the bad record's row never recorded", func(t *testing.T, w *eoWorld) {
			w.landed(tTok, tRanges...)
			delete(w.table[eoP0], 1) // not a row: it is bad
			w.ledger(t, eoP0, 0, "", tEntries[eoP0])
			w.ledger(t, eoP1, 0, "", tEntries[eoP1])
		}, 0, 1},
		{"the route's batch not landed, the bad record's row never recorded", func(t *testing.T, w *eoWorld) {
			w.ledger(t, eoP0, 0, "", tEntries[eoP0])
			w.ledger(t, eoP1, 0, "", tEntries[eoP1])
		}, 1, 0},
		{"the dead-letter batch recorded, not landed", func(t *testing.T, w *eoWorld) {
			w.ledger(t, eoP0, 0, "", tEntries[eoP0], dEntries[eoP0])
			w.ledger(t, eoP1, 0, "", tEntries[eoP1])
		}, 2, 0},
		{"the dead-letter batch landed", func(t *testing.T, w *eoWorld) {
			w.landedAt(w.dead, dTok, eoP0, 1)
			w.ledger(t, eoP0, 0, "", tEntries[eoP0], dEntries[eoP0])
			w.ledger(t, eoP1, 0, "", tEntries[eoP1])
		}, 1, 0}, // its replay holds no row: the one it had is in
		{"the dead-letter batch landed, its token forgotten by the table", func(t *testing.T, w *eoWorld) {
			w.landedAt(w.dead, "", eoP0, 1)
			w.ledger(t, eoP0, 0, "", tEntries[eoP0], dEntries[eoP0])
			w.ledger(t, eoP1, 0, "", tEntries[eoP1])
		}, 1, 0},
		{"the dead-letter batch landed, its intent incomplete", func(t *testing.T, w *eoWorld) {
			w.landedAt(w.table, "", eoP1, 0, 1, 2, 3)
			w.landedAt(w.dead, bTok, eoP0, 1)
			w.landedAt(w.dead, "", eoP1, 4)
			w.ledger(t, eoP0, 0, "", bEntries[eoP0])
			w.ledger(t, eoP1, 5, "")
		}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := dlqWorld()
				tc.setup(t, w)
				before, dropped0 := w.counts()
				r := w.run(t, eoDLQConfig(t), nil)
				r.assign(eoP0, eoP1)
				if kept, dropped := w.counts(); kept-before != tc.kept || dropped-dropped0 != tc.dropped {
					t.Fatalf("recovery: %d INSERTs kept, %d dropped; want %d, %d", kept-before, dropped-dropped0, tc.kept, tc.dropped)
				}
				runToEnd(t, w, r)
				w.holds(t, "the table", w.table, eoP0, 0, 2, 3, 4, 5)
				w.holds(t, "the table", w.table, eoP1, 0, 1, 2, 3, 5)
				w.holds(t, "the dead-letter table", w.dead, eoP0, 1)
				w.holds(t, "the dead-letter table", w.dead, eoP1, 4)
			})
		})
	}
}

// TestUnitExactlyDLQTableAndTopic: with errors.dlq_topic as well, a bad
// record whose dead-letter row recovery found in (its batch replayed) gets
// no row again, but its copy is produced to the topic again: the topic
// stays at-least-once.
func TestUnitExactlyDLQTableAndTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := dlqWorld()
		dRange := eos.Range{TP: eoP0, First: 1, Last: 1}
		dTok, dEntries := tokenIn(eoDLQ, dRange)
		w.landedAt(w.dead, dTok, eoP0, 1)
		w.ledger(t, eoP0, 0, "", dEntries[eoP0])
		cfg := eoDLQConfig(t)
		cfg.Errors.DLQTopic = "dead"
		r := w.run(t, cfg, nil)
		r.assign(eoP0, eoP1)
		runToEnd(t, w, r)
		w.holds(t, "the table", w.table, eoP0, 0, 2, 3, 4, 5)
		w.holds(t, "the dead-letter table", w.dead, eoP0, 1)
		w.holds(t, "the dead-letter table", w.dead, eoP1, 4)
		r.src.mu.Lock()
		sent := append([]int64(nil), r.src.dlqSent...)
		r.src.mu.Unlock()
		slices.Sort(sent)
		if !slices.Equal(sent, []int64{1, 4}) {
			t.Fatalf("copies produced to the dead-letter topic at offsets %v; want 1 (again) and 4", sent)
		}
	})
}
