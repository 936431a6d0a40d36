package decode

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/testenv/cdcevent"
)

// placeholderCase is one NOT NULL column of a PostgreSQL table that a
// delete under REPLICA IDENTITY DEFAULT carries only as Debezium's
// placeholder: the column's ClickHouse type, the field's Kafka Connect
// schema (type and semantic name) and the placeholder Debezium writes.
type placeholderCase struct {
	col, chType   string
	typ, semantic string
	params        string // the schema's "parameters" object, or ""
	value         string // the placeholder, as JSON
	converts      bool   // the placeholder converts to the column's type by itself
}

// placeholderCases are the placeholders Debezium writes for each kind of
// NOT NULL column ("" for text, enum and uuid, false, 0, [], the epoch,
// empty bytes for a numeric) against the column types a user would pick.
var placeholderCases = []placeholderCase{
	{"e8", "Enum8('new' = 1, 'paid' = 2)", "string", "io.debezium.data.Enum", "", `""`, false},
	{"e16", "Enum16('low' = 1000, 'high' = 2000)", "string", "io.debezium.data.Enum", "", `""`, false},
	{"uid", "UUID", "string", "io.debezium.data.Uuid", "", `""`, false},
	{"nuid", "Nullable(UUID)", "string", "io.debezium.data.Uuid", "", `""`, false},
	{"zts", "DateTime64(6)", "string", "io.debezium.time.ZonedTimestamp", "", `""`, false},
	{"zdt", "DateTime", "string", "io.debezium.time.ZonedTimestamp", "", `""`, false},
	{"num", "Decimal(12, 2)", "bytes", "org.apache.kafka.connect.data.Decimal", `{"scale":"2","connect.decimal.precision":"12"}`, `""`, true},
	{"ip4", "IPv4", "string", "", "", `""`, false},
	{"ip6", "IPv6", "string", "", "", `""`, false},
	{"fs", "FixedString(2)", "string", "", "", `""`, true},
	{"lc", "LowCardinality(String)", "string", "", "", `""`, true},
	{"d", "Date", "int32", "io.debezium.time.Date", "", `0`, true},
	{"d32", "Date32", "int32", "io.debezium.time.Date", "", `0`, true},
	{"ts", "DateTime", "int64", "io.debezium.time.MicroTimestamp", "", `0`, true},
	{"ts64", "DateTime64(3)", "int64", "io.debezium.time.Timestamp", "", `0`, true},
	{"arr", "Array(Int32)", "array", "", "", `[]`, true},
	{"earr", "Array(Enum8('a' = 1))", "array", "", "", `[""]`, false},
	{"flag", "Bool", "boolean", "", "", `false`, true},
	{"qty", "Int32", "int32", "", "", `0`, true},
}

// placeholderDelete is a Debezium delete of the row with key id whose
// before image has the key and the placeholders of cs, and its record key.
func placeholderDelete(id int, cs []placeholderCase) (value, key []byte) {
	cols := make([]cdcevent.Column, len(cs))
	vals := make([]string, len(cs))
	for i, c := range cs {
		cols[i] = cdcevent.Column{Name: c.col, Type: c.typ, Semantic: c.semantic, Params: c.params}
		vals[i] = c.value
	}
	return cdcevent.Event("d", id, 26975480, cols, vals)
}

