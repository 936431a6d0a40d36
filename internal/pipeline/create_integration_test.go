//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
	"sink/internal/consumer"
	"sink/internal/pipeline"
	"sink/internal/registry"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// schema.create: if_missing on the real stack, for every format on both
// servers: the records are in the topic before the connector starts; New
// creates the table from a sample of them, and every record lands with
// its values.

const createSchema = "{create: if_missing, order_by: id}"

// kafkaColumns are the Kafka columns a created ReplacingMergeTree has on s.
func kafkaColumns(s testenv.Server) []string {
	ts := "_timestamp DateTime"
	if s.AtLeast(20, 1) {
		ts = "_timestamp DateTime64(3)"
	}
	return []string{"_topic String", "_partition Int32", "_offset Int64", ts}
}

// createAndLoad starts a connector on cfg (whose table does not exist yet:
// the topic already holds n records), waits until it has committed them,
// stops it, and checks the created table's columns (want and the Kafka
// columns, in any order), its engine and that it holds n rows, each with
// the topic and its offset (one partition: offsets 0..n-1) in the Kafka
// columns.
func createAndLoad(t *testing.T, s testenv.Server, ch driver.Conn, cfg *config.Config, db, topic string, n int64, want []string) {
	t.Helper()
	done, stop := startPipeline(t, cfg)
	waitCommitted(t, done, cfg.Kafka.Group, topic, n)
	stopClean(t, done, stop)
	expectColumns(t, columnsOf(t, ch, db), append(want, kafkaColumns(s)...))
	var engine, key string
	if err := ch.QueryRow(context.Background(), "SELECT engine, sorting_key FROM system.tables WHERE database = ? AND name = 't'", db).Scan(&engine, &key); err != nil {
		t.Fatal(err)
	}
	if engine != "ReplacingMergeTree" || key != "id" {
		t.Errorf("created table: engine %s, sorting key %q; want ReplacingMergeTree, id", engine, key)
	}
	expectCount(t, ch, fmt.Sprintf("SELECT count() FROM %s.t WHERE _topic = '%s' AND _offset = id AND _partition = 0", db, topic), uint64(n),
		"%d rows carry their topic, partition and offset; want "+fmt.Sprint(n))
}

func TestCreateJSONTable(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
		var values []string
		for i := range 100 {
			// price is whole in the first record, fractional later: the
			// sample's merged inference makes it Float64.
			values = append(values, fmt.Sprintf(`{"id":%d,"name":"n%d","price":%d.5,"ok":%t,"at":"2024-05-17T12:00:%02dZ","tags":["a","%d"],"none":null}`,
				i, i, i, i%2 == 0, i%60, i))
		}
		values[0] = `{"id":0,"name":"n0","price":0,"ok":true,"at":"2024-05-17T12:00:00Z","tags":["a","0"],"none":null}`
		produceValues(t, topic, values...)
		cfg := evolveConfigFormat(t, s, topic, db, "", createSchema)
		// A time string is a time only where DateTime64 keeps its zone and
		// fraction; on 18.16 it stays the text (as evolution types it).
		want := []string{"id Int64", "name String", "price Float64", "ok UInt8", "at String", "tags Array(String)"}
		at := "at = concat('2024-05-17T12:00:', if(id % 60 < 10, '0', ''), toString(id % 60), 'Z')"
		if s.AtLeast(21, 12) {
			want[3] = "ok Bool"
		}
		if s.AtLeast(20, 1) {
			want[4] = "at DateTime64(3)"
			at = "toUnixTimestamp64Milli(at) = (1715947200 + id % 60) * 1000"
		}
		createAndLoad(t, s, ch, cfg, db, topic, 100, want)
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE name = concat('n', toString(id)) AND (price = id + 0.5 OR id = 0) AND ok = (id % 2 = 0 OR id = 0)"+
			" AND tags = ['a', toString(id)] AND "+at, 100, "%d of 100 rows hold their record's values; want 100")
	})
}

func TestCreateAvroTable(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
		record := avroVersions(t)
		produceBytes(t, topic, recordsOf(record, 0, 100, 2)...)
		cfg := evolveConfigFormat(t, s, topic, db, "avro", createSchema)
		createAndLoad(t, s, ch, cfg, db, topic, 100, avroV2Columns(s))
		expectCount(t, ch, avroV2Filled(s, db, "1"), 100, "%d of 100 rows hold their record's values; want 100")
	})
}

