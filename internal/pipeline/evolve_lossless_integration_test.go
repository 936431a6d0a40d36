//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"sink/config"
	"sink/internal/registry"
	"sink/internal/testenv"
	"sink/tools/eventfmt"
)

// No value is lost when schema.evolve: add_columns adds a column, whatever
// the timing: records decoded while the ALTER runs wait for it. Each test
// runs on both servers and for the four formats whose records can gain
// fields (json, json-schema, avro, protobuf). Version 1 of a record is
// {id}; version 2 adds city (a string) and n (an integer): the table
// starts as (id Int64) and must end with every version-2 record's city =
// 'c<id>' and n = id, every version-1 record's city = '' and n = 0, each
// record once per connector.

// lossFormat makes the records of one route format.
type lossFormat struct {
	name string // the route's format ("" : json)
	// versions registers what the format needs for topic and returns a
	// function making record id of version 1 or 2.
	versions func(t *testing.T, topic string) func(id int, v2 bool) []byte
}

var lossFormats = []lossFormat{
	{"", func(*testing.T, string) func(int, bool) []byte { return lossJSON(nil) }},
	{"json-schema", func(t *testing.T, topic string) func(int, bool) []byte {
		rc := lossRegistry(t)
		id, err := rc.Register(context.Background(), topic+"-value", sr.TypeJSON, eventfmt.JSONSchemaText)
		if err != nil {
			t.Fatal(err)
		}
		return lossJSON(registry.AppendFrame(nil, id, false))
	}},
	{"avro", func(t *testing.T, topic string) func(int, bool) []byte {
		const v1 = `{"type":"record","name":"Row","namespace":"sink.lossless","fields":[{"name":"id","type":"long"}]}`
		const v2 = `{"type":"record","name":"Row","namespace":"sink.lossless","fields":[{"name":"id","type":"long"},
			{"name":"city","type":"string","default":""},{"name":"n","type":"long","default":0}]}`
		id1, id2 := registerAvro(t, topic+"-value", v1), registerAvro(t, topic+"-value", v2)
		return func(id int, version2 bool) []byte {
			if !version2 {
				return avroValue(t, id1, v1, map[string]any{"id": int64(id)})
			}
			return avroValue(t, id2, v2, map[string]any{"id": int64(id), "city": fmt.Sprintf("c%d", id), "n": int64(id)})
		}
	}},
	{"protobuf", func(t *testing.T, topic string) func(int, bool) []byte {
		const text = "syntax = \"proto3\";\npackage sink.lossless;\nmessage Row {\n  int64 id = 1;%s\n}\n"
		const added = "\n  string city = 2;\n  int64 n = 3;"
		rc := lossRegistry(t)
		ids := [2]int{}
		descs := [2]*dynamicpb.Message{}
		for i, extra := range []string{"", added} {
			id, err := rc.Register(context.Background(), topic+"-value", sr.TypeProtobuf, fmt.Sprintf(text, extra))
			if err != nil {
				t.Fatal(err)
			}
			md, err := eventfmt.CompileProto("row.proto", fmt.Sprintf(text, extra), nil, "sink.lossless.Row")
			if err != nil {
				t.Fatal(err)
			}
			ids[i], descs[i] = id, dynamicpb.NewMessage(md)
		}
		var mu sync.Mutex // the messages are reused; producers may call from several goroutines
		return func(id int, version2 bool) []byte {
			mu.Lock()
			defer mu.Unlock()
			v, js := 0, fmt.Sprintf(`{"id":"%d"}`, id)
			if version2 {
				v, js = 1, fmt.Sprintf(`{"id":"%d","city":"c%d","n":"%d"}`, id, id, id)
			}
			m := descs[v]
			proto.Reset(m)
			if err := protojson.Unmarshal([]byte(js), m); err != nil {
				t.Fatal(err)
			}
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return append(registry.AppendFrame(nil, ids[v], true, 0), b...)
		}
	}},
}

func (f lossFormat) label() string {
	if f.name == "" {
		return "json"
	}
	return f.name
}

func lossRegistry(t *testing.T) *registry.Client {
	t.Helper()
	rc, err := registry.New(config.SchemaRegistry{URLs: []string{testenv.Registry(t)}}, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// lossJSON makes JSON records, each after frame (nil: unframed).
func lossJSON(frame []byte) func(int, bool) []byte {
	return func(id int, version2 bool) []byte {
		v := fmt.Sprintf(`{"id":%d}`, id)
		if version2 {
			v = fmt.Sprintf(`{"id":%d,"city":"c%d","n":%d}`, id, id, id)
		}
		return append(append([]byte(nil), frame...), v...)
	}
}

// eachLossFormat runs fn on both servers for every format.
func eachLossFormat(t *testing.T, fn func(t *testing.T, s testenv.Server, f lossFormat)) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		for _, f := range lossFormats {
			t.Run(f.label(), func(t *testing.T) { fn(t, s, f) })
		}
	})
}

