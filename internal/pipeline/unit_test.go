package pipeline

// Unit tests of the pipeline's state machine: a scriptable fake Source
// (fetches handed in by the test, commits and dead-letter produces recorded
// or failed on demand) and a scriptable fake Sink (inserts that succeed,
// are retried N times, fail for good, are slow, or hang until canceled).
// The group's callbacks are called the way franz-go calls them, through
// Hooks. Nothing here opens a connection: `go test -run Unit
// ./internal/pipeline` needs no stack. TestUnitKfakeGroup runs the real
// consumer against kfake, franz-go's in-memory Kafka.
//
// Every other TestUnit test runs its body (testUnit…) in a testing/synctest
// bubble: the pipeline's goroutines and timers (commit interval, revoke
// deadline, shutdown timeout, batch waits, retry backoff) run on the
// bubble's fake clock, which moves only when every goroutine of the test is
// blocked. So a test takes the CPU time its work needs, not its timeouts,
// and eventually's deadlines are fake time: a condition that never comes
// true still fails the test, at the same fake instant on every run.
// TestUnitKfakeGroup stays outside, since kfake talks over loopback TCP and
// a bubble cannot wait on the network.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/consumer"
	"sink/internal/offsets"
	"sink/internal/testenv"
)

const unitTopic = "events"

var unitTP = offsets.TP{Topic: unitTopic, Partition: 0}

// fakeSource is a Source whose records the test hands in.
type fakeSource struct {
	fetches chan kgo.Fetches
	polls   atomic.Int32

	mu            sync.Mutex
	commits       []map[offsets.TP]offsets.Commit // the successful ones, in order
	failCommits   int                             // the next this many commits fail
	failedCommits int
	hangCommits   int   // the next this many commits answer only when ctx ends
	dlqErr        error // what every dead-letter produce answers
	dlqFailFirst  int   // or: the first this many answer a retriable error
	dlqSent       []int64
	dlqValues     []string // the value of each dead-letter copy, as franz-go would have sent it

	// recycled is every record the pipeline handed back (recycle), which
	// is then poisoned as franz-go's pool would reuse it; misuse is what
	// the pipeline did with a record after that, checked when Run ends.
	recycled map[*kgo.Record]bool
	misuse   []string
}

func newFakeSource() *fakeSource {
	return &fakeSource{fetches: make(chan kgo.Fetches, 16), recycled: map[*kgo.Record]bool{}}
}

// recycle is the pipeline's recycle in the fake tests: where franz-go's
// pool would hand the record's memory to the next fetch, it overwrites the
// record's bytes with testenv.Poison and the record with one of no topic
// and offset -1, so a row or dead-letter copy made from it afterwards is
// wrong, and a record recycled twice is reported.
func (s *fakeSource) recycle(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recycled[r] {
		s.misuse = append(s.misuse, fmt.Sprintf("record at offset %d recycled twice", r.Offset))
		return
	}
	s.recycled[r] = true
	poison(r.Key)
	poison(r.Value)
	for _, h := range r.Headers {
		poison(h.Value)
	}
	*r = kgo.Record{Offset: -1, Value: r.Value}
}

func poison(b []byte) {
	for i := range b {
		b[i] = testenv.Poison
	}
}

// misused reports what the pipeline did with recycled records.
func (s *fakeSource) misused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.misuse...)
}

func (s *fakeSource) Poll(ctx context.Context) kgo.Fetches {
	s.polls.Add(1)
	select {
	case f := <-s.fetches:
		return f
	case <-ctx.Done():
		return nil
	}
}

func (s *fakeSource) AllowRebalance() {}

func (s *fakeSource) Commit(ctx context.Context, pos map[offsets.TP]offsets.Commit, _ map[offsets.TP]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hangCommits > 0 {
		s.hangCommits--
		s.failedCommits++
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		return fmt.Errorf("kafka: commit: %w", ctx.Err())
	}
	if s.failCommits > 0 {
		s.failCommits--
		s.failedCommits++
		return errors.New("kafka: commit: NOT_COORDINATOR")
	}
	c := make(map[offsets.TP]offsets.Commit, len(pos))
	for tp, p := range pos {
		c[tp] = p
	}
	s.commits = append(s.commits, c)
	return nil
}

