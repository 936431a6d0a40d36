//go:build integration

package pipeline_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
	"sink/internal/registry"
	"sink/internal/testenv"
)

// The adversarial suite: hostile schemas registered in the stack's
// registry (Apicurio) and hostile records produced to its Kafka, run
// through the connector as it runs in production (the real consumer,
// decoders and writer) on both ClickHouse servers. It asserts that the
// connector stays up (Run ends cleanly at the stop), that the Go heap stays
// within the buffer budget and a stated margin while it runs, that each
// hostile record lands in the dead letters (topic and table) with its
// cause, and that the good records around them land exactly.
//
// produceHostile and runHostile are the hook for more hostile routes
// (topic names under table templates, say): give them routes whose records
// and expectations are set, with a topic made beforehand when its name
// matters.

// hostileRecord is one record of a hostile route and what it must become.
type hostileRecord struct {
	value []byte
	// id is the row a good record lands as; a bad record has cause, a
	// text its dead-letter error must hold.
	id    int64
	cause string
}

// hostileRoute is a topic, the route and table its records go to, and
// its records in offset order.
type hostileRoute struct {
	topic   string // "" makes a topic of its own (produceHostile)
	table   string // the table's name; its columns below
	columns string // CREATE TABLE's column list, with an id UInt64 column
	route   string // more of the route's YAML, in its flow mapping ("format: avro")
	records []hostileRecord
}

func good(id int64, value []byte) hostileRecord { return hostileRecord{id: id, value: value} }

func bad(cause string, value []byte) hostileRecord {
	return hostileRecord{id: -1, cause: cause, value: value}
}

// hostileMargin is what the heap may hold beyond batch.buffer_memory while
// the connector runs: the fetched records (two fetches at most, sized
// from the budget), one record's decoding scratch (its rendered values and
// their parse, bounded by batch.max_bytes and the record's size), the
// Kafka and ClickHouse clients, and the garbage a collection has not yet
// freed (GOGC 100 lets the heap reach twice the live data). Measured: the
// heap grew by 37-53 MiB in all over five runs of both servers.
const hostileMargin = 64 << 20

// hostileBudget is the suite's batch.buffer_memory, and hostileRowBytes its
// batch.max_bytes: below Kafka's default largest record (1 MB), so that
// a record can be past it.
const (
	hostileBudget   = 8 << 20
	hostileRowBytes = 768 << 10
)

func TestHostileInput(t *testing.T) {
	routes := []*hostileRoute{hostileAvro(t), hostileProtobuf(t), hostileJSON(), hostileDebezium()}
	produceHostile(t, routes)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		runHostile(t, s, routes, "schema_registry: {urls: ["+fmt.Sprintf("%q", testenv.Registry(t))+"], subject_strategy: topic_record_name}\n")
	})
}

// produceHostile makes a topic for each route without one and produces
// its records there (call it once, outside EachServer: the topics serve
// every server).
func produceHostile(t *testing.T, routes []*hostileRoute) {
	for _, r := range routes {
		if r.topic == "" {
			r.topic = testenv.NewTopic(t, 1)
			produceBytes(t, r.topic, hostileValues(r)...)
		}
	}
}

