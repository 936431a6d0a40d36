package offsets

import (
	"math/rand/v2"
	"testing"
)

var tp0 = TP{Topic: "t", Partition: 0}

func TestTrackerTable(t *testing.T) {
	// f adds (offset, unit) pairs to one partition, acks the given units in
	// order, and checks the committable position after all of it.
	type add struct {
		off  int64
		unit uint64
	}
	f := func(adds []add, acks []uint64, want int64, wantOK bool) {
		t.Helper()
		tr := New()
		for _, a := range adds {
			tr.Add(tp0, a.off, 7, a.unit)
		}
		for _, u := range acks {
			tr.Ack(u, []TP{tp0})
		}
		got, ok := tr.Position(tp0)
		if ok != wantOK || (ok && got.Offset != want) {
			t.Fatalf("adds %v acks %v: position %v,%v; want %d,%v", adds, acks, got, ok, want, wantOK)
		}
	}
	// nothing acked: nothing to commit
	f([]add{{0, 1}, {1, 1}}, nil, 0, false)
	// whole unit acked: past its last record
	f([]add{{0, 1}, {1, 1}, {2, 1}}, []uint64{1}, 3, true)
	// later unit acked first: the gap holds the position back
	f([]add{{0, 1}, {1, 2}}, []uint64{2}, 0, false)
	f([]add{{0, 1}, {1, 2}, {2, 3}}, []uint64{1, 3}, 1, true)
	// then the gap closes: jumps over everything handled
	f([]add{{0, 1}, {1, 2}, {2, 3}}, []uint64{3, 1, 2}, 3, true)
	// interleaved units in one partition (two tables) make separate segments
	f([]add{{0, 1}, {1, 2}, {2, 1}, {3, 2}}, []uint64{1}, 1, true)
	f([]add{{0, 1}, {1, 2}, {2, 1}, {3, 2}}, []uint64{2}, 0, false)
	// skipped records are handled at once, but only after what precedes them
	f([]add{{0, Done}, {1, Done}}, nil, 2, true)
	f([]add{{0, 1}, {1, Done}}, nil, 0, false)
	f([]add{{0, 1}, {1, Done}, {2, Done}}, []uint64{1}, 3, true)
	// offset gaps (compaction, transaction markers) commit past the last record
	f([]add{{10, 1}, {15, 1}}, []uint64{1}, 16, true)
	// a replayed offset is ignored
	f([]add{{0, 1}, {1, 1}, {1, 2}}, []uint64{1}, 2, true)
	// acking an unknown unit changes nothing
	f([]add{{0, 1}}, []uint64{9}, 0, false)
}

func TestCommittableReportsOnce(t *testing.T) {
	tr := New()
	tr.Add(tp0, 0, 3, 1)
	tr.Add(TP{"t", 1}, 0, 3, 2)
	if c := tr.Committable(); len(c) != 0 {
		t.Fatalf("nothing acked, got %v", c)
	}
	tr.Ack(1, []TP{tp0})
	c := tr.Committable()
	if len(c) != 1 || c[tp0] != (Commit{Offset: 1, Epoch: 3}) {
		t.Fatalf("got %v", c)
	}
	if c := tr.Committable(); len(c) != 0 {
		t.Fatalf("reported twice: %v", c)
	}
}

func TestForgetIgnoresLateAcks(t *testing.T) {
	tr := New()
	tr.Add(tp0, 5, 0, 1)
	tr.Forget(tp0)
	tr.Ack(1, []TP{tp0})
	if _, ok := tr.Position(tp0); ok {
		t.Fatal("forgotten partition reappeared")
	}
	if c := tr.Committable(); len(c) != 0 {
		t.Fatalf("forgotten partition committable: %v", c)
	}
}

