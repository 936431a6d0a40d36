package pipeline

// Unit tests of exactly-once recovery (recoverParts) and of its replay
// decisions on the fakes of exactly_fake_unit_test.go: what a run finds in
// the group's ledgers and in the table after a crash, a rewind or a
// rebalance, and that every offset ends in the table exactly once.

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"sink/config"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// eoRecoverConfig is the unit connector with 3-row batches, so that the
// six records of a partition make two batches.
func eoRecoverConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = 3
	cfg.ClickHouse.RetryInitial, cfg.ClickHouse.RetryMax = 10*time.Millisecond, 40*time.Millisecond
	return cfg
}

// tornWorld is a world whose partitions 0 and 1 hold records 0..5 each,
// committed at 0 with the intent of one batch of 0..2 of both recorded in
// both ledgers (the run that wrote it crashed before committing past it).
func tornWorld(t *testing.T) (*eoWorld, string, []eos.Range) {
	t.Helper()
	w := newEOWorld()
	w.produce(eoP0, 6)
	w.produce(eoP1, 6)
	rs := []eos.Range{{TP: eoP0, First: 0, Last: 2}, {TP: eoP1, First: 0, Last: 2}}
	tok, es := intent(rs...)
	w.ledger(t, eoP0, 0, "", es[eoP0])
	w.ledger(t, eoP1, 0, "", es[eoP1])
	return w, tok, rs
}

// finish feeds both partitions from their committed offsets, waits until
// both are committed at the log's end (6), stops the run and checks that
// each holds 0..5 once and that no ledger lists an intent any more.
func finish(t *testing.T, w *eoWorld, r *eoRun) { t.Helper(); finishSplit(t, w, r, r) }

// finishSplit is finish with partition 0 owned by r0 and partition 1 by
// r1, two members of the group.
func finishSplit(t *testing.T, w *eoWorld, r0, r1 *eoRun) {
	t.Helper()
	r0.resume(t, w, eoP0)
	r1.resume(t, w, eoP1)
	eventually(t, 2*time.Second, "both partitions committed at 6", func() bool {
		return r0.src.committed(eoP0) == 6 && r1.src.committed(eoP1) == 6
	})
	runs := []*eoRun{r0}
	if r1 != r0 {
		runs = append(runs, r1)
	}
	for _, r := range runs {
		if err := r.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	for _, tp := range []offsets.TP{eoP0, eoP1} {
		w.exactly(t, tp, 0, 6)
		if at, l := w.committed(t, tp); at != 6 || len(l.Entries) != 0 {
			t.Fatalf("%v committed at %d with ledger %+v; want 6 and no pending intent", tp, at, l)
		}
	}
}

// runGated is run with eoRecoverConfig whose INSERT call n (1-based) waits
// until the returned gate is closed.
func (w *eoWorld) runGated(t *testing.T, n int) (*eoRun, chan struct{}) {
	t.Helper()
	gate := make(chan struct{})
	return w.run(t, eoRecoverConfig(t), func(call int) insertScript {
		if call == n {
			return insertScript{gate: gate}
		}
		return insertScript{}
	}), gate
}

// TestUnitExactlyRecoverTornIntentNotLanded: the intent was recorded and
// the INSERT never reached the table. Recovery replays the batch (read
// back from Kafka, inserted with its token) before any record is handled;
// the records consumed again from the committed offset are skipped where
// the replay put them, and the rest is inserted once.
func TestUnitExactlyRecoverTornIntentNotLanded(t *testing.T) {
	synctest.Test(t, testUnitExactlyRecoverTornIntentNotLanded)
}

func testUnitExactlyRecoverTornIntentNotLanded(t *testing.T) {
	w, tok, rs := tornWorld(t)
	r := w.run(t, eoRecoverConfig(t), nil)
	r.assign(eoP0, eoP1)
	if n := w.count("ReadRanges"); n != 1 || len(w.reads[0]) != 2 || w.reads[0][0] != rs[0] || w.reads[0][1] != rs[1] {
		t.Fatalf("%d reads back %v; want the batch's two ranges read once", n, w.reads)
	}
	if kept, dropped := w.counts(); kept != 1 || dropped != 0 {
		t.Fatalf("%d INSERTs kept, %d dropped; want the replay kept", kept, dropped)
	}
	w.exactly(t, eoP0, 0, 3)
	w.exactly(t, eoP1, 0, 3)
	if w.tokens[0] != tok {
		t.Fatalf("the replay's token %s, want the intent's %s", w.tokens[0], tok)
	}
	finish(t, w, r)
}

// TestUnitExactlyRecoverBounded: while ClickHouse does not answer, the
// replay's INSERT holds the assigned callback for kafka.rebalance_timeout,
// no longer; then the recovery fails and the connector stops without
// having committed anything, so a restart recovers again.
func TestUnitExactlyRecoverBounded(t *testing.T) { synctest.Test(t, testUnitExactlyRecoverBounded) }

func testUnitExactlyRecoverBounded(t *testing.T) {
	w, _, _ := tornWorld(t)
	cfg := eoRecoverConfig(t)
	cfg.Kafka.RebalanceTimeout = 5 * time.Second
	r := w.run(t, cfg, func(int) insertScript { return insertScript{hang: true} })
	began := time.Now()
	r.assign(eoP0, eoP1)
	if took := time.Since(began); took != cfg.Kafka.RebalanceTimeout {
		t.Fatalf("the assigned callback returned after %s, want after kafka.rebalance_timeout (%s)", took, cfg.Kafka.RebalanceTimeout)
	}
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "took longer than kafka.rebalance_timeout") {
		t.Fatalf("Run: %v; want the recovery's time bound", err)
	}
	for _, tp := range []offsets.TP{eoP0, eoP1} {
		if at, l := w.committed(t, tp); at != 0 || len(l.Entries) != 1 {
			t.Fatalf("%v committed at %d with ledger %+v; want it as it was (0, the intent pending)", tp, at, l)
		}
	}
}

