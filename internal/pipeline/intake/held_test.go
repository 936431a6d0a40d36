package intake

// The held-records queue on its own (heldState, held.go): what it holds,
// weighs, counts, yields and drops, and its schedule. The pipeline's use of
// it is tested in registry_unit_test.go and evolve_hold_unit_test.go.

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/offsets"
	"sink/internal/tables"
)

func heldRecs(tp offsets.TP, from int64, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: from + int64(i), Key: []byte("k"), Value: []byte("value")}
	}
	return recs
}

func TestUnitHeldState(t *testing.T) {
	a := offsets.TP{Topic: "t", Partition: 0}
	b := offsets.TP{Topic: "t", Partition: 1}
	c := offsets.TP{Topic: "u", Partition: 0}
	regErr := errors.New("registry down")
	waitT := &tables.Wait{Table: "db.t", Field: "f"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const recBytes = 6 // "k" + "value"

	tests := []struct {
		name      string
		drop      []offsets.TP
		wantParts []offsets.TP
		wantReg   int
		wantSch   int
	}{
		{name: "nothing dropped", wantParts: []offsets.TP{a, c, b}, wantReg: 5, wantSch: 3},
		{name: "a partition waiting for the registry", drop: []offsets.TP{a}, wantParts: []offsets.TP{c, b}, wantReg: 1, wantSch: 3},
		{name: "one not held", drop: []offsets.TP{{Topic: "v"}}, wantParts: []offsets.TP{a, c, b}, wantReg: 5, wantSch: 3},
		{name: "all", drop: []offsets.TP{c, b, a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h heldState
			if h.holding() || h.due(t0) {
				t.Fatal("the zero value holds something")
			}
			h.hold(a, heldRecs(a, 10, 2), regErr, t0)
			h.hold(c, heldRecs(c, 0, 3), waitT, t0.Add(time.Second))
			h.hold(b, heldRecs(b, 7, 1), &lookupPending{}, t0.Add(2*time.Second))
			h.hold(a, heldRecs(a, 12, 2), nil, t0.Add(3*time.Second))
			if !h.since.Equal(t0) || h.lastErr != regErr {
				t.Fatalf("since %v, lastErr %v: want the first hold's time and the registry's error", h.since, h.lastErr)
			}
			if h.due(t0) || !h.due(t0.Add(heldRetryMax)) {
				t.Fatalf("next attempt at %v: want after %v, within %v", h.next, t0, heldRetryMax)
			}
			if !slices.Equal(slices.Collect(func(yield func(int64) bool) {
				for r := range h.waitingFor("db.t") {
					if !yield(r.Offset) {
						return
					}
				}
			}), []int64{0, 1, 2}) {
				t.Fatal("waitingFor: want the records of the partition waiting for db.t")
			}

			dropped := h.drop(tt.drop)
			n := 0
			for _, hp := range dropped {
				n += len(hp.recs)
				if !slices.Contains(tt.drop, hp.tp) {
					t.Errorf("dropped %v, not asked for", hp.tp)
				}
			}
			var parts []offsets.TP
			for _, hp := range h.parts {
				parts = append(parts, hp.tp)
			}
			if !slices.Equal(parts, tt.wantParts) {
				t.Fatalf("held partitions %v, want %v", parts, tt.wantParts)
			}
			reg, sch := h.counts()
			if reg != tt.wantReg || sch != tt.wantSch || h.records() != reg+sch || n+reg+sch != 8 {
				t.Fatalf("counts %d+%d (records %d, dropped %d), want %d+%d", reg, sch, h.records(), n, tt.wantReg, tt.wantSch)
			}
			if h.bytes != (reg+sch)*recBytes {
				t.Fatalf("bytes %d, want %d", h.bytes, (reg+sch)*recBytes)
			}
			if !h.holding() {
				if h.since != (time.Time{}) || h.lastErr != nil {
					t.Fatal("nothing held, but the schedule is kept")
				}
				return
			}
			for _, tp := range tt.wantParts {
				if !h.has(tp) {
					t.Errorf("has(%v) false, want true", tp)
				}
			}
			for _, tp := range tt.drop {
				if h.has(tp) {
					t.Errorf("has(%v) true after drop", tp)
				}
			}
		})
	}
}

// A round: pop what decodes, prune the partitions left empty, reschedule or
// forget the schedule.
func TestUnitHeldStateRound(t *testing.T) {
	a := offsets.TP{Topic: "t", Partition: 0}
	b := offsets.TP{Topic: "t", Partition: 1}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var h heldState
	h.hold(a, heldRecs(a, 0, 2), errors.New("down"), t0)
	h.hold(b, heldRecs(b, 5, 1), &lookupPending{id: 1}, t0)

	h.kick(t0)
	if !h.due(t0) {
		t.Fatal("kick: want the attempt due now")
	}
	if r := h.pop(h.part(b)); r.Offset != 5 {
		t.Fatalf("pop: offset %d, want 5", r.Offset)
	}
	if r := h.pop(h.part(a)); r.Offset != 0 {
		t.Fatalf("pop: offset %d, want 0", r.Offset)
	}
	h.prune()
	if h.has(b) || !h.has(a) || h.records() != 1 || h.bytes != 6 {
		t.Fatalf("after prune: has(b) %v, has(a) %v, %d records, %d bytes; want only a's last record", h.has(b), h.has(a), h.records(), h.bytes)
	}

	// A round ended only on look-ups still running waits the current
	// step, not counted; another lengthens the backoff.
	retries := h.backoff.Retries()
	h.reschedule(t0, true)
	if h.backoff.Retries() != retries || !h.next.After(t0) {
		t.Fatalf("reschedule(only pending): retries %d → %d, next %v", retries, h.backoff.Retries(), h.next)
	}
	h.reschedule(t0, false)
	if h.backoff.Retries() != retries+1 {
		t.Fatalf("reschedule: retries %d → %d, want one more", retries, h.backoff.Retries())
	}

	h.pop(h.part(a))
	h.prune()
	if h.holding() || h.bytes != 0 || !h.since.IsZero() || h.lastErr != nil {
		t.Fatal("all decoded: want the zero value")
	}
	h.kick(t0)
	if h.due(t0) {
		t.Fatal("kick with nothing held made an attempt due")
	}
}
