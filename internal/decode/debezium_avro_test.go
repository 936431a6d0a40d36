package decode

import (
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/route"
)

// The Avro schemas Debezium's PostgreSQL connector registers through Kafka
// Connect's Avro converter for a customers table (trimmed source block).
const (
	dbzAvroValue = `{"type":"record","name":"Value","namespace":"pg.public.customers","fields":[` +
		`{"name":"id","type":"int"},{"name":"name","type":"string"},` +
		`{"name":"email","type":["null","string"],"default":null},` +
		`{"name":"balance","type":{"type":"bytes","scale":2,"precision":12,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"12"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}},` +
		`{"name":"updated_at","type":{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTimestamp"}},` +
		`{"name":"signup","type":["null",{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Date"}],"default":null}]}`
	dbzAvroEnvelope = `{"type":"record","name":"Envelope","namespace":"pg.public.customers","fields":[` +
		`{"name":"before","type":["null",` + dbzAvroValue + `],"default":null},` +
		`{"name":"after","type":["null","Value"],"default":null},` +
		`{"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[` +
		`{"name":"version","type":"string"},{"name":"connector","type":"string"},{"name":"name","type":"string"},{"name":"ts_ms","type":"long"},` +
		`{"name":"snapshot","type":[{"type":"string","connect.version":1,"connect.parameters":{"allowed":"true,last,false,incremental"},"connect.default":"false","connect.name":"io.debezium.data.Enum"},"null"],"default":"false"},` +
		`{"name":"db","type":"string"},{"name":"schema","type":"string"},{"name":"table","type":"string"},` +
		`{"name":"txId","type":["null","long"],"default":null},{"name":"lsn","type":["null","long"],"default":null}]}},` +
		`{"name":"op","type":"string"},{"name":"ts_ms","type":["null","long"],"default":null},` +
		`{"name":"transaction","type":["null",{"type":"record","name":"block","namespace":"event","fields":[{"name":"id","type":"string"},{"name":"total_order","type":"long"},{"name":"data_collection_order","type":"long"}]}],"default":null}]}`
	dbzAvroKey = `{"type":"record","name":"Key","namespace":"pg.public.customers","fields":[{"name":"id","type":"int"}]}`
)

// dbzAvroImage is a customers row as the Avro converter writes it.
func dbzAvroImage(id int32, name string, email any, cents int64) map[string]any {
	return map[string]any{"id": id, "name": name, "email": email, "balance": big.NewRat(cents, 100),
		"updated_at": int64(1715949296_123456), "signup": int32(19860)}
}

// dbzAvroEvent is an envelope: op, before and after (nil: null), the LSN
// (nil: null) and the connector.
func dbzAvroEvent(t testing.TB, op string, before, after map[string]any, connector string, lsn any) []byte {
	t.Helper()
	var b, a any
	// A record in a union is given as {full name: value}.
	if before != nil {
		b = map[string]any{"pg.public.customers.Value": before}
	}
	if after != nil {
		a = map[string]any{"pg.public.customers.Value": after}
	}
	return avroFrame(t, 11, dbzAvroEnvelope, map[string]any{
		"before": b, "after": a, "op": op, "ts_ms": int64(1715949297000),
		"source": map[string]any{"version": "2.7.0.Final", "connector": connector, "name": "pg", "ts_ms": int64(1715949296000),
			"snapshot": "false", "db": "shop", "schema": "public", "table": "customers", "txId": int64(7), "lsn": lsn},
		"transaction": nil,
	})
}

