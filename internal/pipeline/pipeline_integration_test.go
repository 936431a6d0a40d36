//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/consumer"
	"sink/internal/eos/eosio"
	"sink/internal/pipeline"
	"sink/internal/registry"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// produceEvents writes n JSON events round-robin over the topic's partitions
// and returns when Kafka acknowledged all of them, with their total bytes.
func produceEvents(t *testing.T, topic string, n int) (bytes int64) {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, 1)
	for i := 0; i < n; i++ {
		v := fmt.Sprintf(`{"id":%d,"user_id":%d,"ts":"2024-05-01 10:%02d:%02d","event_type":"e%d","cost":%d.25,"payload":"p-%d"}`,
			i, i%1000, (i/60)%60, i%60, i%7, i%100, i)
		bytes += int64(len(v))
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatalf("produce: %v", err)
	default:
	}
	return bytes
}

func newConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// runUntil runs a connector until the table holds want rows, then stops it
// the way SIGTERM does and returns its stats.
func runUntil(t *testing.T, cfg *config.Config, ch driver.Conn, table string, want uint64) pipeline.Stats {
	t.Helper()
	return runUntilWith(t, cfg, ch, table, want, nil)
}

// runUntilWith is runUntil with pipeline options and a check that runs once
// while the connector is running, after the table got its first rows.
func runUntilWith(t *testing.T, cfg *config.Config, ch driver.Conn, table string, want uint64,
	during func(*writer.Writer), opts ...pipeline.Option) pipeline.Stats {
	t.Helper()
	return runWhile(t, cfg, 2*time.Minute, func(w *writer.Writer) (bool, string) {
		var n uint64
		if err := ch.QueryRow(context.Background(), "SELECT count() FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 && during != nil {
			during(w)
			during = nil
		}
		return n >= want, fmt.Sprintf("%s has %d rows, want %d", table, n, want)
	}, opts...)
}

// eachServerWithTopic runs body once per ClickHouse server (a subtest
// each) with a connection to it, a fresh database, a new topic of
// partitions partitions and the first Kafka broker.
func eachServerWithTopic(t *testing.T, partitions int, body serverTopicBody) {
	withTopicOnEach(t, testenv.EachServer, partitions, body)
}

// eachServerWithTopicConcurrently is eachServerWithTopic with the two
// servers' subtests side by side (testenv.EachServerConcurrently).
func eachServerWithTopicConcurrently(t *testing.T, partitions int, body serverTopicBody) {
	withTopicOnEach(t, testenv.EachServerConcurrently, partitions, body)
}

// serverTopicBody is a test body on one server with a connection, a fresh
// database, a new topic and the first Kafka broker.
type serverTopicBody func(t *testing.T, server testenv.Server, ch driver.Conn, db, topic, broker string)

func withTopicOnEach(t *testing.T, each func(*testing.T, func(*testing.T, testenv.Server)), partitions int, body serverTopicBody) {
	broker := testenv.Kafka(t)[0]
	each(t, func(t *testing.T, s testenv.Server) {
		body(t, s, s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, partitions), broker)
	})
}

// runWhile runs a connector until done reports true (polled every 200 ms;
// its message says what is missing when the timeout passes), then stops it
// the way SIGTERM does and returns its stats.
func runWhile(t *testing.T, cfg *config.Config, timeout time.Duration, done func(*writer.Writer) (bool, string),
	opts ...pipeline.Option) pipeline.Stats {
	t.Helper()
	w, err := writer.Open(context.Background(), cfg.Name, cfg.ClickHouse)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return runSinkWhile(t, cfg, w, zerolog.InfoLevel, timeout, func() (bool, string) { return done(w) }, opts...)
}