// TestRandomAcks is the invariant behind "a committed offset never passes a
// record that is not durably handled": records of many partitions go into
// units at random, units are acked in random order, and after every ack the
// committable position of each partition must be exactly one past the
// longest fully acked prefix.
func TestRandomAcks(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		tr := New()
		const parts = 4
		type rec struct {
			tp   TP
			off  int64
			unit uint64
		}
		var recs []rec
		next := make([]int64, parts)
		unit := uint64(1)
		units := []uint64{}
		n := 50 + rng.IntN(300)
		for i := 0; i < n; i++ {
			if rng.IntN(10) == 0 {
				unit++
				units = append(units, unit)
			}
			p := int32(rng.IntN(parts))
			u := unit
			if rng.IntN(20) == 0 {
				u = Done
			}
			next[p] += 1 + int64(rng.IntN(2)) // sometimes a gap
			r := rec{TP{"t", p}, next[p], u}
			recs = append(recs, r)
			tr.Add(r.tp, r.off, 0, r.unit)
		}
		units = append(units, 1)
		rng.Shuffle(len(units), func(i, j int) { units[i], units[j] = units[j], units[i] })
		acked := map[uint64]bool{Done: true}
		all := []TP{{"t", 0}, {"t", 1}, {"t", 2}, {"t", 3}}
		for _, u := range units {
			tr.Ack(u, all)
			acked[u] = true
			for p := int32(0); p < parts; p++ {
				// expected: one past the last record of the acked prefix
				want, wantOK := int64(0), false
				for _, r := range recs {
					if r.tp.Partition != p {
						continue
					}
					if !acked[r.unit] {
						break
					}
					want, wantOK = r.off+1, true
				}
				got, ok := tr.Position(TP{"t", p})
				if ok != wantOK || got.Offset != want {
					t.Fatalf("seed %d partition %d after acking %d: got %v,%v want %d,%v", seed, p, u, got, ok, want, wantOK)
				}
			}
		}
	}
}

// Add remembers the last partition it saw; Forget must not leave that
// shortcut pointing at the dropped state.
func TestForgetThenAddStartsFresh(t *testing.T) {
	tr := New()
	tp1 := TP{Topic: "t", Partition: 1}
	tr.Add(tp0, 5, 0, 1)
	tr.Forget(tp0)
	tr.Add(tp0, 3, 0, 2) // below the forgotten 5: a fresh partition takes it
	if n := tr.Pending(tp0); n != 1 {
		t.Fatalf("after Forget and Add: %d pending units, want 1", n)
	}
	tr.Add(tp1, 7, 0, 2)
	tr.Add(tp0, 4, 0, 3) // back to tp0 after another partition
	if n := tr.Pending(tp0); n != 2 {
		t.Fatalf("%d pending units on tp0, want 2", n)
	}
}

// BenchmarkAdd is the per-record cost: runs of records of one partition.
func BenchmarkAdd(b *testing.B) {
	tr := New()
	tps := []TP{{Topic: "events", Partition: 0}, {Topic: "events", Partition: 1}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tr.Add(tps[(i>>10)&1], int64(i), 0, uint64(i>>16))
	}
}

// TestTruncate: after a truncate at the first record of an unacknowledged
// unit, those offsets are added again (the partition was sought back), the
// units behind are gone, and the position moves only through what is acked.
func TestTruncate(t *testing.T) {
	tr := New()
	for off, unit := range []uint64{1, 1, 2, 2, Done, 3, 3} { // offsets 0..6
		tr.Add(tp0, int64(off), 7, unit)
	}
	tr.Ack(1, []TP{tp0})
	if next, ok := tr.Truncate(tp0, 2); !ok || next != 7 {
		t.Fatalf("Truncate = %d,%v; want 7,true", next, ok)
	}
	if _, ok := tr.Truncate(tp0, 2); ok {
		t.Fatal("a second truncate found records at or after 2")
	}
	tr.Ack(3, []TP{tp0}) // a late ack of a dropped unit changes nothing
	if c, _ := tr.Position(tp0); c.Offset != 2 {
		t.Fatalf("position %d after truncate, want 2", c.Offset)
	}
	tr.Add(tp0, 2, 7, 4) // consumed again from 2
	tr.Add(tp0, 3, 7, 4)
	tr.Ack(4, []TP{tp0})
	if c, _ := tr.Position(tp0); c.Offset != 4 {
		t.Fatalf("position %d after the records came again, want 4", c.Offset)
	}
	if _, ok := New().Truncate(tp0, 0); ok {
		t.Fatal("an empty tracker truncated something")
	}
}

