package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Unit tests of fan-out routing (fanout.go) with the fake source and sink.

// fanRecord is a record of unitTP with a key, one header "type" (when
// typ is not "") and a JSON value with a kind field.
func fanRecord(off int64, key, typ, kind string) *kgo.Record {
	r := &kgo.Record{Topic: unitTopic, Partition: unitTP.Partition, Offset: off, Timestamp: time.Now(),
		Value: fmt.Appendf(nil, `{"id":%d,"s":"row %d","kind":%q}`, off, off, kind)}
	if key != "" {
		r.Key = []byte(key)
	}
	if typ != "" {
		r.Headers = []kgo.RecordHeader{{Key: "type", Value: []byte(typ)}}
	}
	return r
}

// sendRecords hands the pipeline one fetch of unitTP's records.
func (s *fakeSource) sendRecords(recs ...*kgo.Record) {
	s.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: unitTopic, Partitions: []kgo.FetchPartition{{
		Partition: unitTP.Partition, HighWatermark: recs[len(recs)-1].Offset + 1, Records: recs}}}}}}
}

// drained waits until the pipeline handled every fetch sent so far and
// asked for the next.
func (r *running) drained(t *testing.T) {
	t.Helper()
	eventually(t, 2*time.Second, "the fetches handled", func() bool {
		return len(r.src.fetches) == 0 && r.src.polls.Load() >= 2
	})
}

// threeTables routes events to db.t (header type order), db.clicks (field
// kind click or view) and db.rest (key eu-*: listed).
const threeTables = `    when: {header.type: order}
  - topic: events
    table: clicks
    when: {field: kind, in: [click, view]}
  - topic: events
    table: rest
    when: {key: [eu-1, eu-2]}
`

// TestUnitFanoutFirstMatch: each record goes to the first route whose when:
// holds, only there; a record no route takes is skipped and counted, and
// committed past.
func TestUnitFanoutFirstMatch(t *testing.T) { synctest.Test(t, testUnitFanoutFirstMatch) }

func testUnitFanoutFirstMatch(t *testing.T) {
	cfg := unitConfig(t, threeTables)
	cfg.Batch.MaxRows = 100
	r := start(t, cfg, newFakeSink(nil))
	r.src.sendRecords(
		fanRecord(0, "eu-1", "order", "click"), // t (first match)
		fanRecord(1, "eu-1", "", "click"),      // clicks
		fanRecord(2, "eu-2", "", "other"),      // rest
		fanRecord(3, "us-1", "", "view"),       // clicks
		fanRecord(4, "us-1", "refund", "x"),    // nothing: skipped
		fanRecord(5, "", "order", ""),          // t
	)
	r.drained(t)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for table, want := range map[string]int{"db.t": 2, "db.clicks": 2, "db.rest": 1} {
		if got := r.sink.inserted(table); got != want {
			t.Errorf("%s: %d rows, want %d", table, got, want)
		}
	}
	if st := r.p.Stats(); st.Rows != 5 || st.Skipped != 1 {
		t.Errorf("stats %+v; want 5 rows, 1 skipped", st)
	}
	if got := r.src.committed(unitTP); got != 6 {
		t.Fatalf("committed %d, want 6", got)
	}
}

// TestUnitFanoutAll: with fanout: all a record goes to every route whose
// when: holds, once per table.
func TestUnitFanoutAll(t *testing.T) { synctest.Test(t, testUnitFanoutAll) }

func testUnitFanoutAll(t *testing.T) {
	cfg := unitConfig(t, threeTables+`  - topic: events
    table: t
    when: {key: eu-1}
fanout: all
`)
	cfg.Batch.MaxRows = 100
	r := start(t, cfg, newFakeSink(nil))
	r.src.sendRecords(
		fanRecord(0, "eu-1", "order", "click"), // t, clicks, rest (t once, though two routes name it)
		fanRecord(1, "eu-1", "", "click"),      // clicks, rest, t (the fourth route)
		fanRecord(2, "us-1", "", "other"),      // nothing
		fanRecord(3, "us-1", "", "view"),       // clicks
	)
	r.drained(t)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for table, want := range map[string]int{"db.t": 2, "db.clicks": 3, "db.rest": 2} {
		if got := r.sink.inserted(table); got != want {
			t.Errorf("%s: %d rows, want %d", table, got, want)
		}
	}
	if got := r.src.committed(unitTP); got != 4 {
		t.Fatalf("committed %d, want 4", got)
	}
}

// allTables feeds every record of events to db.t, db.b and db.c.
const allTables = `  - topic: events
    table: b
  - topic: events
    table: c
fanout: all
`

// TestUnitFanoutCommitWaitsForEveryTarget: a record in three tables is
// committed only when the last of its three INSERTs is acknowledged.
func TestUnitFanoutCommitWaitsForEveryTarget(t *testing.T) {
	synctest.Test(t, testUnitFanoutCommitWaitsForEveryTarget)
}

