package pipeline

// Unit tests of exactly-once delivery when partitions are given up, with
// the fake Source and Sink of unit_test.go: what happens to batches not yet
// recorded, to open batches and to INSERTs in flight that hold a lost
// partition together with partitions the member keeps.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chtable"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/pipeline/intake"
)

var (
	eoP0 = offsets.TP{Topic: unitTopic, Partition: 0}
	eoP1 = offsets.TP{Topic: unitTopic, Partition: 1}
)

// eoSource is the fake source plus what exactly-once uses: the metadata of
// each commit, intent commits refused on demand, and seeks.
type eoSource struct {
	*fakeSource
	emu    sync.Mutex
	refuse error                   // what every commit fails with, when not nil
	metas  []map[offsets.TP]string // metadata of the successful commits
	seeks  []map[offsets.TP]int64  // every Seek call
	tried  int                     // commits attempted
	// world, when not nil, is where successful commits are stored, as
	// the group coordinator stores them.
	world *eoWorld
}

func (s *eoSource) Commit(ctx context.Context, pos map[offsets.TP]offsets.Commit, meta map[offsets.TP]string) error {
	s.emu.Lock()
	s.tried++
	refuse := s.refuse
	s.emu.Unlock()
	if refuse != nil {
		return fmt.Errorf("kafka: commit: %w", refuse)
	}
	if err := s.fakeSource.Commit(ctx, pos, meta); err != nil {
		return err
	}
	s.emu.Lock()
	m := map[offsets.TP]string{}
	for tp, v := range meta {
		m[tp] = v
	}
	s.metas = append(s.metas, m)
	s.emu.Unlock()
	if w := s.world; w != nil {
		w.mu.Lock()
		for tp, c := range pos {
			w.group[tp] = eos.Committed{Offset: c.Offset, Metadata: meta[tp]}
		}
		w.mu.Unlock()
	}
	return nil
}

func (s *eoSource) Seek(pos map[offsets.TP]int64) {
	s.emu.Lock()
	defer s.emu.Unlock()
	m := map[offsets.TP]int64{}
	for tp, at := range pos {
		m[tp] = at
	}
	s.seeks = append(s.seeks, m)
}

func (s *eoSource) setRefuse(v error) {
	s.emu.Lock()
	s.refuse = v
	s.emu.Unlock()
}

func (s *eoSource) attempts() int {
	s.emu.Lock()
	defer s.emu.Unlock()
	return s.tried
}

func (s *eoSource) seekCalls() []map[offsets.TP]int64 {
	s.emu.Lock()
	defer s.emu.Unlock()
	return append([]map[offsets.TP]int64(nil), s.seeks...)
}

// commitsSince returns the successful commits from the n-th on.
func (s *eoSource) commitsSince(n int) []map[offsets.TP]offsets.Commit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[offsets.TP]offsets.Commit(nil), s.commits[n:]...)
}

func (s *eoSource) commitCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.commits)
}

// startEO runs an exactly-once pipeline over partitions 0 and 1 of the unit
// topic, both assigned without a committed offset (what recovery on
// assignment leaves for a new group).
func startEO(t *testing.T, cfg *config.Config, sink *fakeSink) (*running, *eoSource) {
	t.Helper()
	p := newEO(t, cfg, sink)
	src := &eoSource{fakeSource: newFakeSource()}
	r := launch(t, p, src.fakeSource, src, sink)
	return r, src
}

// newEO builds (without running) an exactly-once pipeline whose partitions
// 0 and 1 of the unit topic are assigned without a committed offset.
func newEO(t *testing.T, cfg *config.Config, sink *fakeSink) *Pipeline {
	t.Helper()
	cfg.Delivery = config.DeliveryExactlyOnce
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink, WithExactlyOnce(anyTableIO{eoFakeIO{newEOWorld()}}))
	if err != nil {
		t.Fatal(err)
	}
	// What main does before Run (the windows, 1000 in the fake world),
	// then the recovery of partitions no member has committed yet.
	ctx := context.Background()
	if err := p.CheckExactlyOnce(ctx); err != nil {
		t.Fatal(err)
	}
	p.eo.OnAssign(ctx, []offsets.TP{eoP0, eoP1})
	if p.fatal != nil {
		t.Fatal(p.fatal)
	}
	return p
}

// anyTableIO is the fake world's I/O for tables without the Kafka columns
// (the plain fake sink's): every table's window is the world's.
type anyTableIO struct{ eoFakeIO }

