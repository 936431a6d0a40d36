package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/status"
)

// pausableSource is a fakeSource that pauses its fetching as franz-go's
// PauseFetchTopics does: a poll while paused returns nothing (it waits)
// and the records handed in meanwhile come after the resume.
type pausableSource struct {
	*fakeSource
	mu      sync.Mutex
	paused  []string      // the topics of the last PauseFetch; nil: not paused
	resumed chan struct{} // closed by ResumeFetch
	pauses  int
}

func newPausableSource() *pausableSource {
	return &pausableSource{fakeSource: newFakeSource(), resumed: make(chan struct{})}
}

func (s *pausableSource) PauseFetch(topics []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused == nil {
		s.resumed = make(chan struct{})
	}
	s.paused = slices.Clone(topics)
	s.pauses++
}

func (s *pausableSource) ResumeFetch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused != nil {
		s.paused = nil
		close(s.resumed)
	}
}

func (s *pausableSource) pausedTopics() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

func (s *pausableSource) Poll(ctx context.Context) kgo.Fetches {
	s.mu.Lock()
	paused, resumed := s.paused != nil, s.resumed
	s.mu.Unlock()
	if paused {
		s.polls.Add(1) // the poll is open while paused: counted, answered after the resume
		select {
		case <-resumed:
		case <-ctx.Done():
			return nil
		}
	}
	return s.fakeSource.Poll(ctx)
}

// startPausable runs a pipeline on a pausableSource.
func startPausable(t *testing.T, maxRows int, sink *fakeSink) (*running, *pausableSource) {
	t.Helper()
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = maxRows
	cfg.Kafka.RebalanceTimeout = 20 * time.Second
	cfg.ShutdownTimeout = 2 * time.Second
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	p.view.snapEvery = 10 * time.Millisecond
	src := newPausableSource()
	r := launch(t, p, src.fakeSource, src, sink)
	eventually(t, time.Second, "Run started", func() bool { return p.Status() != nil })
	return r, src
}

func (r *running) state() status.State { return r.p.Status().State }

func (r *running) waitState(t *testing.T, d time.Duration, want status.State) {
	t.Helper()
	eventually(t, d, "state "+string(want), func() bool {
		return r.state() == want
	})
}

func (r *running) pause(t *testing.T) status.State {
	t.Helper()
	st, err := r.p.Pause(context.Background())
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	return st
}

