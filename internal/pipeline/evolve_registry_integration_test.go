//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
	"sink/internal/registry"
	"sink/internal/testenv"
	"sink/tools/eventfmt"
)

// Schema drift and evolution for the registry formats, on the real stack:
// a producer registers version 2 of its schema with new fields; the fields
// are counted, and with schema.evolve: add_columns become columns typed by
// the schema.

const (
	evolveAvroV1 = `{"type":"record","name":"Order","namespace":"sink.evolve","fields":[
		{"name":"id","type":"long"},{"name":"a","type":"string"}]}`
	evolveAvroV2 = `{"type":"record","name":"Order","namespace":"sink.evolve","fields":[
		{"name":"id","type":"long"},{"name":"a","type":"string"},
		{"name":"note","type":["null","string"],"default":null},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-micros"},"default":0},
		{"name":"flag","type":"boolean","default":false},
		{"name":"tags","type":{"type":"array","items":"string"},"default":[]},
		{"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2},"default":"\u0000"}]}`
)

// evolveAvroAt is record id's timestamp-micros value, in µs.
func evolveAvroAt(id int) int64 { return 1715949296_000000 + int64(id)*1_000_001 }

// avroVersions registers both schema versions under a subject of its own
// and returns a function making record id of version 1 or 2.
func avroVersions(t *testing.T) func(id, version int) []byte {
	subject := testenv.UniqueName(t, "evolve-avro") + "-value"
	v1 := registerAvro(t, subject, evolveAvroV1)
	v2 := registerAvro(t, subject, evolveAvroV2)
	return func(id, version int) []byte {
		if version == 1 {
			return avroValue(t, v1, evolveAvroV1, map[string]any{"id": int64(id), "a": "x"})
		}
		return avroValue(t, v2, evolveAvroV2, map[string]any{
			"id": int64(id), "a": "x", "note": map[string]any{"string": fmt.Sprintf("n%d", id)},
			"at": time.UnixMicro(evolveAvroAt(id)).UTC(), "flag": id%2 == 0, "tags": []string{"x", fmt.Sprint(id)},
			"price": big.NewRat(int64(id)*100+5, 100),
		})
	}
}

// avroV2Columns are the columns, "name type", that version 2 of the Avro
// schema gives its fields on s.
func avroV2Columns(s testenv.Server) []string {
	want := []string{"id Int64", "a String", "note Nullable(String)", "at DateTime", "flag UInt8", "tags Array(String)", "price Decimal(10, 2)"}
	if s.AtLeast(24, 8) {
		want[3], want[4] = "at DateTime64(6)", "flag Bool"
	}
	return want
}

// avroV2Filled counts the rows of db.t matching where that hold the values
// avroVersions gives version 2's fields.
func avroV2Filled(s testenv.Server, db, where string) string {
	at := fmt.Sprintf("toUInt32(at) = intDiv(%d + id * 1000001, 1000000)", evolveAvroAt(0))
	if s.AtLeast(24, 8) {
		at = fmt.Sprintf("toUnixTimestamp64Micro(at) = %d + id * 1000001", evolveAvroAt(0))
	}
	return "SELECT count() FROM " + db + ".t WHERE " + where + " AND note = concat('n', toString(id)) AND " + at +
		" AND flag = (id % 2 = 0) AND tags = ['x', toString(id)] AND toString(price) = concat(toString(id), '.05')"
}

func recordsOf(make func(id, version int) []byte, from, to, version int) [][]byte {
	var out [][]byte
	for i := from; i < to; i++ {
		out = append(out, make(i, version))
	}
	return out
}

// expectColumns fails unless db.t's columns (sorted) are want.
func expectColumns(t *testing.T, got, want []string) {
	t.Helper()
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("columns\n  %v\nwant\n  %v", got, want)
	}
}

// Without schema.evolve, the fields version 2 adds are counted per field
// (only the records of version 2 carry them); the table is not changed and
// every record lands.
func TestUnmappedAvroFieldsCounted(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id Int64, a String")
		record := avroVersions(t)
		cfg := evolveConfigFormat(t, s, topic, db, "avro", "")
		done, stop, unmapped := startWithMetrics(t, cfg)
		sendBytes(t, done, cfg, topic, 200, append(recordsOf(record, 0, 50, 1), recordsOf(record, 50, 200, 2)...)...)
		stopClean(t, done, stop)
		checkUnmapped(t, unmapped, db, map[string]float64{"note": 150, "at": 150, "flag": 150, "tags": 150, "price": 150}, 5)
		if n := countRows(t, ch, db+".t"); n != 200 {
			t.Errorf("%d rows; want 200", n)
		}
		if cols := columnsOf(t, ch, db); len(cols) != 2 {
			t.Errorf("columns %v: the table changed without schema.evolve", cols)
		}
	})
}