// runHostile runs one connector over every route (produceHostile made
// their topics) on s until every offset is committed, stops it, and
// checks the rows, the dead letters and the heap. extra is more
// top-level YAML.
func runHostile(t *testing.T, s testenv.Server, routes []*hostileRoute, extra string) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	var topics, routeYAML []string
	for _, r := range routes {
		testenv.Exec(t, ch, fmt.Sprintf("CREATE TABLE %s.%s (%s) ENGINE = MergeTree ORDER BY id", db, r.table, r.columns))
		topics = append(topics, fmt.Sprintf("%q", r.topic))
		routeYAML = append(routeYAML, fmt.Sprintf("  - {topic: %q, table: %s, %s}", r.topic, r.table, r.route))
	}
	dlq := testenv.NewTopic(t, 1)
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%s], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 50ms, retry_max: 300ms}
batch: {max_rows: 100, max_wait: 200ms, max_bytes: %d, buffer_memory: %d}
routes:
%s
errors: {tolerance: all, dlq_topic: %q, dlq_table: dead}
shutdown_timeout: 5s
http: {listen: ""}
%s`, testenv.UniqueName(t, "hostile"), testenv.Kafka(t)[0], strings.Join(topics, ", "), s.Addr, db,
		hostileRowBytes, hostileBudget, strings.Join(routeYAML, "\n"), dlq, extra))

	peak, baseline := hostileRun(t, cfg, routes)
	if grew := peak - baseline; grew > hostileBudget+hostileMargin {
		t.Errorf("the heap grew by %d MiB while the connector ran (peak %d MiB), more than batch.buffer_memory (%d MiB) and the margin (%d MiB)",
			grew>>20, peak>>20, hostileBudget>>20, hostileMargin>>20)
	} else {
		t.Logf("heap: %d MiB before, peak %d MiB (grew %d MiB; budget %d MiB + margin %d MiB)", baseline>>20, peak>>20, grew>>20, hostileBudget>>20, hostileMargin>>20)
	}
	for _, r := range routes {
		var want []uint64
		for _, rec := range r.records {
			if rec.cause == "" {
				want = append(want, uint64(rec.id))
			}
		}
		if got := ids(t, ch, db+"."+r.table); !slices.Equal(got, want) {
			t.Errorf("%s: ids %v, want %v", r.table, got, want)
		}
	}
	checkHostileDLQTopic(t, dlq, routes)
	checkHostileDLQTable(t, ch, db, routes)
}

func hostileValues(r *hostileRoute) [][]byte {
	out := make([][]byte, len(r.records))
	for i, rec := range r.records {
		out[i] = rec.value
	}
	return out
}

// hostileRun runs the connector until every route's topic is committed to
// its end, then stops it like SIGTERM (Run must end without an error), and
// returns the highest heap seen while it ran and the heap before.
func hostileRun(t *testing.T, cfg *config.Config, routes []*hostileRoute) (peak, baseline uint64) {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline = ms.HeapAlloc
	var top atomic.Uint64
	stopSampling := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > top.Load() {
				top.Store(ms.HeapAlloc)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	done, stop := startPipeline(t, cfg)
	deadline := time.Now().Add(2 * time.Minute)
	for _, r := range routes {
		for committed(t, cfg.Kafka.Group, r.topic, 0) < int64(len(r.records)) {
			select {
			case err := <-done:
				t.Fatalf("the connector stopped before committing %s: %v", r.topic, err)
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: offset %d not committed after 2 minutes (at %d)", r.topic, len(r.records), committed(t, cfg.Kafka.Group, r.topic, 0))
			}
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	close(stopSampling)
	wg.Wait()
	return top.Load(), baseline
}

// checkHostileDLQTopic: each bad record is in the dead-letter topic once,
// with its coordinates and its cause in the headers.
func checkHostileDLQTopic(t *testing.T, dlq string, routes []*hostileRoute) {
	t.Helper()
	got := map[string]string{} // "topic@offset" -> sink.error
	for _, rec := range dlqRecords(t, dlq) {
		topic, _ := header(rec, "sink.source.topic")
		off, _ := header(rec, "sink.source.offset")
		msg, _ := header(rec, "sink.error")
		got[topic+"@"+off] = msg
	}
	for _, r := range routes {
		for off, rec := range r.records {
			key := fmt.Sprintf("%s@%d", r.topic, off)
			msg, ok := got[key]
			switch {
			case rec.cause == "" && ok:
				t.Errorf("%s: a good record in the dead-letter topic: %s", key, msg)
			case rec.cause != "" && !strings.Contains(msg, rec.cause):
				t.Errorf("%s: dead-letter topic error %q, want %q in it", key, msg, rec.cause)
			}
			delete(got, key)
		}
	}
	for k, msg := range got {
		t.Errorf("dead-letter topic has %s, which no route produced: %s", k, msg)
	}
}

// checkHostileDLQTable: each bad record is a row of the dead-letter table,
// with the table it was meant for and its cause.
func checkHostileDLQTable(t *testing.T, ch driver.Conn, db string, routes []*hostileRoute) {
	t.Helper()
	rows, err := ch.Query(context.Background(), fmt.Sprintf("SELECT _topic, _offset, target_table, error, error_class FROM %s.dead", db))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type dead struct{ table, err, class string }
	got := map[string]dead{}
	for rows.Next() {
		var topic, table, msg, class string
		var off int64
		if err := rows.Scan(&topic, &off, &table, &msg, &class); err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprintf("%s@%d", topic, off)] = dead{table, msg, class}
	}
	for _, r := range routes {
		for off, rec := range r.records {
			key := fmt.Sprintf("%s@%d", r.topic, off)
			d, ok := got[key]
			switch {
			case rec.cause == "" && ok:
				t.Errorf("%s: a good record in the dead-letter table: %+v", key, d)
			case rec.cause != "" && (!strings.Contains(d.err, rec.cause) || d.table != db+"."+r.table || d.class == ""):
				t.Errorf("%s: dead-letter row %+v, want table %s.%s and %q in the error", key, d, db, r.table, rec.cause)
			}
			delete(got, key)
		}
	}
	for k, d := range got {
		t.Errorf("dead-letter table has %s, which no route produced: %+v", k, d)
	}
}

// avroVarint is Avro's zigzag varint of n.
func avroVarint(n int64) []byte { return binary.AppendVarint(nil, n) }

// registerUnder registers schema (of typ) under subject in the stack's
// registry and returns its id.
func registerUnder(t *testing.T, subject string, typ sr.SchemaType, schema string) int {
	t.Helper()
	rc, err := registry.New(config.SchemaRegistry{URLs: []string{testenv.Registry(t)}}, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := rc.Register(context.Background(), subject, typ, schema)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// hostileAvro: Avro schemas registered under the topic's subjects
// (TopicRecordNameStrategy: TOPIC-<name>) and one under another topic's.
func hostileAvro(t *testing.T) *hostileRoute {
	r := &hostileRoute{table: "av", columns: "id UInt64, a String", route: "format: avro", topic: testenv.NewTopic(t, 1)}
	reg := func(name, schema string) int {
		return registerUnder(t, r.topic+"-"+name, sr.TypeAvro, schema)
	}
	record := func(fields string) string {
		return `{"type":"record","name":"R","namespace":"hostile","fields":[{"name":"id","type":"long"},` + fields + `]}`
	}
	frame := func(id int, payload ...[]byte) []byte {
		b := registry.AppendFrame(nil, id, false)
		for _, p := range payload {
			b = append(b, p...)
		}
		return b
	}
	str := func(s string) []byte { return append(avroVarint(int64(len(s))), s...) }

	goodID := reg("hostile.R", record(`{"name":"a","type":"string"}`))
	fixedID := reg("hostile.Fixed", record(`{"name":"a","type":{"type":"fixed","name":"Huge","size":2000000000}}`))
	var deep strings.Builder
	for range 200 {
		deep.WriteString(`{"type":"array","items":`)
	}
	deep.WriteString(`"long"` + strings.Repeat("}", 200))
	deepID := reg("hostile.Deep", record(`{"name":"a","type":`+deep.String()+`}`))
	loopID := reg("hostile.Loop", `{"type":"record","name":"Loop","namespace":"hostile","fields":[{"name":"id","type":"long"},{"name":"next","type":"hostile.Loop"}]}`)
	symbols := make([]string, 20_000)
	for i := range symbols {
		symbols[i] = fmt.Sprintf("%q", fmt.Sprintf("S%05d", i))
	}
	enumID := reg("hostile.Enum", record(`{"name":"a","type":{"type":"enum","name":"Many","symbols":[`+strings.Join(symbols, ",")+`]}}`))
	var branches []string
	for i := range 500 {
		branches = append(branches, fmt.Sprintf(`{"type":"record","name":"B%03d","fields":[{"name":"v","type":"int"}]}`, i))
	}
	unionID := reg("hostile.Union", record(`{"name":"u","type":[`+strings.Join(branches, ",")+`]},{"name":"a","type":"string"}`))
	nullsID := reg("hostile.Nulls", record(`{"name":"a","type":{"type":"array","items":"null"}}`))
	decimalID := reg("hostile.Decimal", record(`{"name":"a","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}}`))
	foreignID := registerUnder(t, testenv.UniqueName(t, "other")+"-hostile.R", sr.TypeAvro, record(`{"name":"a","type":"string"},{"name":"x","type":"int","default":0}`))

	var nulls []byte
	for range 3 {
		nulls = append(nulls, avroVarint(50_000)...)
	}
	nulls = append(nulls, 0)
	bigDecimal := append(avroVarint(600<<10), make([]byte, 600<<10)...)
	bigDecimal[len(avroVarint(600<<10))] = 0x7f
	r.records = []hostileRecord{
		good(0, frame(goodID, avroVarint(0), str("zero"))),
		bad("fixed of 2000000000 bytes in a 21-byte record", frame(fixedID, avroVarint(1), make([]byte, 20))),
		bad("the schema nests deeper than 128 levels", frame(deepID, avroVarint(2), []byte{0})),
		bad("record hostile.Loop always holds another record of its kind", frame(loopID, avroVarint(3))),
		bad("enum index 1000000000 of 20000 symbols", frame(enumID, avroVarint(4), avroVarint(1_000_000_000))),
		good(5, frame(enumID, avroVarint(5), avroVarint(19_999))),
		bad("union branch 5000 of 500", frame(unionID, avroVarint(6), avroVarint(5000))),
		bad("more than 65536 values that take no bytes of the record", frame(nullsID, avroVarint(7), nulls)),
		bad("string or bytes length 1000000000000 in a 7-byte record", frame(goodID, avroVarint(8), avroVarint(1_000_000_000_000))),
		bad("decimal of 614400 bytes, more than 65536", frame(decimalID, avroVarint(9), bigDecimal)),
		bad(fmt.Sprintf(`schema id %d is registered under subject "`, foreignID), frame(foreignID, avroVarint(10), str("x"), avroVarint(1))),
		good(11, frame(goodID, avroVarint(11), str("eleven"))),
	}
	produceBytes(t, r.topic, hostileValues(r)...)
	return r
}

// hostileProtobuf: a message whose empty entries each write 300 absent
// fields at their defaults, and one nested past the depth bound.
func hostileProtobuf(t *testing.T) *hostileRoute {
	r := &hostileRoute{table: "pb", columns: "id UInt64, items String, child String", route: "format: protobuf", topic: testenv.NewTopic(t, 1)}
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\npackage hostile;\nmessage Outer {\n  repeated Wide items = 1;\n  int64 id = 2;\n  Outer child = 3;\n}\nmessage Wide {")
	for i := range 300 {
		fmt.Fprintf(&b, " int32 f%03d = %d;", i, i+1)
	}
	b.WriteString(" }\n")
	id := registerUnder(t, r.topic+"-hostile.Outer", sr.TypeProtobuf, b.String())
	frame := func(payload []byte) []byte { return append(registry.AppendFrame(nil, id, true, 0), payload...) }
	withID := func(n int64, rest []byte) []byte {
		return append(binary.AppendUvarint([]byte{0x10}, uint64(n)), rest...)
	}
	var empties []byte
	for range 20_000 {
		empties = append(empties, 0x0a, 0x00)
	}
	chain := withID(2, nil)
	for range 150 {
		chain = append(binary.AppendUvarint([]byte{0x1a}, uint64(len(chain))), chain...)
	}
	r.records = []hostileRecord{
		good(0, frame(withID(0, []byte{0x0a, 0x02, 0x08, 0x07}))),
		bad("more than 65536 values that take no bytes of the record", frame(withID(1, empties))),
		bad("Protobuf messages nest deeper than 100", frame(withID(2, chain))),
		good(3, frame(withID(3, nil))),
	}
	produceBytes(t, r.topic, hostileValues(r)...)
	return r
}

// hostileJSON: a record nested 10,000 deep, one with 50,000 fields no
// column reads, one with a 500 KB field name, and one whose row is past
// batch.max_bytes.
func hostileJSON() *hostileRoute {
	var many strings.Builder
	many.WriteString(`{"id":2,"s":"many"`)
	for i := range 50_000 {
		fmt.Fprintf(&many, `,"f%d":%d`, i, i)
	}
	many.WriteString("}")
	return &hostileRoute{table: "js", columns: "id UInt64, s String", route: "format: json", records: []hostileRecord{
		good(0, []byte(`{"id":0,"s":"zero"}`)),
		bad("nested deeper than 300 levels", []byte(`{"id":1,"s":`+strings.Repeat("[", 10_000)+strings.Repeat("]", 10_000)+`}`)),
		good(2, []byte(many.String())),
		good(3, []byte(`{"id":3,"s":"long name","`+strings.Repeat("n", 500_000)+`":1}`)),
		bad(fmt.Sprintf("the row would hold more than %d bytes decoded (batch.max_bytes)", hostileRowBytes),
			[]byte(`{"id":4,"s":"`+strings.Repeat("w", 900_000)+`"}`)),
		good(5, []byte(`{"id":5,"s":"five"}`)),
	}}
}

// hostileDebezium: decimals of 560 KiB and of more digits than the
// column holds, and an envelope nested past the depth bound.
func hostileDebezium() *hostileRoute {
	event := func(id int, total string) []byte {
		return fmt.Appendf(nil, `{"op":"c","after":{"id":%d,"total":%s},"source":{"lsn":%d},"ts_ms":1}`, id, total, 100+id)
	}
	raw := make([]byte, 560<<10)
	raw[0] = 0x7f
	huge := base64.StdEncoding.EncodeToString(raw)
	return &hostileRoute{table: "dz", columns: "id UInt64, total Decimal(12, 2), _version UInt64, _deleted UInt8", route: "format: debezium-json", records: []hostileRecord{
		good(0, event(0, `"AeI="`)),
		bad("decimal of 573440 bytes, more than 65536", event(1, `"`+huge+`"`)),
		bad("decimal with more digits than Decimal(12, 2) holds", event(2, `"`+huge[:2800]+`"`)),
		bad("it exceeds 300", event(3, strings.Repeat("[", 10_000)+strings.Repeat("]", 10_000))),
		good(4, event(4, `"AeI="`)),
	}}
}