// lossConfig is a connector reading topic into each of tables of db with
// add_columns (fanout: all when there are several), in format f.
func lossConfig(t *testing.T, s testenv.Server, topic, db string, f lossFormat, tables ...string) *config.Config {
	var routes []string
	for _, table := range tables {
		r := fmt.Sprintf("{topic: %q, table: %s, schema: {evolve: add_columns}", topic, table)
		if f.name != "" {
			r += ", format: " + f.name
		}
		routes = append(routes, r+"}")
	}
	extra := ""
	if f.name != "" {
		extra = fmt.Sprintf("schema_registry: {urls: [%q]}\n", testenv.Registry(t))
	}
	if len(tables) > 1 {
		extra += "fanout: all\n"
	}
	return newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 50ms, retry_max: 300ms, schema_refresh: 0s}
batch: {max_rows: 1000, max_wait: 300ms}
routes: [%s]
http: {listen: ""}
%s`, testenv.UniqueName(t, "lossless"), testenv.Kafka(t)[0], topic, s.Addr, db, strings.Join(routes, ", "), extra))
}

// produceSpread produces records ids [from, to) to topic, record id to
// partition id % partitions, version 2 from id firstV2 on; pace, when not
// zero, is the pause after every 25 records.
func produceSpread(t *testing.T, topic string, partitions, from, to, firstV2 int, pace time.Duration, record func(int, bool) []byte) {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	step := to - from
	if pace > 0 {
		step = 25
	}
	for lo := from; lo < to; lo += step {
		var recs []*kgo.Record
		for id := lo; id < min(lo+step, to); id++ {
			recs = append(recs, &kgo.Record{Value: record(id, id >= firstV2), Partition: int32(id % partitions)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(pace)
	}
}

// checkLossless checks every value of db.table: copies rows per id of
// [0, total), version 2 (city = 'c<id>', n = id) from firstV2 on, version
// 1 (city = ”, n = 0) before, and city String, n Int64 as the new columns
// after id Int64 and base.
func checkLossless(t *testing.T, ch driver.Conn, db, table string, total, firstV2, copies int, base ...string) {
	t.Helper()
	cols := columnsOfTable(t, ch, db, table)
	expectColumns(t, cols, append([]string{"id Int64", "city String", "n Int64"}, base...))
	q := func(where string) string { return "SELECT count() FROM " + db + "." + table + " WHERE " + where }
	name := db + "." + table
	expectCount(t, ch, "SELECT count() FROM "+name, uint64(total*copies), name+": %d rows; want "+fmt.Sprint(total*copies))
	expectCount(t, ch, "SELECT uniqExact(id) FROM "+name, uint64(total), name+": %d distinct ids; want "+fmt.Sprint(total))
	expectCount(t, ch, fmt.Sprintf("SELECT count() FROM (SELECT id, count() AS c FROM %s GROUP BY id HAVING c != %d)", name, copies), 0,
		name+": %d ids not present exactly "+fmt.Sprint(copies)+" times")
	expectCount(t, ch, q(fmt.Sprintf("id >= %d AND id < %d AND city = concat('c', toString(id)) AND n = id", firstV2, total)), uint64((total-firstV2)*copies),
		name+": %d version-2 rows hold their city and n; want "+fmt.Sprint((total-firstV2)*copies))
	expectCount(t, ch, q(fmt.Sprintf("id < %d AND city = '' AND n = 0", firstV2)), uint64(firstV2*copies),
		name+": %d version-1 rows have the defaults; want "+fmt.Sprint(firstV2*copies))
}

// lossScenario is one way of meeting the new fields: total records on a
// two-partition topic, version 2 from id firstV2 on, produced before the
// connectors start (backlog) or while they run (paced, pace after every
// 25 records), read by connectors connectors (each its own group) into
// tables (fan-out when several). The tests built on it, and
// TestEvolveExactlyOnceKill9LosesNoValue, run in parallel with the
// package's other parallel tests: each has its own topics, tables, groups
// and registry subjects, and checks values, not times.
type lossScenario struct {
	total, firstV2 int
	backlog        bool
	pace           time.Duration
	connectors     int
	tables         []string
}

// run runs the scenario for every format on both servers and checks every
// value of every table.
func (sc lossScenario) run(t *testing.T) {
	eachLossFormat(t, func(t *testing.T, s testenv.Server, f lossFormat) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 2)
		for _, table := range sc.tables {
			createTable(t, ch, db, table, "id Int64")
		}
		record := f.versions(t, topic)
		if sc.backlog {
			produceSpread(t, topic, 2, 0, sc.total, sc.firstV2, 0, record)
		}
		var dones []<-chan error
		var stops []context.CancelFunc
		for range sc.connectors {
			done, stop := startPipeline(t, lossConfig(t, s, topic, db, f, sc.tables...))
			dones, stops = append(dones, done), append(stops, stop)
		}
		if !sc.backlog {
			produceSpread(t, topic, 2, 0, sc.total, sc.firstV2, sc.pace, record)
		}
		for _, table := range sc.tables {
			waitRows(t, ch, db+"."+table, uint64(sc.total*sc.connectors), dones...)
		}
		for i := range dones {
			stopClean(t, dones[i], stops[i])
		}
		for _, table := range sc.tables {
			checkLossless(t, ch, db, table, sc.total, sc.firstV2, sc.connectors)
		}
	})
}

// A backlog of 6,000 records on two partitions whose first record with
// the new fields is the 1,001st: the connector starts on the whole backlog,
// adds city and n, and every one of the 5,000 later records keeps its
// values.
func TestEvolveBacklogLosesNoValue(t *testing.T) {
	t.Parallel()
	lossScenario{total: 6000, firstV2: 1000, backlog: true, connectors: 1, tables: []string{"t"}}.run(t)
}

// A live stream, paced, that gains the fields mid-run: the records that
// arrive while the ALTER runs keep their values too.
func TestEvolveLiveStreamLosesNoValue(t *testing.T) {
	t.Parallel()
	lossScenario{total: 1500, firstV2: 500, pace: 20 * time.Millisecond, connectors: 1, tables: []string{"t"}}.run(t)
}

// Two connectors (two groups: each reads every record) race to add the
// same columns to one table: one ALTER wins, the other finds the column,
// both keep every value.
func TestEvolveRaceLosesNoValue(t *testing.T) {
	t.Parallel()
	lossScenario{total: 1000, firstV2: 300, pace: 10 * time.Millisecond, connectors: 2, tables: []string{"t"}}.run(t)
}

// Fan-out into two tables that both evolve: each gets its own columns
// and every value, and a record waits until both tables have them.
func TestEvolveFanoutLosesNoValue(t *testing.T) {
	t.Parallel()
	lossScenario{total: 3000, firstV2: 1000, backlog: true, connectors: 1, tables: []string{"t", "u"}}.run(t)
}

// Exactly-once delivery (26.9) with add_columns, killed with SIGKILL while
// its INSERTs are slow and batches are recorded but not committed, then
// restarted: the pending batches are rebuilt from Kafka and replayed with
// their tokens (dropped where they had landed), the held records' batches
// among them, and the table ends with each record exactly once and every
// value. The backlog's first new field is the 1,001st record of 6,000.
func TestEvolveExactlyOnceKill9LosesNoValue(t *testing.T) {
	t.Parallel()
	s := testenv.Server26(t)
	bin := filepath.Join(t.TempDir(), "sink")
	if out, err := exec.Command("go", "build", "-o", bin, "sink/cmd/sink").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 2)
	testenv.Exec(t, ch,
		"CREATE TABLE "+db+".t (id Int64, _topic LowCardinality(String), _partition Int32, _offset Int64) ENGINE = MergeTree ORDER BY (_topic, _partition, _offset) SETTINGS non_replicated_deduplication_window = 1000",
		// Slow INSERTs (0.4 ms per row) leave batches recorded and not
		// yet committed when the process is killed.
		"CREATE TABLE "+db+".slow_sink (n UInt8) ENGINE = Null",
		"CREATE MATERIALIZED VIEW "+db+".slow TO "+db+".slow_sink AS SELECT sleepEachRow(0.0004) AS n FROM "+db+".t")
	produceSpread(t, topic, 2, 0, 6000, 1000, 0, lossJSON(nil))
	group := testenv.UniqueName(t, "eo-evolve")
	cfgPath := filepath.Join(t.TempDir(), "sink.yaml")
	yaml := fmt.Sprintf(`name: %s