// With schema.evolve: add_columns, the fields of version 2 become columns
// of the types its schema gives them on that server, and the records
// decoded after the ALTER fill them.
func TestEvolveAvroAddsSchemaTypedColumns(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id Int64, a String")
		record := avroVersions(t)
		cfg := evolveConfigFormat(t, s, topic, db, "avro", "{evolve: add_columns}")
		done, stop := startPipeline(t, cfg)
		sendBytes(t, done, cfg, topic, 200, append(recordsOf(record, 0, 100, 1), recordsOf(record, 100, 200, 2)...)...)
		expectEvolved(t, ch, db, done, avroV2Columns(s))

		sendBytes(t, done, cfg, topic, 400, recordsOf(record, 200, 400, 2)...)
		if n := countRows(t, ch, db+".t"); n != 400 {
			t.Fatalf("%d rows; want 400", n)
		}
		expectCount(t, ch, avroV2Filled(s, db, "id >= 100"), 300, "%d of the 300 version-2 records filled every new column; want 300 (the first ones wait for the ALTERs)")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id < 100 AND note IS NULL", 100, "%d of the 100 version-1 records have a NULL note; want 100")
		stopClean(t, done, stop)
	})
}

// evolveProtoEvent is record id of the shop Event message as protojson;
// version 2 sets the field it adds.
func evolveProtoEvent(id int, version2 bool) string {
	js := fmt.Sprintf(`{"id":"%d","i32":%d,"s64":"-9","flag":true,"db":0.5,"name":"n","raw":"AAE=","kind":"VIEW",
		"nums":["%d","-1"],"tags":["a"],"counts":{"x":"%d"},"inner":{"a":"in","b":2},"number":"%d",
		"ts":"%s","dur":"1.5s","maybe":"%d","attrs":{"k":"v"},"price":{"units":"12","cents":5},"items":[{"a":"i"}]`,
		id, -id, id, id, id, time.Unix(1715949296+int64(id), 123456789).UTC().Format(time.RFC3339Nano), id)
	if version2 {
		js += fmt.Sprintf(`,"added":"v2-%d"`, id)
	}
	return js + "}"
}

// protoEventColumns are the columns, "name type", that the schema gives the
// fields of version 1 of the shop Event message on s.
func protoEventColumns(s testenv.Server) []string {
	want := []string{"id UInt64", "name String", "i32 Int32", "s64 Int64", "flag UInt8", "db Float64", "raw String",
		"kind String", "nums Array(Int64)", "tags Array(String)", "counts String", "inner String", "text String",
		"number Int64", "ts DateTime", "dur String", "maybe Nullable(Int64)", "attrs String", "price String", "items Array(String)"}
	if s.AtLeast(24, 8) {
		on26 := map[string]string{"flag UInt8": "flag Bool", "counts String": "counts Map(String, Int64)", "inner String": "inner JSON",
			"ts DateTime": "ts DateTime64(9)", "attrs String": "attrs JSON", "price String": "price JSON"}
		for i, c := range want {
			if t26, ok := on26[c]; ok {
				want[i] = t26
			}
		}
	}
	return want
}

// protoEventFilled counts the rows of db.t matching where that hold the
// values evolveProtoEvent gives the Event's fields.
func protoEventFilled(s testenv.Server, db, where string) string {
	ts := "toUInt32(ts) = 1715949296 + id"
	obj := "replaceAll(price, ' ', '') = '{\"units\":12,\"cents\":5}'"
	if s.AtLeast(24, 8) {
		ts = "toUnixTimestamp64Nano(ts) = (1715949296 + id) * 1000000000 + 123456789"
		obj = "price.units = 12 AND counts['x'] = id"
	}
	return "SELECT count() FROM " + db + ".t WHERE " + where + " AND i32 = -id AND kind = 'VIEW' AND nums = [toInt64(id), -1]" +
		" AND number = id AND maybe = id AND " + ts + " AND " + obj
}

func protoVersions(t *testing.T, topic string) func(id, version int) []byte {
	v1, v2 := shopSchemas(t, testenv.Registry(t), topic)
	return func(id, version int) []byte {
		if version == 1 {
			return shopRecord(t, v1, false, "shop.v1.Event", evolveProtoEvent(id, false))
		}
		return shopRecord(t, v2, true, "shop.v1.Event", evolveProtoEvent(id, true))
	}
}