// runOpts are the options sink run gives New for cfg on w: the sampler of
// schema.create, a registry client when schema_registry is configured, and
// the exactly-once I/O of an exactly_once cfg on w's connection (reading
// every shard when w is a cluster's, closed when the test ends). Options a
// test gives after them win.
func runOpts(t *testing.T, cfg *config.Config, w pipeline.Sink) []pipeline.Option {
	t.Helper()
	opts := []pipeline.Option{pipeline.WithSampler(consumer.Sampler{Kafka: cfg.Kafka})}
	if cfg.SchemaRegistry.Enabled() {
		rc, err := registry.New(cfg.SchemaRegistry, registry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, pipeline.WithRegistry(rc))
	}
	if !cfg.ExactlyOnce() {
		return opts
	}
	cs, ok := w.(interface{ Conn() driver.Conn })
	if !ok {
		t.Fatalf("exactly-once test on a sink without a ClickHouse connection (%T)", w)
	}
	io, err := eosio.NewIO(cfg, cs.Conn())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(io.Close)
	if c, ok := w.(*writer.Cluster); ok {
		io.OnCluster(c) // as sink run wires it
	}
	return append(opts, pipeline.WithExactlyOnce(io))
}

// runSinkWhile is runWhile with the ClickHouse side given (a writer.Cluster,
// say), logging at level.
func runSinkWhile(t *testing.T, cfg *config.Config, w pipeline.Sink, level zerolog.Level, timeout time.Duration,
	done func() (bool, string), opts ...pipeline.Option) pipeline.Stats {
	t.Helper()
	ctx := context.Background()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(level)
	p, err := pipeline.New(ctx, cfg, log, w, append(runOpts(t, cfg, w), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := consumer.New(ctx, cfg, log, consumer.HooksOf(p))
	if err != nil {
		t.Fatal(err)
	}
	p.Attach(cons)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- p.Run(runCtx) }()

	deadline := time.Now().Add(timeout)
	for {
		ok, missing := done()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("after %s: %s", timeout, missing)
		}
		select {
		case err := <-ran:
			t.Fatalf("pipeline stopped early: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	cons.Close()
	return p.Stats()
}

// insertsInto returns the number of finished INSERTs into table and their
// written rows, from system.query_log.
func insertsInto(t *testing.T, ch driver.Conn, db, table string) (inserts, rows uint64) {
	t.Helper()
	ctx := context.Background()
	if err := ch.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		t.Fatal(err)
	}
	q := "SELECT count(), sum(written_rows) FROM system.query_log WHERE type = 2 AND query LIKE ?"
	prefix := "INSERT INTO " + chschema.QuoteIdent(db) + "." + chschema.QuoteIdent(table) + " %"
	if err := ch.QueryRow(ctx, q, prefix).Scan(&inserts, &rows); err != nil {
		t.Fatal(err)
	}
	return inserts, rows
}

// TestPipelineEndToEnd moves 200,000 records from one topic into a table on
// each server, once with batches across partitions and once with a batch per
// partition. The topic is produced once; each server's runs consume it with
// groups of their own.
func TestPipelineEndToEnd(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 12)
	const n = 200_000
	produceEvents(t, topic, n)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		testPipelineEndToEnd(t, s, brokers, topic, n)
	})
}

