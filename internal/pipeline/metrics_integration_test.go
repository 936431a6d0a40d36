//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/command/report"
	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// scrape GETs url and returns the status and body.
func scrape(t *testing.T, url string) (int, string) {
	t.Helper()
	return testenv.HTTP(t, http.MethodGet, url)
}

// samples parses the Prometheus text format into "name{labels}" → value.
func samples(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// sum adds every series of name whose labels contain all of with.
func sum(s map[string]float64, name string, with ...string) (total float64, series int) {
	for k, v := range s {
		if !strings.HasPrefix(k, name+"{") && k != name {
			continue
		}
		ok := true
		for _, w := range with {
			ok = ok && strings.Contains(k, w)
		}
		if ok {
			total += v
			series++
		}
	}
	return total, series
}

// TestMetricsMatchClickHouse runs the connector with metrics on, scrapes
// /metrics over HTTP after the run, and checks the counters against what
// ClickHouse saw (rows in the table, INSERTs and written rows in
// query_log) and what was produced, and the time-based series against the
// clock (lag seconds 0 once caught up, one end-to-end latency per insert
// within the bounds the produce and run times allow, a recent last
// insert); /readyz answers 200 while the connector runs and 503 after it
// left the group.
//
// The topic is produced once; each server's run consumes it with a group of
// its own.
func TestMetricsMatchClickHouse(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 4)
	const n, bad = 40_000, 3
	// Kafka stamps each record at produce time (CreateTime, milliseconds):
	// every record's timestamp lies in [produced, producedEnd], which bounds
	// the end-to-end latency each insert can report.
	produced := time.Now().Add(-time.Millisecond)
	goodBytes := produceEvents(t, topic, n)
	badCl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic))
	for i := 0; i < bad; i++ {
		if err := badCl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(`{"id": "not a number`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	producedEnd := time.Now()
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		testMetricsMatchClickHouse(t, s, brokers[0], topic, n, bad, goodBytes, produced, producedEnd)
	})
}

