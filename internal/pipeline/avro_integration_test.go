//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/shopspring/decimal"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
	"sink/internal/registry"
	"sink/internal/testenv"
)

// Integration tests of the avro format on the real stack: Apicurio's
// Confluent-compatible API as the schema registry, Kafka, and both
// ClickHouse servers.

// registerAvro registers schema under a subject unique to the test and
// returns its id.
func registerAvro(t *testing.T, subject, schema string) int {
	t.Helper()
	rc, err := registry.New(config.SchemaRegistry{URLs: []string{testenv.Registry(t)}}, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := rc.Register(context.Background(), subject, sr.TypeAvro, schema)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// avroValue encodes v with schema and frames it with id.
func avroValue(t *testing.T, id int, schema string, v any) []byte {
	t.Helper()
	b, err := avro.Marshal(avro.MustParse(schema), v)
	if err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	return append(registry.AppendFrame(nil, id, false), b...)
}

// produceRecords produces recs to topic partition 0, in order.
func produceRecords(t *testing.T, topic string, recs ...*kgo.Record) {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// queryRows returns each row of query as its columns' text joined by "|".
func queryRows(t *testing.T, s testenv.Server, query string) []string {
	t.Helper()
	rows, err := s.Conn(t).Query(context.Background(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	n := len(rows.Columns())
	for rows.Next() {
		vals := make([]string, n)
		ptrs := make([]any, n)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join(vals, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// avroMappingSchema has a field for every mapping the avro format offers.
const avroMappingSchema = `{"type":"record","name":"Event","namespace":"sink.test","fields":[
	{"name":"id","type":"long"},
	{"name":"flag","type":"boolean"},
	{"name":"i32","type":"int"},
	{"name":"f64","type":"double"},
	{"name":"s","type":"string"},
	{"name":"raw","type":"bytes"},
	{"name":"fx","type":{"type":"fixed","name":"FX","size":3}},
	{"name":"color","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
	{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":4}},
	{"name":"big","type":{"type":"fixed","name":"Big","size":16,"logicalType":"decimal","precision":38,"scale":6}},
	{"name":"uid","type":{"type":"string","logicalType":"uuid"}},
	{"name":"day","type":{"type":"int","logicalType":"date"}},
	{"name":"tod","type":{"type":"int","logicalType":"time-millis"}},
	{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"ts_us","type":{"type":"long","logicalType":"timestamp-micros"}},
	{"name":"ts_ns","type":{"type":"long","logicalType":"timestamp-nanos"}},
	{"name":"local_ms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
	{"name":"dur","type":{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}},
	{"name":"note","type":["null","string"],"default":null},
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"attrs","type":{"type":"map","values":"long"}},
	{"name":"choice","type":["null","string","long"]},
	{"name":"customer","type":["null",{"type":"record","name":"Customer","fields":[
		{"name":"name","type":"string"},
		{"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"},{"name":"zip","type":"int"}]}}]}]}]}`

// TestAvroMappings produces records of every Avro mapping through the real
// registry and checks what each server stores: the types both servers have
// on both, DateTime64, Map, Tuple and Variant on 26.9 only.
func TestAvroMappings(t *testing.T) {
	brokers := testenv.Kafka(t)
	subject := testenv.UniqueName(t, "avro-map") + "-value"
	id := registerAvro(t, subject, avroMappingSchema)
	keyID := registerAvro(t, subject[:len(subject)-len("-value")]+"-key", `"string"`)
	topic := testenv.NewTopic(t, 1)
	ts := time.Date(2024, 5, 17, 12, 34, 56, 123456789, time.UTC)
	full := map[string]any{
		"id": int64(1), "flag": true, "i32": int32(-7), "f64": 2.5, "s": "héllo", "raw": []byte("ab"), "fx": [3]byte{'x', 'y', 'z'},
		"color": "GREEN", "amount": big.NewRat(-123456789, 10000),
		"big": new(big.Rat).SetFrac(new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil), big.NewInt(1_000_000)),
		"uid": "6f2b8a52-4d7e-4a3c-9f1e-0c2d3b4a5e6f", "day": time.Date(2024, 5, 17, 0, 0, 0, 0, time.UTC),
		"tod": 90 * time.Minute, "ts": ts, "ts_us": ts, "ts_ns": ts.UnixNano(), "local_ms": ts,
		"dur": avro.LogicalDuration{Months: 1, Days: 2, Milliseconds: 3}, "note": "n",
		"tags": []string{"a", "b"}, "attrs": map[string]int64{"k": 9}, "choice": map[string]any{"long": int64(42)},
		"customer": map[string]any{"sink.test.Customer": map[string]any{"name": "Ann", "address": map[string]any{"city": "Oslo", "zip": 150}}},
	}
	empty := map[string]any{
		"id": int64(2), "flag": false, "i32": int32(0), "f64": 0.0, "s": "", "raw": []byte{}, "fx": [3]byte{'a', 'b', 'c'},
		"color": "RED", "amount": big.NewRat(0, 1), "big": big.NewRat(1, 1_000_000),
		"uid": "00000000-0000-0000-0000-000000000000", "day": time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		"tod": time.Duration(0), "ts": time.Unix(0, 0).UTC(), "ts_us": time.Unix(0, 0).UTC(), "ts_ns": int64(0), "local_ms": time.Unix(0, 0).UTC(),
		"dur": avro.LogicalDuration{}, "note": nil, "tags": []string{}, "attrs": map[string]int64{}, "choice": nil, "customer": nil,
	}
	key := append(registry.AppendFrame(nil, keyID, false), 0x06, 'k', '-', '1') // Avro string "k-1"
	produceRecords(t, topic,
		&kgo.Record{Key: key, Value: avroValue(t, id, avroMappingSchema, full)},
		&kgo.Record{Key: []byte("plain"), Value: avroValue(t, id, avroMappingSchema, empty)})

	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		cols := `id UInt64, flag UInt8, i32 Int32, f64 Float64, s String, raw String, fx FixedString(3),
			color Enum8('RED' = 1, 'GREEN' = 2), amount Decimal(18, 4), big Decimal(38, 6), uid UUID, day Date, tod UInt32, ts DateTime,
			note Nullable(String), tags Array(String), customer_name Nullable(String), city String, zip UInt32, k String, dur_text String`
		modern := s.AtLeast(23, 0)
		if modern {
			cols += `, ts_us DateTime64(6), ts_ns DateTime64(9), local_ms DateTime64(3, 'Asia/Tokyo'), attrs Map(String, Int64),
				choice Variant(String, Int64), dur Tuple(months UInt32, days UInt32, milliseconds UInt32), customer String, cj JSON`
		}
		if err := ch.Exec(context.Background(), "CREATE TABLE "+db+".m ("+cols+") ENGINE = MergeTree ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s}
schema_registry: {urls: [%q]}
batch: {max_rows: 100, max_wait: 200ms}
routes:
  - topic: %q
    table: m
    format: avro
    columns: {customer_name: customer.name, city: customer.address.city, zip: customer.address.zip, k: $key, dur_text: dur%s}
errors: {tolerance: none}
http: {listen: ""}
`, testenv.UniqueName(t, "avro"), brokers[0], topic, s.Addr, db, testenv.Registry(t), topic, map[bool]string{true: ", cj: customer"}[modern]))
		runUntil(t, cfg, ch, db+".m", 2)
		// Dates as numbers and decimals through the driver: the servers
		// print the epoch and decimals differently.
		got := queryRows(t, s, `SELECT toString(id), toString(flag), toString(i32), toString(f64), s, raw, toString(fx), toString(color),
			toString(uid), toString(toUInt16(day)), toString(tod), toString(toUInt32(ts)), ifNull(note, 'NULL'),
			arrayStringConcat(tags, ','), ifNull(customer_name, 'NULL'), city, toString(zip), k, dur_text FROM `+db+`.m ORDER BY id`)
		compareRows(t, got, []string{
			"1|1|-7|2.5|héllo|ab|xyz|GREEN|6f2b8a52-4d7e-4a3c-9f1e-0c2d3b4a5e6f|19860|5400000|1715949296|n|a,b|Ann|Oslo|150|k-1|" +
				`{"months":1,"days":2,"milliseconds":3}`,
			"2|0|0|0|||abc|RED|00000000-0000-0000-0000-000000000000|0|0|0|NULL||NULL||0|plain|" +
				`{"months":0,"days":0,"milliseconds":0}`,
		})
		rows, err := ch.Query(context.Background(), "SELECT amount, big FROM "+db+".m ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		var decs []string
		for rows.Next() {
			var a, b decimal.Decimal
			if err := rows.Scan(&a, &b); err != nil {
				t.Fatal(err)
			}
			decs = append(decs, a.String()+"|"+b.String())
		}
		rows.Close()
		compareRows(t, decs, []string{"-12345.6789|1000000000000000000000000", "0|0.000001"})
		if modern {
			got := queryRows(t, s, `SELECT toString(ts_us, 'UTC'), toString(ts_ns, 'UTC'), toString(local_ms), toString(attrs),
				toString(choice), variantType(choice), toString(dur), customer, toString(cj.address.city), toString(cj) FROM `+db+`.m ORDER BY id`)
			compareRows(t, got, []string{
				`2024-05-17 12:34:56.123456|2024-05-17 12:34:56.123456789|2024-05-17 12:34:56.123|{'k':9}|42|Int64|(1,2,3)|{"name":"Ann","address":{"city":"Oslo","zip":150}}|Oslo|{"address":{"city":"Oslo","zip":150},"name":"Ann"}`,
				`1970-01-01 00:00:00.000000|1970-01-01 00:00:00.000000000|1970-01-01 00:00:00.000|{}||None|(0,0,0)|||{}`,
			})
		}
	})
}

func compareRows(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const avroRowV1 = `{"type":"record","name":"Row","namespace":"sink.test","fields":[{"name":"id","type":"long"}]}`

// avroRowV2 adds an optional field: a compatible producer-side evolution.
const avroRowV2 = `{"type":"record","name":"Row","namespace":"sink.test","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`

// TestAvroBadRecordsToDLQ: a record that is not registry-framed and one
// whose schema id the registry does not know go to the dead-letter topic
// with the reason; the others are inserted and the offsets pass them all.
func TestAvroBadRecordsToDLQ(t *testing.T) {
	id := registerAvro(t, testenv.UniqueName(t, "avro-dlq")+"-value", avroRowV1)
	topic := testenv.NewTopic(t, 1)
	row := func(n int64) *kgo.Record {
		return &kgo.Record{Value: avroValue(t, id, avroRowV1, map[string]any{"id": n})}
	}
	unknown := append(registry.AppendFrame(nil, 987_654_321, false), 2)
	produceRecords(t, topic, row(0), &kgo.Record{Value: []byte(`{"id":1}`)}, &kgo.Record{Value: unknown}, row(3))
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		if err := ch.Exec(context.Background(), "CREATE TABLE "+db+".repro (id UInt64) ENGINE = MergeTree ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		dlqTopic := testenv.NewTopic(t, 1)
		cfg := dlqConfig(t, s, topic, db, dlqTopic, "")
		cfg.Routes[0].Format = "avro"
		cfg.SchemaRegistry.URLs = []string{testenv.Registry(t)}
		runUntilCommitted(t, cfg, topic, 4)
		if got := ids(t, ch, db+".repro"); fmt.Sprint(got) != "[0 3]" {
			t.Fatalf("table ids %v, want [0 3]", got)
		}
		recs := dlqRecords(t, dlqTopic)
		if len(recs) != 2 {
			t.Fatalf("%d dead-letter records, want 2", len(recs))
		}
		for i, want := range []string{"first byte is 0x7b, not the registry wire format's magic byte 0", "schema id 987654321: the registry says it does not exist"} {
			msg, _ := header(recs[i], "sink.error")
			off, _ := header(recs[i], "sink.source.offset")
			if !strings.Contains(msg, want) || off != fmt.Sprint(i+1) {
				t.Errorf("dead-letter record %d: offset %s, error %q; want offset %d and %q", i, off, msg, i+1, want)
			}
		}
	})
}

// tcpProxy forwards connections from a local port to target until closed;
// it can be opened again on the same port.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// close stops accepting and cuts every open connection: the registry is
// unreachable.
func (p *tcpProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// open accepts again on the same port.
func (p *tcpProxy) open(t *testing.T) {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}

// TestAvroRegistryOutage cuts the connector off the registry (a proxy in
// front of it, closed): records of the schema id it has cached keep
// flowing; the first record of a new id (the producer added an optional
// field) waits, with everything after it, and is neither dead-lettered nor
// fatal (errors.tolerance is none); once the registry is reachable again
// the waiting records are inserted, the new field included, each once.
// Parallel with the package's other parallel tests: the outage is its own
// proxy's, and its topic, subject, tables and groups are its own.
func TestAvroRegistryOutage(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	reg := testenv.Registry(t)
	subject := testenv.UniqueName(t, "avro-outage") + "-value"
	v1 := registerAvro(t, subject, avroRowV1)
	v2 := registerAvro(t, subject, avroRowV2)
	u, err := url.Parse(reg)
	if err != nil {
		t.Fatal(err)
	}
	target, path := u.Host, u.Path
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		proxy := newTCPProxy(t, target)
		topic := testenv.NewTopic(t, 1)
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		if err := ch.Exec(context.Background(), "CREATE TABLE "+db+".r (id UInt64, note Nullable(String)) ENGINE = MergeTree ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		r1 := func(n int64) *kgo.Record {
			return &kgo.Record{Value: avroValue(t, v1, avroRowV1, map[string]any{"id": n})}
		}
		r2 := func(n int64) *kgo.Record {
			return &kgo.Record{Value: avroValue(t, v2, avroRowV2, map[string]any{"id": n, "note": fmt.Sprintf("v2-%d", n)})}
		}
		produceRecords(t, topic, r1(0), r1(1), r1(2))
		group := testenv.UniqueName(t, "outage")
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s}
schema_registry: {urls: ["http://%s%s"]}
batch: {max_rows: 100, max_wait: 200ms}
routes: [{topic: %q, table: r, format: avro}]
errors: {tolerance: none}
http: {listen: ""}
`, group, brokers[0], topic, s.Addr, db, proxy.addr, path, topic))
		done, stop := startPipeline(t, cfg)
		waitFor := func(what string, cond func() bool) {
			t.Helper()
			deadline := time.Now().Add(time.Minute)
			for !cond() {
				select {
				case err := <-done:
					t.Fatalf("connector stopped while waiting for %s: %v", what, err)
				case <-time.After(100 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("no %s after a minute", what)
				}
			}
		}
		waitFor("3 rows with the registry up", func() bool { return countRows(t, ch, db+".r") == 3 })

		proxy.close()
		produceRecords(t, topic, r1(3), r1(4), r2(5), r1(6), r2(7))
		waitFor("the cached id's rows", func() bool { return countRows(t, ch, db+".r") == 5 && committed(t, group, topic, 0) == 5 })
		time.Sleep(2 * time.Second)
		if n, c := countRows(t, ch, db+".r"), committed(t, group, topic, 0); n != 5 || c != 5 {
			t.Fatalf("with the registry down: %d rows, offset %d committed; want 5 and 5 (the new id waits)", n, c)
		}

		proxy.open(t)
		waitFor("every row after the registry came back", func() bool { return countRows(t, ch, db+".r") == 8 && committed(t, group, topic, 0) == 8 })
		stop()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		got := queryRows(t, s, "SELECT toString(id), ifNull(note, 'NULL') FROM "+db+".r ORDER BY id")
		compareRows(t, got, []string{"0|NULL", "1|NULL", "2|NULL", "3|NULL", "4|NULL", "5|v2-5", "6|NULL", "7|v2-7"})
	})
}

// The Avro converter's schemas of a Debezium PostgreSQL customers table
// (the source block trimmed to the fields the sink reads and a few more).
const (
	dbzAvroValueSchema = `{"type":"record","name":"Value","namespace":"pg.public.customers","fields":[` +
		`{"name":"id","type":"int"},{"name":"name","type":"string"},` +
		`{"name":"email","type":["null","string"],"default":null},` +
		`{"name":"balance","type":{"type":"bytes","scale":2,"precision":12,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"12"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}},` +
		`{"name":"updated_at","type":{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTimestamp"}},` +
		`{"name":"signup","type":["null",{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Date"}],"default":null}]}`
	dbzAvroEnvelopeSchema = `{"type":"record","name":"Envelope","namespace":"pg.public.customers","fields":[` +
		`{"name":"before","type":["null",` + dbzAvroValueSchema + `],"default":null},` +
		`{"name":"after","type":["null","Value"],"default":null},` +
		`{"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[` +
		`{"name":"version","type":"string"},{"name":"connector","type":"string"},{"name":"name","type":"string"},{"name":"ts_ms","type":"long"},` +
		`{"name":"db","type":"string"},{"name":"schema","type":"string"},{"name":"table","type":"string"},` +
		`{"name":"txId","type":["null","long"],"default":null},{"name":"lsn","type":["null","long"],"default":null}]}},` +
		`{"name":"op","type":"string"},{"name":"ts_ms","type":["null","long"],"default":null}]}`
	dbzAvroKeySchema = `{"type":"record","name":"Key","namespace":"pg.public.customers","fields":[{"name":"id","type":"int"}]}`
)

// TestDebeziumAvroReplayCollapses replays the change history of 4,000 keys
// of one PostgreSQL table, as Debezium's Avro converter writes it (a
// snapshot, inserts, updates, deletes with and without a before image, each
// delete followed by a tombstone), into ReplacingMergeTree on each server,
// then replays it all again from the start as a crash would, and requires
// FINAL to equal the source's final state exactly. Parallel with the
// package's other parallel tests: its topics, subjects, tables and groups
// are its own, and it checks values, not times.
func TestDebeziumAvroReplayCollapses(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	prefix := testenv.UniqueName(t, "pga")
	topic := prefix + ".public.customers"
	createTopic(t, topic, 4)
	valueID := registerAvro(t, topic+"-value", dbzAvroEnvelopeSchema)
	keyID := registerAvro(t, topic+"-key", dbzAvroKeySchema)

	rnd := rand.New(rand.NewPCG(7, 3))
	state := map[int32]cdcRow{}
	var recs []*kgo.Record
	rowsWritten, tombstones := 0, 0
	lsn := int64(1_000_000)
	image := func(r cdcRow) map[string]any {
		var email any
		if r.email != "" {
			email = r.email
		}
		return map[string]any{"pg.public.customers.Value": map[string]any{"id": r.id, "name": r.name, "email": email,
			"balance": big.NewRat(r.balance, 100), "updated_at": r.updated, "signup": int32(r.signupDy)}}
	}
	newRow := func(id int32) cdcRow {
		r := cdcRow{id: id, name: fmt.Sprintf("n%d-%d", id, rnd.IntN(1000)), balance: rnd.Int64N(2_000_000) - 1_000_000,
			updated: 1715949296_000000 + lsn*1000 + rnd.Int64N(1000), signupDy: 18000 + rnd.Int64N(2000)}
		if rnd.IntN(5) > 0 {
			r.email = fmt.Sprintf("u%d@example.com", id)
		}
		return r
	}
	emit := func(op string, before, after any, id int32, snapshot bool) {
		if !snapshot {
			lsn += 1 + rnd.Int64N(200)
		}
		key := avroValue(t, keyID, dbzAvroKeySchema, map[string]any{"id": id})
		value := avroValue(t, valueID, dbzAvroEnvelopeSchema, map[string]any{
			"before": before, "after": after, "op": op, "ts_ms": int64(1715949297000) + lsn/1000,
			"source": map[string]any{"version": "2.7.0.Final", "connector": "postgresql", "name": "pg", "ts_ms": int64(1715949296000) + lsn/1000,
				"db": "shop", "schema": "public", "table": "customers", "txId": lsn / 7, "lsn": lsn},
		})
		recs = append(recs, &kgo.Record{Topic: topic, Key: key, Value: value})
		rowsWritten++
		if op == "d" {
			recs = append(recs, &kgo.Record{Topic: topic, Key: key}) // tombstone
			tombstones++
		}
	}
	const keys = 4000
	for id := int32(1); id <= keys/2; id++ {
		r := newRow(id)
		state[id] = r
		emit("r", nil, image(r), id, true)
	}
	lsn = 2_000_000
	for range 16_000 {
		id := int32(1 + rnd.IntN(keys))
		old, alive := state[id]
		switch {
		case !alive:
			r := newRow(id)
			state[id] = r
			emit("c", nil, image(r), id, false)
		case rnd.IntN(10) < 7:
			r := newRow(id)
			state[id] = r
			emit("u", image(old), image(r), id, false)
		case id%2 == 0: // REPLICA IDENTITY FULL: the before image
			delete(state, id)
			emit("d", image(old), nil, id, false)
		default: // REPLICA IDENTITY DEFAULT: only the key
			delete(state, id)
			emit("d", nil, nil, id, false)
		}
	}
	cl := testenv.KafkaClient(t, kgo.ProducerLinger(5*time.Millisecond))
	pctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Logf("produced %d change events and %d tombstones; %d live keys", rowsWritten, tombstones, len(state))

	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		engine, live := "ReplacingMergeTree(_version)", " FINAL WHERE _deleted = 0"
		if s.AtLeast(23, 2) {
			engine, live = "ReplacingMergeTree(_version, _deleted)", " FINAL"
		}
		if err := ch.Exec(context.Background(), "CREATE TABLE "+db+`.customers (id Int32, name String, email Nullable(String),
			balance Decimal(12, 2), updated_at DateTime, signup Date, op String, tbl String, _version UInt64, _deleted UInt8)
			ENGINE = `+engine+" ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		for run, group := range []string{testenv.UniqueName(t, "first"), testenv.UniqueName(t, "replay")} {
			cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topic_regex: '%s\.public\..*', fetch_max_wait: 200ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s}
schema_registry: {urls: [%q]}
batch: {max_rows: 20000, max_wait: 1s}
routes:
  - topic_regex: '%s\.public\..*'
    table: '${topic.last}'
    format: debezium-avro
    columns: {op: $op, tbl: $source.table}
http: {listen: ""}
`, group, brokers[0], prefix, s.Addr, db, testenv.Registry(t), prefix))
			st := runToEnd(t, cfg, topic)
			t.Logf("run %d: %d records, %d rows in %d inserts, %d skipped", run+1, st.Records, st.Rows, st.Inserts, st.Skipped)
			if st.Records != int64(len(recs)) || st.Rows != int64(rowsWritten) || st.Skipped != int64(tombstones) || st.DLQ != 0 {
				t.Fatalf("run %d: records %d rows %d skipped %d dlq %d; want %d, %d, %d, 0",
					run+1, st.Records, st.Rows, st.Skipped, st.DLQ, len(recs), rowsWritten, tombstones)
			}
		}
		if n := countRows(t, ch, db+".customers WHERE _deleted = 1"); n == 0 {
			t.Fatal("no row with _deleted = 1, so FINAL is not shown to leave deletes out")
		}
		compareStates(t, "customers"+live, customersIn(t, ch, db+".customers"+live), customersWant(state))
	})
}