// ProduceDLQ records the copy's value when franz-go would have sent it:
// on its own goroutine, after ProduceDLQ returned, as franz-go's producer
// reads the record's bytes.
func (s *fakeSource) ProduceDLQ(_ context.Context, _ string, rec *kgo.Record, _ error, _ bool, done func(error)) {
	s.mu.Lock()
	err := s.dlqErr
	if s.dlqFailFirst > 0 {
		s.dlqFailFirst--
		err = kerr.LeaderNotAvailable
	}
	if s.recycled[rec] {
		s.misuse = append(s.misuse, "dead-letter produce of a recycled record")
	}
	s.dlqSent = append(s.dlqSent, rec.Offset)
	s.mu.Unlock()
	go func() {
		s.mu.Lock()
		if s.recycled[rec] {
			s.misuse = append(s.misuse, fmt.Sprintf("record at offset %d recycled while its dead-letter produce was under way", rec.Offset))
		}
		s.dlqValues = append(s.dlqValues, string(rec.Value))
		s.mu.Unlock()
		done(err)
	}()
}

// committed is the highest offset committed for tp (-1: none).
func (s *fakeSource) committed(tp offsets.TP) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := int64(-1)
	for _, c := range s.commits {
		if p, ok := c[tp]; ok && p.Offset > at {
			at = p.Offset
		}
	}
	return at
}

// send hands the pipeline one fetch of tp's records: values in offset
// order from first.
func (s *fakeSource) send(tp offsets.TP, first int64, values ...string) {
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: first + int64(i),
			Value: []byte(v), Timestamp: time.Now()}
	}
	s.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: tp.Topic, Partitions: []kgo.FetchPartition{{
		Partition: tp.Partition, HighWatermark: first + int64(len(values)), Records: recs}}}}}}
}

// rows returns n good records' values starting at id from.
func rows(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"id":%d,"s":"row %d"}`, from+i, from+i)
	}
	return out
}

// insertScript says what one INSERT call does.
type insertScript struct {
	retries int           // fail retriably this many times first (onRetry each)
	err     error         // then fail for good with this
	delay   time.Duration // or answer after this long
	gate    chan struct{} // or wait until it is closed
	hang    bool          // or never answer until ctx ends
	// linger: once ctx ended, return only this much later (a driver
	// still telling the server and closing the connection), unless
	// release is closed first.
	linger  time.Duration
	release chan struct{}
}

// fakeSink is a Sink with one table layout for every table; script picks
// each INSERT's behaviour by its call number (1-based).
type fakeSink struct {
	script func(n int) insertScript

	mu    sync.Mutex
	calls int
	rows  map[string]int      // rows inserted per table
	ids   map[string][]uint64 // the id column's values inserted per table, in order
	// strs is the s column's values inserted per table, in order, kept
	// only when keepStrs is set (before Run; the benchmarks do not).
	strs     map[string][]string
	keepStrs bool
	canceled int          // inserts that ended because ctx ended
	active   atomic.Int32 // Insert calls not returned yet
}

var errRetriable = errors.New("code: 252, TOO_MANY_PARTS")

func newFakeSink(script func(n int) insertScript) *fakeSink {
	if script == nil {
		script = func(int) insertScript { return insertScript{} }
	}
	return &fakeSink{script: script, rows: map[string]int{}, ids: map[string][]uint64{}, strs: map[string][]string{}}
}

func (k *fakeSink) Describe(_ context.Context, _, _ string) ([]chschema.ColumnSchema, error) {
	return []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "s", Type: "String"}}, nil
}

func (k *fakeSink) Insert(ctx context.Context, t *chtable.Table, block chschema.Block, _ uint64,
	onRetry func(chtable.Attempt), _ chtable.Refresh) error {
	k.active.Add(1)
	defer k.active.Add(-1)
	k.mu.Lock()
	k.calls++
	sc := k.script(k.calls)
	k.mu.Unlock()
	canceled := func() error {
		if sc.linger > 0 {
			select {
			case <-time.After(sc.linger):
			case <-sc.release:
			}
		}
		k.mu.Lock()
		k.canceled++
		k.mu.Unlock()
		return ctx.Err()
	}
	for i := 1; i <= sc.retries; i++ {
		if onRetry != nil {
			onRetry(chtable.Attempt{N: i, Err: errRetriable, Class: chtable.Retriable, Code: 252, Wait: time.Millisecond})
		}
		time.Sleep(time.Millisecond)
	}
	switch {
	case sc.err != nil:
		return sc.err
	case sc.hang:
		<-ctx.Done()
		return canceled()
	case sc.gate != nil:
		select {
		case <-sc.gate:
		case <-ctx.Done():
			return canceled()
		}
	case sc.delay > 0:
		select {
		case <-time.After(sc.delay):
		case <-ctx.Done():
			return canceled()
		}
	}
	k.mu.Lock()
	k.rows[t.FullName()] += block.Rows()
	if ids, ok := block.ColumnData(0).([]uint64); ok {
		k.ids[t.FullName()] = append(k.ids[t.FullName()], ids...)
	}
	if k.keepStrs && len(block.Columns()) > 1 {
		if strs, ok := block.ColumnData(1).([]string); ok {
			k.strs[t.FullName()] = append(k.strs[t.FullName()], strs...)
		}
	}
	k.mu.Unlock()
	return nil
}

// insertedIDs is the id column's values inserted into table, in order.
func (k *fakeSink) insertedIDs(table string) []uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]uint64(nil), k.ids[table]...)
}

// insertedStrs is the s column's values inserted into table, in order.
func (k *fakeSink) insertedStrs(table string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.strs[table]...)
}

func (k *fakeSink) inserted(table string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rows[table]
}

// unitConfig is a one-topic, one-table connector with small timings; edit
// the result for a test's needs.
func unitConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	return unitConfigTopics(t, unitTopic, extra)
}

// unitConfigTopics is unitConfig consuming topics (a YAML flow list's
// items), for routes of more topics than the first.
func unitConfigTopics(t *testing.T, topics, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`
name: unit
kafka:
  topics: [`+topics+`]