// TestTrackerShared: a record held by several units (fan-out to several
// tables) is handled only when every one of them is acknowledged.
func TestTrackerShared(t *testing.T) {
	// Each add is one record; units lists who holds it.
	f := func(adds [][]uint64, acks []uint64, want int64, wantOK bool) {
		t.Helper()
		tr := New()
		for off, units := range adds {
			tr.AddShared(tp0, int64(off), 7, units)
		}
		for _, u := range acks {
			tr.Ack(u, []TP{tp0})
		}
		got, ok := tr.Position(tp0)
		if ok != wantOK || (ok && got.Offset != want) {
			t.Fatalf("adds %v acks %v: position %v,%v; want %d,%v", adds, acks, got, ok, want, wantOK)
		}
	}
	// one of two targets acked: held
	f([][]uint64{{1, 2}, {1, 2}}, []uint64{1}, 0, false)
	f([][]uint64{{1, 2}, {1, 2}}, []uint64{2}, 0, false)
	// both, in either order: past both records
	f([][]uint64{{1, 2}, {1, 2}}, []uint64{1, 2}, 2, true)
	f([][]uint64{{1, 2}, {1, 2}}, []uint64{2, 1}, 2, true)
	// three targets, one failing (never acked) holds everything behind it
	f([][]uint64{{1, 2, 3}, {1, 2, 3}}, []uint64{1, 3}, 0, false)
	// a record of one target after a shared one: each at its own pace
	f([][]uint64{{1, 2}, {1}, {1, 2}}, []uint64{1}, 0, false)
	f([][]uint64{{1}, {1, 2}, {1}}, []uint64{1}, 1, true)
	f([][]uint64{{1}, {1, 2}, {1}}, []uint64{1, 2}, 3, true)
	// a sealed unit replaced by the next: groups {1,2} then {3,2}
	f([][]uint64{{1, 2}, {3, 2}}, []uint64{1, 2}, 1, true)
	f([][]uint64{{1, 2}, {3, 2}}, []uint64{1, 2, 3}, 2, true)
	// duplicates and singletons
	f([][]uint64{{1, 1}, {1}}, []uint64{1}, 2, true)
	// shared with Done (a target that skipped it) behaves as the unit alone
	f([][]uint64{{Done, 1}}, []uint64{1}, 1, true)
}

// TestTrackerSharedGroupsReused: consecutive records held by the same units
// share one segment, and the groups are gone once acknowledged.
func TestTrackerSharedGroupsReused(t *testing.T) {
	tr := New()
	units := []uint64{5, 4}
	for off := range int64(1000) {
		tr.AddShared(tp0, off, 0, units)
	}
	if n := tr.Pending(tp0); n != 1 {
		t.Fatalf("1000 records of one pair of units: %d segments pending, want 1", n)
	}
	tr.Ack(4, []TP{tp0})
	tr.Ack(5, []TP{tp0})
	if c, _ := tr.Position(tp0); c.Offset != 1000 {
		t.Fatalf("position %d, want 1000", c.Offset)
	}
	if len(tr.groups) != 0 || len(tr.groupOf) != 0 || len(tr.unitGroup) != 0 {
		t.Fatalf("groups left behind: %d %d %d", len(tr.groups), len(tr.groupOf), len(tr.unitGroup))
	}
	if a := testing.AllocsPerRun(100, func() { tr.AddShared(tp0, 2000, 0, units) }); a > 0 {
		t.Fatalf("AddShared of a known group allocates %v times", a)
	}
}