// TestUnitExactlyRecoverTornIntentLanded: the other way round, the INSERT
// reached the table and the run crashed before its commit past the batch.
// The replay carries the same token and the table drops it; nothing is
// inserted twice.
func TestUnitExactlyRecoverTornIntentLanded(t *testing.T) {
	synctest.Test(t, testUnitExactlyRecoverTornIntentLanded)
}

func testUnitExactlyRecoverTornIntentLanded(t *testing.T) {
	w, tok, rs := tornWorld(t)
	w.landed(tok, rs...)
	r := w.run(t, eoRecoverConfig(t), nil)
	r.assign(eoP0, eoP1)
	if kept, dropped := w.counts(); kept != 1 || dropped != 1 {
		t.Fatalf("%d INSERTs kept, %d dropped; want the replay dropped as a repeat", kept, dropped)
	}
	finish(t, w, r)
}

// TestUnitExactlyRecoverAfterCrash: the whole path with ledgers the sink
// wrote itself. Run A's INSERTs never answer (reaching the table first, or
// not), and A is stopped while they wait: as far as the group and the
// table are concerned, a crash after the intents and before the commits.
// Run B on the same group and table replays what A recorded; the table
// keeps each batch once.
func TestUnitExactlyRecoverAfterCrash(t *testing.T) {
	bothWays(t, "landed", "not landed", testUnitExactlyRecoverAfterCrash)
}

// bothWays runs f in a synctest bubble as subtest yes with true and as
// subtest no with false.
func bothWays(t *testing.T, yes, no string, f func(*testing.T, bool)) {
	for _, v := range []bool{true, false} {
		name := no
		if v {
			name = yes
		}
		t.Run(name, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { f(t, v) }) })
	}
}

