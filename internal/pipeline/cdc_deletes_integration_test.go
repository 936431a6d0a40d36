//go:build integration

package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/testenv/cdcevent"
)

// placeholderCol is a NOT NULL PostgreSQL column as Debezium describes it
// (Kafka Connect type, semantic name), a ClickHouse type a user would pick
// for it, a real value and the placeholder Debezium puts in a delete's
// before image under REPLICA IDENTITY DEFAULT.
type placeholderCol struct {
	name, typ, semantic, params string
	ch                          string
	value, placeholder          string // JSON
	since                       int    // the ClickHouse major version that has the type (0: both servers)
}

var placeholderCols = []placeholderCol{
	{"status", "string", "io.debezium.data.Enum", `{"allowed":"new,paid"}`, "Enum8('new' = 1, 'paid' = 2)", `"paid"`, `""`, 0},
	{"tier", "string", "io.debezium.data.Enum", `{"allowed":"low,high"}`, "Enum16('low' = 1000, 'high' = 2000)", `"high"`, `""`, 0},
	{"uid", "string", "io.debezium.data.Uuid", "", "UUID", `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`, `""`, 0},
	{"ref", "string", "io.debezium.data.Uuid", "", "Nullable(UUID)", `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12"`, `""`, 0},
	{"born", "int32", "io.debezium.time.Date", "", "Date", `19782`, `0`, 0},
	{"seen", "int64", "io.debezium.time.MicroTimestamp", "", "DateTime", `1709212455123456`, `0`, 0},
	{"paid_at", "string", "io.debezium.time.ZonedTimestamp", "", "DateTime", `"2024-02-29T11:14:15Z"`, `""`, 0},
	{"amount", "bytes", "org.apache.kafka.connect.data.Decimal", `{"scale":"2","connect.decimal.precision":"12"}`, "Decimal(12, 2)", `"AeJA"`, `""`, 0},
	{"tags", "array", "", "", "Array(String)", `["a","b"]`, `[]`, 0},
	{"code", "string", "", "", "FixedString(2)", `"xy"`, `""`, 0},
	{"flag", "boolean", "", "", "UInt8", `true`, `false`, 0},
	{"at", "string", "io.debezium.time.ZonedTimestamp", "", "DateTime64(6)", `"2024-02-29T11:14:15.123456Z"`, `""`, 20},
	{"ip", "string", "", "", "IPv4", `"10.0.0.1"`, `""`, 20},
	{"ip6", "string", "", "", "IPv6", `"::1"`, `""`, 20},
	{"kind", "string", "io.debezium.data.Enum", `{"allowed":"a,b"}`, "LowCardinality(String)", `"a"`, `""`, 20},
	{"day", "int32", "io.debezium.time.Date", "", "Date32", `-165`, `0`, 20},
}

// placeholderEvent is a Debezium event of row id: op c with the values of
// cols, or op d with their placeholders (a REPLICA IDENTITY DEFAULT delete).
func placeholderEvent(topic string, cols []placeholderCol, op string, id int, lsn int64) *kgo.Record {
	cs := make([]cdcevent.Column, len(cols))
	vals := make([]string, len(cols))
	for i, c := range cols {
		cs[i] = cdcevent.Column{Name: c.name, Type: c.typ, Semantic: c.semantic, Params: c.params}
		vals[i] = c.value
		if op == "d" {
			vals[i] = c.placeholder
		}
	}
	value, key := cdcevent.Event(op, id, lsn, cs, vals)
	return &kgo.Record{Topic: topic, Key: key, Value: value}
}

// runCDC produces recs (all of one single-partition topic) and runs a
// debezium-json route of their topic into db.table (with the route
// options opts, ", key: value" flow mapping entries), batches of 3 rows,
// errors.tolerance none, until every offset is committed.
func runCDC(t *testing.T, s testenv.Server, broker, db string, recs []*kgo.Record, table, opts string) pipeline.Stats {
	t.Helper()
	topic := recs[0].Topic
	if err := testenv.KafkaClient(t).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_wait: 500ms, max_rows: 3}
routes:
  - {topic: %q, table: %s, format: debezium-json%s}
