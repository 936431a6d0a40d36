//go:build integration

package pipeline_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// This file replays a PostgreSQL history through Debezium's event shapes
// written by cdcSource below, into ReplacingMergeTree tables named after
// their topics, twice, and requires FINAL to show exactly the source's
// final state. PostgreSQL's own semantics (replica identities, TOASTed
// values, deletes, primary-key changes, ADD COLUMN … DEFAULT, TRUNCATE,
// every type) are checked against a real PostgreSQL and the real Debezium
// connector in tools/internal/pgcdc. These hand-made events stay for what
// that test does not run: the JSON converter without schemas next to one
// with them (whose lossy encodings need column types chosen for them,
// docs/formats.md), tables named by capture groups (${1}), and a full
// replay under a new consumer group at 45,000 events in seconds.

// cdcRow is one source row. customers: name, email, balance (cents),
// updated (µs), signup (days). orders: name is the status, balance the
// amount in cents, email the note ("" is NULL).
type cdcRow struct {
	id                int32
	name, email       string
	balance           int64
	updated, signupDy int64
}

// cdcTable is one replicated table and what its topic carries.
type cdcTable struct {
	name    string
	wrapped bool // JSON converter with schemas.enable=true
	state   map[int32]cdcRow
}

// cdcSource generates a PostgreSQL change history the way Debezium reports
// it: a snapshot (op r, all at the snapshot's LSN), then inserts, updates
// and deletes (each delete followed by a tombstone) with growing LSNs.
type cdcSource struct {
	rnd          *rand.Rand
	lsn          int64
	prefix       string
	tables       []*cdcTable
	records      []*kgo.Record
	rows, tombst int
}

const customersFields = `[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":false,"field":"name"},` +
	`{"type":"string","optional":true,"field":"email"},` +
	`{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"12"},"field":"balance"},` +
	`{"type":"int64","optional":false,"name":"io.debezium.time.MicroTimestamp","version":1,"field":"updated_at"},` +
	`{"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1,"field":"signup"}]`

func envelopeSchema(table string) string {
	return `{"type":"struct","fields":[` +
		`{"type":"struct","fields":` + customersFields + `,"optional":true,"name":"pg.public.` + table + `.Value","field":"before"},` +
		`{"type":"struct","fields":` + customersFields + `,"optional":true,"name":"pg.public.` + table + `.Value","field":"after"},` +
		`{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},` +
		`{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},{"type":"string","optional":true,` +
		`"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,last,false,incremental"},"default":"false","field":"snapshot"},` +
		`{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},{"type":"string","optional":false,"field":"schema"},` +
		`{"type":"string","optional":false,"field":"table"},{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,"field":"lsn"},` +
		`{"type":"int64","optional":true,"field":"xmin"}],"optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source"},` +
		`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}],` +
		`"optional":false,"name":"pg.public.` + table + `.Envelope","version":2}`
}

// b64Decimal is Kafka Connect's Decimal: minimal big-endian two's complement.
func b64Decimal(unscaled int64) string {
	var b []byte
	for v := unscaled; ; v >>= 8 {
		b = append([]byte{byte(v)}, b...)
		if (v >= -128 && v < 128) && (v < 0) == (b[0]&0x80 != 0) {
			break
		}
	}
	return `"` + base64.StdEncoding.EncodeToString(b) + `"`
}