func TestCreateProtobufTable(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
		record := protoVersions(t, topic)
		produceBytes(t, topic, recordsOf(record, 0, 100, 2)...)
		cfg := evolveConfigFormat(t, s, topic, db, "protobuf", createSchema)
		createAndLoad(t, s, ch, cfg, db, topic, 100, append(protoEventColumns(s), "added String"))
		expectCount(t, ch, protoEventFilled(s, db, "added = concat('v2-', toString(id))"), 100, "%d of 100 rows hold their record's values; want 100")
	})
}

// createJSONSchema declares n a number although the records below give it
// whole values (the schema's Float64 wins over the values' Int64), and note
// nullable; extra is not declared and is typed by its values.
const createJSONSchema = `{"type":"object","properties":{"id":{"type":"integer"},"n":{"type":"number"},` +
	`"note":{"type":["null","string"]},"tags":{"type":"array","items":{"type":"string"}}}}`

// json-schema: the columns the schema declares, in its order and typed by
// it, then the fields it does not declare, typed by their values.
func TestCreateJSONSchemaTable(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
		rc, err := registry.New(config.SchemaRegistry{URLs: []string{testenv.Registry(t)}}, registry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		id, err := rc.Register(context.Background(), topic+"-value", sr.TypeJSON, createJSONSchema)
		if err != nil {
			t.Fatal(err)
		}
		var values [][]byte
		for i := range 100 {
			note := "null"
			if i%2 == 0 {
				note = fmt.Sprintf(`"n%d"`, i)
			}
			values = append(values, append(registry.AppendFrame(nil, id, false),
				fmt.Sprintf(`{"id":%d,"n":%d,"note":%s,"tags":["t%d"],"extra":%d}`, i, -i, note, i, i*2)...))
		}
		produceBytes(t, topic, values...)
		cfg := evolveConfigFormat(t, s, topic, db, "json-schema", createSchema)
		createAndLoad(t, s, ch, cfg, db, topic, 100, []string{"id Int64", "n Float64", "note Nullable(String)", "tags Array(String)", "extra Int64"})
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE n = -id AND tags = [concat('t', toString(id))] AND extra = id * 2"+
			" AND ((id % 2 = 0 AND note = concat('n', toString(id))) OR (id % 2 = 1 AND note IS NULL))", 100, "%d of 100 rows hold their record's values; want 100")
		if cols := columnsOf(t, ch, db); strings.Join(cols[:5], ", ") != "id Int64, n Float64, note Nullable(String), tags Array(String), extra Int64" {
			t.Errorf("columns in the order %v; want the schema's order, then extra", cols)
		}
	})
}

// engine: MergeTree, partition_by and settings reach the created table,
// which then has no Kafka columns.
func TestCreateMergeTreeOptions(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
		produceValues(t, topic, `{"id":1,"day":"d1"}`, `{"id":2,"day":"d2"}`)
		cfg := evolveConfigFormat(t, s, topic, db, "", `{create: if_missing, engine: MergeTree, order_by: "(day, id)", partition_by: day, settings: {index_granularity: 1024}}`)
		done, stop := startPipeline(t, cfg)
		waitCommitted(t, done, cfg.Kafka.Group, topic, 2)
		stopClean(t, done, stop)
		expectColumns(t, columnsOf(t, ch, db), []string{"id Int64", "day String"})
		var full string
		if err := ch.QueryRow(context.Background(), "SELECT engine_full FROM system.tables WHERE database = ? AND name = 't'", db).Scan(&full); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"MergeTree", "PARTITION BY day", "ORDER BY (day, id)", "index_granularity = 1024"} {
			if !strings.Contains(full, want) || strings.Contains(full, "Replacing") {
				t.Fatalf("engine %q lacks %q (or is a ReplacingMergeTree)", full, want)
			}
		}
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE day = concat('d', toString(id))", 2, "%d of 2 rows; want 2")
	})
}