func (f anyTableIO) Windows(_ context.Context, tables []*chtable.Table) ([]eos.Window, error) {
	out := make([]eos.Window, len(tables))
	for i := range out {
		out[i] = eos.Window{Setting: "non_replicated_deduplication_window", Size: int64(f.w.window)}
	}
	return out, nil
}

func lose(r *running, tp offsets.TP) {
	r.p.Lost(context.Background(), map[string][]int32{tp.Topic: {tp.Partition}})
}

// firstInsertHeld returns a fake sink whose first INSERT waits until the
// returned gate is closed; every later INSERT succeeds at once.
func firstInsertHeld() (*fakeSink, chan struct{}) {
	gate := make(chan struct{})
	sink := newFakeSink(func(n int) insertScript {
		if n == 1 {
			return insertScript{gate: gate}
		}
		return insertScript{}
	})
	return sink, gate
}

// checkSurvivedLoss stops the pipeline after partition 0 was lost and
// checks that the member survived it (Run returns no error), that want
// rows were inserted (why says which ones) and that no successful commit
// from the since-th on names partition 0.
func checkSurvivedLoss(t *testing.T, r *running, src *eoSource, sink *fakeSink, since, want int, why string) {
	t.Helper()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v (the member must survive the loss)", err)
	}
	if got := sink.inserted("db.t"); got != want {
		t.Fatalf("%d rows inserted, want %d (%s)", got, want, why)
	}
	for _, c := range src.commitsSince(since) {
		if _, ok := c[eoP0]; ok {
			t.Fatalf("partition 0 committed after it was lost: %v", c)
		}
	}
}

// startRefused runs an exactly-once pipeline of 4-row batches whose every
// commit fails with refuse and whose retries wait retry, sends one batch of
// partitions 0 (offsets 0-1) and 1 (offsets 10-11) and waits until its
// intent commit was tried at least tries times (what names the wait).
func startRefused(t *testing.T, retry time.Duration, refuse error, tries int, what string) (*running, *eoSource, *fakeSink) {
	t.Helper()
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = 4
	cfg.ClickHouse.RetryInitial, cfg.ClickHouse.RetryMax = retry, retry
	sink := newFakeSink(nil)
	r, src := startEO(t, cfg, sink)
	src.setRefuse(refuse)
	r.src.send(eoP0, 0, rows(0, 2)...)
	r.src.send(eoP1, 10, rows(10, 2)...)
	eventually(t, 2*time.Second, what, func() bool { return src.attempts() >= tries })
	return r, src, sink
}

// TestUnitExactlyLostUnrecordedBatch: a sealed batch holding partitions 0
// and 1 waits for an insert slot (its intent not yet sent) behind an
// INSERT in flight, and an open batch holds more of partition 1, when
// partition 0 is lost. Both are dropped, never inserted; partition 1 is
// sought back to the dropped batch's first offset of it, and its records,
// consumed again, go into new batches; the batch in flight is inserted;
// the member keeps running and nothing is inserted twice.
func TestUnitExactlyLostUnrecordedBatch(t *testing.T) {
	synctest.Test(t, testUnitExactlyLostUnrecordedBatch)
}

func testUnitExactlyLostUnrecordedBatch(t *testing.T) {
	cfg := unitConfig(t, "")
	sink, gate := firstInsertHeld()
	r, src := startEO(t, cfg, sink)
	r.src.send(eoP1, 8, rows(8, 2)...) // batch {p1 8-9}: recorded, INSERT held
	r.insertStarted(t)
	r.src.send(eoP0, 0, rows(0, 1)...)
	r.src.send(eoP1, 10, rows(10, 2)...) // batch {p0 0, p1 10} waits for the slot; p1 11 stays open
	eventually(t, time.Second, "the fetches handled", func() bool { return r.src.polls.Load() >= 4 })
	lose(r, eoP0)
	if got := src.seekCalls(); len(got) != 1 || len(got[0]) != 1 || got[0][eoP1] != 10 {
		t.Fatalf("seeks %v; want partition 1 sought back to 10 only", got)
	}
	before := src.commitCount()
	close(gate)
	eventually(t, 2*time.Second, "partition 1 committed up to 10", func() bool { return r.src.committed(eoP1) == 10 })
	r.src.send(eoP1, 10, rows(10, 4)...) // consumed again from 10, and two more
	eventually(t, 2*time.Second, "partition 1 committed up to 14", func() bool { return r.src.committed(eoP1) == 14 })
	checkSurvivedLoss(t, r, src, sink, before, 6, "partition 1's 8-13 once; partition 0's record belongs to its next owner")
	src.emu.Lock()
	defer src.emu.Unlock()
	l, ok, err := eos.Decode(src.metas[len(src.metas)-1][eoP1])
	if err != nil || !ok || l.Offset != 14 || len(l.Entries) != 0 {
		t.Fatalf("partition 1's last ledger %+v (%v, %v); want offset 14 and no pending entry", l, ok, err)
	}
}