// cents renders an amount of cents as decimal text, as Debezium's
// decimal.handling.mode=double prints a numeric(12,2).
func cents(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

func (t *cdcTable) image(r cdcRow, keyOnly bool) string {
	if keyOnly {
		return fmt.Sprintf(`{"id":%d}`, r.id)
	}
	if t.wrapped {
		email := "null"
		if r.email != "" {
			email = strconv.Quote(r.email)
		}
		return fmt.Sprintf(`{"id":%d,"name":%q,"email":%s,"balance":%s,"updated_at":%d,"signup":%d}`,
			r.id, r.name, email, b64Decimal(r.balance), r.updated, r.signupDy)
	}
	// orders: decimal.handling.mode=double, time.precision.mode=connect
	note := "null"
	if r.email != "" {
		note = strconv.Quote(r.email)
	}
	return fmt.Sprintf(`{"id":%d,"status":%q,"note":%s,"amount":%s,"updated_at":%d}`,
		r.id, r.name, note, cents(r.balance), r.updated/1000)
}

func (s *cdcSource) emit(t *cdcTable, op string, before, after string, id int32) {
	s.lsn += 1 + s.rnd.Int64N(200)
	if op == "r" {
		s.lsn = 1_000_000 // every snapshot read carries the snapshot's LSN
	}
	ts := 1715949296000 + s.lsn/1000
	payload := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"version":"2.7.0.Final","connector":"postgresql","name":"pg","ts_ms":%d,`+
		`"snapshot":%q,"db":"shop","sequence":"[null,\"%d\"]","schema":"public","table":%q,"txId":%d,"lsn":%d,"xmin":null},"op":%q,"ts_ms":%d}`,
		before, after, ts, map[bool]string{true: "true", false: "false"}[op == "r"], s.lsn, t.name, s.lsn/7, s.lsn, op, ts+5)
	value := payload
	key := fmt.Sprintf(`{"id":%d}`, id)
	if t.wrapped {
		value = `{"schema":` + envelopeSchema(t.name) + `,"payload":` + payload + `}`
		key = `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"pg.public.` +
			t.name + `.Key"},"payload":` + key + `}`
	}
	topic := s.prefix + ".public." + t.name
	s.records = append(s.records, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)})
	s.rows++
	if op == "d" {
		s.records = append(s.records, &kgo.Record{Topic: topic, Key: []byte(key)}) // tombstone
		s.tombst++
	}
}

func (s *cdcSource) newRow(id int32) cdcRow {
	statuses := []string{"new", "paid", "shipped", "cancelled"}
	r := cdcRow{id: id, balance: s.rnd.Int64N(2_000_000) - 1_000_000, updated: 1715949296_000000 + s.lsn*1_000 + s.rnd.Int64N(1000),
		signupDy: 18000 + s.rnd.Int64N(2000)}
	r.name = statuses[s.rnd.IntN(4)] + "-" + strconv.Itoa(s.rnd.IntN(1000))
	if s.rnd.IntN(5) > 0 {
		r.email = fmt.Sprintf("user%d.%d@example.com", id, s.rnd.IntN(100))
	}
	return r
}

// generate writes the history: keysPerTable keys per table, a snapshot of
// the first half, then changes random keys.
func (s *cdcSource) generate(keysPerTable, changes int) {
	for _, t := range s.tables {
		for id := int32(1); id <= int32(keysPerTable/2); id++ {
			r := s.newRow(id)
			t.state[id] = r
			s.emit(t, "r", "null", t.image(r, false), id)
		}
	}
	s.lsn = 2_000_000
	for i := 0; i < changes; i++ {
		t := s.tables[s.rnd.IntN(len(s.tables))]
		id := int32(1 + s.rnd.IntN(keysPerTable))
		old, alive := t.state[id]
		switch {
		case !alive:
			r := s.newRow(id)
			t.state[id] = r
			s.emit(t, "c", "null", t.image(r, false), id)
		case s.rnd.IntN(10) < 7:
			r := s.newRow(id)
			t.state[id] = r
			s.emit(t, "u", t.image(old, false), t.image(r, false), id)
		default:
			delete(t.state, id)
			// REPLICA IDENTITY DEFAULT on customers (key only), FULL on orders.
			s.emit(t, "d", t.image(old, t.wrapped), "null", id)
		}
	}
}

