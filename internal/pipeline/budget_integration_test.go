//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// budgetTables makes n tables db.<prefix>NN (id, ms, and the columns of
// more, if any), merges stopped so that each INSERT stays one part, and a
// one-partition topic for each.
func budgetTables(t *testing.T, ch driver.Conn, db, prefix string, n int, more ...string) (tables, topics []string) {
	t.Helper()
	cols := strings.Join(append([]string{"id UInt64", "ms UInt64"}, more...), ", ")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s%02d", prefix, i)
		testenv.Exec(t, ch,
			fmt.Sprintf("CREATE TABLE %s.%s (%s) ENGINE = MergeTree ORDER BY id", db, name, cols),
			fmt.Sprintf("SYSTEM STOP MERGES %s.%s", db, name))
		tables = append(tables, name)
		topics = append(topics, testenv.NewTopic(t, 1))
	}
	return tables, topics
}

// produceEach produces perSecond records a second to each topic, each
// {"id": n, "ms": unix milliseconds at produce}, without waiting for one
// to be acknowledged before the next, until stop; it returns the count
// Kafka acknowledged per topic, final once stop returned.
func produceEach(t *testing.T, topics []string, perSecond int) (counts []*atomic.Int64, stop func()) {
	t.Helper()
	cl := testenv.KafkaClient(t)
	counts = make([]*atomic.Int64, len(topics))
	for i := range counts {
		counts[i] = new(atomic.Int64)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sent := make([]int64, len(topics))
		start := time.Now()
		for ctx.Err() == nil {
			due := int64(time.Since(start).Seconds() * float64(perSecond))
			for i, topic := range topics {
				for ; sent[i] < due; sent[i]++ {
					rec := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"id":%d,"ms":%d}`, sent[i]+1, time.Now().UnixMilli())}
					cl.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
						if err != nil {
							t.Errorf("produce: %v", err)
							return
						}
						counts[i].Add(1) // only what Kafka has; in order within the topic's one partition
					})
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return counts, func() {
		cancel()
		<-done
		if err := cl.Flush(context.Background()); err != nil {
			t.Errorf("produce: %v", err)
		}
	}
}

// feed is records produced to topics while a pipeline runs (produceWhile).
type feed struct {
	counts []*atomic.Int64 // per topic, what Kafka acknowledged
	start  time.Time       // when producing began
}

// produceWhile returns a runWhile condition that, once topics' partitions
// are assigned (read scrapes the pipeline's metrics), produces perSecond
// records a second to each topic for d (produceEach), and then holds
// until every record produced is consumed; f has the counts once it is.
func produceWhile(t *testing.T, topics []string, perSecond int, d time.Duration, read func() map[string]float64) (f *feed, done func(*writer.Writer) (bool, string)) {
	f = &feed{}
	var stop func()
	t.Cleanup(func() {
		if stop != nil {
			stop()
		}
	})
	return f, func(*writer.Writer) (bool, string) {
		if f.counts == nil {
			if v, _ := sum(read(), metrics.Partitions); v < float64(len(topics)) {
				return false, "partitions not assigned"
			}
			f.counts, stop = produceEach(t, topics, perSecond)
			f.start = time.Now()
		}
		if time.Since(f.start) < d {
			return false, "producing"
		}
		stop()
		var total int64
		for _, c := range f.counts {
			total += c.Load()
		}
		v, _ := sum(read(), metrics.RecordsConsumed)
		return v >= float64(total), fmt.Sprintf("%v records consumed of %d", v, total)
	}
}

// insertTimes is the event_time of every INSERT into db's tables that
// ClickHouse finished (type 2) or failed (types 3 and 4), from query_log.
func insertTimes(t *testing.T, ch driver.Conn, db string) (ok []time.Time, failed int) {
	t.Helper()
	ctx := context.Background()
	if err := ch.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		t.Fatal(err)
	}
	rows, err := ch.Query(ctx, "SELECT toUInt8(type), event_time FROM system.query_log WHERE type != 1 AND query LIKE ? ORDER BY event_time",
		"INSERT INTO "+chschema.QuoteIdent(db)+".%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			typ uint8
			at  time.Time
		)
		if err := rows.Scan(&typ, &at); err != nil {
			t.Fatal(err)
		}
		if typ == 2 {
			ok = append(ok, at)
		} else {
			failed++
		}
	}
	return ok, failed
}

// mostIn60s is the most times in any 60 seconds (query_log's event_time
// has whole seconds: times in [s, s+59] are less than 60 s apart).
func mostIn60s(times []time.Time) int {
	most, j := 0, 0
	for i := range times {
		for times[i].Sub(times[j]) >= 60*time.Second {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// rowWaits checks db.table's rows: ids 1..want each once, and returns the
// longest any row produced at from or later waited from its produce to
// its part's creation (system.parts.modification_time, whole seconds, so
// up to a second less than the wait).
func rowWaits(t *testing.T, ch driver.Conn, db, table string, want int64, from time.Time) time.Duration {
	t.Helper()
	ctx := context.Background()
	made := map[string]int64{}
	rows, err := ch.Query(ctx, "SELECT name, toUInt64(toUnixTimestamp(modification_time)) FROM system.parts WHERE database = ? AND table = ? AND active", db, table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			name string
			at   uint64
		)
		if err := rows.Scan(&name, &at); err != nil {
			t.Fatal(err)
		}
		made[name] = int64(at) * 1000
	}
	rows.Close()
	rows, err = ch.Query(ctx, "SELECT id, ms, _part FROM "+db+"."+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[uint64]bool{}
	var worst int64
	for rows.Next() {
		var (
			id, ms uint64
			part   string
		)
		if err := rows.Scan(&id, &ms, &part); err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Errorf("%s: id %d twice", table, id)
		}
		seen[id] = true
		if int64(ms) >= from.UnixMilli() {
			worst = max(worst, made[part]-int64(ms))
		}
	}
	if int64(len(seen)) != want {
		t.Errorf("%s: %d distinct ids, want %d", table, len(seen), want)
	}
	for id := uint64(1); id <= uint64(want); id++ {
		if !seen[id] {
			t.Errorf("%s: id %d missing", table, id)
			break
		}
	}
	return time.Duration(worst) * time.Millisecond
}

// TestInsertBudget: 20 tables that tolerate 90 s and 2 that must keep 10 s,
// each fed 2 records/s for 75 s, with max_wait 2s and a budget of 60
// INSERTs a minute (without it the 22 tables would make 660 a minute).
// ClickHouse's query_log shows at most 60 INSERTs in any minute before the
// shutdown's flush, the budget used (the 90 s tables go early while it has
// room), and not one failed INSERT; every row is in once; no row waited
// past its table's bound, measured from its produce to its part's creation
// (the bound holds the produce, the fetch and the INSERT itself). Both
// servers, side by side; not t.Parallel: it counts INSERTs a minute and
// times rows, so no other test of the package shares its servers.
func TestInsertBudget(t *testing.T) {
	broker := testenv.Kafka(t)[0]
	testenv.EachServerConcurrently(t, func(t *testing.T, s testenv.Server) {
		ch, db := s.Conn(t), s.NewDatabase(t)
		loose, looseTopics := budgetTables(t, ch, db, "loose", 20)
		tight, tightTopics := budgetTables(t, ch, db, "tight", 2)
		var routes []string
		for i, table := range loose {
			routes = append(routes, fmt.Sprintf("  - {topic: %q, table: %s, max_latency: 90s}", looseTopics[i], table))
		}
		for i, table := range tight {
			routes = append(routes, fmt.Sprintf("  - {topic: %q, table: %s, max_latency: 10s}", tightTopics[i], table))
		}
		topics := append(append([]string(nil), looseTopics...), tightTopics...)
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%s], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s, max_inserts_per_minute: 60}
batch: {max_wait: 2s}
http: {listen: ""}
routes:
%s
`, testenv.UniqueName(t, "budget"), broker, `"`+strings.Join(topics, `", "`)+`"`, s.Addr, db, strings.Join(routes, "\n")))
		m, read := serveMetrics(t, cfg.Kafka.Group)

		f, done := produceWhile(t, topics, 2, 75*time.Second, read)
		runWhile(t, cfg, 3*time.Minute, done, pipeline.WithMetrics(m))
		counts, stopAt := f.counts, f.start.Add(75*time.Second)
		// The shutdown flushed every open batch, budget or not: count
		// the INSERTs before it.
		ok, failed := insertTimes(t, ch, db)
		var before []time.Time
		for _, at := range ok {
			if at.Before(stopAt.Truncate(time.Second)) {
				before = append(before, at)
			}
		}
		most := mostIn60s(before)
		t.Logf("%d INSERTs in the 75 s run (at most %d in any minute), %d with the shutdown's flush, %d failed", len(before), most, len(ok), failed)
		if most > 60 {
			t.Errorf("%d INSERTs in one minute, budget 60", most)
		}
		if len(before) < 50 {
			t.Errorf("%d INSERTs in 75 s: the 90 s tables should go early while the budget has room (about 58 a minute)", len(before))
		}
		if failed != 0 {
			t.Errorf("%d INSERTs failed", failed)
		}
		for i, table := range append(append([]string(nil), loose...), tight...) {
			bound := 90 * time.Second
			if strings.HasPrefix(table, "tight") {
				bound = 10 * time.Second
			}
			w := rowWaits(t, ch, db, table, counts[i].Load(), time.Time{})
			t.Logf("%s: rows in at most %v after their produce, bound %v", table, w, bound)
			if w > bound {
				t.Errorf("%s: a row waited %v, bound %v", table, w, bound)
			}
		}
		smp := read()
		if v, _ := sum(smp, metrics.InsertBudgetExceeded); v != 0 {
			t.Errorf("%s = %v: the bounds fit in the budget", metrics.InsertBudgetExceeded, v)
		}
		if v, _ := sum(smp, metrics.InsertRetries); v != 0 {
			t.Errorf("%s = %v", metrics.InsertRetries, v)
		}
	})
}