func testUnitExactlyRecoverAfterCrash(t *testing.T, landed bool) {
	w := newEOWorld()
	w.produce(eoP0, 6)
	w.produce(eoP1, 6)
	cfg := eoRecoverConfig(t)
	cfg.ShutdownTimeout = 50 * time.Millisecond
	a := w.runOn(t, cfg, eoTable{w: w,
		fakeSink:  newFakeSink(func(int) insertScript { return insertScript{hang: true} }),
		landFirst: func(int) bool { return landed }})
	a.assign(eoP0, eoP1) // a new group: nothing committed, nothing in the table
	a.feed(w, eoP0, 0)
	a.insertStarted(t)
	eventually(t, time.Second, "the fetch handled", func() bool { return a.src.polls.Load() >= 2 })
	if err := a.stop(t); err == nil || !strings.Contains(err.Error(), "shutdown_timeout") {
		t.Fatalf("run A: %v; want it stopped on the INSERT that never answered", err)
	}
	// The intent of 0..2 is recorded, not acknowledged; 3..5 waited for
	// its slot and is never recorded, nor inserted, once the shutdown has
	// given up on the INSERT.
	at, l := w.committed(t, eoP0)
	n := len(l.Entries)
	a.sink.mu.Lock()
	calls := a.sink.calls
	a.sink.mu.Unlock()
	if at != 0 || n != 1 || l.Entries[0].First != 0 || l.Entries[0].Last != 2 || calls != 1 {
		t.Fatalf("run A left partition 0 at %d with ledger %+v after %d INSERTs; want only the intent of 0..2 recorded at 0, and 1 INSERT", at, l, calls)
	}
	kept, _ := w.counts()
	b := w.run(t, eoRecoverConfig(t), nil)
	b.assign(eoP0, eoP1)
	k2, dropped := w.counts()
	switch {
	case landed && (k2 != kept || dropped != n):
		t.Fatalf("landed: %d→%d kept, %d dropped; want all %d replays dropped", kept, k2, dropped, n)
	case !landed && (k2 != kept+n || dropped != 0):
		t.Fatalf("not landed: %d→%d kept, %d dropped; want all %d replays kept", kept, k2, dropped, n)
	}
	finish(t, w, b)
}

// TestUnitExactlyRecoverRewind: the group's offset of partition 0 was
// reset to 0 by a tool (committed without metadata) while the table holds
// 0..9. Recovery looks the partition up in the table from 0 on, and the
// records consumed again are skipped up to 9; only 10..14 are inserted.
func TestUnitExactlyRecoverRewind(t *testing.T) { synctest.Test(t, testUnitExactlyRecoverRewind) }

func testUnitExactlyRecoverRewind(t *testing.T) {
	w := newEOWorld()
	w.produce(eoP0, 15)
	w.landed("earlier-1", eos.Range{TP: eoP0, First: 0, Last: 4})
	w.landed("earlier-2", eos.Range{TP: eoP0, First: 5, Last: 9})
	w.commit(eoP0, 0, "")
	r := w.run(t, eoRecoverConfig(t), nil)
	r.assign(eoP0)
	if got := strings.Join(w.presents, "; "); got != "events[0] 0..-1" {
		t.Fatalf("table checks %q; want partition 0 from 0 with no end", got)
	}
	if n := w.count("ReadRanges"); n != 0 {
		t.Fatalf("%d reads back with no intent recorded", n)
	}
	r.feed(w, eoP0, 0)
	eventually(t, 2*time.Second, "partition 0 committed at 13", func() bool { return r.src.committed(eoP0) == 13 })
	if err := r.stop(t); err != nil { // the flush inserts 13..14
		t.Fatalf("Run: %v", err)
	}
	w.exactly(t, eoP0, 0, 15)
	if _, l := w.committed(t, eoP0); l.Offset != 15 || l.Check != 0 {
		t.Fatalf("ledger %+v; want offset 15 with the check region passed", l)
	}
}

// TestUnitExactlyRecoverRevokedWhileReplaying: partition 0 is revoked while
// the replay's INSERT still runs (the revoke waits for recovery), and its
// next owner, run C, finds the same intent in the ledgers and replays it
// again: the table drops the repeat. Run B keeps partition 1 and goes on.
func TestUnitExactlyRecoverRevokedWhileReplaying(t *testing.T) {
	synctest.Test(t, testUnitExactlyRecoverRevokedWhileReplaying)
}

func testUnitExactlyRecoverRevokedWhileReplaying(t *testing.T) {
	w, _, _ := tornWorld(t)
	b, gate := w.runGated(t, 1) // the replay's INSERT
	assigned := make(chan struct{})
	go func() { b.assign(eoP0, eoP1); close(assigned) }()
	b.insertStarted(t)
	revoked := make(chan struct{})
	go func() { revoke(b.running, eoP0); close(revoked) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-assigned:
		t.Fatal("recovery returned before its replay's INSERT")
	case <-revoked:
		t.Fatal("the revoke returned while recovery was replaying")
	default:
	}
	close(gate)
	<-assigned
	<-revoked
	c := w.run(t, eoRecoverConfig(t), nil)
	c.assign(eoP0)
	if kept, dropped := w.counts(); kept != 1 || dropped != 1 {
		t.Fatalf("%d INSERTs kept, %d dropped; want B's replay kept and C's dropped", kept, dropped)
	}
	finishSplit(t, w, c, b)
	if got := b.src.committed(eoP0); got > 0 {
		t.Fatalf("run B committed partition 0 at %d after it was revoked", got)
	}
}

