package decode

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
)

// dbzValueEvent is an insert (wrapped with its schema) whose after image
// has the key id and field v of Kafka Connect type typ with semantic name
// sem, value value (JSON).
func dbzValueEvent(typ, sem, value string) []byte {
	f := fmt.Sprintf(`{"type":%q,"optional":true,"name":%q,"version":1,"field":"v"}`, typ, sem)
	img := `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},` + f + `],"optional":true,"name":"pg.public.t.Value","field":"%s"}`
	schema := `{"type":"struct","fields":[` + fmt.Sprintf(img, "before") + "," + fmt.Sprintf(img, "after") +
		`,{"type":"struct","fields":[{"type":"string","optional":false,"field":"connector"},{"type":"int64","optional":true,"field":"lsn"}],"optional":false,"field":"source"},` +
		`{"type":"string","optional":false,"field":"op"}],"optional":false,"name":"pg.public.t.Envelope"}`
	return []byte(`{"schema":` + schema + `,"payload":{"before":null,"after":{"id":1,"v":` + value +
		`},"source":{"connector":"postgresql","lsn":100},"op":"c"}}`)
}

// errPrefix marks a want that is a bad record whose reason contains the rest.
const errPrefix = "error: "

// TestDebeziumTemporalTypes pins what each Debezium temporal type becomes
// in each column type a user would pick for it (debeziumFormat's doc
// comment and docs/formats.md say the same): String gets PostgreSQL's text
// of the value, numeric columns Debezium's number (ZonedTimestamp: µs since
// the epoch; ZonedTime: µs since midnight UTC), DateTime64 the instant
// (a time of day: that long after 1970-01-01 00:00 UTC), Date a day only.
func TestDebeziumTemporalTypes(t *testing.T) {
	const (
		date    = "io.debezium.time.Date"
		ts      = "io.debezium.time.Timestamp"
		microTs = "io.debezium.time.MicroTimestamp"
		nanoTs  = "io.debezium.time.NanoTimestamp"
		zonedTs = "io.debezium.time.ZonedTimestamp"
		tm      = "io.debezium.time.Time"
		microTm = "io.debezium.time.MicroTime"
		nanoTm  = "io.debezium.time.NanoTime"
		zonedTm = "io.debezium.time.ZonedTime"
		dur     = "io.debezium.time.MicroDuration"
	)
	cases := []struct {
		typ, sem, value string
		want            map[string]any // column type -> value, or errPrefix + part of the reason
	}{
		// date '2024-05-17' and '1969-07-20' (before 1970) and '0001-01-01'.
		{"int32", date, `19860`, map[string]any{"String": "2024-05-17", "Int32": int32(19860), "Date": "2024-05-17",
			"Date32": "2024-05-17", "DateTime": "2024-05-17 00:00:00", "DateTime64(6)": "2024-05-17T00:00:00Z"}},
		{"int32", date, `-165`, map[string]any{"String": "1969-07-20", "Int32": int32(-165), "Date": errPrefix + "out of range",
			"Date32": "1969-07-20", "DateTime": errPrefix + "out of range", "DateTime64(6)": "1969-07-20T00:00:00Z", "UInt32": errPrefix + ""}},
		{"int32", date, `-719162`, map[string]any{"String": "0001-01-01", "Int32": int32(-719162), "Date32": errPrefix + "out of range",
			"DateTime64(6)": errPrefix + "out of range"}},
		// timestamp(3), timestamp(6), timestamp with nanoseconds; pre-1970.
		{"int64", ts, `1715949296789`, map[string]any{"String": "2024-05-17 12:34:56.789", "Int64": int64(1715949296789),
			"DateTime": "2024-05-17 12:34:56", "DateTime64(3)": "2024-05-17T12:34:56.789Z", "Date": "2024-05-17"}},
		{"int64", microTs, `1715949296789012`, map[string]any{"String": "2024-05-17 12:34:56.789012", "Int64": int64(1715949296789012),
			"UInt64": uint64(1715949296789012), "DateTime64(6)": "2024-05-17T12:34:56.789012Z", "Float64": float64(1715949296789012)}},
		{"int64", microTs, `-1`, map[string]any{"String": "1969-12-31 23:59:59.999999", "Int64": int64(-1),
			"DateTime64(6)": "1969-12-31T23:59:59.999999Z", "DateTime": errPrefix + "out of range", "UInt64": errPrefix + ""}},
		{"int64", nanoTs, `1715949296789012345`, map[string]any{"String": "2024-05-17 12:34:56.789012345",
			"Int64": int64(1715949296789012345), "DateTime64(9)": "2024-05-17T12:34:56.789012345Z"}},
		// timestamptz: RFC 3339 text in UTC.
		{"string", zonedTs, `"2024-05-17T12:34:56.789012Z"`, map[string]any{"String": "2024-05-17T12:34:56.789012Z",
			"Int64": int64(1715949296789012), "DateTime64(6)": "2024-05-17T12:34:56.789012Z", "DateTime": "2024-05-17 12:34:56",
			"Date": "2024-05-17", "Decimal(20, 0)": "1715949296789012"}},
		{"string", zonedTs, `"1969-12-31T23:59:59.999999Z"`, map[string]any{"String": "1969-12-31T23:59:59.999999Z",
			"Int64": int64(-1), "DateTime64(6)": "1969-12-31T23:59:59.999999Z", "DateTime": errPrefix + "out of range"}},
		// time(3), time(6), time with nanoseconds, and 24:00:00.
		{"int32", tm, `45296789`, map[string]any{"String": "12:34:56.789", "Int32": int32(45296789),
			"DateTime64(3)": "1970-01-01T12:34:56.789Z", "Date": errPrefix + "time of day"}},
		{"int64", microTm, `45296789012`, map[string]any{"String": "12:34:56.789012", "Int64": int64(45296789012),
			"DateTime64(6)": "1970-01-01T12:34:56.789012Z", "DateTime": "1970-01-01 12:34:56"}},
		{"int64", microTm, `86400000000`, map[string]any{"String": "24:00:00", "Int64": int64(86400000000), "UInt64": uint64(86400000000),
			"DateTime64(6)": "1970-01-02T00:00:00Z", "Date32": errPrefix + "time of day"}},
		{"int64", microTm, `0`, map[string]any{"String": "00:00:00", "DateTime64(6)": "1970-01-01T00:00:00Z"}},
		{"int64", microTm, `86400000001`, map[string]any{"String": errPrefix + "not a time of day", "Int64": int64(86400000001)}},
		{"int64", nanoTm, `45296789012345`, map[string]any{"String": "12:34:56.789012345", "DateTime64(9)": "1970-01-01T12:34:56.789012345Z"}},
		// timetz: UTC text.
		{"string", zonedTm, `"03:00:00Z"`, map[string]any{"String": "03:00:00Z", "Int64": int64(10_800_000_000), "Decimal(12, 0)": "10800000000",
			"DateTime64(6)": "1970-01-01T03:00:00Z", "Date": errPrefix + "time of day"}},
		{"string", zonedTm, `"12:34:56.789012Z"`, map[string]any{"String": "12:34:56.789012Z", "Int64": int64(45296789012),
			"DateTime64(6)": "1970-01-01T12:34:56.789012Z"}},
		{"string", zonedTm, `"24:00:00Z"`, map[string]any{"String": "24:00:00Z", "Int64": int64(86400000000), "DateTime64(6)": "1970-01-02T00:00:00Z"}},
		{"string", zonedTm, `"01:30:00+02:00"`, map[string]any{"Int64": int64(-30*60*1e6 + 86400e6), "DateTime64(6)": "1970-01-01T23:30:00Z"}},
		{"string", zonedTm, `"25:00:00Z"`, map[string]any{"String": "25:00:00Z", "Int64": errPrefix + "ZonedTime"}},
		// interval: µs (a month is 30.4375 days in Debezium's reckoning).
		{"int64", dur, `-86401000000`, map[string]any{"String": "-86401000000", "Int64": int64(-86401000000),
			"Decimal(18, 0)": "-86401000000", "DateTime64(6)": errPrefix + "not a point in time", "UInt64": errPrefix + "",
			"Date": errPrefix + "not a point in time"}},
	}
	for _, c := range cases {
		for colType, want := range c.want {
			name := fmt.Sprintf("%s %s into %s", strings.TrimPrefix(c.sem, "io.debezium.time."), c.value, colType)
			cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "v", Type: colType}}
			got, err := dbzRow(t, cols, nil, &kgo.Record{Topic: "pg.public.t", Value: dbzValueEvent(c.typ, c.sem, c.value)})
			if w, ok := want.(string); ok && strings.HasPrefix(w, errPrefix) {
				if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(w, errPrefix)) {
					t.Errorf("%s: got %v, %v; want an error with %q", name, got["v"], err, strings.TrimPrefix(w, errPrefix))
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if !reflect.DeepEqual(got["v"], want) {
				t.Errorf("%s = %#v, want %#v", name, got["v"], want)
			}
		}
	}
}