clickhouse:
  database: db
routes:
  - topic: `+unitTopic+`
    table: t
`+extra), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Kafka.CommitInterval = 50 * time.Millisecond
	cfg.Kafka.RebalanceTimeout = 400 * time.Millisecond // revoke deadline: 200ms
	cfg.ClickHouse.SchemaRefresh = 0
	cfg.ClickHouse.MaxInFlight = 1
	cfg.Batch.MaxRows = 2
	cfg.Batch.MaxWait = time.Hour
	cfg.ShutdownTimeout = 300 * time.Millisecond
	return cfg
}

// running is a pipeline whose Run goroutine is going.
type running struct {
	p      *Pipeline
	src    *fakeSource
	sink   *fakeSink
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg *config.Config, sink *fakeSink, opts ...Option) *running {
	t.Helper()
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink, opts...)
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	return launch(t, p, src, src, sink)
}

// launch attaches as (src itself, or a wrapper of it) and starts Run.
func launch(t *testing.T, p *Pipeline, src *fakeSource, as Source, sink *fakeSink) *running {
	t.Helper()
	p.Attach(as)
	p.recycle = src.recycle
	// Runs after the cleanup below has waited for Run.
	t.Cleanup(func() {
		for _, m := range src.misused() {
			t.Error(m)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, src: src, sink: sink, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return within 5s of the cleanup's cancel")
		}
	})
	return r
}

// stop cancels Run the way SIGTERM does and returns its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// wait returns Run's error once it returned by itself.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return within 3s")
		return nil
	}
}

// insertStarted waits for the first INSERT call.
func (r *running) insertStarted(t *testing.T) {
	t.Helper()
	eventually(t, time.Second, "the insert started", func() bool {
		r.sink.mu.Lock()
		defer r.sink.mu.Unlock()
		return r.sink.calls >= 1
	})
}

// eventually fails the test unless cond holds within d (in a synctest
// bubble, d and the polling sleeps are fake time).
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestUnitInsertRetriedThenCommitted: an INSERT retried three times before
// it succeeds is one insert of its rows, its retries are counted, and the
// offsets are committed once the rows are in.
func TestUnitInsertRetriedThenCommitted(t *testing.T) {
	synctest.Test(t, testUnitInsertRetriedThenCommitted)
}

func testUnitInsertRetriedThenCommitted(t *testing.T) {
	r := start(t, unitConfig(t, ""), newFakeSink(func(int) insertScript { return insertScript{retries: 3} }))
	r.src.send(unitTP, 0, rows(0, 4)...)
	eventually(t, 2*time.Second, "offset 4 committed", func() bool { return r.src.committed(unitTP) == 4 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.p.Stats()
	if st.Rows != 4 || st.Inserts != 2 || r.sink.inserted("db.t") != 4 {
		t.Fatalf("stats %+v, sink has %d rows; want 4 rows in 2 inserts", st, r.sink.inserted("db.t"))
	}
	if got := r.p.disp.Retries(); got != 6 { // db.t's, the one table
		t.Fatalf("retries counted %d, want 6 (3 per insert)", got)
	}
}

// TestUnitCommitsOnlyPrefixBeforeFatal: the second of three batches fails
// for good; Run returns that error, the first batch's offsets are
// committed, and nothing at or after the failed batch ever is.
func TestUnitCommitsOnlyPrefixBeforeFatal(t *testing.T) {
	synctest.Test(t, testUnitCommitsOnlyPrefixBeforeFatal)
}

func testUnitCommitsOnlyPrefixBeforeFatal(t *testing.T) {
	permanent := errors.New("code: 53, TYPE_MISMATCH")
	sink := newFakeSink(func(n int) insertScript {
		if n == 2 {
			return insertScript{err: permanent}
		}
		return insertScript{}
	})
	cfg := unitConfig(t, "")
	cfg.ShutdownTimeout = 2 * time.Second
	r := start(t, cfg, sink)
	began := time.Now()
	r.src.send(unitTP, 0, rows(0, 6)...) // batches [0,1] [2,3] [4,5]
	err := r.wait(t)
	if !errors.Is(err, permanent) {
		t.Fatalf("Run returned %v, want the permanent insert error", err)
	}
	if got := r.src.committed(unitTP); got != 2 {
		t.Fatalf("committed offset %d, want 2 (the batch before the failure, nothing past it)", got)
	}
	// The batch queued behind the failed one must not strand the flush
	// until shutdown_timeout.
	if took := time.Since(began); took >= r.p.cfg.ShutdownTimeout {
		t.Fatalf("Run took %s to stop: the flush after the failure waited for shutdown_timeout", took)
	}
}

// TestUnitFailedDLQProduceStops: a bad record whose dead-letter produce
// fails for good stops the connector; the batches holding later records
// of its partition are never inserted and nothing from it on is committed.
func TestUnitFailedDLQProduceStops(t *testing.T) { synctest.Test(t, testUnitFailedDLQProduceStops) }

func testUnitFailedDLQProduceStops(t *testing.T) {
	cfg := unitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n")
	cfg.Batch.MaxRows = 1
	r := start(t, cfg, newFakeSink(nil))
	r.src.mu.Lock()
	r.src.dlqErr = errors.New("TOPIC_AUTHORIZATION_FAILED")
	r.src.mu.Unlock()
	r.src.send(unitTP, 0, rows(0, 1)[0], `not json`, rows(2, 1)[0], rows(3, 1)[0])
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "dead-letter produce of events[0] offset 1") {
		t.Fatalf("Run returned %v, want the failed dead-letter produce of offset 1", err)
	}
	if got := r.sink.inserted("db.t"); got != 1 {
		t.Fatalf("%d rows inserted, want 1 (only the record before the bad one)", got)
	}
	if got := r.src.committed(unitTP); got > 1 {
		t.Fatalf("committed offset %d, past the record the DLQ did not take", got)
	}
}

// TestUnitDLQProduceRetried: a dead-letter produce that fails retriably is
// sent again after a backoff; the batch holding a later record of the
// partition waits for it, then everything is inserted and committed.
func TestUnitDLQProduceRetried(t *testing.T) { synctest.Test(t, testUnitDLQProduceRetried) }

func testUnitDLQProduceRetried(t *testing.T) {
	cfg := unitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n")
	cfg.Batch.MaxRows = 1
	cfg.ClickHouse.RetryInitial = 20 * time.Millisecond
	r := start(t, cfg, newFakeSink(nil))
	r.src.mu.Lock()
	r.src.dlqFailFirst = 2
	r.src.mu.Unlock()
	r.src.send(unitTP, 0, rows(0, 1)[0], `not json`, rows(2, 1)[0])
	eventually(t, 2*time.Second, "offset 3 committed", func() bool { return r.src.committed(unitTP) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.src.mu.Lock()
	sent := append([]int64(nil), r.src.dlqSent...)
	r.src.mu.Unlock()
	if len(sent) != 3 || sent[0] != 1 || sent[2] != 1 {
		t.Fatalf("dead-letter produces of offsets %v, want offset 1 three times (two retriable failures)", sent)
	}
	if st := r.p.Stats(); st.Rows != 2 || st.DLQ != 1 || r.sink.inserted("db.t") != 2 {
		t.Fatalf("stats %+v, sink %d rows; want 2 rows and 1 dead-lettered", st, r.sink.inserted("db.t"))
	}
}

// TestUnitPauseAtBudget: with the buffer budget used up by a batch whose
// INSERT has not finished, the pipeline stops polling; once the INSERT is
// done and the memory is free, it polls again and handles what was waiting.
func TestUnitPauseAtBudget(t *testing.T) { synctest.Test(t, testUnitPauseAtBudget) }

func testUnitPauseAtBudget(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = 1
	cfg.Batch.BufferMemory = 1 // one row is over budget
	gate := make(chan struct{})
	r := start(t, cfg, newFakeSink(func(int) insertScript { return insertScript{gate: gate} }))
	r.src.send(unitTP, 0, rows(0, 1)...)
	r.src.send(unitTP, 1, rows(1, 1)...)
	eventually(t, time.Second, "the first poll", func() bool { return r.src.polls.Load() >= 1 })
	time.Sleep(100 * time.Millisecond)
	if n := r.src.polls.Load(); n != 1 {
		t.Fatalf("%d polls while the budget was used up, want 1", n)
	}
	close(gate)
	eventually(t, 2*time.Second, "the waiting fetch handled and committed", func() bool { return r.src.committed(unitTP) == 2 })
	if n := r.src.polls.Load(); n < 2 {
		t.Fatalf("%d polls after the memory was freed, want more than 1", n)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestUnitShutdownTimeout: an INSERT that never answers holds the shutdown
// only until shutdown_timeout; Run then cancels it, commits nothing of it,
// and says so.
func TestUnitShutdownTimeout(t *testing.T) { synctest.Test(t, testUnitShutdownTimeout) }

func testUnitShutdownTimeout(t *testing.T) {
	cfg := unitConfig(t, "")
	r := start(t, cfg, newFakeSink(func(int) insertScript { return insertScript{hang: true} }))
	r.src.send(unitTP, 0, rows(0, 2)...)
	r.insertStarted(t)
	began := time.Now()
	err := r.stop(t)
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "shutdown_timeout") || !strings.Contains(err.Error(), "1 batches not inserted") {
		t.Fatalf("Run returned %v, want the shutdown_timeout error naming the batch", err)
	}
	if took < cfg.ShutdownTimeout || took > cfg.ShutdownTimeout+2*time.Second {
		t.Fatalf("shutdown took %s, want about shutdown_timeout (%s)", took, cfg.ShutdownTimeout)
	}
	if got := r.src.committed(unitTP); got != -1 {
		t.Fatalf("committed offset %d of a batch never inserted", got)
	}
	eventually(t, time.Second, "the hanging insert canceled", func() bool {
		r.sink.mu.Lock()
		defer r.sink.mu.Unlock()
		return r.sink.canceled == 1
	})
}

// TestUnitFailedCommitRetried: a commit refused by Kafka is sent again
// with the next commit (here commit_interval's tick) with the same
// positions.
func TestUnitFailedCommitRetried(t *testing.T) { synctest.Test(t, testUnitFailedCommitRetried) }

func testUnitFailedCommitRetried(t *testing.T) {
	r := start(t, unitConfig(t, ""), newFakeSink(nil))
	r.src.mu.Lock()
	r.src.failCommits = 1
	r.src.mu.Unlock()
	r.src.send(unitTP, 0, rows(0, 2)...)
	eventually(t, 2*time.Second, "offset 2 committed after a failed commit", func() bool { return r.src.committed(unitTP) == 2 })
	r.src.mu.Lock()
	failed := r.src.failedCommits
	r.src.mu.Unlock()
	if failed != 1 {
		t.Fatalf("%d commits failed, want 1", failed)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestUnitCommitBoundedByRequestTimeout: a commit the coordinator does not
// answer holds the owner goroutine for kafka.request_timeout, no longer;
// the next commit carries the positions, and a revoke meanwhile is handled.
func TestUnitCommitBoundedByRequestTimeout(t *testing.T) {
	synctest.Test(t, testUnitCommitBoundedByRequestTimeout)
}

func testUnitCommitBoundedByRequestTimeout(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Kafka.RequestTimeout = 2 * time.Second
	cfg.Kafka.RebalanceTimeout = 20 * time.Second
	r := start(t, cfg, newFakeSink(nil))
	r.src.mu.Lock()
	r.src.hangCommits = 1
	r.src.mu.Unlock()
	began := time.Now()
	r.src.send(unitTP, 0, rows(0, 2)...)
	eventually(t, 10*time.Second, "offset 2 committed after a commit that hung", func() bool { return r.src.committed(unitTP) == 2 })
	if took := time.Since(began); took < cfg.Kafka.RequestTimeout || took > cfg.Kafka.RequestTimeout+time.Second {
		t.Fatalf("the positions were committed after %s, want just after the hung commit's request_timeout (%s)", took, cfg.Kafka.RequestTimeout)
	}
	r.src.send(unitTP, 2, rows(2, 1)...)
	eventually(t, time.Second, "the fetch handled", func() bool { return r.src.polls.Load() >= 3 })
	if took := revoke(r, unitTP); took > time.Second {
		t.Fatalf("revoke took %s", took)
	}
	if got := r.src.committed(unitTP); got != 3 {
		t.Fatalf("committed %d after the revoke, want 3", got)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestUnitCommitOffTheOwner: while a commit hangs, the owner goes on
// decoding and inserting; the positions handled meanwhile go in the commit
// after it, and no two commits are out at once.
func TestUnitCommitOffTheOwner(t *testing.T) { synctest.Test(t, testUnitCommitOffTheOwner) }

func testUnitCommitOffTheOwner(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Kafka.RequestTimeout = 10 * time.Second
	cfg.Kafka.RebalanceTimeout = 60 * time.Second
	sink := newFakeSink(nil)
	r := start(t, cfg, sink)
	r.src.mu.Lock()
	r.src.hangCommits = 1
	r.src.mu.Unlock()
	began := time.Now()
	r.src.send(unitTP, 0, rows(0, 2)...)
	eventually(t, time.Second, "the first batch inserted", func() bool { return sink.inserted("db.t") == 2 })
	r.src.send(unitTP, 2, rows(2, 4)...)
	eventually(t, time.Second, "the next batches inserted while the first commit hangs", func() bool { return sink.inserted("db.t") == 6 })
	if took := time.Since(began); took >= cfg.Kafka.RequestTimeout {
		t.Fatalf("the batches after a hung commit were inserted after %s, want before its request_timeout (%s)", took, cfg.Kafka.RequestTimeout)
	}
	if got := r.src.committed(unitTP); got != -1 {
		t.Fatalf("committed %d while the first commit hangs, want nothing (one commit out at a time)", got)
	}
	eventually(t, 2*cfg.Kafka.RequestTimeout, "offset 6 committed after the hung commit", func() bool { return r.src.committed(unitTP) == 6 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// revoke calls the Revoked callback as franz-go does and returns how long
// it held the rebalance.
func revoke(r *running, tp offsets.TP) time.Duration {
	began := time.Now()
	r.p.Revoked(context.Background(), map[string][]int32{tp.Topic: {tp.Partition}})
	return time.Since(began)
}

// TestUnitRevokeWaitsForInserts: a revoke seals the partition's open batch,
// waits for its INSERT and commits before it returns.
func TestUnitRevokeWaitsForInserts(t *testing.T) { synctest.Test(t, testUnitRevokeWaitsForInserts) }

func testUnitRevokeWaitsForInserts(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = 100
	cfg.Kafka.RebalanceTimeout = 20 * time.Second // the deadline is not what this test is about
	r := start(t, cfg, newFakeSink(func(int) insertScript { return insertScript{delay: 50 * time.Millisecond} }))
	r.src.send(unitTP, 0, rows(0, 3)...)
	eventually(t, time.Second, "the fetch handled", func() bool { return r.src.polls.Load() >= 2 })
	took := revoke(r, unitTP)
	if got := r.src.committed(unitTP); got != 3 {
		t.Fatalf("revoke returned after %s with offset %d committed, want 3", took, got)
	}
	if took < 50*time.Millisecond {
		t.Fatalf("revoke returned after %s, before the INSERT could finish", took)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestUnitRevokeDeadline: an INSERT that does not finish holds a revoke
// only until half the rebalance timeout; the partition is then given up
// without committing the batch, for the next owner to consume again.
func TestUnitRevokeDeadline(t *testing.T) { synctest.Test(t, testUnitRevokeDeadline) }

func testUnitRevokeDeadline(t *testing.T) {
	cfg := unitConfig(t, "")
	r := start(t, cfg, newFakeSink(func(int) insertScript { return insertScript{hang: true} }))
	r.src.send(unitTP, 0, rows(0, 2)...)
	r.insertStarted(t)
	took := revoke(r, unitTP)
	half := cfg.Kafka.RebalanceTimeout / 2
	if took < half || took > half+2*time.Second {
		t.Fatalf("revoke held the rebalance %s, want about half the rebalance timeout (%s)", took, half)
	}
	if got := r.src.committed(unitTP); got != -1 {
		t.Fatalf("committed offset %d of a batch never inserted", got)
	}
	// The hanging INSERT is still in flight: the shutdown times out on it.
	if err := r.stop(t); err == nil || !strings.Contains(err.Error(), "shutdown_timeout") {
		t.Fatalf("Run returned %v, want the shutdown_timeout error", err)
	}
}

// TestUnitLostWithBatchInFlight: a lost partition is dropped at once, even
// with a batch of it in flight; when that INSERT later succeeds, nothing
// of the partition is committed (another member may own it now).
func TestUnitLostWithBatchInFlight(t *testing.T) { synctest.Test(t, testUnitLostWithBatchInFlight) }

func testUnitLostWithBatchInFlight(t *testing.T) {
	gate := make(chan struct{})
	r := start(t, unitConfig(t, ""), newFakeSink(func(int) insertScript { return insertScript{gate: gate} }))
	r.src.send(unitTP, 0, rows(0, 2)...)
	r.insertStarted(t)
	began := time.Now()
	r.p.Lost(context.Background(), map[string][]int32{unitTopic: {0}})
	// Waiting for the insert would never end: the gate opens only after.
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("the lost callback waited %s; it must not wait for inserts", took)
	}
	close(gate)
	eventually(t, time.Second, "the insert acknowledged", func() bool { return r.sink.inserted("db.t") == 2 })
	time.Sleep(3 * r.p.cfg.Kafka.CommitInterval)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.src.committed(unitTP); got != -1 {
		t.Fatalf("committed offset %d of a lost partition", got)
	}
}

// TestUnitKfakeGroup runs the pipeline with the real consumer (the
// production Source) in a real consumer group on an in-memory Kafka
// (kfake), into the fake sink: every record is inserted once, the group's
// committed offsets reach the end of both partitions, and the member
// leaves cleanly.
func TestUnitKfakeGroup(t *testing.T) {
	k := startKfake(t)
	k.produce(t, 0, 10)
	eventually(t, 8*time.Second, "the group committed all 10 records", func() bool { return k.committed() == 10 })
	k.stop(t)
	if got := k.sink.inserted("db.t"); got != 10 {
		t.Fatalf("%d rows inserted, want 10", got)
	}
}

// kfakeRun is a pipeline with the real consumer on kfake, franz-go's
// in-memory Kafka, with a 2-partition topic (and a dead-letter topic,
// kfakeDLQ) and a fake sink. The consumer's record pool poisons what is
// put back (testenv.PoisonPool), so a record the pipeline recycles too
// early shows as wrong rows or dead-letter copies.
type kfakeRun struct {
	cfg    *config.Config
	prod   *kgo.Client
	adm    *kadm.Client
	p      *Pipeline
	cons   *consumer.Consumer
	pool   *testenv.PoisonPool
	sink   *fakeSink
	cancel context.CancelFunc
	done   chan error
}

const kfakeDLQ = "dead"

// startKfake starts it; setup, if any, adjusts the pipeline before Run.
func startKfake(t *testing.T, setup ...func(*Pipeline)) *kfakeRun {
	t.Helper()
	return startKfakeConfig(t, "", setup...)
}

// startKfakeConfig is startKfake with extra YAML for unitConfig.
func startKfakeConfig(t *testing.T, extra string, setup ...func(*Pipeline)) *kfakeRun {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, unitTopic, kfakeDLQ))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cfg := unitConfig(t, extra)
	cfg.Kafka.Brokers = cluster.ListenAddrs()
	cfg.Kafka.FetchMaxWait = 50 * time.Millisecond
	cfg.Kafka.RebalanceTimeout = 5 * time.Second
	cfg.Batch.MaxWait = 100 * time.Millisecond
	cfg.ShutdownTimeout = 2 * time.Second

	prod, err := kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...), kgo.DefaultProduceTopic(unitTopic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	k := &kfakeRun{cfg: cfg, prod: prod, adm: kadm.NewClient(prod), sink: newFakeSink(nil), done: make(chan error, 1),
		pool: &testenv.PoisonPool{Inner: consumer.NewPool()}}
	ctx := context.Background()
	if k.p, err = New(ctx, cfg, zerolog.Nop(), k.sink); err != nil {
		t.Fatal(err)
	}
	hooks := consumer.HooksOf(k.p)
	hooks.Pool = k.pool
	if k.cons, err = consumer.New(ctx, cfg, zerolog.Nop(), hooks); err != nil {
		t.Fatal(err)
	}
	k.p.Attach(k.cons)
	for _, f := range setup {
		f(k.p)
	}
	runCtx, cancel := context.WithCancel(ctx)
	k.cancel = cancel
	go func() { k.done <- k.p.Run(runCtx) }()
	t.Cleanup(func() { k.stop(t) })
	return k
}

// produce sends rows from, from+1, ... (n of them), round robin.
func (k *kfakeRun) produce(t *testing.T, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, v := range rows(from, n) {
		if err := k.prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// committed is the sum of the group's committed offsets (-1: unknown).
func (k *kfakeRun) committed() int64 {
	os, err := k.adm.FetchOffsets(context.Background(), k.cfg.Kafka.Group)
	if err != nil {
		return -1
	}
	var n int64
	os.Each(func(o kadm.OffsetResponse) { n += o.At })
	return n
}

// stop stops Run the way SIGTERM does and leaves the group (once).
func (k *kfakeRun) stop(t *testing.T) {
	t.Helper()
	if k.cancel == nil {
		return
	}
	k.cancel()
	k.cancel = nil
	if err := <-k.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	k.cons.Close()
}

// TestUnitRecycledRecordsExact: every record is recycled once the pipeline
// no longer needs it, and the recycle poisons its bytes (fakeSource's
// recycle, as franz-go's pool would reuse them): the rows inserted still
// read exactly what the records said (the String column copied them), the
// dead-letter copies of the bad records are exact although their produce
// ran after the rest of their fetch was recycled and was retried, and every
// record, the bad ones included, was recycled exactly once.
func TestUnitRecycledRecordsExact(t *testing.T) { synctest.Test(t, testUnitRecycledRecordsExact) }

func testUnitRecycledRecordsExact(t *testing.T) {
	cfg := unitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n")
	cfg.Batch.MaxRows = 3
	cfg.Batch.MaxWait = 100 * time.Millisecond
	cfg.ClickHouse.RetryInitial = 20 * time.Millisecond
	sink := newFakeSink(nil)
	sink.keepStrs = true
	r := start(t, cfg, sink)
	r.src.mu.Lock()
	r.src.dlqFailFirst = 1
	r.src.mu.Unlock()
	values := rows(0, 10)
	values[3], values[7] = `not json 3`, `{"id":"not a number 7"}`
	r.src.send(unitTP, 0, values[:6]...)
	r.src.send(unitTP, 6, values[6:]...)
	eventually(t, 2*time.Second, "offset 10 committed", func() bool { return r.src.committed(unitTP) == 10 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	ids, strs := r.sink.insertedIDs("db.t"), r.sink.insertedStrs("db.t")
	want := []uint64{0, 1, 2, 4, 5, 6, 8, 9}
	if fmt.Sprint(ids) != fmt.Sprint(want) || len(strs) != len(want) {
		t.Fatalf("inserted ids %v (%d strings), want %v", ids, len(strs), want)
	}
	for i, id := range ids {
		if w := fmt.Sprintf("row %d", id); strs[i] != w {
			t.Fatalf("row %d's s is %q, want %q", id, strs[i], w)
		}
	}
	r.src.mu.Lock()
	defer r.src.mu.Unlock()
	if got := fmt.Sprintf("%q", r.src.dlqValues); got != fmt.Sprintf("%q", []string{values[3], values[3], values[7]}) &&
		got != fmt.Sprintf("%q", []string{values[3], values[7], values[3]}) {
		t.Fatalf("dead-letter copies %s, want offset 3's twice (one retry) and offset 7's", got)
	}
	if n := len(r.src.recycled); n != len(values) {
		t.Fatalf("%d records recycled, want all %d", n, len(values))
	}
}

// TestUnitKfakePooledRecords runs the real consumer with franz-go's pools
// (a pool that poisons every buffer put back) over snappy batches of many
// records, some of them bad: every row inserted reads exactly what was
// produced, the dead-letter topic holds the bad records exactly, and once
// everything is committed every batch's decompression buffer and record
// slice has come back to the pool (every record was recycled).
func TestUnitKfakePooledRecords(t *testing.T) {
	k := startKfakeConfig(t, "errors: {tolerance: all, dlq_topic: "+kfakeDLQ+"}\n",
		func(p *Pipeline) { p.cfg.Batch.MaxRows, p.w.(*fakeSink).keepStrs = 500, true })
	const n = 2000
	values := rows(0, n)
	bad := map[string]bool{}
	for _, i := range []int{7, 777, 1500} {
		values[i] = fmt.Sprintf(`{"id":"bad %d"}`, i)
		bad[values[i]] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, v := range values {
		k.prod.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := k.prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 8*time.Second, "the group committed all records", func() bool { return k.committed() == n })
	k.stop(t)

	ids, strs := k.sink.insertedIDs("db.t"), k.sink.insertedStrs("db.t")
	if len(ids) != n-len(bad) || len(strs) != len(ids) {
		t.Fatalf("%d rows inserted (%d strings), want %d", len(ids), len(strs), n-len(bad))
	}
	seen := map[uint64]bool{}
	for i, id := range ids {
		if w := fmt.Sprintf("row %d", id); strs[i] != w || seen[id] || id >= n {
			t.Fatalf("row %d: s is %q, want %q once", id, strs[i], w)
		}
		seen[id] = true
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(k.cfg.Kafka.Brokers...), kgo.ConsumeTopics(kfakeDLQ))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for len(bad) > 0 {
		f := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("dead-letter copies not found: %v", bad)
		}
		f.EachRecord(func(r *kgo.Record) {
			if !bad[string(r.Value)] {
				t.Fatalf("dead-letter copy %q is none of the bad records", r.Value)
			}
			delete(bad, string(r.Value))
		})
	}
	p := k.pool
	if p.BytesGot.Load() == 0 || p.BytesGot.Load() != p.BytesPut.Load() || p.RecordsGot.Load() != p.RecordsPut.Load() {
		t.Fatalf("decompression buffers %d out, %d back; record slices %d out, %d back: want some, all back",
			p.BytesGot.Load(), p.BytesPut.Load(), p.RecordsGot.Load(), p.RecordsPut.Load())
	}
	t.Logf("%d records in %d batches, every one back in the pool", n, p.RecordsGot.Load())
}
