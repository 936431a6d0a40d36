package pipeline

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/metrics"
	"sink/internal/offsets"
	"sink/internal/pipeline/dispatch"
)

// runBudget builds a pipeline of cfg writing to sink (fake is the
// fakeSink inside it) and runs it on a fake source.
func runBudget(t *testing.T, cfg *config.Config, sink Sink, fake *fakeSink, opts ...Option) (*Pipeline, *fakeSource, *running) {
	t.Helper()
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink, opts...)
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	return p, src, launch(t, p, src, src, fake)
}

// clockSink is a fakeSink that remembers when each INSERT came, and for
// each table the longest any of its rows waited: every row's id is the
// fake clock's milliseconds when its record was sent.
type clockSink struct {
	*fakeSink
	start time.Time
	mu    sync.Mutex
	at    []time.Time
	worst map[string]time.Duration
	// active and most: Insert calls running now, and the most at once.
	active, most int
	// from: worst counts only the rows sent this long after start or later.
	from time.Duration
}

func newClockSink(script func(n int) insertScript) *clockSink {
	return &clockSink{fakeSink: newFakeSink(script), start: time.Now(), worst: map[string]time.Duration{}}
}

func (k *clockSink) Insert(ctx context.Context, t *chtable.Table, block chschema.Block, id uint64,
	onRetry func(chtable.Attempt), refresh chtable.Refresh) error {
	k.mu.Lock()
	k.active++
	k.most = max(k.most, k.active)
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.active--
		k.mu.Unlock()
	}()
	err := k.fakeSink.Insert(ctx, t, block, id, onRetry, refresh)
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.at = append(k.at, now)
	if ids, ok := block.ColumnData(0).([]uint64); ok {
		for _, ms := range ids {
			sent := k.start.Add(time.Duration(ms) * time.Millisecond)
			if sent.Before(k.start.Add(k.from)) {
				continue
			}
			k.worst[t.FullName()] = max(k.worst[t.FullName()], now.Sub(sent))
		}
	}
	return err
}