// TestUnitPauseFlushesAndCommitsFirst: POST /pause with an open batch of 3
// rows (max_rows 100, max_wait an hour) inserts and commits that batch at
// once, pauses the fetching of the topic, then reports PAUSED. Records
// handed in while paused are neither decoded nor inserted, while polls
// stay open; resume fetches and inserts them.
func TestUnitPauseFlushesAndCommitsFirst(t *testing.T) {
	sink := newFakeSink(nil)
	r, src := startPausable(t, 100, sink)
	r.src.send(unitTP, 0, rows(0, 3)...)
	eventually(t, time.Second, "the fetch decoded", func() bool {
		snap := r.p.Status()
		return len(snap.Tables) == 1 && snap.Tables[0].OpenRows == 3
	})
	if got := sink.inserted("db.t"); got != 0 {
		t.Fatalf("%d rows inserted before the pause; the batch should still be open", got)
	}
	if st := r.pause(t); st != status.Pausing && st != status.Paused {
		t.Fatalf("Pause answered %s, want PAUSING or PAUSED", st)
	}
	if got := src.pausedTopics(); !slices.Equal(got, []string{unitTopic}) {
		t.Fatalf("fetching paused for %v, want [%s]", got, unitTopic)
	}
	r.waitState(t, time.Second, status.Paused)
	if got, c := sink.inserted("db.t"), r.src.committed(unitTP); got != 3 || c != 3 {
		t.Fatalf("when PAUSED: %d rows inserted, offset %d committed; want 3 and 3 (flushed and committed first)", got, c)
	}
	snap := r.p.Status()
	if tb := snap.Tables[0]; tb.OpenBatches != 0 || tb.InFlightBatches != 0 || tb.Inserts1m != 1 || tb.Rows1m != 3 {
		t.Fatalf("paused snapshot table %+v; want nothing open or in flight, 1 insert of 3 rows in the last minute", tb)
	}

	polls := r.src.polls.Load()
	r.src.send(unitTP, 3, rows(3, 2)...)
	time.Sleep(150 * time.Millisecond)
	if got := sink.inserted("db.t"); got != 3 {
		t.Fatalf("%d rows inserted while paused, want still 3", got)
	}
	if r.src.polls.Load() < polls {
		t.Fatal("poll count went down")
	}
	if r.state() != status.Paused {
		t.Fatalf("state %s while paused", r.state())
	}
	if st, err := r.p.Resume(context.Background()); err != nil || st != status.Running {
		t.Fatalf("Resume: %s, %v; want RUNNING", st, err)
	}
	if src.pausedTopics() != nil {
		t.Fatal("fetching still paused after the resume")
	}
	eventually(t, time.Second, "the 2 records decoded after the resume", func() bool { return r.p.Status().Tables[0].OpenRows == 2 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, c := sink.inserted("db.t"), r.src.committed(unitTP); got != 5 || c != 5 {
		t.Fatalf("after resume and stop: %d rows, offset %d committed; want 5 and 5", got, c)
	}
	if st := r.state(); st != status.Stopped {
		t.Fatalf("state after a clean stop: %s, want STOPPED", st)
	}
	if _, err := r.p.Pause(context.Background()); !errors.Is(err, status.ErrConflict) {
		t.Fatalf("Pause after the stop: %v, want ErrConflict", err)
	}
}

// TestUnitPauseDuringOutage: ClickHouse does not answer (the INSERT is
// retried and held): a pause stays PAUSING, committing nothing past the
// batch, until the INSERT succeeds; then it commits and turns PAUSED. The
// last INSERT error and its code are in the snapshot.
func TestUnitPauseDuringOutage(t *testing.T) {
	gate := make(chan struct{})
	sink := newFakeSink(func(n int) insertScript {
		if n == 1 {
			return insertScript{retries: 2, gate: gate}
		}
		return insertScript{}
	})
	r, _ := startPausable(t, 2, sink)
	r.src.send(unitTP, 0, rows(0, 3)...) // one full batch of 2 in its INSERT, 1 row open
	r.insertStarted(t)
	r.pause(t)
	time.Sleep(200 * time.Millisecond)
	if st := r.state(); st != status.Pausing {
		t.Fatalf("state %s while the INSERT is held, want PAUSING", st)
	}
	if c := r.src.committed(unitTP); c != -1 {
		t.Fatalf("offset %d committed while the first batch is not in; want none", c)
	}
	eventually(t, time.Second, "the retries in the snapshot", func() bool {
		e := r.p.Status().Tables[0].LastError
		return e != nil && e.Retries == 2
	})
	tb := r.p.Status().Tables[0]
	if tb.InFlightBatches != 1 || tb.QueuedBatches != 1 || tb.LastError == nil || tb.LastError.Code != 252 || tb.LastError.Retries != 2 {
		t.Fatalf("snapshot during the outage: %+v (last error %+v); want 1 in flight, 1 queued (the pause sealed the open row), code 252 after 2 retries", tb, tb.LastError)
	}
	close(gate)
	r.waitState(t, 2*time.Second, status.Paused)
	if got, c := sink.inserted("db.t"), r.src.committed(unitTP); got != 3 || c != 3 {
		t.Fatalf("PAUSED with %d rows inserted and offset %d committed; want 3 and 3", got, c)
	}
}

// TestUnitPauseRebalanceWhilePaused: a paused sink is still a group member
// whose loop answers the group at once: a revoke returns without waiting,
// an assignment while paused pauses the new partitions' topic too.
func TestUnitPauseRebalanceWhilePaused(t *testing.T) {
	r, src := startPausable(t, 100, newFakeSink(nil))
	r.p.Assigned(context.Background(), map[string][]int32{unitTopic: {0}})
	r.src.send(unitTP, 0, rows(0, 1)...)
	eventually(t, time.Second, "the row decoded", func() bool { return r.p.Status().Tables[0].OpenRows == 1 })
	r.pause(t)
	r.waitState(t, time.Second, status.Paused)
	src.mu.Lock()
	before := src.pauses
	src.mu.Unlock()
	r.p.Assigned(context.Background(), map[string][]int32{"other": {0}})
	if took := revoke(r, unitTP); took > time.Second {
		t.Fatalf("revoke while paused took %s; the loop should answer at once", took)
	}
	src.mu.Lock()
	pauses := src.pauses
	src.mu.Unlock()
	if pauses <= before {
		t.Fatal("an assignment while paused did not pause fetching again")
	}
	if got := src.pausedTopics(); !slices.Contains(got, "other") {
		t.Fatalf("paused topics %v; want the newly assigned topic too", got)
	}
	eventually(t, time.Second, "only other[0] left after the revoke", func() bool {
		ps := r.p.Status().Partitions
		return len(ps) == 1 && ps[0].Topic == "other"
	})
	if r.state() != status.Paused {
		t.Fatalf("state %s after the rebalance, want PAUSED", r.state())
	}
}

// TestUnitPauseRefusedWhileStopping: once SIGTERM's flush runs, pause and
// resume are refused (409) and the state is STOPPING; a resume of a sink
// that is running is a no-op.
func TestUnitPauseRefusedWhileStopping(t *testing.T) {
	gate := make(chan struct{})
	sink := newFakeSink(func(n int) insertScript { return insertScript{gate: gate} })
	r, _ := startPausable(t, 2, sink)
	if st, err := r.p.Resume(context.Background()); err != nil || st != status.Running {
		t.Fatalf("Resume while running: %s, %v; want RUNNING, nil", st, err)
	}
	r.src.send(unitTP, 0, rows(0, 2)...)
	r.insertStarted(t)
	r.cancel()
	r.waitState(t, time.Second, status.Stopping)
	for _, f := range []func(context.Context) (status.State, error){r.p.Pause, r.p.Resume} {
		if st, err := f(context.Background()); !errors.Is(err, status.ErrConflict) || st != status.Stopping {
			t.Fatalf("while stopping: %s, %v; want STOPPING and ErrConflict", st, err)
		}
	}
	close(gate)
	if err := r.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestUnitStatusFailed: a permanent INSERT error makes the state FAILED
// with the error as the trace.
func TestUnitStatusFailed(t *testing.T) {
	r, _ := startPausable(t, 2, newFakeSink(func(int) insertScript {
		return insertScript{err: errors.New("code: 60, UNKNOWN_TABLE")}
	}))
	r.src.send(unitTP, 0, rows(0, 2)...)
	if err := r.wait(t); err == nil {
		t.Fatal("Run returned nil after a permanent error")
	}
	snap := r.p.Status()
	if snap.State != status.Failed || snap.Error != "code: 60, UNKNOWN_TABLE" {
		t.Fatalf("state %s, error %q; want FAILED with the INSERT's error", snap.State, snap.Error)
	}
}

// TestUnitStatusPartitions: the snapshot's partitions carry the committed
// offset, the log end and the lag of the last fetch.
func TestUnitStatusPartitions(t *testing.T) {
	r, _ := startPausable(t, 2, newFakeSink(nil))
	r.p.Assigned(context.Background(), map[string][]int32{unitTopic: {0, 1}})
	recs := rows(0, 4)
	// Offsets 10..13 of a partition whose log ends at 20: 6 records after them.
	values := make([]*kgo.Record, len(recs))
	for i, v := range recs {
		values[i] = &kgo.Record{Topic: unitTopic, Partition: 0, Offset: 10 + int64(i), Value: []byte(v), Timestamp: time.Now()}
	}
	r.src.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: unitTopic, Partitions: []kgo.FetchPartition{{
		Partition: 0, HighWatermark: 20, Records: values}}}}}}
	eventually(t, 2*time.Second, "offset 14 committed", func() bool { return r.src.committed(unitTP) == 14 })
	eventually(t, 2*time.Second, "the commit in the snapshot", func() bool {
		ps := r.p.Status().Partitions
		return len(ps) == 2 && ps[0].Committed != nil && *ps[0].Committed == 14
	})
	ps := r.p.Status().Partitions
	p0, p1 := ps[0], ps[1]
	if p0.Partition != 0 || p0.LogEnd == nil || *p0.LogEnd != 20 || p0.LagRecords == nil || *p0.LagRecords != 6 || p0.LastFetched.IsZero() {
		t.Fatalf("partition 0: %+v; want log end 20, lag 6 records, a last fetched timestamp", p0)
	}
	if p1.Partition != 1 || p1.Committed != nil || p1.LogEnd != nil || p1.LagRecords != nil {
		t.Fatalf("partition 1 (nothing fetched): %+v; want no numbers", p1)
	}
}