delivery: exactly_once
kafka: {brokers: [%s], topics: [%s], fetch_min_bytes: 1, fetch_max_wait: 100ms, fetch_max_bytes: 64KiB, max_partition_fetch_bytes: 32KiB, session_timeout: 6s}
clickhouse: {addrs: [%s], database: %s, schema_refresh: 0s, max_in_flight: 2}
batch: {max_rows: 400, max_wait: 200ms}
routes: [{topic: %s, table: t, schema: {evolve: add_columns}}]
http: {listen: ""}
log: {level: warn}
`, group, testenv.Kafka(t)[0], topic, s.Addr, db, topic)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	child := startSink(t, bin, cfgPath)
	deadline := time.Now().Add(2 * time.Minute)
	// Kill past the first new field, with something committed.
	for countRows(t, ch, db+".t") < 2500 || len(fetchCommitted(t, group, topic)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows, committed %v after 2 minutes", countRows(t, ch, db+".t"), fetchCommitted(t, group, topic))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killedAt := countRows(t, ch, db+".t")
	t.Logf("killed with %d rows in the table, committed %v", killedAt, fetchCommitted(t, group, topic))
	if killedAt >= 6000 {
		t.Fatalf("the table had all %d rows before the kill: the replay is not exercised", killedAt)
	}

	child = startSink(t, bin, cfgPath)
	end := endOffsets(t, topic)
	deadline = time.Now().Add(2 * time.Minute)
	for !equalOffsets(fetchCommitted(t, group, topic), end) {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: committed %v, want %v", fetchCommitted(t, group, topic), end)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("sink run after SIGTERM: %v", err)
	}
	expectCount(t, ch, "SELECT uniqExact(_topic, _partition, _offset) FROM "+db+".t", 6000, "%d distinct offsets; want 6000")
	checkLossless(t, ch, db, "t", 6000, 1000, 1, "_topic LowCardinality(String)", "_partition Int32", "_offset Int64")
}
