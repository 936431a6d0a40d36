//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestLagSecondsWhileBehind holds the sink behind on purpose and watches
// sink_consumer_lag_seconds: the connection to ClickHouse is cut (every
// insert fails with a network error and is retried), records are produced, and with a
// small buffer and small partition fetches the sink stops fetching with
// records left in Kafka. Then the lag in seconds is at least the age of
// the produced records and grows one second per second between two
// scrapes; after ClickHouse is reachable again and every row is in, it is 0.
func TestLagSecondsWhileBehind(t *testing.T) {
	eachServerWithTopic(t, 1, testLagSecondsWhileBehind)
}

func testLagSecondsWhileBehind(t *testing.T, server testenv.Server, ch driver.Conn, db, topic, broker string) {
	ctx := context.Background()
	if err := ch.Exec(ctx, "CREATE TABLE "+db+".events (id UInt64, v String) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	proxy := testenv.NewProxy(t, server.Addr)
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, max_partition_fetch_bytes: 1KiB}
clickhouse: {addrs: [%q], database: %s, retry_initial: 100ms, retry_max: 200ms}
batch: {max_rows: 1000, max_wait: 100ms, max_bytes: 8KiB, buffer_memory: 8KiB}
routes: [{topic: %q, table: events}]
http: {listen: ""}
`, testenv.UniqueName(t, "lagsec"), broker, topic, proxy.Addr, db, topic))
	m, read := serveMetrics(t, cfg.Kafka.Group)
	topicL := fmt.Sprintf(`topic="%s"`, topic)
	lagSeconds := func(s map[string]float64) float64 {
		v, series := sum(s, metrics.ConsumerLagSeconds, topicL)
		if series != 1 {
			return -1
		}
		return v
	}

	var (
		step        int
		produced    time.Time // after the last record was produced
		t1          time.Time
		lag1, lag2  float64
		lagRecords1 float64
	)
	runWhile(t, cfg, time.Minute, func(*writer.Writer) (bool, string) {
		s := read()
		switch step {
		case 0: // joined and idle: make inserts fail, then produce
			if v, _ := sum(s, metrics.Partitions); v < 1 {
				return false, "no partition assigned"
			}
			proxy.Cut()
			// Small record batches: a fetch returns whole batches, so
			// only small ones let the sink stop with records left behind.
			cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1024))
			var recs []*kgo.Record
			for i := range n {
				recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, `{"id":%d,"v":"value %d"}`, i, i)})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			produced = time.Now()
			step++
		case 1: // wait until fetching paused with records left in Kafka
			paused, _ := sum(s, metrics.FetchPaused)
			lagRecords, _ := sum(s, metrics.ConsumerLag, topicL)
			if paused != 1 || lagRecords == 0 {
				return false, fmt.Sprintf("fetch paused %v, lag %v records: want paused with records waiting", paused, lagRecords)
			}
			t1, lag1, lagRecords1 = time.Now(), lagSeconds(s), lagRecords
			step++
		case 2: // 1.5s later the waiting records are 1.5s older
			if time.Since(t1) < 1500*time.Millisecond {
				return false, "waiting 1.5s"
			}
			elapsed := time.Since(t1).Seconds()
			lag2 = lagSeconds(s)
			if lag1 < time.Since(produced).Seconds()-elapsed-0.5 || lag2-lag1 < elapsed-0.5 || lag2-lag1 > elapsed+0.5 {
				t.Errorf("%s: %.2fs, then %.2fs %.2fs later (records produced %.2fs before the first): want at least their age, growing with the clock",
					metrics.ConsumerLagSeconds, lag1, lag2, elapsed, time.Since(produced).Seconds()-elapsed)
			}
			t.Logf("behind by %v records: %s %.2fs, %.2fs later %.2fs", lagRecords1, metrics.ConsumerLagSeconds, lag1, elapsed, lag2)
			proxy.Restore()
			step++
		case 3:
			var rows uint64
			if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".events").Scan(&rows); err != nil {
				t.Fatal(err)
			}
			return rows == n, fmt.Sprintf("%d rows, want %d", rows, n)
		}
		return false, fmt.Sprintf("step %d", step)
	}, pipeline.WithMetrics(m))

	s := read()
	if lag := lagSeconds(s); lag != 0 {
		t.Errorf("%s after catching up = %v, want 0", metrics.ConsumerLagSeconds, lag)
	}
	if v, _ := sum(s, metrics.InsertRetries, `code="0"`); v < 1 {
		t.Errorf("%s{code=0} = %v: the inserts while ClickHouse was cut off should have been retried", metrics.InsertRetries, v)
	}
}