// TestUnitPauseWaitsForCommit: when the commit after the flush fails, the
// pause stays PAUSING and turns PAUSED only once a commit succeeds.
func TestUnitPauseWaitsForCommit(t *testing.T) {
	sink := newFakeSink(nil)
	r, _ := startPausable(t, 100, sink)
	r.src.send(unitTP, 0, rows(0, 3)...)
	eventually(t, time.Second, "the fetch decoded", func() bool { return r.p.Status().Tables[0].OpenRows == 3 })
	r.src.mu.Lock()
	r.src.failCommits = 1_000_000
	r.src.mu.Unlock()
	r.pause(t)
	eventually(t, time.Second, "the rows inserted", func() bool { return sink.inserted("db.t") == 3 })
	eventually(t, time.Second, "two failed commits", func() bool {
		r.src.mu.Lock()
		defer r.src.mu.Unlock()
		return r.src.failedCommits >= 2
	})
	if st := r.state(); st != status.Pausing {
		t.Fatalf("state %s while commits fail, want PAUSING", st)
	}
	r.src.mu.Lock()
	r.src.failCommits = 0
	r.src.mu.Unlock()
	r.waitState(t, time.Second, status.Paused)
	if c := r.src.committed(unitTP); c != 3 {
		t.Fatalf("PAUSED with offset %d committed, want 3", c)
	}
}