// TestUnitExactlyRecoverLostAfterReplay: after its recovery replayed the
// batch, run B records the next batch of partition 0 (3..5) and its INSERT
// is slow when the partition is lost (the session expired meanwhile). Its
// next owner, run C, replays both pending batches from the ledgers; B's
// INSERT then lands with the same token and is dropped, and B never
// commits partition 0 again.
func TestUnitExactlyRecoverLostAfterReplay(t *testing.T) {
	synctest.Test(t, testUnitExactlyRecoverLostAfterReplay)
}

func testUnitExactlyRecoverLostAfterReplay(t *testing.T) {
	w, _, _ := tornWorld(t)
	b, gate := w.runGated(t, 2) // the first batch after the replay
	b.assign(eoP0, eoP1)
	b.feed(w, eoP0, 0) // 0..2 skipped as replayed, 3..5 recorded and inserted
	eventually(t, time.Second, "the batch's INSERT started", func() bool {
		b.sink.mu.Lock()
		defer b.sink.mu.Unlock()
		return b.sink.calls >= 2
	})
	// The skipped 0..2 were committed, which passed the replayed batch.
	if at, l := w.committed(t, eoP0); at != 3 || len(l.Entries) != 1 || l.Entries[0].First != 3 {
		t.Fatalf("partition 0 at %d with ledger %+v; want 3 and the batch in flight pending", at, l)
	}
	before := b.src.commitCount()
	lose(b.running, eoP0)
	c := w.run(t, eoRecoverConfig(t), nil)
	c.assign(eoP0)
	if kept, dropped := w.counts(); kept != 2 || dropped != 0 {
		t.Fatalf("%d kept, %d dropped; want B's replay and C's replay of the batch in flight kept", kept, dropped)
	}
	close(gate)
	eventually(t, time.Second, "B's INSERT answered", func() bool {
		_, dropped := w.counts()
		return dropped == 1
	})
	w.exactly(t, eoP0, 0, 6)
	finishSplit(t, w, c, b)
	for _, cm := range b.src.commitsSince(before) {
		if _, ok := cm[eoP0]; ok {
			t.Fatalf("run B committed partition 0 after it was lost: %v", cm)
		}
	}
}

// TestUnitExactlyRecoverIntentOfAnotherMember: only partition 0 is
// assigned, and its intent spans partition 1 too. The whole batch is
// replayed (partition 1's ledger in the group names the same token), but
// only partition 0's offsets are marked as handled by this member;
// partition 1's owner replays the same batch, which the table drops.
func TestUnitExactlyRecoverIntentOfAnotherMember(t *testing.T) {
	synctest.Test(t, testUnitExactlyRecoverIntentOfAnotherMember)
}

func testUnitExactlyRecoverIntentOfAnotherMember(t *testing.T) {
	w, _, _ := tornWorld(t)
	b := w.run(t, eoRecoverConfig(t), nil)
	b.assign(eoP0)
	w.exactly(t, eoP1, 0, 3)
	for o := range int64(6) {
		if b.p.eo.Skip(eoP1, o) {
			t.Fatal("offsets of a partition not assigned were marked as handled")
		}
	}
	c := w.run(t, eoRecoverConfig(t), nil)
	c.assign(eoP1)
	if kept, dropped := w.counts(); kept != 1 || dropped != 1 {
		t.Fatalf("%d INSERTs kept, %d dropped; want one kept, one dropped", kept, dropped)
	}
	finishSplit(t, w, b, c)
}

// TestUnitExactlyRecoverTwoPending: two batches of partition 0 were in
// flight (max_in_flight 2): the first landed, the second did not. Both
// are replayed, in token order; the first is dropped, the second kept.
func TestUnitExactlyRecoverTwoPending(t *testing.T) {
	synctest.Test(t, testUnitExactlyRecoverTwoPending)
}