func TestUnmappedProtobufFieldsCounted(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id UInt64, name String")
		record := protoVersions(t, topic)
		cfg := evolveConfigFormat(t, s, topic, db, "protobuf", "")
		done, stop, unmapped := startWithMetrics(t, cfg)
		sendBytes(t, done, cfg, topic, 100, append(recordsOf(record, 0, 50, 1), recordsOf(record, 50, 100, 2)...)...)
		stopClean(t, done, stop)
		// The Event's 20 fields less id and name, and version 2's added.
		checkUnmapped(t, unmapped, db, map[string]float64{"added": 50, "i32": 100, "text": 100, "ts": 100}, 19)
		if n := countRows(t, ch, db+".t"); n != 100 {
			t.Errorf("%d rows; want 100", n)
		}
	})
}

// With add_columns, every field of the Protobuf message the table lacks
// becomes a column typed by the schema (the cap raised to let them all
// in), then version 2's new field does, and the records after fill them.
func TestEvolveProtobufAddsSchemaTypedColumns(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id UInt64, name String")
		record := protoVersions(t, topic)
		cfg := evolveConfigFormat(t, s, topic, db, "protobuf", "{evolve: add_columns, max_new_columns_per_hour: 30}")
		done, stop := startPipeline(t, cfg)

		sendBytes(t, done, cfg, topic, 100, recordsOf(record, 0, 100, 1)...)
		want := protoEventColumns(s)
		expectEvolved(t, ch, db, done, want)

		sendBytes(t, done, cfg, topic, 200, recordsOf(record, 100, 200, 2)...)
		expectEvolved(t, ch, db, done, append(want, "added String"))

		sendBytes(t, done, cfg, topic, 300, recordsOf(record, 200, 300, 2)...)
		if n := countRows(t, ch, db+".t"); n != 300 {
			t.Fatalf("%d rows; want 300", n)
		}
		expectCount(t, ch, protoEventFilled(s, db, "id >= 0"), 300, "%d of the 300 records filled the new columns; want 300 (the first ones wait for the ALTERs)")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id >= 100 AND added = concat('v2-', toString(id))", 200, "%d of the 200 version-2 records filled added; want 200")
		stopClean(t, done, stop)
	})
}

// json-schema records are JSON objects: their new fields are typed from
// their values, as json's are, and add_columns works the same.
func TestEvolveJSONSchemaAddsColumns(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id UInt64")
		rc, err := registry.New(config.SchemaRegistry{URLs: []string{testenv.Registry(t)}}, registry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		id, err := rc.Register(context.Background(), testenv.UniqueName(t, "evolve-js")+"-value", sr.TypeJSON, eventfmt.JSONSchemaText)
		if err != nil {
			t.Fatal(err)
		}
		records := func(from, to int) [][]byte {
			var out [][]byte
			for i := from; i < to; i++ {
				out = append(out, append(registry.AppendFrame(nil, id, false), fmt.Sprintf(`{"id":%d,"x":%d,"s":"s%d"}`, i, -i, i)...))
			}
			return out
		}
		cfg := evolveConfigFormat(t, s, topic, db, "json-schema", "{evolve: add_columns}")
		done, stop := startPipeline(t, cfg)
		sendBytes(t, done, cfg, topic, 100, records(0, 100)...)
		expectEvolved(t, ch, db, done, []string{"id UInt64", "x Int64", "s String"})
		sendBytes(t, done, cfg, topic, 200, records(100, 200)...)
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE x = -id AND s = concat('s', toString(id))", 200, "%d of the 200 records filled x and s; want 200 (the first ones wait for the ALTER)")
		stopClean(t, done, stop)
	})
}

// The cap, the allow and deny lists and schema.nullable apply to fields
// typed by a schema as to json's: of the permitted i32, db and ts (s64 is
// denied, the rest not allowed), the cap lets two in, as Nullable.
func TestEvolveProtobufCapAndLists(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id UInt64")
		record := protoVersions(t, topic)
		cfg := evolveConfigFormat(t, s, topic, db, "protobuf",
			`{evolve: add_columns, allow: [i32, db, ts, s64], deny: [s64], max_new_columns_per_hour: 2, nullable: true}`)
		done, stop := startPipeline(t, cfg)
		sendBytes(t, done, cfg, topic, 100, recordsOf(record, 0, 100, 1)...)
		waitColumns(t, ch, db, done, 3)
		sendBytes(t, done, cfg, topic, 200, recordsOf(record, 100, 200, 2)...)
		ts := "Nullable(DateTime)"
		if s.AtLeast(24, 8) {
			ts = "Nullable(DateTime64(9))"
		}
		allowed := map[string]bool{"i32 Nullable(Int32)": true, "db Nullable(Float64)": true, "ts " + ts: true}
		checkCapped(t, ch, db, allowed, "s64 is denied, the other fields not allowed", 200)
		stopClean(t, done, stop)
	})
}