// TestUnitKfakePauseResume, with the real consumer on kfake: paused, the
// records produced meanwhile are neither fetched into batches nor
// inserted, the positions probe shows them as lag, and after the resume
// every record is inserted exactly once (nothing franz-go had buffered
// for the paused topic is skipped).
func TestUnitKfakePauseResume(t *testing.T) {
	k := startKfake(t, func(p *Pipeline) { p.view.snapEvery, p.view.posEvery = 20*time.Millisecond, 200*time.Millisecond })
	k.produce(t, 0, 10)
	eventually(t, 8*time.Second, "10 records committed", func() bool { return k.committed() == 10 })
	if st, err := k.p.Pause(context.Background()); err != nil || (st != status.Pausing && st != status.Paused) {
		t.Fatalf("Pause: %s, %v", st, err)
	}
	eventually(t, 2*time.Second, "PAUSED", func() bool { return k.p.Status().State == status.Paused })
	k.produce(t, 10, 10)
	eventually(t, 8*time.Second, "the probe showing 10 records of lag", func() bool {
		var lag int64
		for _, p := range k.p.Status().Partitions {
			if p.LagRecords != nil {
				lag += *p.LagRecords
			}
		}
		return lag == 10
	})
	if got := k.sink.inserted("db.t"); got != 10 {
		t.Fatalf("%d rows inserted while paused, want 10", got)
	}
	if st, err := k.p.Resume(context.Background()); err != nil || st != status.Running {
		t.Fatalf("Resume: %s, %v", st, err)
	}
	eventually(t, 8*time.Second, "20 records committed", func() bool { return k.committed() == 20 })
	k.stop(t)
	if got := k.sink.inserted("db.t"); got != 20 {
		t.Fatalf("%d rows inserted, want 20 (each record once)", got)
	}
}