func testUnitExactlyRecoverTwoPending(t *testing.T) {
	w := newEOWorld()
	w.produce(eoP0, 9)
	r1, r2 := eos.Range{TP: eoP0, First: 0, Last: 2}, eos.Range{TP: eoP0, First: 3, Last: 5}
	t1, e1 := intent(r1)
	_, e2 := intent(r2)
	w.landed(t1, r1)
	w.ledger(t, eoP0, 0, "", e1[eoP0], e2[eoP0])
	r := w.run(t, eoRecoverConfig(t), nil)
	r.assign(eoP0)
	if kept, dropped := w.counts(); kept != 2 || dropped != 1 || w.count("ReadRanges") != 2 {
		t.Fatalf("%d kept, %d dropped, %d reads back; want both replayed, the landed one dropped", kept, dropped, w.count("ReadRanges"))
	}
	r.feed(w, eoP0, 0)
	eventually(t, 2*time.Second, "partition 0 committed at 9", func() bool { return r.src.committed(eoP0) == 9 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	w.exactly(t, eoP0, 0, 9)
}

// TestUnitExactlyRecoverIncompleteIntent: partition 0's ledger lists a
// two-partition batch that partition 1's ledger no longer does (its next
// owner replayed it and committed past it). The intent cannot be rebuilt,
// so its region of partition 0 is looked up in the table instead: present
// rows are skipped, absent ones consumed again.
func TestUnitExactlyRecoverIncompleteIntent(t *testing.T) {
	bothWays(t, "present", "absent", testUnitExactlyRecoverIncompleteIntent)
}

func testUnitExactlyRecoverIncompleteIntent(t *testing.T, present bool) {
	w := newEOWorld()
	w.produce(eoP0, 6)
	w.produce(eoP1, 6)
	rs := []eos.Range{{TP: eoP0, First: 0, Last: 2}, {TP: eoP1, First: 0, Last: 2}}
	tok, es := intent(rs...)
	w.ledger(t, eoP0, 0, "", es[eoP0])
	w.ledger(t, eoP1, 3, "")
	if present {
		w.landed(tok, rs...)
	} else {
		w.landed("other", rs[1]) // partition 1's rows came in another batch
	}
	r := w.run(t, eoRecoverConfig(t), nil)
	r.assign(eoP0)
	if n := w.count("ReadRanges"); n != 0 {
		t.Fatalf("%d reads back of an incomplete intent", n)
	}
	if got := strings.Join(w.presents, "; "); got != "events[0] 0..3" {
		t.Fatalf("table checks %q; want partition 0's region of the intent, 0..3", got)
	}
	r.feed(w, eoP0, 0)
	eventually(t, 2*time.Second, "partition 0 committed at 6", func() bool { return r.src.committed(eoP0) == 6 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	w.exactly(t, eoP0, 0, 6)
}

// TestUnitExactlyRecoverWaitsForClickHouse: the check in the table
// refused because ClickHouse is down or restarting is tried again with the
// INSERTs' backoff within kafka.rebalance_timeout, and the partition is
// then recovered as if it had answered at once; an error that will repeat
// stops the connector at once, and one that passes too late stops it at
// the bound.
func TestUnitExactlyRecoverWaitsForClickHouse(t *testing.T) {
	down := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name  string
		errs  []error
		want  string // in Run's error; "": recovered
		tries int    // Present calls
	}{
		{"down twice", []error{down, down}, "", 3},
		{"refused for good", []error{&clickhouse.Exception{Code: 497, Message: "not enough privileges"}}, "not enough privileges", 1},
		{"down past the bound", slices.Repeat([]error{down}, 100_000), "took longer than kafka.rebalance_timeout", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newEOWorld()
				w.produce(eoP0, 6)
				rs := []eos.Range{{TP: eoP0, First: 0, Last: 2}, {TP: eoP1, First: 0, Last: 2}}
				_, es := intent(rs...)
				w.ledger(t, eoP0, 0, "", es[eoP0]) // incomplete: checked in the table
				w.presentErrs = c.errs
				cfg := eoRecoverConfig(t)
				cfg.Kafka.RebalanceTimeout = 30 * time.Second
				r := w.run(t, cfg, nil)
				began := time.Now()
				r.assign(eoP0)
				took := time.Since(began)
				if c.tries > 0 && w.count("Present") != c.tries {
					t.Fatalf("%d checks in the table, want %d", w.count("Present"), c.tries)
				}
				if c.want == "" {
					r.feed(w, eoP0, 0)
					eventually(t, 2*time.Second, "partition 0 committed at 6", func() bool { return r.src.committed(eoP0) == 6 })
					if err := r.stop(t); err != nil {
						t.Fatalf("Run: %v", err)
					}
					w.exactly(t, eoP0, 0, 6)
					return
				}
				err := r.wait(t)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Run: %v; want %q", err, c.want)
				}
				if c.tries == 0 && took != cfg.Kafka.RebalanceTimeout {
					t.Fatalf("the assigned callback returned after %s, want after kafka.rebalance_timeout (%s)", took, cfg.Kafka.RebalanceTimeout)
				}
			})
		})
	}
}