// TestDebeziumDeletePlaceholders: a delete whose before image holds
// Debezium's placeholders is a delete row with its key and version, every
// other column its type's default (what a missing value gives), for each
// placeholder and column type, in debezium-json.
func TestDebeziumDeletePlaceholders(t *testing.T) {
	for _, c := range placeholderCases {
		t.Run(c.col, func(t *testing.T) {
			cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: c.col, Type: c.chType}}
			value, key := placeholderDelete(7, []placeholderCase{c})
			got, err := dbzRow(t, cols, nil, &kgo.Record{Topic: "pg.public.t", Value: value, Key: key})
			if err != nil {
				t.Fatalf("delete: %v", err)
			}
			if got["id"] != int32(7) || got["_deleted"] != uint8(1) || got["_version"] != uint64(26975480) {
				t.Errorf("key and version: got %v", got)
			}
			if !c.converts {
				// The placeholder is one the column refuses: the default
				// is the delete path's doing, not the column's.
				ins := strings.Replace(string(value), `"before":{`, `"before":null,"after":{`, 1)
				ins = strings.Replace(ins, `},"after":null,`, `},`, 1)
				ins = strings.Replace(ins, `"op":"d"`, `"op":"c"`, 1)
				if _, err := dbzRow(t, cols, nil, &kgo.Record{Topic: "pg.public.t", Value: []byte(ins), Key: key}); err == nil {
					t.Errorf("an insert with %s in %s is not a bad record, so this case tests nothing", c.value, c.chType)
				}
			}
			want, err := decodeOne(t, c.chType, "")
			if err != nil {
				t.Fatalf("default of %s: %v", c.chType, err)
			}
			if w := firstRow(c.chType, want); !c.converts && !reflect.DeepEqual(got[c.col], w) {
				t.Errorf("%s = %#v, want the type's default %#v", c.col, got[c.col], w)
			}
		})
	}

	// All of them in one row, as one table's delete.
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}}
	for _, c := range placeholderCases {
		cols = append(cols, chschema.ColumnSchema{Name: c.col, Type: c.chType})
	}
	value, key := placeholderDelete(9, placeholderCases)
	got, err := dbzRow(t, cols, nil, &kgo.Record{Topic: "pg.public.t", Value: value, Key: key})
	if err != nil {
		t.Fatalf("delete of every kind: %v", err)
	}
	if got["id"] != int32(9) || got["_deleted"] != uint8(1) {
		t.Errorf("delete of every kind: %v", got)
	}
}

// TestDebeziumDeletePlaceholderKeyStrict: a key column that does not
// convert is still a bad record, and so is any column when the record key
// cannot say which columns are the key.
func TestDebeziumDeletePlaceholderKeyStrict(t *testing.T) {
	c := placeholderCases[0] // an Enum8 that "" does not fit
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: c.col, Type: c.chType}}
	value, key := placeholderDelete(7, []placeholderCase{c})
	for _, k := range []struct {
		name string
		key  []byte
	}{
		{"enum column in the key", []byte(`{"id":7,"e8":""}`)},
		{"no record key", nil},
		{"key not JSON", []byte(`{id`)},
		{"key a JSON number", []byte(`7`)},
	} {
		_, err := dbzRow(t, cols, nil, &kgo.Record{Topic: "pg.public.t", Value: value, Key: k.key})
		var re *RecordError
		if !errors.As(err, &re) || re.Column != "e8" {
			t.Errorf("%s: err = %v, want a bad record naming column e8", k.name, err)
		}
	}
	// The key, bare or wrapped, names the key columns.
	for _, k := range [][]byte{key, []byte(`{"id":7}`)} {
		if _, err := dbzRow(t, cols, nil, &kgo.Record{Topic: "pg.public.t", Value: value, Key: k}); err != nil {
			t.Errorf("key %s: %v", k, err)
		}
	}
	// A mapped column is the key's when the field it reads is.
	mcols := []chschema.ColumnSchema{{Name: "pk", Type: "Int32"}, {Name: "state", Type: c.chType}}
	if _, err := dbzRow(t, mcols, map[string]string{"pk": "id", "state": "e8"}, &kgo.Record{Topic: "pg.public.t", Value: value, Key: key}); err != nil {
		t.Errorf("mapped columns: %v", err)
	}
	_, err := dbzRow(t, mcols, map[string]string{"pk": "id", "state": "e8"}, &kgo.Record{Topic: "pg.public.t", Value: value, Key: []byte(`{"id":7,"e8":""}`)})
	if err == nil {
		t.Error("mapped key column with a bad value: no error")
	}
}

// samplesTable is a ClickHouse table for the captured types_default and
// types_full tables (testdata/debezium/dbz361_pg15_*: Debezium 3.6.1,
// PostgreSQL 15, pgoutput) with the column types a user would pick.
var samplesTable = []chschema.ColumnSchema{
	{Name: "id", Type: "Int32"},
	{Name: "c_int4", Type: "Int32"},
	{Name: "c_num122", Type: "Decimal(12, 2)"},
	{Name: "c_bool", Type: "Bool"},
	{Name: "c_date", Type: "Date32"},
	{Name: "c_ts", Type: "DateTime64(6)"},
	{Name: "c_tstz", Type: "DateTime64(6)"},
	{Name: "c_time", Type: "String"},
	{Name: "c_timetz", Type: "String"},
	{Name: "c_interval", Type: "Int64"},
	{Name: "c_uuid", Type: "UUID"},
	{Name: "c_text_arr", Type: "Array(Nullable(String))"},
	{Name: "c_enum", Type: "Enum8('sad' = 1, 'ok' = 2, 'happy' = 3)"},
	{Name: "c_text", Type: "LowCardinality(String)"},
}