func testPipelineEndToEnd(t *testing.T, s testenv.Server, brokers []string, topic string, n uint64) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	ctx := context.Background()
	for _, tbl := range []string{"batched", "per_partition"} {
		ddl := fmt.Sprintf(`CREATE TABLE %s.%s (id UInt64, user_id UInt32, ts DateTime, event_type String,
			cost Decimal(18, 4), payload String, _topic String, _partition UInt16, _offset UInt64,
			inserted DateTime DEFAULT now()) ENGINE = MergeTree ORDER BY id`, db, tbl)
		if err := ch.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	cfgFor := func(table string, ignore bool) *config.Config {
		return newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 50000, max_wait: 3s, ignore_partitions: %v}
routes: [{topic: %q, table: %s}]
http: {listen: ""}
`, testenv.UniqueName(t, table), brokers[0], topic, s.Addr, db, ignore, topic, table))
	}

	// Cross-partition batches: the insert count is set by max_rows.
	cfg := cfgFor("batched", true)
	st := runUntil(t, cfg, ch, db+".batched", n)
	var rows, distinct uint64
	if err := ch.QueryRow(ctx, "SELECT count(), uniqExact(id) FROM "+db+".batched").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n {
		t.Fatalf("batched: %d rows, %d distinct ids; want exactly %d", rows, distinct, n)
	}
	inserts, written := insertsInto(t, ch, db, "batched")
	t.Logf("ignore_partitions=true: %d INSERTs, %d rows written, %.0f rows/insert (pipeline: %d inserts)",
		inserts, written, float64(written)/float64(inserts), st.Inserts)
	if inserts == 0 || inserts > 6 {
		t.Fatalf("ignore_partitions=true: %d INSERTs in query_log, want 1..6", inserts)
	}
	assertCommittedAtEnd(t, cfg.Kafka.Group, topic)

	// One batch per partition (a Kafka sink's usual behaviour): more,
	// smaller inserts for the same rows.
	cfg2 := cfgFor("per_partition", false)
	runUntil(t, cfg2, ch, db+".per_partition", n)
	if err := ch.QueryRow(ctx, "SELECT count(), uniqExact(id) FROM "+db+".per_partition").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n {
		t.Fatalf("per_partition: %d rows, %d distinct; want %d", rows, distinct, n)
	}
	inserts2, written2 := insertsInto(t, ch, db, "per_partition")
	t.Logf("ignore_partitions=false: %d INSERTs, %.0f rows/insert", inserts2, float64(written2)/float64(inserts2))
	if inserts2 <= inserts || float64(written2)/float64(inserts2) >= float64(written)/float64(inserts) {
		t.Fatalf("per-partition batching made %d inserts (%d rows), cross-partition %d (%d rows): want more and smaller",
			inserts2, written2, inserts, written)
	}
	if inserts2 < 12 {
		t.Fatalf("per-partition batching over 12 partitions made only %d inserts", inserts2)
	}
	assertCommittedAtEnd(t, cfg2.Kafka.Group, topic)

	// Metadata columns came from the records.
	var parts, badTopic uint64
	if err := ch.QueryRow(ctx, "SELECT uniqExact(_partition), countIf(_topic != ?) FROM "+db+".batched", topic).Scan(&parts, &badTopic); err != nil {
		t.Fatal(err)
	}
	if parts != 12 || badTopic != 0 {
		t.Fatalf("_partition has %d distinct values (want 12), %d rows with a wrong _topic", parts, badTopic)
	}
}

// assertCommittedAtEnd checks the group committed every partition's end
// offset: nothing left to replay after a clean stop.
func assertCommittedAtEnd(t *testing.T, group, topic string) {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		if !ok || c.At != o.Offset {
			bad = append(bad, fmt.Sprintf("p%d committed %d end %d", o.Partition, c.At, o.Offset))
		}
	})
	if len(bad) > 0 {
		t.Fatalf("group %s: committed offsets differ from end offsets: %s", group, strings.Join(bad, "; "))
	}
}

// Several topics routed to one table share its batches: one INSERT (one
// part, with merges stopped) holds rows of both topics.
func TestTopicsShareTableBatches(t *testing.T) {
	brokers := testenv.Kafka(t)
	a, b := testenv.NewTopic(t, 3), testenv.NewTopic(t, 3)
	produceEvents(t, a, 5000)
	produceEvents(t, b, 5000)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		ctx := context.Background()
		if err := ch.Exec(ctx, "CREATE TABLE "+db+".t (id UInt64, _topic String) ENGINE = MergeTree ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		if err := ch.Exec(ctx, "SYSTEM STOP MERGES "+db+".t"); err != nil {
			t.Fatal(err)
		}
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q, %q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 100000, max_wait: 2s}
routes: [{topic: %q, table: t}, {topic: %q, table: t}]
http: {listen: ""}
`, testenv.UniqueName(t, "shared"), brokers[0], a, b, s.Addr, db, a, b))
		runUntil(t, cfg, ch, db+".t", 10000)
		var parts, mixed uint64
		q := "SELECT count(), countIf(topics = 2) FROM (SELECT _part, uniqExact(_topic) AS topics FROM " + db + ".t GROUP BY _part)"
		if err := ch.QueryRow(ctx, q).Scan(&parts, &mixed); err != nil {
			t.Fatal(err)
		}
		inserts, rows := insertsInto(t, ch, db, "t")
		t.Logf("%d INSERTs, %d rows, %d parts, %d with both topics", inserts, rows, parts, mixed)
		if rows != 10000 || mixed == 0 {
			t.Fatalf("%d rows in %d parts, %d holding both topics: want 10000 rows and a part (an INSERT) with both", rows, parts, mixed)
		}
	})
}