// TestUnitExactlyRecoverStaleLedgers: ledgers that no longer describe the
// partition are not replayed. A ledger written at offset 3 while the group
// is committed at 6 (an older generation's metadata that a later commit
// carried over): the committed offset wins, and the partition is checked
// from 6 on. A ledger whose intent's token is not the batch's for the
// table the topic is routed to now (the route changed): the region is
// checked in the table, not rebuilt into the new table.
func TestUnitExactlyRecoverStaleLedgers(t *testing.T) {
	synctest.Test(t, testUnitExactlyRecoverStaleLedgers)
}

func testUnitExactlyRecoverStaleLedgers(t *testing.T) {
	w := newEOWorld()
	w.produce(eoP0, 9)
	w.produce(eoP1, 6)
	_, es := intent(eos.Range{TP: eoP0, First: 3, Last: 5})
	stale, err := eos.Ledger{Offset: 3, Entries: []eos.Entry{es[eoP0]}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	w.commit(eoP0, 6, stale)
	other := eos.Token("db.old", []eos.Range{{TP: eoP1, First: 0, Last: 2}})
	w.ledger(t, eoP1, 0, "", eos.Entry{Token: other, First: 0, Last: 2, N: 1})
	r := w.run(t, eoRecoverConfig(t), nil)
	r.assign(eoP0, eoP1)
	if n := w.count("ReadRanges"); n != 0 {
		t.Fatalf("%d reads back of stale intents", n)
	}
	if got := strings.Join(w.presents, "; "); got != "events[0] 6..-1; events[1] 0..3" {
		t.Fatalf("table checks %q; want partition 0 from its committed 6, partition 1's region 0..3", got)
	}
	r.feed(w, eoP0, 6)
	r.feed(w, eoP1, 0)
	eventually(t, 2*time.Second, "committed at the ends", func() bool {
		return r.src.committed(eoP0) == 9 && r.src.committed(eoP1) == 6
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	w.exactly(t, eoP0, 6, 9)
	w.exactly(t, eoP1, 0, 6)
}

// TestUnitExactlyRecoverRecreatedTopic: a ledger written for another
// incarnation of the topic (deleted and recreated under the same name)
// stops the connector with the fix before anything is replayed, whether
// the proof is the ledger's topic ID or a row in the table past the new
// partition's log end.
func TestUnitExactlyRecoverRecreatedTopic(t *testing.T) {
	bothWays(t, "topic ID", "log end", testUnitExactlyRecoverRecreatedTopic)
}

func testUnitExactlyRecoverRecreatedTopic(t *testing.T, byID bool) {
	w, _, _ := tornWorld(t)
	want := "the group's ledger was written for topic ID old-id, the topic's ID is now new-id"
	if byID {
		_, es := intent(eos.Range{TP: eoP0, First: 0, Last: 2}, eos.Range{TP: eoP1, First: 0, Last: 2})
		w.ledger(t, eoP0, 0, "old-id", es[eoP0])
		w.ledger(t, eoP1, 0, "old-id", es[eoP1])
		w.ids[unitTopic] = "new-id"
	} else {
		// Kafka dropped the group's offsets with the old topic; the table
		// holds the old topic's rows up to 9, the new log ends at 6.
		w.group = eos.Snapshot{}
		w.landed("old", eos.Range{TP: eoP0, First: 0, Last: 9})
		want = "the table holds a row of offset 9, and the partition's log ends at 6"
	}
	kept, _ := w.counts()
	r := w.run(t, eoRecoverConfig(t), nil)
	r.assign(eoP0, eoP1)
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "was deleted and recreated") || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run returned %v; want the recreated topic named with %q", err, want)
	}
	if k, _ := w.counts(); k != kept || w.count("ReadRanges") != 0 {
		t.Fatalf("%d INSERTs, %d reads back before the stop; want none", k-kept, w.count("ReadRanges"))
	}
}

// TestUnitExactlyRecoverUnreadable: the pending batch cannot be read back
// (retention deleted its records): its ranges are looked up in the table
// instead, where it had landed, and nothing is inserted twice.
func TestUnitExactlyRecoverUnreadable(t *testing.T) {
	synctest.Test(t, testUnitExactlyRecoverUnreadable)
}

func testUnitExactlyRecoverUnreadable(t *testing.T) {
	w, tok, rs := tornWorld(t)
	w.landed(tok, rs...)
	w.unreadable = true
	r := w.run(t, eoRecoverConfig(t), nil)
	r.assign(eoP0, eoP1)
	if got := strings.Join(w.presents, "; "); got != "events[0] 0..3; events[1] 0..3" {
		t.Fatalf("table checks %q; want the batch's ranges 0..3 of both partitions", got)
	}
	if kept, dropped := w.counts(); kept != 1 || dropped != 0 {
		t.Fatalf("%d kept, %d dropped; want no INSERT", kept-1, dropped)
	}
	finish(t, w, r)
}

// TestUnitExactlyRecoverReadsRetried: the reads of recovery (the topic IDs
// and log ends while a leader moves; the group's ledgers while its
// coordinator's broker is down or the coordinator moves) are tried again
// with backoff, and recovery goes on once they answer; a refusal that does
// not pass (authorization) stops the connector at once.
func TestUnitExactlyRecoverReadsRetried(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		call          string
		fail          func(w *eoWorld, errs ...error)
		passing       []error
		fatal         error
		fatalText     string
		checkBackoffs bool
	}{
		{"TopicState", func(w *eoWorld, errs ...error) { w.stateErrs = errs },
			[]error{kerr.LeaderNotAvailable, kerr.NotLeaderForPartition}, kerr.TopicAuthorizationFailed, "TOPIC_AUTHORIZATION_FAILED", true},
		{"Snapshot", func(w *eoWorld, errs ...error) { w.snapshotErrs = errs },
			[]error{refused, kerr.CoordinatorNotAvailable}, kerr.GroupAuthorizationFailed, "GROUP_AUTHORIZATION_FAILED", false},
	} {
		t.Run(tc.call, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, _, _ := tornWorld(t)
				tc.fail(w, tc.passing...)
				r := w.run(t, eoRecoverConfig(t), nil)
				began := time.Now()
				r.assign(eoP0, eoP1)
				if n := w.count(tc.call); n != 3 {
					t.Fatalf("%d calls of %s, want 3", n, tc.call)
				}
				// Steps of 10ms and 20ms, each half fixed and half drawn at random.
				if took := time.Since(began); tc.checkBackoffs && (took < 15*time.Millisecond || took > 30*time.Millisecond) {
					t.Fatalf("recovery took %s; the two retries must wait 5-10ms and 10-20ms", took)
				}
				finish(t, w, r)
			})
			synctest.Test(t, func(t *testing.T) {
				w, _, _ := tornWorld(t)
				tc.fail(w, tc.fatal)
				r := w.run(t, eoRecoverConfig(t), nil)
				r.assign(eoP0, eoP1)
				if err := r.wait(t); err == nil || !strings.Contains(err.Error(), tc.fatalText) {
					t.Fatalf("Run returned %v; want the authorization error", err)
				}
				if n := w.count(tc.call); n != 1 {
					t.Fatalf("%d calls of %s, want 1", n, tc.call)
				}
			})
		})
	}
}