// TestDebeziumCapturedDeletes: real deletes (REPLICA IDENTITY DEFAULT,
// with the JSON converter's schemas and without; a composite key) become
// delete rows with their key and version.
func TestDebeziumCapturedDeletes(t *testing.T) {
	for _, c := range []struct{ value, key string }{
		{"dbz361_pg15_types_default_delete.json", "dbz361_pg15_types_default_key.json"},
		{"dbz361_pg15_types_default_delete_bare.json", "dbz361_pg15_types_default_key_bare.json"},
	} {
		got, err := dbzRow(t, samplesTable, nil, &kgo.Record{Topic: "dbzs.public.types_default", Value: fixture(t, c.value), Key: fixture(t, c.key)})
		if err != nil {
			t.Errorf("%s: %v", c.value, err)
			continue
		}
		if got["id"] != int32(2) || got["_deleted"] != uint8(1) || got["_version"] != uint64(26880248) || got["c_text"] != "dflt" {
			t.Errorf("%s: %v", c.value, got)
		}
	}
	pairs := []chschema.ColumnSchema{{Name: "a", Type: "Int32"}, {Name: "b", Type: "String"}, {Name: "v", Type: "UUID"}}
	got, err := dbzRow(t, pairs, nil, &kgo.Record{Topic: "dbzs.public.pairs", Value: fixture(t, "dbz361_pg15_pairs_delete.json"), Key: fixture(t, "dbz361_pg15_pairs_key.json")})
	if err != nil {
		t.Fatalf("pairs: %v", err)
	}
	if got["a"] != int32(1) || got["b"] != "one" || got["_deleted"] != uint8(1) {
		t.Errorf("pairs: %v", got)
	}
}

// TestDebeziumCapturedTemporal: the captured types_full rows' dates and
// times (24:00:00, year 1, before 1970, timetz, interval) into String,
// Int64 and DateTime64 columns.
func TestDebeziumCapturedTemporal(t *testing.T) {
	cols := []chschema.ColumnSchema{
		{Name: "id", Type: "Int32"},
		{Name: "c_date", Type: "String"}, {Name: "d_num", Type: "Int32"},
		{Name: "c_ts", Type: "DateTime64(6)"}, {Name: "ts_text", Type: "String"},
		{Name: "c_tstz", Type: "DateTime64(6)"}, {Name: "tstz_num", Type: "Int64"},
		{Name: "c_time", Type: "String"}, {Name: "time_dt", Type: "DateTime64(6)"}, {Name: "time_num", Type: "UInt64"},
		{Name: "c_timetz", Type: "String"}, {Name: "timetz_dt", Type: "DateTime64(6)"}, {Name: "timetz_num", Type: "Int64"},
		{Name: "c_interval", Type: "Int64"}, {Name: "interval_text", Type: "String"},
	}
	mapping := map[string]string{"d_num": "c_date", "ts_text": "c_ts", "tstz_num": "c_tstz", "time_dt": "c_time", "time_num": "c_time",
		"timetz_dt": "c_timetz", "timetz_num": "c_timetz", "interval_text": "c_interval"}
	for _, c := range []struct {
		fixture string
		want    map[string]any
	}{
		// '2024-02-29', '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.123456+02', '13:14:15.123456',
		// '13:14:15.5+05:30', '1 year 2 mons 3 days 04:05:06.789'
		{"dbz361_pg15_types_full_snapshot.json", map[string]any{"c_date": "2024-02-29", "d_num": int32(19782),
			"c_ts": "2024-02-29T13:14:15.123456Z", "ts_text": "2024-02-29 13:14:15.123456",
			"c_tstz": "2024-02-29T11:14:15.123456Z", "tstz_num": int64(1709205255123456),
			"c_time": "13:14:15.123456", "time_dt": "1970-01-01T13:14:15.123456Z", "time_num": uint64(47655123456),
			"c_timetz": "07:44:15.5Z", "timetz_dt": "1970-01-01T07:44:15.5Z", "timetz_num": int64(27855500000),
			"c_interval": int64(37091106789000), "interval_text": "37091106789000"}},
		// '0001-01-01', '1970-01-01 00:00:00', '1969-12-31 23:59:59.999999+00', '24:00:00', '00:00:00-03', '-1 days -00:00:01'
		{"dbz361_pg15_types_full_delete.json", map[string]any{"c_date": "0001-01-01", "d_num": int32(-719162),
			"c_ts": "1970-01-01T00:00:00Z", "ts_text": "1970-01-01 00:00:00",
			"c_tstz": "1969-12-31T23:59:59.999999Z", "tstz_num": int64(-1),
			"c_time": "24:00:00", "time_dt": "1970-01-02T00:00:00Z", "time_num": uint64(86400000000),
			"c_timetz": "03:00:00Z", "timetz_dt": "1970-01-01T03:00:00Z", "timetz_num": int64(10800000000),
			"c_interval": int64(-86401000000), "interval_text": "-86401000000"}},
	} {
		got, err := dbzRow(t, cols, mapping, &kgo.Record{Topic: "dbzs.public.types_full", Value: fixture(t, c.fixture)})
		if err != nil {
			t.Errorf("%s: %v", c.fixture, err)
			continue
		}
		for col, w := range c.want {
			if !reflect.DeepEqual(got[col], w) {
				t.Errorf("%s: %s = %#v, want %#v", c.fixture, col, got[col], w)
			}
		}
	}
}

