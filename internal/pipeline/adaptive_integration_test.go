//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestAdaptiveBacksOffMergesStopped: batch.mode adaptive on a table whose
// merges are stopped and whose own SETTINGS put parts_to_delay_insert at 4
// and parts_to_throw_insert at 8, fed 50 records/s for 60 s. At the target
// cadence (12/min, one part per insert) the table would reach 8 parts after
// about 40 s and ClickHouse would refuse inserts with TOO_MANY_PARTS (252).
// The controller reads the parts, stretches the wait past max_latency (and
// says so), and the run ends with fewer parts than the throw limit and not
// one 252. Both servers, side by side; not t.Parallel: the controller
// answers the table's parts and the INSERTs' pace, which other tests'
// INSERTs on the same server would slow.
func TestAdaptiveBacksOffMergesStopped(t *testing.T) {
	eachServerWithTopicConcurrently(t, 2, testAdaptiveBacksOff)
}

func testAdaptiveBacksOff(t *testing.T, server testenv.Server, ch driver.Conn, db, topic, broker string) {
	ctx := context.Background()
	testenv.Exec(t, ch,
		"CREATE TABLE "+db+".events (id UInt64) ENGINE = MergeTree ORDER BY id SETTINGS parts_to_delay_insert = 4, parts_to_throw_insert = 8",
		"SYSTEM STOP MERGES "+db+".events")
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 100ms, retry_max: 1s}
batch: {mode: adaptive, target_inserts_per_minute: 12, max_latency: 8s}
routes: [{topic: %q, table: events}]
http: {listen: ""}
`, testenv.UniqueName(t, "adaptive"), broker, topic, server.Addr, db, topic))
	m, read := serveMetrics(t, cfg.Kafka.Group)

	// 50 JSON records/s until the test ends.
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	pctx, stopProducing := context.WithCancel(ctx)
	var produced atomic.Int64
	go func() {
		start := time.Now()
		for pctx.Err() == nil {
			for due := int64(time.Since(start).Seconds() * 50); produced.Load() < due; {
				n := produced.Add(1)
				cl.Produce(pctx, &kgo.Record{Value: fmt.Appendf(nil, `{"id":%d}`, n)}, nil)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer stopProducing()

	var began time.Time
	var over, maxWait, maxParts float64
	runWhile(t, cfg, 2*time.Minute, func(*writer.Writer) (bool, string) {
		s := read()
		if began.IsZero() {
			if v, _ := sum(s, metrics.Partitions); v < 1 {
				return false, "no partition assigned"
			}
			began = time.Now()
		}
		if v, _ := sum(s, metrics.BatchOverLatency); v > over {
			over = v
		}
		if v, _ := sum(s, metrics.BatchTargetWait); v > maxWait {
			maxWait = v
		}
		if v, _ := sum(s, metrics.TableActiveParts); v > maxParts {
			maxParts = v
		}
		if refused, _ := sum(s, metrics.InsertRetries, `code="252"`); refused > 0 {
			t.Fatalf("ClickHouse refused %v inserts with TOO_MANY_PARTS (parts seen: %v, wait %vs)", refused, maxParts, maxWait)
		}
		return time.Since(began) >= 60*time.Second, fmt.Sprintf("%.0fs of 60", time.Since(began).Seconds())
	}, pipeline.WithMetrics(m))
	stopProducing()

	var parts uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM system.parts WHERE database = ? AND table = 'events' AND active", db).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	var rows uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".events").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("60 s at 50 records/s: %d rows in %d parts (parts_to_throw_insert 8; the 12/min cadence would have made 12); largest wait %.1fs, over max_latency: %v",
		rows, parts, maxWait, over == 1)
	if parts >= 8 {
		t.Errorf("%d active parts: reached parts_to_throw_insert", parts)
	}
	if over != 1 || maxWait <= 8 {
		t.Errorf("largest wait %.1fs, over max_latency %v: want the pushback to stretch the wait past max_latency 8s and report it", maxWait, over)
	}
	if rows == 0 {
		t.Error("no rows inserted")
	}
}