func testUnitFanoutCommitWaitsForEveryTarget(t *testing.T) {
	gate := make(chan struct{})
	sink := newFakeSink(func(n int) insertScript {
		if n == 3 {
			return insertScript{gate: gate}
		}
		return insertScript{}
	})
	r := start(t, unitConfig(t, allTables), sink) // max_rows 2: two records seal all three batches
	r.src.send(unitTP, 0, rows(0, 2)...)
	eventually(t, 2*time.Second, "two inserts done, the third started", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.calls == 3 && sink.rows["db.t"]+sink.rows["db.b"]+sink.rows["db.c"] == 4
	})
	time.Sleep(4 * r.p.cfg.Kafka.CommitInterval)
	if got := r.src.committed(unitTP); got != -1 {
		t.Fatalf("committed %d while one of three targets has not acknowledged", got)
	}
	close(gate)
	eventually(t, 2*time.Second, "offset 2 committed", func() bool { return r.src.committed(unitTP) == 2 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, table := range []string{"db.t", "db.b", "db.c"} {
		if got := sink.inserted(table); got != 2 {
			t.Errorf("%s: %d rows, want 2", table, got)
		}
	}
}

// TestUnitFanoutFailingTargetHoldsCommit: when one target's INSERT fails
// for good, the connector stops and nothing of the records it held is
// committed, though the other targets have them.
func TestUnitFanoutFailingTargetHoldsCommit(t *testing.T) {
	synctest.Test(t, testUnitFanoutFailingTargetHoldsCommit)
}

func testUnitFanoutFailingTargetHoldsCommit(t *testing.T) {
	sink := newFakeSink(func(n int) insertScript {
		if n == 2 {
			return insertScript{err: errors.New("code: 60, UNKNOWN_TABLE")}
		}
		return insertScript{}
	})
	r := start(t, unitConfig(t, allTables), sink)
	r.src.send(unitTP, 0, rows(0, 2)...)
	err := r.wait(t)
	if err == nil {
		t.Fatal("Run returned nil after a permanent insert failure")
	}
	if got := r.src.committed(unitTP); got != -1 {
		t.Fatalf("committed %d past records a failed target holds", got)
	}
	if n := sink.inserted("db.t") + sink.inserted("db.b") + sink.inserted("db.c"); n != 4 {
		t.Fatalf("%d rows inserted, want 4 (two targets of three)", n)
	}
}

// TestUnitFanoutUnroutedDLQ: with errors.unrouted: dlq a record no route
// takes goes to the dead-letter topic and is committed once it is there.
func TestUnitFanoutUnroutedDLQ(t *testing.T) { synctest.Test(t, testUnitFanoutUnroutedDLQ) }

func testUnitFanoutUnroutedDLQ(t *testing.T) {
	cfg := unitConfig(t, threeTables+`errors: {tolerance: all, dlq_topic: dead, unrouted: dlq}
`)
	r := start(t, cfg, newFakeSink(nil))
	r.src.sendRecords(
		fanRecord(0, "us-1", "refund", "x"), // nothing takes it
		fanRecord(1, "eu-1", "", "x"),       // rest
		fanRecord(2, "", "order", "x"),      // t
	)
	r.drained(t)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.src.mu.Lock()
	sent := slices.Clone(r.src.dlqSent)
	r.src.mu.Unlock()
	if !slices.Equal(sent, []int64{0}) {
		t.Fatalf("dead-letter produces %v, want [0]", sent)
	}
	if st := r.p.Stats(); st.DLQ != 1 || st.Rows != 2 || st.Skipped != 0 {
		t.Fatalf("stats %+v; want 1 DLQ, 2 rows, 0 skipped", st)
	}
	if got := r.src.committed(unitTP); got != 3 {
		t.Fatalf("committed %d, want 3", got)
	}
}

// TestUnitFanoutBadForOneTarget: a record one target cannot decode still
// reaches the others, goes once to the dead-letter topic, and is committed
// only when both the insert and the produce succeeded.
func TestUnitFanoutBadForOneTarget(t *testing.T) { synctest.Test(t, testUnitFanoutBadForOneTarget) }

func testUnitFanoutBadForOneTarget(t *testing.T) {
	cfg := unitConfig(t, `    columns: {id: id, s: s}
  - topic: events
    table: b
    columns: {id: kind, s: s}
fanout: all
errors: {tolerance: all, dlq_topic: dead}
`)
	cfg.Batch.MaxRows = 100
	r := start(t, cfg, newFakeSink(nil))
	r.src.sendRecords(fanRecord(0, "", "", "7"), fanRecord(1, "", "", "not a number"))
	r.drained(t)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if a, b := r.sink.inserted("db.t"), r.sink.inserted("db.b"); a != 2 || b != 1 {
		t.Fatalf("rows: db.t %d, db.b %d; want 2 and 1", a, b)
	}
	if st := r.p.Stats(); st.DLQ != 1 {
		t.Fatalf("stats %+v; want 1 DLQ", st)
	}
	if got := r.src.committed(unitTP); got != 2 {
		t.Fatalf("committed %d, want 2", got)
	}
}

// TestUnitFanoutRevokeWaitsForEveryTarget: a revoke seals the open batches
// of every table the partition's records went to, waits for all their
// INSERTs, and commits the partition's end.
func TestUnitFanoutRevokeWaitsForEveryTarget(t *testing.T) {
	synctest.Test(t, testUnitFanoutRevokeWaitsForEveryTarget)
}

func testUnitFanoutRevokeWaitsForEveryTarget(t *testing.T) {
	cfg := unitConfig(t, allTables)
	cfg.Batch.MaxRows = 100
	cfg.Kafka.RebalanceTimeout = 20 * time.Second
	sink := newFakeSink(func(n int) insertScript { return insertScript{delay: time.Duration(n) * 30 * time.Millisecond} })
	r := start(t, cfg, sink)
	r.src.send(unitTP, 0, rows(0, 3)...)
	r.drained(t)
	took := revoke(r, unitTP)
	if got := r.src.committed(unitTP); got != 3 {
		t.Fatalf("revoke returned after %s with offset %d committed, want 3", took, got)
	}
	for _, table := range []string{"db.t", "db.b", "db.c"} {
		if got := sink.inserted(table); got != 3 {
			t.Errorf("%s: %d rows when the revoke returned, want 3", table, got)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