errors: {tolerance: none}
http: {listen: ""}
`, testenv.UniqueName(t, "g"), broker, topic, s.Addr, db, topic, table, opts))
	return runToEnd(t, cfg, topic)
}

// TestDebeziumDeletePlaceholders: deletes whose before image holds
// Debezium's placeholders ("" for enums, UUIDs, timestamptz, IPs, 0, [],
// false) for every column type a user would pick reach the table as delete
// rows, with errors.tolerance none (a bad record would stop the
// connector), so FINAL leaves only the row never deleted; on each server
// with the types it has.
func TestDebeziumDeletePlaceholders(t *testing.T) {
	brokers := testenv.Kafka(t)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		var cols []placeholderCol
		ddl := []string{"id Int32"}
		for _, c := range placeholderCols {
			if c.since == 0 || s.AtLeast(c.since, 1) {
				cols = append(cols, c)
				ddl = append(ddl, c.name+" "+c.ch)
			}
		}
		engine, live := "ReplacingMergeTree(_version)", " FINAL WHERE _deleted = 0"
		if s.AtLeast(23, 2) {
			engine, live = "ReplacingMergeTree(_version, _deleted)", " FINAL"
		}
		if err := ch.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.t (%s, _version UInt64, _deleted UInt8) ENGINE = %s ORDER BY id",
			db, strings.Join(ddl, ", "), engine)); err != nil {
			t.Fatal(err)
		}
		topic := testenv.UniqueName(t, "pg.public.t")
		createTopic(t, topic, 1)
		recs := []*kgo.Record{
			placeholderEvent(topic, cols, "c", 1, 100),
			placeholderEvent(topic, cols, "c", 2, 110),
			placeholderEvent(topic, cols, "d", 1, 120),
			{Topic: topic, Key: placeholderEvent(topic, cols, "d", 1, 120).Key}, // the tombstone
		}
		st := runCDC(t, s, brokers[0], db, recs, "t", "")
		if st.Rows != 3 || st.Skipped != 1 || st.DLQ != 0 {
			t.Fatalf("stats %+v: want 3 rows (2 inserts, 1 delete) and the tombstone skipped", st)
		}
		var ids []int32
		rows, err := ch.Query(ctx, "SELECT id FROM "+db+".t"+live+" ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int32
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if fmt.Sprint(ids) != "[2]" {
			t.Fatalf("live ids %v, want [2]: the delete of 1 did not take", ids)
		}
		var deletes uint64
		if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".t WHERE _deleted = 1 AND id = 1 AND _version = 120").Scan(&deletes); err != nil {
			t.Fatal(err)
		}
		if deletes != 1 {
			t.Fatalf("%d delete rows of id 1 at version 120, want 1", deletes)
		}
		t.Logf("%d placeholder columns: the delete is a row, FINAL leaves only id 2", len(cols))

		// The same with a delete captured from Debezium 3.6.1 and
		// PostgreSQL 15 (every column NOT NULL), after its snapshot read.
		kinds := "paid_at DateTime, ip String, flag UInt8, doc String"
		if s.AtLeast(20, 1) {
			kinds = "paid_at DateTime64(6), ip IPv4, flag Bool, doc Map(String, Int64)"
		}
		if err := ch.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s.orders (id Int32, status Enum8('new' = 1, 'paid' = 2), uid UUID, %s,
			seen DateTime, born Date, at_time String, span Int64, amount Decimal(12, 2), tags Array(String), code FixedString(2),
			_version UInt64, _deleted UInt8) ENGINE = %s ORDER BY id`, db, kinds, engine)); err != nil {
			t.Fatal(err)
		}
		otopic := testenv.UniqueName(t, "dbzph.public.orders")
		createTopic(t, otopic, 1)
		key := captured(t, "dbz361_pg15_orders_key.json")
		recs = []*kgo.Record{
			{Topic: otopic, Key: key, Value: captured(t, "dbz361_pg15_orders_snapshot.json")},
			{Topic: otopic, Key: key, Value: captured(t, "dbz361_pg15_orders_delete_placeholders.json")},
		}
		if st := runCDC(t, s, brokers[0], db, recs, "orders", ""); st.Rows != 2 || st.DLQ != 0 {
			t.Fatalf("captured: stats %+v, want the snapshot row and the delete row", st)
		}
		var liveRows, deleted uint64
		if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".orders"+live).Scan(&liveRows); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".orders WHERE _deleted = 1 AND id = 1").Scan(&deleted); err != nil {
			t.Fatal(err)
		}
		if liveRows != 0 || deleted != 1 {
			t.Fatalf("captured: %d live rows and %d delete rows of id 1, want 0 and 1", liveRows, deleted)
		}
	})
}

// captured reads an event captured from Debezium 3.6.1 and PostgreSQL 15.
func captured(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../decode/testdata/debezium/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

// TestDebeziumTruncate: a TRUNCATE event (as Debezium 3.6.1 wrote it for
// PostgreSQL 15) between inserts: with truncate: apply the table ends with
// the rows after it only (the rows before it were inserted, then
// truncated); with the default skip it keeps them all. On each server.
func TestDebeziumTruncate(t *testing.T) {
	brokers := testenv.Kafka(t)
	truncate := captured(t, "dbz361_pg15_types_default_truncate.json")
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		cols := placeholderCols[:1]
		for _, mode := range []string{"apply", "skip"} {
			if err := ch.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.t_%s (id Int32, status %s, _version UInt64, _deleted UInt8) ENGINE = ReplacingMergeTree(_version) ORDER BY id",
				db, mode, cols[0].ch)); err != nil {
				t.Fatal(err)
			}
			topic := testenv.UniqueName(t, "pg.public.t_"+mode)
			createTopic(t, topic, 1)
			var recs []*kgo.Record
			for id := 1; id <= 5; id++ {
				recs = append(recs, placeholderEvent(topic, cols, "c", id, int64(100+id)))
			}
			recs = append(recs, &kgo.Record{Topic: topic, Value: truncate})
			for id := 6; id <= 7; id++ {
				recs = append(recs, placeholderEvent(topic, cols, "c", id, int64(30_000_000+id)))
			}
			st := runCDC(t, s, brokers[0], db, recs, "t_"+mode, ", truncate: "+mode)
			if st.Rows != 7 || st.Skipped != 1 {
				t.Fatalf("%s: stats %+v: want 7 rows inserted and the TRUNCATE event handled without a row", mode, st)
			}
			var n, minID uint64
			if err := ch.QueryRow(ctx, "SELECT count(), toUInt64(min(id)) FROM "+db+".t_"+mode).Scan(&n, &minID); err != nil {
				t.Fatal(err)
			}
			want, wantMin := uint64(7), uint64(1)
			if mode == "apply" {
				want, wantMin = 2, 6
			}
			if n != want || minID != wantMin {
				t.Fatalf("truncate: %s: %d rows from id %d, want %d from id %d", mode, n, minID, want, wantMin)
			}
			if _, written := insertsInto(t, ch, db, "t_"+mode); written != 7 {
				t.Fatalf("truncate: %s: %d rows written by INSERTs, want all 7", mode, written)
			}
			t.Logf("truncate: %s: %d rows left", mode, n)
		}
	})
}