// mostPerMinute is the most INSERTs in any 60 seconds.
func (k *clockSink) mostPerMinute() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	most, j := 0, 0
	for i := range k.at {
		for !k.at[j].Add(time.Minute).After(k.at[i]) {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// sendTopics hands the pipeline one fetch with one record for each of
// topics, each id the fake clock's milliseconds since start.
func sendTopics(src *fakeSource, start time.Time, topics []string, offset int64) {
	var ft []kgo.FetchTopic
	now := time.Now()
	ms := now.Sub(start).Milliseconds()
	for _, topic := range topics {
		rec := &kgo.Record{Topic: topic, Offset: offset, Value: fmt.Appendf(nil, `{"id":%d,"s":"x"}`, ms), Timestamp: now}
		ft = append(ft, kgo.FetchTopic{Topic: topic, Partitions: []kgo.FetchPartition{{HighWatermark: offset + 1, Records: []*kgo.Record{rec}}}})
	}
	src.fetches <- kgo.Fetches{{Topics: ft}}
}

// sendSeconds sends one record for each of topics every second for
// seconds (sendTopics).
func sendSeconds(src *fakeSource, start time.Time, topics []string, seconds int) {
	for i := 0; i < seconds; i++ {
		sendTopics(src, start, topics, int64(i))
		time.Sleep(time.Second)
	}
}

// numbered names n topics prefix0, prefix1, …
func numbered(prefix string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// checkWorst fails t for each table with a row in later than bound after
// it was sent, or (least > 0) none later than least (the budget should
// hold it near its bound), and returns how many tables it saw.
func (k *clockSink) checkWorst(t *testing.T, bound, least time.Duration) int {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	for table, w := range k.worst {
		if w > bound {
			t.Errorf("%s: a row was in %v after its record was sent, bound %v", table, w, bound)
		}
		if least > 0 && w < least {
			t.Errorf("%s: rows were in within %v: the budget should hold them near their bound", table, w)
		}
	}
	return len(k.worst)
}

func budgetConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Kafka.CommitInterval = 50 * time.Millisecond
	cfg.ClickHouse.SchemaRefresh = 0
	cfg.ShutdownTimeout = time.Second
	return cfg
}

// TestUnitBudget: 20 tables that tolerate two minutes and 2 that must
// keep 10 seconds, a budget of 30 INSERTs a minute, a record a second for
// each table over 6 minutes of fake time. No minute holds more than 30
// INSERTs; every row is inserted once; no row waits past its table's
// bound; the tight tables insert at their bound's pace while the others
// wait far longer than max_wait (5s) to share what is left.
func TestUnitBudget(t *testing.T) { synctest.Test(t, testUnitBudget) }

func testUnitBudget(t *testing.T) {
	cfg := budgetConfig(t, `
name: unit
kafka:
  topic_regex: "(loose|tight)[0-9]+"
clickhouse:
  database: db
  max_inserts_per_minute: 30
batch:
  max_wait: 5s
routes:
  - topic_regex: "tight[0-9]+"
    table: '${topic}'
    max_latency: 10s
  - topic_regex: "loose[0-9]+"
    table: '${topic}'
    max_latency: 2m
`)
	sink := newClockSink(nil)
	m := metrics.New("unit")
	p, src, r := runBudget(t, cfg, sink, sink.fakeSink, WithMetrics(m))
	var topics []string
	for i := 0; i < 20; i++ {
		topics = append(topics, fmt.Sprintf("loose%02d", i))
	}
	topics = append(topics, "tight0", "tight1")
	const seconds = 360
	for i := 0; i < seconds; i++ {
		sendTopics(src, sink.start, topics, int64(i))
		time.Sleep(time.Second)
	}
	if got := sink.mostPerMinute(); got > 30 {
		t.Errorf("%d INSERTs in one minute, budget 30", got)
	}
	sink.mu.Lock()
	before := len(sink.at)
	worst := maps.Clone(sink.worst)
	sink.mu.Unlock()
	if before < 5*25 {
		t.Errorf("%d INSERTs in 6 minutes: the budget of 30 a minute was not used", before)
	}
	for table, w := range worst {
		bound := 2 * time.Minute
		if table == "db.tight0" || table == "db.tight1" {
			bound = 10 * time.Second
		}
		if w > bound {
			t.Errorf("%s: a row waited %v, bound %v", table, w, bound)
		}
		if table == "db.loose00" && w < 30*time.Second {
			t.Errorf("%s: rows waited at most %v: the budget should hold small tables far past max_wait (5s)", table, w)
		}
	}
	st := p.Status()
	if len(st.Budgets) != 1 || st.Budgets[0].PerMinute != 30 || st.Budgets[0].LastMinute > 30 || st.Budgets[0].OverBudget {
		t.Errorf("status budgets %+v", st.Budgets)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		if got := sink.inserted("db." + topic); got != seconds {
			t.Errorf("%s: %d rows, want %d", topic, got, seconds)
		}
		if c := src.committed(offsets.TP{Topic: topic}); c != seconds {
			t.Errorf("%s: committed %d, want %d", topic, c, seconds)
		}
	}
	if v := gauge(m, metrics.InsertBudget); v != 30 {
		t.Errorf("%s = %g, want 30", metrics.InsertBudget, v)
	}
}

// TestUnitBudgetLatencyWins: 10 tables bound to 10 seconds need 60
// INSERTs a minute; with a budget of 20 they keep their bound, and the
// sink says the budget is exceeded: the counter and /status.
func TestUnitBudgetLatencyWins(t *testing.T) { synctest.Test(t, testUnitBudgetLatencyWins) }

func testUnitBudgetLatencyWins(t *testing.T) {
	cfg := budgetConfig(t, `
name: unit
kafka:
  topic_regex: "t[0-9]+"
clickhouse:
  database: db
  max_inserts_per_minute: 20
batch:
  max_wait: 1s
routes:
  - topic_regex: "t[0-9]+"
    table: '${topic}'
    max_latency: 10s
`)
	sink := newClockSink(nil)
	m := metrics.New("unit")
	p, src, r := runBudget(t, cfg, sink, sink.fakeSink, WithMetrics(m))
	topics := numbered("t", 10)
	sendSeconds(src, sink.start, topics, 120)
	sink.checkWorst(t, 10*time.Second, 0)
	if got := sink.mostPerMinute(); got <= 20 {
		t.Errorf("at most %d INSERTs a minute: 10 tables bound to 10s need about 60", got)
	}
	st := p.Status()
	if len(st.Budgets) != 1 || !st.Budgets[0].OverBudget || st.Budgets[0].ExceededTotal == 0 {
		t.Errorf("status budgets %+v: want over budget with INSERTs counted", st.Budgets)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestUnitBudgetSlowInserts: 10 tables bound to two minutes, a budget
// that holds them all to their bound, INSERTs that take 3 seconds (and
// queue for the pool's connections when they all go at once): once the
// sink has seen its INSERTs' time, every row is in by its bound, counted
// from its record's timestamp to its INSERT's end, and the tables are
// still held near their bound.
func TestUnitBudgetSlowInserts(t *testing.T) { synctest.Test(t, testUnitBudgetSlowInserts) }

func testUnitBudgetSlowInserts(t *testing.T) {
	cfg := budgetConfig(t, `
name: unit
kafka:
  topic_regex: "t[0-9]+"
clickhouse:
  database: db
  max_inserts_per_minute: 3
  max_in_flight: 1
batch:
  max_wait: 5s
routes:
  - topic_regex: "t[0-9]+"
    table: '${topic}'
    max_latency: 2m
`)
	var quick atomic.Bool // the flush at shutdown goes at once
	sink := newClockSink(func(int) insertScript {
		if quick.Load() {
			return insertScript{}
		}
		return insertScript{delay: 3 * time.Second}
	})
	// The first batches go before the sink has timed an INSERT.
	sink.from = 3 * time.Minute
	_, src, r := runBudget(t, cfg, sink, sink.fakeSink)
	topics := numbered("t", 10)
	sendSeconds(src, sink.start, topics, 480)
	if n := sink.checkWorst(t, 2*time.Minute, 90*time.Second); n != len(topics) {
		t.Errorf("%d tables measured, want %d", n, len(topics))
	}
	quick.Store(true)
	time.Sleep(time.Minute) // the INSERTs running end
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestUnitConnWait: 30 tables flush at once into a sink whose INSERTs
// take 100ms: at most chtable.InsertConns of them run at once, the others
// wait for a slot without an error or a retry, every row is in, and the
// wait is not part of an insert's duration (which adaptive batching reads
// as the server's).
func TestUnitConnWait(t *testing.T) { synctest.Test(t, testUnitConnWait) }

func testUnitConnWait(t *testing.T) {
	cfg := budgetConfig(t, `
name: unit
kafka:
  topic_regex: "t[0-9]+"
clickhouse:
  database: db
routes:
  - topic_regex: "t[0-9]+"
    table: '${topic}'
`)
	cfg.ClickHouse.MaxInFlight = 1
	cfg.Batch.MaxRows = 1
	sink := newClockSink(func(int) insertScript { return insertScript{delay: 100 * time.Millisecond} })
	m := metrics.New("unit")
	p, src, r := runBudget(t, cfg, sink, sink.fakeSink, WithMetrics(m))
	var topics []string
	for i := 0; i < 30; i++ {
		topics = append(topics, fmt.Sprintf("t%02d", i))
	}
	sendTopics(src, sink.start, topics, 0)
	eventually(t, 5*time.Second, "30 rows in", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.at) == 30
	})
	if limit := chtable.InsertConns(cfg.ClickHouse.MaxInFlight); sink.most > limit || sink.most < 2 {
		t.Errorf("%d INSERTs at once, want between 2 and %d", sink.most, limit)
	}
	if retries := p.disp.Retries(); retries != 0 {
		t.Errorf("%d retries: waiting for a connection is not a failed attempt", retries)
	}
	sum, n := histogram(m, metrics.InsertDuration)
	if n != 30 || sum/float64(n) > 0.15 {
		t.Errorf("%d inserts took %.3fs on average: the queue's wait (up to 0.7s) counted in", n, sum/float64(max(n, 1)))
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// histogram sums a histogram over its series: the sum and the count.
func histogram(m *metrics.Metrics, name string) (float64, uint64) {
	mfs, _ := m.Registry().Gather()
	var sum float64
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, x := range mf.GetMetric() {
				sum += x.GetHistogram().GetSampleSum()
				n += x.GetHistogram().GetSampleCount()
			}
		}
	}
	return sum, n
}

// TestUnitPartsReadOnce: adaptive batching reads the parts of all its
// tables in one read per interval, never one per table, and never two at
// once.
func TestUnitPartsReadOnce(t *testing.T) { synctest.Test(t, testUnitPartsReadOnce) }

func testUnitPartsReadOnce(t *testing.T) {
	old := dispatch.PartsInterval
	dispatch.PartsInterval = 100 * time.Millisecond
	defer func() { dispatch.PartsInterval = old }()
	cfg := budgetConfig(t, `
name: unit
kafka:
  topic_regex: "t[0-9]+"
clickhouse:
  database: db
batch:
  mode: adaptive
routes:
  - topic_regex: "t[0-9]+"
    table: '${topic}'
`)
	sink := &partsSink{fakeSink: newFakeSink(nil)}
	_, src, r := runBudget(t, cfg, sink, sink.fakeSink)
	var topics []string
	for i := 0; i < 25; i++ {
		topics = append(topics, fmt.Sprintf("t%02d", i))
	}
	sendTopics(src, time.Now(), topics, 0)
	time.Sleep(2 * time.Second)
	sink.mu.Lock()
	reads, asked, most := sink.reads, sink.asked, sink.most
	sink.mu.Unlock()
	if reads < 10 || reads > 25 || asked != 25 || most != 1 {
		t.Errorf("in 2s at a 100ms interval: %d reads (want about 20), the last for %d tables (want 25), %d at once (want 1)", reads, asked, most)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