// TestUnitExactlyLostTriedBatchStops: a batch holding partitions 0 and 1
// whose intent commit was sent and failed (the broker may have stored it)
// waits for the retry when partition 0 is lost. Its intent may be recorded,
// so partition 1's records in it can be neither inserted nor built into
// other batches: the member stops, inserting nothing of it, and recovery
// settles it from the ledgers on restart.
func TestUnitExactlyLostTriedBatchStops(t *testing.T) {
	synctest.Test(t, testUnitExactlyLostTriedBatchStops)
}

func testUnitExactlyLostTriedBatchStops(t *testing.T) {
	r, src, sink := startRefused(t, time.Hour, context.DeadlineExceeded, 1, "the intent commit tried")
	lose(r, eoP0)
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "whether that intent was recorded is unknown") {
		t.Fatalf("Run returned %v, want the stop naming the unknown intent", err)
	}
	if got := src.seekCalls(); len(got) != 0 {
		t.Fatalf("seeks %v; nothing may be consumed again", got)
	}
	if got := sink.inserted("db.t"); got != 0 {
		t.Fatalf("%d rows inserted", got)
	}
}

// TestUnitExactlyLostWhileAccumulating: the open batch holds partitions 0
// and 1 when partition 0 is lost: it is emptied, partition 1 is consumed
// again from its first record in it, and the shutdown flush inserts
// partition 1's records once.
func TestUnitExactlyLostWhileAccumulating(t *testing.T) {
	synctest.Test(t, testUnitExactlyLostWhileAccumulating)
}