func testMetricsMatchClickHouse(t *testing.T, server testenv.Server, broker, topic string, n, bad uint64, goodBytes int64,
	produced, producedEnd time.Time) {
	ch := server.Conn(t)
	db := server.NewDatabase(t)
	dlq := testenv.NewTopic(t, 1)
	ctx := context.Background()
	if err := ch.Exec(ctx, "CREATE TABLE "+db+`.events (id UInt64, user_id UInt32, ts DateTime, event_type String,
		cost Decimal(18, 4), payload String) ENGINE = MergeTree ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 10000, max_wait: 2s}
routes: [{topic: %q, table: events}]
errors: {tolerance: all, dlq_topic: %q}
http: {listen: ""}
`, testenv.UniqueName(t, "metrics"), broker, topic, server.Addr, db, topic, dlq))

	m := metrics.New(cfg.Kafka.Group)
	srv, err := metrics.Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	base := "http://" + srv.Addr()
	if code, body := scrape(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before the run: %d %q, want 503", code, body)
	}
	runStart := time.Now()
	st := runUntilWith(t, cfg, ch, db+".events", n, func(w *writer.Writer) {
		m.SetPinger(func(ctx context.Context) error { return w.Conn().Ping(ctx) })
		if code, body := scrape(t, base+"/readyz"); code != http.StatusOK {
			t.Errorf("/readyz while running: %d %q, want 200", code, body)
		}
	}, pipeline.WithMetrics(m))

	runEnd := time.Now()
	code, body := scrape(t, base+"/metrics")
	scraped := time.Now()
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	s := samples(t, body)
	table := fmt.Sprintf(`table="%s.events"`, db)
	topicL := fmt.Sprintf(`topic="%s"`, topic)

	var rows uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".events").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	qlInserts, qlRows := insertsInto(t, ch, db, "events")
	r, err := report.Query(ctx, ch, report.Options{
		Target: report.Target{Database: db, Table: "events", DefaultDatabase: db},
		Since:  time.Now().Add(-10 * time.Minute), Until: time.Now().Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ClickHouse: %d rows; query_log: %d INSERTs, %d written rows; report: %d inserts; pipeline: %+v",
		rows, qlInserts, qlRows, r.Total.Inserts, st)

	f := func(what string, got float64, want uint64) {
		t.Helper()
		if got != float64(want) {
			t.Errorf("%s = %v, want %d", what, got, want)
		}
	}
	get := func(name string, with ...string) float64 {
		t.Helper()
		v, series := sum(s, name, with...)
		if series == 0 {
			t.Fatalf("no %s%v series in /metrics", name, with)
		}
		return v
	}
	f(metrics.RowsInserted+" vs count()", get(metrics.RowsInserted, table), rows)
	f(metrics.RowsInserted+" vs query_log written_rows", get(metrics.RowsInserted, table), qlRows)
	f(metrics.Inserts+" vs query_log", get(metrics.Inserts, table), qlInserts)
	f(metrics.Inserts+" vs sink report", get(metrics.Inserts, table), uint64(r.Total.Inserts))
	f(metrics.RowsPerInsert+"_count", get(metrics.RowsPerInsert+"_count", table), qlInserts)
	f(metrics.RowsPerInsert+"_sum", get(metrics.RowsPerInsert+"_sum", table), qlRows)
	f(metrics.InsertDuration+"_count", get(metrics.InsertDuration+"_count", table), qlInserts)
	f(metrics.BatchesSealed+" (all reasons)", get(metrics.BatchesSealed, table), qlInserts)
	f(metrics.RecordsConsumed, get(metrics.RecordsConsumed, topicL), n+bad)
	f(metrics.BytesConsumed, get(metrics.BytesConsumed, topicL), uint64(goodBytes)+bad*uint64(len(`{"id": "not a number`)))
	f(metrics.DLQRecords, get(metrics.DLQRecords, topicL), bad)
	f(metrics.ConsumerLag+" (all partitions)", get(metrics.ConsumerLag, topicL), 0)
	f(metrics.FetchPaused, get(metrics.FetchPaused), 0)
	f(metrics.InsertRetries, func() float64 { v, _ := sum(s, metrics.InsertRetries); return v }(), 0)
	if _, series := sum(s, metrics.ConsumerLag, topicL); series != 4 {
		t.Errorf("%d lag series, want one per partition (4)", series)
	}
	if rows != n || qlRows != n || r.Total.Rows != n {
		t.Errorf("ClickHouse has %d rows, query_log %d, report %d; want %d", rows, qlRows, r.Total.Rows, n)
	}
	if age := get(metrics.LastCommitAge); age < 0 || age > 10 {
		t.Errorf("%s = %v right after a clean stop, want 0..10", metrics.LastCommitAge, age)
	}
	if reasons := get(metrics.BatchesSealed, table, `reason="rows"`); reasons < 3 {
		t.Errorf("%v batches sealed by max_rows for %d rows at max_rows 10000, want at least 3", reasons, n)
	}

	// The time-based series. Caught up at the end: every partition's lag in
	// seconds is 0, like its lag in records.
	f(metrics.ConsumerLagSeconds+" (all partitions)", get(metrics.ConsumerLagSeconds, topicL), 0)
	if _, series := sum(s, metrics.ConsumerLagSeconds, topicL); series != 4 {
		t.Errorf("%d lag-seconds series, want one per partition (4)", series)
	}
	// One end-to-end observation per INSERT (every record has a timestamp),
	// each between the earliest possible (the run started after the last
	// record was produced) and the latest (acknowledged before the scrape,
	// the record produced no earlier than produced).
	f(metrics.EndToEndLatency+"_count", get(metrics.EndToEndLatency+"_count", table), qlInserts)
	lo, hi := runStart.Sub(producedEnd).Seconds(), scraped.Sub(produced).Seconds()
	if e2e := get(metrics.EndToEndLatency+"_sum", table); e2e < lo*float64(qlInserts) || e2e > hi*float64(qlInserts) {
		t.Errorf("%s_sum = %.3fs over %d inserts, want each in [%.3fs, %.3fs]", metrics.EndToEndLatency, e2e, qlInserts, lo, hi)
	}
	if inf := get(metrics.EndToEndLatency+"_bucket", table, `le="+Inf"`); inf != float64(qlInserts) {
		t.Errorf("%s +Inf bucket = %v, want %d", metrics.EndToEndLatency, inf, qlInserts)
	}
	// The last insert was acknowledged during the run: its age at the scrape
	// is at most the time since the run's stop began.
	if age := get(metrics.LastInsertAge, table); age < 0 || age > scraped.Sub(runEnd).Seconds()+runEnd.Sub(runStart).Seconds() || age > 10 {
		t.Errorf("%s = %v right after the run (run took %v), want 0..10s", metrics.LastInsertAge, age, runEnd.Sub(runStart))
	}
	t.Logf("end-to-end latency: %d inserts, mean %.2fs (bounds %.2fs..%.2fs); last insert %.2fs before the scrape",
		qlInserts, get(metrics.EndToEndLatency+"_sum", table)/float64(qlInserts), lo, hi, get(metrics.LastInsertAge, table))
	if code, body := scrape(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not joined") {
		t.Errorf("/readyz after the run: %d %q, want 503 saying the consumer is not in the group", code, body)
	}
}