func dbzAvroPlan(t *testing.T) *Plan {
	reg := newFakeRegistry()
	reg.add(11, sr.TypeAvro, dbzAvroEnvelope)
	reg.add(12, sr.TypeAvro, dbzAvroKey)
	p, err := Compile(route.DebeziumAvro, customerAvroCols, map[string]string{"op": "$op", "tbl": "$source.table", "ts": "$ts_ms"}, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var customerAvroCols = []chschema.ColumnSchema{
	{Name: "id", Type: "Int32"},
	{Name: "name", Type: "String"},
	{Name: "email", Type: "Nullable(String)"},
	{Name: "balance", Type: "Decimal(12, 2)"},
	{Name: "updated_at", Type: "DateTime64(6)"},
	{Name: "signup", Type: "Date"},
	{Name: "op", Type: "LowCardinality(String)"},
	{Name: "tbl", Type: "String"},
	{Name: "ts", Type: "Nullable(Int64)"},
	{Name: "_version", Type: "UInt64"},
	{Name: "_deleted", Type: "UInt8"},
}

// TestDebeziumAvroChangeEvents: the rows of debezium-json, from the Avro
// converter's events: c/r/u write the after image, d the before image or,
// without one, the key; the version is the LSN for PostgreSQL and ts_ms ×
// 1e6 + offset otherwise.
func TestDebeziumAvroChangeEvents(t *testing.T) {
	p := dbzAvroPlan(t)
	key := avroFrame(t, 12, dbzAvroKey, map[string]any{"id": int32(5)})
	f := func(value, key []byte, offset int64, want string) {
		t.Helper()
		blk := p.NewBlock()
		if err := p.Append(blk, &kgo.Record{Topic: "pg.public.customers", Offset: offset, Key: key, Value: value}); err != nil {
			if got := "error: " + err.Error(); !strings.Contains(got, want) {
				t.Errorf("got %s\nwant %s", got, want)
			}
			return
		}
		var parts []string
		for i, c := range blk.Columns() {
			parts = append(parts, fmt.Sprint(norm(chtype.Parse(c.Type), rowOf(blk.ColumnData(i), 0))))
		}
		if got := strings.Join(parts, "|"); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	row := dbzAvroImage(5, "Ann", "ann@example.com", -12345)
	f(dbzAvroEvent(t, "c", nil, row, "postgresql", int64(33)), key, 1,
		"5|Ann|ann@example.com|-123.45|2024-05-17T12:34:56.123456Z|2024-05-17|c|customers|1715949297000|33|0")
	f(dbzAvroEvent(t, "r", nil, dbzAvroImage(5, "Ann", nil, 0), "postgresql", int64(30)), key, 2,
		"5|Ann|<nil>|0|2024-05-17T12:34:56.123456Z|2024-05-17|r|customers|1715949297000|30|0")
	f(dbzAvroEvent(t, "u", row, dbzAvroImage(5, "Bo", nil, 100), "postgresql", int64(40)), key, 3,
		"5|Bo|<nil>|1|2024-05-17T12:34:56.123456Z|2024-05-17|u|customers|1715949297000|40|0")
	f(dbzAvroEvent(t, "d", row, nil, "postgresql", int64(50)), key, 4,
		"5|Ann|ann@example.com|-123.45|2024-05-17T12:34:56.123456Z|2024-05-17|d|customers|1715949297000|50|1")
	// REPLICA IDENTITY DEFAULT: no before image; the key has the id.
	f(dbzAvroEvent(t, "d", nil, nil, "postgresql", int64(60)), key, 5,
		"5||<nil>|0|1970-01-01T00:00:00Z|1970-01-01|d|customers|1715949297000|60|1")
	// Other connectors: ts_ms × 1e6 + offset mod 1e6.
	f(dbzAvroEvent(t, "c", nil, row, "mysql", nil), key, 1_000_007,
		"5|Ann|ann@example.com|-123.45|2024-05-17T12:34:56.123456Z|2024-05-17|c|customers|1715949297000|1715949297000000007|0")
	// Skips and bad records.
	f(nil, key, 6, "error: record carries no row: tombstone")
	f(dbzAvroEvent(t, "t", nil, nil, "postgresql", int64(70)), nil, 7, "error: record carries no row: truncate event (op t)")
	f(dbzAvroEvent(t, "x", nil, row, "postgresql", int64(70)), nil, 8, `invalid Debezium event: unknown op "x"`)
	f(dbzAvroEvent(t, "c", nil, nil, "postgresql", int64(70)), nil, 9, "invalid Debezium event: op c without an after image")
	f(dbzAvroEvent(t, "d", nil, nil, "postgresql", int64(70)), []byte("5"), 10, "delete without a before image and without a registry-framed record key")
	f(dbzAvroEvent(t, "c", nil, row, "postgresql", nil), nil, 11, `column "_version": PostgreSQL event without source.lsn, which is its version`)
	// An unchanged TOASTed value's placeholder is never written as data: a
	// bad record in an update, the column's zero in a delete.
	toasted := dbzAvroImage(5, "__debezium_unavailable_value", nil, 100)
	f(dbzAvroEvent(t, "u", nil, toasted, "postgresql", int64(80)), key, 12,
		`column "name": the value is Debezium's placeholder for an unchanged TOASTed value`)
	f(dbzAvroEvent(t, "d", toasted, nil, "postgresql", int64(81)), key, 13,
		"5||<nil>|1|2024-05-17T12:34:56.123456Z|2024-05-17|d|customers|1715949297000|81|1")
}

// TestDebeziumAvroNeedsVersionColumns: the plan is refused without the
// version and delete-marker columns, as debezium-json's is.
func TestDebeziumAvroNeedsVersionColumns(t *testing.T) {
	reg := newFakeRegistry()
	_, err := Compile(route.DebeziumAvro, []chschema.ColumnSchema{{Name: "id", Type: "Int32"}}, nil, WithRegistry(reg))
	if err == nil || !strings.HasPrefix(err.Error(), "no column receives the row version") {
		t.Fatalf("Compile: %v", err)
	}
}

// TestDebeziumAvroAppendDoesNotAllocate pins the steady state of
// debezium-avro: an update event allocates nothing.
func TestDebeziumAvroAppendDoesNotAllocate(t *testing.T) {
	p := dbzAvroPlan(t)
	v := dbzAvroEvent(t, "u", dbzAvroImage(5, "Ann", "ann@example.com", -12345), dbzAvroImage(5, "Bo", "bo@example.com", 100), "postgresql", int64(40))
	blk := p.NewBlock()
	rec := &kgo.Record{Topic: "pg.public.customers", Value: v}
	next := func() {
		if blk.Rows() == 5000 {
			blk.Reset()
		}
		if err := p.Append(blk, rec); err != nil {
			t.Fatal(err)
		}
	}
	for range 6000 {
		next()
	}
	if allocs := testing.AllocsPerRun(2000, next); allocs > 0.1 {
		t.Fatalf("%.2f allocations per record", allocs)
	}
}

// BenchmarkDebeziumAvroAppend: one update event of the customers table
// per op.
//
//	go test ./internal/decode/ -run '^$' -bench DebeziumAvroAppend -benchmem
func BenchmarkDebeziumAvroAppend(b *testing.B) {
	reg := newFakeRegistry()
	reg.add(11, sr.TypeAvro, dbzAvroEnvelope)
	p, err := Compile(route.DebeziumAvro, customerAvroCols, map[string]string{"op": "$op", "tbl": "$source.table", "ts": "$ts_ms"}, WithRegistry(reg))
	if err != nil {
		b.Fatal(err)
	}
	v := dbzAvroEvent(b, "u", dbzAvroImage(5, "Ann", "ann@example.com", -12345), dbzAvroImage(5, "Bo", "bo@example.com", 100), "postgresql", int64(40))
	rec := &kgo.Record{Topic: "pg.public.customers", Value: v}
	blk := p.NewBlock()
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if blk.Rows() == 10_000 {
			blk.Reset()
		}
		if err := p.Append(blk, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDebeziumAvroDeletePlaceholders: in debezium-avro too, a delete's
// placeholder that does not fit its column ("" into an Enum8) gives the
// type's default when the record key says the column is not part of the
// key; without a key to say so, the record is bad, as is an insert with
// the same value.
func TestDebeziumAvroDeletePlaceholders(t *testing.T) {
	reg := newFakeRegistry()
	reg.add(11, sr.TypeAvro, dbzAvroEnvelope)
	reg.add(12, sr.TypeAvro, dbzAvroKey)
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "name", Type: "Enum8('anne' = 1, 'bob' = 2)"},
		{Name: "_version", Type: "UInt64"}, {Name: "_deleted", Type: "UInt8"}}
	p, err := Compile(route.DebeziumAvro, cols, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	img := dbzAvroImage(5, "", nil, 0) // "": Debezium's placeholder for a NOT NULL text or enum column
	key := avroFrame(t, 12, dbzAvroKey, map[string]any{"id": int32(5)})
	for _, c := range []struct {
		name        string
		value, key  []byte
		want, errIs string
	}{
		{"delete with its key", dbzAvroEvent(t, "d", img, nil, "postgresql", int64(900)), key, "5|1|900|1", ""}, // the Enum8 default: its smallest element,
		{"delete without a key", dbzAvroEvent(t, "d", img, nil, "postgresql", int64(900)), nil, "", `column "name"`},
		{"insert", dbzAvroEvent(t, "c", nil, img, "postgresql", int64(900)), key, "", `column "name"`},
	} {
		blk := p.NewBlock()
		err := p.Append(blk, &kgo.Record{Topic: "pg.public.customers", Key: c.key, Value: c.value})
		if c.errIs != "" {
			if err == nil || !strings.Contains(err.Error(), c.errIs) {
				t.Errorf("%s: err = %v, want one with %s", c.name, err, c.errIs)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var parts []string
		for i, col := range blk.Columns() {
			parts = append(parts, fmt.Sprint(norm(chtype.Parse(col.Type), rowOf(blk.ColumnData(i), 0))))
		}
		if got := strings.Join(parts, "|"); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}