// TestUnitExactlyNeedsItsIO: an exactly-once pipeline without the
// exactly-once I/O refuses to run, in one line.
func TestUnitExactlyNeedsItsIO(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Delivery = config.DeliveryExactlyOnce
	p, err := New(context.Background(), cfg, zerolog.Nop(), newFakeSink(nil))
	if err != nil {
		t.Fatal(err)
	}
	p.Attach(newFakeSource())
	if err := p.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "WithExactlyOnce") {
		t.Fatalf("Run returned %v; want the missing exactly-once I/O named", err)
	}
}

// TestUnitExactlyPlacementRecorded: with a table split across a cluster's
// shards (target: local by key), each intent records the placement its
// batch is split under.
func TestUnitExactlyPlacementRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newEOWorld()
		w.produce(eoP0, 3)
		w.placement = "00000000000000a1"
		r := w.run(t, eoRecoverConfig(t), nil)
		r.assign(eoP0)
		r.feed(w, eoP0, 0)
		eventually(t, 2*time.Second, "partition 0 committed at 3", func() bool { return r.src.committed(eoP0) == 3 })
		if err := r.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
		r.src.emu.Lock()
		defer r.src.emu.Unlock()
		l, _, err := eos.Decode(r.src.metas[0][eoP0])
		if err != nil || len(l.Entries) != 1 || l.Entries[0].Placement != w.placement {
			t.Fatalf("the intent's ledger %+v (%v); want one entry with placement %s", l, err, w.placement)
		}
	})
}