// A transactional partition as read with read_committed: the consumer sees
// the committed records and every transaction marker (commit or abort),
// never the aborted records, so an aborted transaction is a gap closed by
// its marker. Markers are added as Done; the position must pass them (and
// the gaps before them) only once every record before them is handled, and
// reach the log end when the log ends with an aborted transaction.
func TestTransactionMarkersAndAbortedRanges(t *testing.T) {
	// Log of tp0 (offset: what it is):
	//  0-4  committed txn A, batch 1     5  commit marker of A
	//  6-9  aborted txn B (not seen)    10  abort marker of B
	// 11,13 committed txn C, batch 2    12  a bad record of C, DLQ unit 3
	// 14    commit marker of C
	// 15-19 aborted txn D (not seen)    20  abort marker of D; log end 21
	tr := New()
	for o := int64(0); o <= 4; o++ {
		tr.Add(tp0, o, 1, 1)
	}
	tr.Add(tp0, 5, 1, Done)
	tr.Add(tp0, 10, 1, Done)
	tr.Add(tp0, 11, 2, 2)
	tr.Add(tp0, 12, 2, 3)
	tr.Add(tp0, 13, 2, 2)
	tr.Add(tp0, 14, 2, Done)
	tr.Add(tp0, 20, 2, Done)
	pos := func(want int64, wantOK bool, when string) {
		t.Helper()
		got, ok := tr.Position(tp0)
		if ok != wantOK || (ok && got.Offset != want) {
			t.Fatalf("%s: position %v,%v; want %d,%v", when, got, ok, want, wantOK)
		}
	}
	pos(0, false, "nothing acknowledged: markers wait behind batch 1")
	tr.Ack(2, []TP{tp0})
	pos(0, false, "batch 2 acknowledged before batch 1")
	tr.Ack(1, []TP{tp0})
	pos(12, true, "batch 1 acknowledged: past marker 5, the aborted 6-9, marker 10 and 11 of batch 2, up to the DLQ record 12")
	if c := tr.Committable(); c[tp0] != (Commit{Offset: 12, Epoch: 2}) {
		t.Fatalf("committable %v, want offset 12 epoch 2", c)
	}
	tr.Ack(3, []TP{tp0})
	pos(21, true, "all acknowledged: the log end, past the trailing aborted transaction")
	if c := tr.Committable(); c[tp0] != (Commit{Offset: 21, Epoch: 2}) {
		t.Fatalf("committable %v, want offset 21 epoch 2", c)
	}
	if n := tr.Pending(tp0); n != 0 {
		t.Fatalf("%d units pending after all acks", n)
	}

	// A partition whose only content is an aborted transaction: the marker
	// alone moves the position to the log end.
	tp1 := TP{Topic: "t", Partition: 1}
	tr.Add(tp1, 7, 0, Done)
	if got, ok := tr.Position(tp1); !ok || got.Offset != 8 {
		t.Fatalf("marker-only partition: position %v,%v; want 8", got, ok)
	}
}

// Truncating a partition back to a batch's first record also forgets the
// markers after it, which arrive again with the records.
func TestTruncateForgetsMarkersAfter(t *testing.T) {
	tr := New()
	tr.Add(tp0, 0, 0, 1)
	tr.Add(tp0, 1, 0, Done) // commit marker
	tr.Add(tp0, 2, 0, 2)
	tr.Add(tp0, 3, 0, Done) // commit marker
	tr.Add(tp0, 9, 0, Done) // abort marker after an aborted 4-8
	next, ok := tr.Truncate(tp0, 2)
	if !ok || next != 10 {
		t.Fatalf("truncate: %d,%v; want 10,true", next, ok)
	}
	tr.Ack(1, []TP{tp0})
	if got, ok := tr.Position(tp0); !ok || got.Offset != 2 {
		t.Fatalf("after truncate and ack: %v,%v; want 2 (markers past 2 forgotten)", got, ok)
	}
	tr.Add(tp0, 2, 0, 3)
	tr.Add(tp0, 3, 0, Done)
	tr.Add(tp0, 9, 0, Done)
	tr.Ack(3, []TP{tp0})
	if got, ok := tr.Position(tp0); !ok || got.Offset != 10 {
		t.Fatalf("after re-adding: %v,%v; want 10", got, ok)
	}
}

// Fan-out: a record shared by two tables, then a marker. The marker waits
// until both tables have the record.
func TestMarkerAfterSharedRecord(t *testing.T) {
	tr := New()
	tr.AddShared(tp0, 0, 0, []uint64{1, 2})
	tr.Add(tp0, 1, 0, Done)
	tr.Ack(1, []TP{tp0})
	if _, ok := tr.Position(tp0); ok {
		t.Fatal("marker passed a record only one of its two tables has")
	}
	tr.Ack(2, []TP{tp0})
	if got, ok := tr.Position(tp0); !ok || got.Offset != 2 {
		t.Fatalf("position %v,%v; want 2", got, ok)
	}
}