// Two connectors starting at once on a missing table both create it (one
// of the CREATE TABLE IF NOT EXISTS wins, the other does nothing) and
// both resolve their route into the one table.
func TestCreateRace(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
		produceValues(t, topic, `{"id":1,"a":"x"}`, `{"id":2,"a":"y"}`)
		cfg := evolveConfigFormat(t, s, topic, db, "", createSchema)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				w, err := writer.Open(context.Background(), cfg.Name, cfg.ClickHouse)
				if err != nil {
					errs[i] = err
					return
				}
				defer w.Close()
				p, err := pipeline.New(context.Background(), cfg, zerolog.Nop(), w, pipeline.WithSampler(consumer.Sampler{Kafka: cfg.Kafka}))
				if err == nil && len(p.Catalog().Targets()) != 1 {
					err = fmt.Errorf("%d tables resolved", len(p.Catalog().Targets()))
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("connector %d of %d starting on the missing table: %v", i+1, len(errs), err)
			}
		}
		expectColumns(t, columnsOf(t, ch, db), append([]string{"id Int64", "a String"}, kafkaColumns(s)...))
	})
}

// A topic with no records yet has nothing to type the columns by: New
// waits, creates nothing, and creates the table once records arrive.
func TestCreateWaitsForRecords(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
		cfg := evolveConfigFormat(t, s, topic, db, "", createSchema)
		w, err := writer.Open(context.Background(), cfg.Name, cfg.ClickHouse)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		done := make(chan error, 1)
		go func() {
			_, err := pipeline.New(context.Background(), cfg, zerolog.Nop(), w, pipeline.WithSampler(consumer.Sampler{Kafka: cfg.Kafka}))
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("New returned (%v) before the topic had a record", err)
		case <-time.After(3 * time.Second):
		}
		if cols := columnsOf(t, ch, db); len(cols) != 0 {
			t.Fatalf("table created with %v before any record", cols)
		}
		produceValues(t, topic, `{"id":1,"v":"x"}`)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("New still waiting 30 s after the first record")
		}
		expectColumns(t, columnsOf(t, ch, db), append([]string{"id Int64", "v String"}, kafkaColumns(s)...))
	})
}

// On a cluster (clickhouse.cluster), the created table is a
// ReplicatedReplacingMergeTree t_local on every node, ON CLUSTER, with a
// Distributed t over it that the connector inserts into: every record is
// in the cluster once, and each shard's replicas hold the same rows.
func TestCreateOnCluster(t *testing.T) {
	c := testenv.Cluster(t)
	db := c.NewDatabase(t)
	topic := testenv.NewTopic(t, 1)
	var values []string
	for i := range 200 {
		values = append(values, fmt.Sprintf(`{"id":%d,"v":"v%d"}`, i, i))
	}
	produceValues(t, topic, values...)
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, cluster: %s, retry_initial: 50ms, retry_max: 300ms, settings: {insert_distributed_sync: 1}}
batch: {max_rows: 1000, max_wait: 300ms}
routes: [{topic: %q, table: t, schema: %s}]
http: {listen: ""}
`, testenv.UniqueName(t, "create-cluster"), testenv.Kafka(t)[0], topic, c.Shards[0][0].Addr, db, c.Name, topic, createSchema))
	done, stop := startPipeline(t, cfg)
	waitCommitted(t, done, cfg.Kafka.Group, topic, 200)
	stopClean(t, done, stop)

	ctx := context.Background()
	var sum uint64
	for _, shard := range c.Shards {
		var counts []uint64
		for _, n := range shard {
			conn := n.Conn(t)
			var engines []string
			rows, err := conn.Query(ctx, "SELECT concat(name, ' ', engine) FROM system.tables WHERE database = ? ORDER BY name", db)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var e string
				if err := rows.Scan(&e); err != nil {
					t.Fatal(err)
				}
				engines = append(engines, e)
			}
			rows.Close()
			if strings.Join(engines, ", ") != "t Distributed, t_local ReplicatedReplacingMergeTree" {
				t.Fatalf("node %s has tables %v; want t Distributed, t_local ReplicatedReplacingMergeTree", n.Name, engines)
			}
			testenv.Exec(t, conn, "SYSTEM SYNC REPLICA "+db+".t_local")
			counts = append(counts, uint64Of(t, conn, "SELECT count() FROM "+db+".t_local WHERE v = concat('v', toString(id))"))
		}
		if counts[0] == 0 || counts[0] != counts[1] {
			t.Errorf("a shard's replicas hold %v rows; want the same, non-zero", counts)
		}
		sum += counts[0]
	}
	if sum != 200 {
		t.Errorf("the shards hold %d rows in all; want 200", sum)
	}
}