// createTopic creates a topic with a chosen name (Debezium's
// server.schema.table) and deletes it when the test ends.
func createTopic(t *testing.T, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopic(ctx, topic)
	})
	for ctx.Err() == nil {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil && td[topic].Err == nil && len(td[topic].Partitions) == int(partitions) {
			ready := true
			for _, p := range td[topic].Partitions {
				ready = ready && p.Leader >= 0
			}
			if ready {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("topic %s not ready", topic)
}

// runToEnd runs a connector until its group has committed the end offset of
// every partition of topics (every record handled, tombstones included),
// then stops it like SIGTERM and returns its stats.
func runToEnd(t *testing.T, cfg *config.Config, topics ...string) pipeline.Stats {
	t.Helper()
	ctx := context.Background()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	return runWhile(t, cfg, 3*time.Minute, func(*writer.Writer) (bool, string) {
		got, err := adm.FetchOffsets(ctx, cfg.Kafka.Group)
		caughtUp := err == nil
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := got.Lookup(o.Topic, o.Partition)
			caughtUp = caughtUp && ok && c.At == o.Offset
		})
		return caughtUp, fmt.Sprintf("group %s has not committed the end offsets", cfg.Kafka.Group)
	})
}

// TestDebeziumReplayCollapses replays the change history of 10,000 keys (two
// tables of 5,000, one topic each, one wrapped with schemas and one bare)
// through one route that names each table after its topic, then replays it
// all again from the start as a crash would, and requires FINAL to equal the
// source's final state exactly, on each server. ClickHouse 18.16 has
// ReplacingMergeTree(_version) only, so deleted rows are filtered there
// (`FINAL WHERE _deleted = 0`); 26.9 takes ReplacingMergeTree(_version,
// _deleted), whose FINAL leaves deleted rows out by itself.
func TestDebeziumReplayCollapses(t *testing.T) {
	brokers := testenv.Kafka(t)
	ctx := context.Background()

	prefix := testenv.UniqueName(t, "pg")
	src := &cdcSource{rnd: rand.New(rand.NewPCG(4, 2)), prefix: prefix, tables: []*cdcTable{
		{name: "customers", wrapped: true, state: map[int32]cdcRow{}},
		{name: "orders", wrapped: false, state: map[int32]cdcRow{}},
	}}
	src.generate(5000, 40_000)
	var topics []string
	for _, tb := range src.tables {
		topic := prefix + ".public." + tb.name
		topics = append(topics, topic)
		createTopic(t, topic, 4)
	}

	// Debezium keys by primary key, so the default (key-hash) partitioner
	// keeps each row's history in one partition, in order.
	cl := testenv.KafkaClient(t, kgo.ProducerLinger(5*time.Millisecond))
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := cl.ProduceSync(pctx, src.records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Logf("produced %d change events and %d tombstones for %d+%d live keys", src.rows, src.tombst,
		len(src.tables[0].state), len(src.tables[1].state))
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		testDebeziumReplay(t, s, brokers[0], src, topics)
	})
}

func testDebeziumReplay(t *testing.T, s testenv.Server, broker string, src *cdcSource, topics []string) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	ctx := context.Background()
	prefix := src.prefix
	engine, live := "ReplacingMergeTree(_version)", " FINAL WHERE _deleted = 0"
	if s.AtLeast(23, 2) { // the is_deleted parameter exists since 23.2
		engine, live = "ReplacingMergeTree(_version, _deleted)", " FINAL"
	}
	ddl := map[string]string{
		"customers": `(id Int32, name String, email Nullable(String), balance Decimal(12, 2), updated_at DateTime, signup Date,
			op String, tbl String, _version UInt64, _deleted UInt8)`,
		"orders": `(id Int32, status LowCardinality(String), note Nullable(String), amount Float64, updated_at DateTime,
			op String, tbl String, _version UInt64, _deleted UInt8)`,
	}
	for name, cols := range ddl {
		if err := ch.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.%s %s ENGINE = %s ORDER BY id", db, name, cols, engine)); err != nil {
			t.Fatal(err)
		}
	}

	for run, group := range []string{testenv.UniqueName(t, "first"), testenv.UniqueName(t, "replay")} {
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topic_regex: '%s\.public\..*', fetch_max_wait: 200ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 20000, max_wait: 1s}
routes:
  - topic_regex: '%s\.public\.customers'
    table: '${topic.last}'
    format: debezium-json
    columns: {op: $op, tbl: $source.table}
  - topic_regex: '%s\.public\.(orders)'
    table: '${1}'
    format: debezium-json
    columns: {op: $op, tbl: $source.table}