func testUnitExactlyLostWhileAccumulating(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = 100
	cfg.ShutdownTimeout = 2 * time.Second
	sink := newFakeSink(nil)
	r, src := startEO(t, cfg, sink)
	r.src.send(eoP1, 5, rows(5, 1)...)
	r.src.send(eoP0, 0, rows(0, 3)...)
	r.src.send(eoP1, 6, rows(6, 2)...)
	eventually(t, time.Second, "the fetches handled", func() bool { return r.src.polls.Load() >= 4 })
	lose(r, eoP0)
	if got := src.seekCalls(); len(got) != 1 || got[0][eoP1] != 5 || len(got[0]) != 1 {
		t.Fatalf("seeks %v; want partition 1 sought back to 5 (the open batch's first record of it)", got)
	}
	r.src.send(eoP1, 5, rows(5, 4)...) // 5..8
	eventually(t, time.Second, "the fetch after the seek handled", func() bool { return r.src.polls.Load() >= 5 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v (the member must survive the loss)", err)
	}
	if got := sink.inserted("db.t"); got != 4 {
		t.Fatalf("%d rows inserted, want 4 (partition 1's 5-8 once)", got)
	}
	if got := r.src.committed(eoP1); got != 9 {
		t.Fatalf("partition 1 committed up to %d, want 9", got)
	}
	if got := r.src.committed(eoP0); got != -1 {
		t.Fatalf("partition 0 committed up to %d; it was lost before anything of it was recorded", got)
	}
}

// TestUnitExactlyLostWhileInserting: the batch's intent is recorded and its
// INSERT is running when partition 0 is lost. Nothing is dropped or sought:
// the INSERT carries the token partition 0's next owner replays with, so
// ClickHouse keeps one copy. Once it succeeds partition 1 is committed past
// it, partition 0 never again, and the member goes on.
func TestUnitExactlyLostWhileInserting(t *testing.T) {
	synctest.Test(t, testUnitExactlyLostWhileInserting)
}

func testUnitExactlyLostWhileInserting(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = 4
	sink, gate := firstInsertHeld()
	r, src := startEO(t, cfg, sink)
	r.src.send(eoP0, 0, rows(0, 2)...)
	r.src.send(eoP1, 10, rows(10, 2)...)
	r.insertStarted(t)
	src.emu.Lock()
	intent := src.metas[0]
	src.emu.Unlock()
	l0, _, _ := eos.Decode(intent[eoP0])
	l1, _, _ := eos.Decode(intent[eoP1])
	if len(l0.Entries) != 1 || len(l1.Entries) != 1 || l0.Entries[0].Token != l1.Entries[0].Token || l0.Entries[0].N != 2 {
		t.Fatalf("intent %v: want one entry of the same two-partition batch on both partitions", intent)
	}
	lost := src.commitCount()
	lose(r, eoP0)
	if got := src.seekCalls(); len(got) != 0 {
		t.Fatalf("seeks %v for a recorded batch", got)
	}
	close(gate)
	eventually(t, 2*time.Second, "partition 1 committed past the batch", func() bool { return r.src.committed(eoP1) == 12 })
	r.src.send(eoP1, 12, rows(12, 4)...)
	eventually(t, 2*time.Second, "partition 1's next batch committed", func() bool { return r.src.committed(eoP1) == 16 })
	checkSurvivedLoss(t, r, src, sink, lost, 8, "the recorded batch's 4 once, then 4")
}

// TestUnitExactlyFencedIntentThenLost: the intent commit is refused for a
// stale membership (UNKNOWN_MEMBER_ID, a member paused past its session
// timeout): the batch waits instead of stopping the member, and the loss
// franz-go reports next drops it unrecorded. Nothing is inserted and the
// member goes on.
func TestUnitExactlyFencedIntentThenLost(t *testing.T) {
	synctest.Test(t, testUnitExactlyFencedIntentThenLost)
}

func testUnitExactlyFencedIntentThenLost(t *testing.T) {
	r, src, sink := startRefused(t, 20*time.Millisecond, kerr.UnknownMemberID, 3, "the intent tried again")
	r.p.Lost(context.Background(), map[string][]int32{unitTopic: {0, 1}})
	n := src.attempts()
	time.Sleep(100 * time.Millisecond)
	if got := src.attempts(); got != n {
		t.Fatalf("%d more intent commits after the loss dropped the batch", got-n)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v (the member must survive)", err)
	}
	if got := sink.inserted("db.t"); got != 0 {
		t.Fatalf("%d rows inserted by a member whose intent was refused", got)
	}
}

// TestUnitExactlyLostDropsPendingOfSoughtPartition: a fetch of partitions 0
// and 1 is decoded in part (one turn of intake.MaxDecode records) into the open
// batch when partition 0 is lost. Partition 1 is sought back to its first
// record in the dropped batch, so the records of it still waiting to be
// decoded, which lie past that point, are dropped with the batch: they are
// consumed again after the seek, and decoding them too would insert them
// twice.
func TestUnitExactlyLostDropsPendingOfSoughtPartition(t *testing.T) {
	synctest.Test(t, testUnitExactlyLostDropsPendingOfSoughtPartition)
}

func testUnitExactlyLostDropsPendingOfSoughtPartition(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = 10 * intake.MaxDecode
	p := newEO(t, cfg, newFakeSink(nil))
	src := &eoSource{fakeSource: newFakeSource()}
	p.Attach(src)
	recs := func(tp offsets.TP, n int) []*kgo.Record {
		out := make([]*kgo.Record, n)
		for i, v := range rows(0, n) {
			out[i] = &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: int64(i), Value: []byte(v), Timestamp: time.Now()}
		}
		return out
	}
	p.in.Take(kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: unitTopic, Partitions: []kgo.FetchPartition{
		{Partition: 0, HighWatermark: 3, Records: recs(eoP0, 3)},
		{Partition: 1, HighWatermark: intake.MaxDecode + 5, Records: recs(eoP1, intake.MaxDecode+5)},
	}}}}})
	p.in.DecodeSome(context.Background())
	if n := p.in.Pending(); n != 8 {
		t.Fatalf("%d records pending after one turn, want 8 of partition 1", n)
	}
	p.forget([]offsets.TP{eoP0})
	if got := src.seekCalls(); len(got) != 1 || len(got[0]) != 1 || got[0][eoP1] != 0 {
		t.Fatalf("seeks %v; want partition 1 sought back to 0 only", got)
	}
	if n := p.in.Pending(); n != 0 {
		t.Fatalf("%d records of partition 1 still pending after it was sought back; they would be inserted twice", n)
	}
}