// TestDebeziumCapturedPlaceholderDelete: a real delete under REPLICA
// IDENTITY DEFAULT of a row whose columns are all NOT NULL (Debezium
// 3.6.1, PostgreSQL 15: "" for the enum, uuid, inet, char, text, jsonb and
// bytea, the epoch for timestamptz, 0, false, [], base64 zero for numeric)
// into the column types a user would pick: the delete row has the key and
// the version, every column its type's default where the placeholder does
// not fit. Without the record key no column is known not to be the key,
// and the same event is a bad record. The snapshot read of the row, with
// real values, fills the same table.
func TestDebeziumCapturedPlaceholderDelete(t *testing.T) {
	cols := []chschema.ColumnSchema{
		{Name: "id", Type: "Int32"}, {Name: "status", Type: "Enum8('new' = 1, 'paid' = 2)"}, {Name: "uid", Type: "UUID"},
		{Name: "paid_at", Type: "DateTime64(6)"}, {Name: "seen", Type: "DateTime64(6)"}, {Name: "born", Type: "Date"},
		{Name: "at_time", Type: "String"}, {Name: "at_timetz", Type: "String"}, {Name: "span", Type: "Int64"},
		{Name: "amount", Type: "Decimal(12, 2)"}, {Name: "amount_any", Type: "Decimal(20, 4)"}, {Name: "tags", Type: "Array(String)"},
		{Name: "ip", Type: "IPv4"}, {Name: "flag", Type: "Bool"}, {Name: "code", Type: "FixedString(2)"}, {Name: "note", Type: "String"},
		{Name: "doc", Type: "Map(String, Int64)"}, {Name: "raw", Type: "String"}, {Name: "qty", Type: "Int32"},
	}
	snap, err := dbzRow(t, cols, nil, &kgo.Record{Topic: "dbzph.public.orders", Value: fixture(t, "dbz361_pg15_orders_snapshot.json")})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap["status"] != int8(2) || snap["uid"] != "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" || snap["ip"] != "10.0.0.1" || snap["at_time"] != "24:00:00" ||
		snap["amount"] != "12.34" || snap["_deleted"] != uint8(0) {
		t.Errorf("snapshot row: %v", snap)
	}
	del := fixture(t, "dbz361_pg15_orders_delete_placeholders.json")
	got, err := dbzRow(t, cols, nil, &kgo.Record{Topic: "dbzph.public.orders", Value: del, Key: fixture(t, "dbz361_pg15_orders_key.json")})
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got["id"] != int32(1) || got["_deleted"] != uint8(1) || got["_version"] == uint64(0) {
		t.Errorf("delete row: key, marker, version: %v", got)
	}
	for _, c := range []string{"status", "uid", "ip", "doc"} { // the placeholders that do not fit
		var typ string
		for _, col := range cols {
			if col.Name == c {
				typ = col.Type
			}
		}
		d, err := decodeOne(t, typ, "")
		if err != nil {
			t.Fatal(err)
		}
		if w := firstRow(typ, d); !reflect.DeepEqual(got[c], w) {
			t.Errorf("delete row: %s = %#v, want the type's default %#v", c, got[c], w)
		}
	}
	var re *RecordError
	if _, err := dbzRow(t, cols, nil, &kgo.Record{Topic: "dbzph.public.orders", Value: del}); !errors.As(err, &re) {
		t.Errorf("delete without its key: %v, want a bad record", err)
	}
}