http: {listen: ""}
`, group, broker, prefix, s.Addr, db, prefix, prefix))
		st := runToEnd(t, cfg, topics...)
		t.Logf("run %d (group %s): %d records, %d rows inserted in %d inserts, %d skipped", run+1, group, st.Records, st.Rows, st.Inserts, st.Skipped)
		if st.Records != int64(len(src.records)) || st.Rows != int64(src.rows) || st.Skipped != int64(src.tombst) || st.DLQ != 0 {
			t.Fatalf("run %d: records %d rows %d skipped %d dlq %d; want %d, %d, %d tombstones, 0",
				run+1, st.Records, st.Rows, st.Skipped, st.DLQ, len(src.records), src.rows, src.tombst)
		}
	}

	// Both runs wrote every change: the duplicates are in the table, and
	// only FINAL collapses them. The deletes are in it too, as rows with
	// _deleted = 1 that FINAL must leave out.
	for _, tb := range src.tables {
		if _, written := insertsInto(t, ch, db, tb.name); written < uint64(2*src.rowsOf(tb)) {
			t.Fatalf("%s: %d rows written in query_log, want at least twice the %d change events", tb.name, written, src.rowsOf(tb))
		}
		var deletes uint64
		if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+"."+tb.name+" WHERE _deleted = 1").Scan(&deletes); err != nil {
			t.Fatal(err)
		}
		if deletes == 0 {
			t.Fatalf("%s: no row with _deleted = 1, so FINAL is not shown to leave deletes out", tb.name)
		}
	}

	// customers: wrapped, Decimal bytes, MicroTimestamp and Date from the schema.
	compareStates(t, "customers"+live, customersIn(t, ch, db+".customers"+live), customersWant(src.tables[0].state))

	// orders: bare, decimal.handling.mode=double, connect timestamps (ms).
	want := map[int32]string{}
	for id, r := range src.tables[1].state {
		note := "NULL"
		if r.email != "" {
			note = r.email
		}
		amount, _ := strconv.ParseFloat(cents(r.balance), 64)
		want[id] = fmt.Sprintf("%s|%s|%v|%d", r.name, note, amount, r.updated/1_000_000)
	}
	got := map[int32]string{}
	rows, err := ch.Query(ctx, "SELECT id, status, note, amount, updated_at FROM "+db+".orders"+live)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id     int32
			status string
			note   *string
			amount float64
			upd    time.Time
		)
		if err := rows.Scan(&id, &status, &note, &amount, &upd); err != nil {
			t.Fatal(err)
		}
		n := "NULL"
		if note != nil {
			n = *note
		}
		got[id] = fmt.Sprintf("%s|%s|%v|%d", status, n, amount, upd.Unix())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	compareStates(t, "orders"+live, got, want)
}

// customersWant renders the source's live customers as customersIn reads
// them.
func customersWant(state map[int32]cdcRow) map[int32]string {
	want := map[int32]string{}
	for id, r := range state {
		email := "NULL"
		if r.email != "" {
			email = r.email
		}
		want[id] = fmt.Sprintf("%s|%s|%s|%d|%s|customers", r.name, email, decimal.New(r.balance, -2).String(), r.updated/1_000_000,
			time.Unix(r.signupDy*86400, 0).UTC().Format("2006-01-02"))
	}
	return want
}

// customersIn reads the customers rows of from (a table with FINAL and
// any filter), by id; an id twice fails the test.
func customersIn(t *testing.T, ch driver.Conn, from string) map[int32]string {
	t.Helper()
	got := map[int32]string{}
	rows, err := ch.Query(context.Background(), "SELECT id, name, email, balance, updated_at, signup, tbl FROM "+from)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id          int32
			name, tbl   string
			email       *string
			balance     decimal.Decimal
			upd, signup time.Time
		)
		if err := rows.Scan(&id, &name, &email, &balance, &upd, &signup, &tbl); err != nil {
			t.Fatal(err)
		}
		e := "NULL"
		if email != nil {
			e = *email
		}
		if _, dup := got[id]; dup {
			t.Fatalf("%s: id %d twice", from, id)
		}
		got[id] = fmt.Sprintf("%s|%s|%s|%d|%s|%s", name, e, balance.String(), upd.Unix(), signup.UTC().Format("2006-01-02"), tbl)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func (s *cdcSource) rowsOf(tb *cdcTable) int {
	n := 0
	for _, r := range s.records {
		if r.Value != nil && strings.HasSuffix(r.Topic, ".public."+tb.name) {
			n++
		}
	}
	return n
}

// compareStates compares the rows a query read (named by what, e.g.
// "orders FINAL") with the source's live rows.
func compareStates(t *testing.T, what string, got, want map[int32]string) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		t.Logf("%s has exactly the source's %d live rows", what, len(want))
		return
	}
	var diffs []string
	ids := map[int32]bool{}
	for id := range got {
		ids[id] = true
	}
	for id := range want {
		ids[id] = true
	}
	sorted := make([]int, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, int(id))
	}
	sort.Ints(sorted)
	for _, id := range sorted {
		g, gok := got[int32(id)]
		w, wok := want[int32(id)]
		if g != w || gok != wok {
			diffs = append(diffs, fmt.Sprintf("id %d: got %q (present %v), want %q (present %v)", id, g, gok, w, wok))
		}
	}
	if len(diffs) > 10 {
		diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
	}
	t.Fatalf("%s: %d rows, source has %d live:\n%s", what, len(got), len(want), strings.Join(diffs, "\n"))
}

// A route that names its table after the topic stops the connector, naming
// the table and the topic, when that table does not exist — before the
// topic's first record, so nothing of it is committed.
func TestDebeziumMissingTableStops(t *testing.T) {
	testenv.EachServer(t, testDebeziumMissingTableStops)
}

func testDebeziumMissingTableStops(t *testing.T, s testenv.Server) {
	brokers := testenv.Kafka(t)
	db := s.NewDatabase(t)
	prefix := testenv.UniqueName(t, "pg")
	topic := prefix + ".public.nothere"
	createTopic(t, topic, 1)
	src := &cdcSource{rnd: rand.New(rand.NewPCG(1, 1)), prefix: prefix, tables: []*cdcTable{{name: "nothere", state: map[int32]cdcRow{}}}}
	src.generate(10, 10)
	cl := testenv.KafkaClient(t)
	if err := cl.ProduceSync(context.Background(), src.records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	group := testenv.UniqueName(t, "g")
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topic_regex: '%s\..*', fetch_max_wait: 200ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic_regex: '%s\..*', table: '${topic.last}', format: debezium-json}]
http: {listen: ""}
`, group, brokers[0], prefix, s.Addr, db, prefix))
	done, _ := startPipeline(t, cfg)
	select {
	case err := <-done:
		want := fmt.Sprintf(`routes[0] (table "${topic.last}" for topic %q): clickhouse: table %s.nothere does not exist`, topic, db)
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "errors.tolerance") {
			t.Fatalf("Run: %v\nwant it to begin: %s\nand to say how errors.tolerance would divert it", err, want)
		}
	case <-time.After(time.Minute):
		t.Fatal("the connector did not stop within 1m")
	}
	adm := kadm.NewClient(testenv.KafkaClient(t))
	offs, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); ok && o.At > 0 {
		t.Fatalf("committed offset %d for a topic whose table is missing", o.At)
	}
}
