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