// TestBudgetBoundHoldsInsertTime: 20 tables bound to 20 s, whose every
// INSERT takes 2 s more (a column MATERIALIZED sleep(2)), each fed 2
// records/s for 60 s under a budget of 30 INSERTs a minute: the tables are
// held to their bound (less than a minute: never sealed early), and
// every row is in by it, from its produce to its part's creation, once
// the sink has timed its first INSERTs (rows produced from 25 s on; the
// first batches go before any INSERT was timed). Without the INSERT's
// time in the deadline, rows took about 22 s. Both servers, side by side;
// not t.Parallel: it times rows, so no other test of the package shares
// its servers.
func TestBudgetBoundHoldsInsertTime(t *testing.T) {
	broker := testenv.Kafka(t)[0]
	testenv.EachServerConcurrently(t, func(t *testing.T, s testenv.Server) {
		ch, db := s.Conn(t), s.NewDatabase(t)
		tables, topics := budgetTables(t, ch, db, "t", 20, "slow UInt8 MATERIALIZED sleep(2)")
		var routes []string
		for i, table := range tables {
			routes = append(routes, fmt.Sprintf("  - {topic: %q, table: %s, max_latency: 20s}", topics[i], table))
		}
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%s], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s, max_inserts_per_minute: 30, max_in_flight: 5}
batch: {max_wait: 2s}
http: {listen: ""}
routes:
%s
`, testenv.UniqueName(t, "bound"), broker, `"`+strings.Join(topics, `", "`)+`"`, s.Addr, db, strings.Join(routes, "\n")))
		m, read := serveMetrics(t, cfg.Kafka.Group)

		f, done := produceWhile(t, topics, 2, 60*time.Second, read)
		runWhile(t, cfg, 3*time.Minute, done, pipeline.WithMetrics(m))
		counts, start := f.counts, f.start
		bound := 20 * time.Second
		for i, table := range tables {
			w := rowWaits(t, ch, db, table, counts[i].Load(), start.Add(25*time.Second))
			t.Logf("%s: rows in at most %v after their produce", table, w)
			if w > bound {
				t.Errorf("%s: a row was in %v after its produce, bound %v", table, w, bound)
			}
			if w < bound/2 {
				t.Errorf("%s: rows in within %v: the tables should be held near their bound %v", table, w, bound)
			}
		}
	})
}

// TestConnWaitManyTables: 40 tables whose every record is a batch
// (max_rows 1) and max_in_flight 1, so up to 40 INSERTs want a connection
// at once from a pool of chtable.InsertConns + 2 = 6. clickhouse-go waits
// for one of its pool's connections at most dial_timeout (150ms here)
// and then fails with "acquire conn timeout": without the sink's own
// queue, that failed about a hundred attempts of this test. They queue
// for a slot, and not one fails or is retried. Both servers.
func TestConnWaitManyTables(t *testing.T) {
	broker := testenv.Kafka(t)[0]
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		ch, db := s.Conn(t), s.NewDatabase(t)
		tables, topics := budgetTables(t, ch, db, "t", 40)
		var routes []string
		for i, table := range tables {
			routes = append(routes, fmt.Sprintf("  - {topic: %q, table: %s}", topics[i], table))
		}
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%s], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s, max_in_flight: 1, dial_timeout: 150ms}
batch: {max_rows: 1}
http: {listen: ""}
routes:
%s
`, testenv.UniqueName(t, "connwait"), broker, `"`+strings.Join(topics, `", "`)+`"`, s.Addr, db, strings.Join(routes, "\n")))
		const perTopic = 15
		cl := testenv.KafkaClient(t)
		for _, topic := range topics {
			for n := 1; n <= perTopic; n++ {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"id":%d,"ms":%d}`, n, time.Now().UnixMilli())}, nil)
			}
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		m, read := serveMetrics(t, cfg.Kafka.Group)
		runWhile(t, cfg, 3*time.Minute, func(*writer.Writer) (bool, string) {
			v, _ := sum(read(), metrics.RowsInserted)
			return v >= 40*perTopic, fmt.Sprintf("%v rows of %d", v, 40*perTopic)
		}, pipeline.WithMetrics(m))
		ok, failed := insertTimes(t, ch, db)
		t.Logf("%d INSERTs, %d failed", len(ok), failed)
		if failed != 0 || len(ok) != 40*perTopic {
			t.Errorf("%d INSERTs finished and %d failed, want %d and 0", len(ok), failed, 40*perTopic)
		}
		if v, _ := sum(read(), metrics.InsertRetries); v != 0 {
			t.Errorf("%s = %v: waiting for a connection is not a failed attempt", metrics.InsertRetries, v)
		}
		for _, table := range tables {
			rowWaits(t, ch, db, table, perTopic, time.Time{})
		}
	})
}