// TestUnitExactlyRecoverPlacementChanged: a pending batch recorded under
// one placement across the shards is replayed while the cluster places
// rows the same way; once the shards or their weights changed, recovery
// stops the connector with the fix before anything is replayed, since the
// rebuilt batch would split differently and each shard drops its part by
// the batch's token.
func TestUnitExactlyRecoverPlacementChanged(t *testing.T) {
	bothWays(t, "changed", "same", testUnitExactlyRecoverPlacementChanged)
}

func testUnitExactlyRecoverPlacementChanged(t *testing.T, changed bool) {
	w := newEOWorld()
	w.produce(eoP0, 6)
	w.produce(eoP1, 6)
	tok, es := intent(eos.Range{TP: eoP0, First: 0, Last: 2}, eos.Range{TP: eoP1, First: 0, Last: 2})
	for tp, e := range es {
		e.Placement = "00000000000000a1"
		w.ledger(t, tp, 0, "", e)
	}
	w.placement = "00000000000000a1"
	if changed {
		w.placement = "00000000000000b2"
	}
	r := w.run(t, eoRecoverConfig(t), nil)
	r.assign(eoP0, eoP1)
	if !changed {
		if kept, _ := w.counts(); kept != 1 || w.tokens[0] != tok {
			t.Fatalf("%d INSERTs kept; want the replay", kept)
		}
		finish(t, w, r)
		return
	}
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "placement 00000000000000a1") || !strings.Contains(err.Error(), "now place rows under 00000000000000b2") {
		t.Fatalf("Run returned %v; want the changed placement named", err)
	}
	if kept, _ := w.counts(); kept != 0 || w.count("ReadRanges") != 0 {
		t.Fatalf("%d INSERTs, %d reads back before the stop; want none", kept, w.count("ReadRanges"))
	}
}

// TestUnitExactlyShardWindows: the deduplication windows exactly-once
// checks at start are every shard's (ExactlyOnce.Windows on a cluster): a
// shard's refusal stops the run before anything is recorded or inserted,
// with the shard's line; a window read with a replica not reached is the
// one the margin counts from, the replica named in a warning.
func TestUnitExactlyShardWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newEOWorld()
		w.produce(eoP0, 6)
		w.windowsErr = errors.New("delivery exactly_once: table db.t_local on shard 2 replica 127.0.0.1:19202 has non_replicated_deduplication_window = 0, so a replayed batch would be inserted again")
		r := w.run(t, eoRecoverConfig(t), nil)
		if err := r.wait(t); err == nil || !strings.Contains(err.Error(), "on shard 2 replica 127.0.0.1:19202") {
			t.Fatalf("Run: %v; want the shard's refusal", err)
		}
		if n, snap := w.count("Snapshot"), len(w.group); n != 0 || snap != 0 {
			t.Fatalf("%d ledger reads, %d commits after the refusal", n, snap)
		}
		if kept, dropped := w.counts(); kept != 0 || dropped != 0 {
			t.Fatalf("%d INSERTs after the refusal", kept+dropped)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := newEOWorld()
		w.produce(eoP0, 6)
		w.produce(eoP1, 6)
		w.window, w.unchecked = 300, []string{"shard 2 replica 127.0.0.1:19203"}
		r := w.run(t, eoRecoverConfig(t), nil)
		r.assign(eoP0, eoP1)
		finish(t, w, r)
		remembered := 0
		r.p.cat.EachTable(func(ts *tables.Table) {
			size, ok := r.p.eo.Window(ts)
			if !ok {
				return
			}
			remembered++
			if size != 300 {
				t.Fatalf("%s: window %d for the margin; want the 300 Windows read", ts.Name(), size)
			}
		})
		if remembered == 0 {
			t.Fatal("no window remembered")
		}
	})
}
