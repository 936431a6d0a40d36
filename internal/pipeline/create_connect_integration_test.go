//go:build integration

package pipeline_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/internal/testenv"
)

// Kafka Connect's JSON envelope ({"schema": S, "payload": P}) into tables
// the sink creates (schema.create) or extends (schema.evolve): the
// payload's fields get the column types their Connect schema declares,
// and the records then fill them with the source's values, on both
// servers.

// connectCapture is the captured JsonConverter output (Kafka Connect 4.3,
// Debezium 3.6.1 from PostgreSQL 15 with ExtractNewRecordState and
// time.precision.mode=connect) that package decode's TestConnectCaptured
// reads; its comment has the table and the statements that made it.
const connectCapture = "../decode/testdata/connect/pg15_dbz361_unwrapped_connect_time.jsonl"

// capturedValues returns the record values of a capture file (nil for a
// tombstone).
func capturedValues(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.FromSlash(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct{ Value json.RawMessage }
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		if string(c.Value) == "null" {
			out = append(out, nil)
			continue
		}
		out = append(out, c.Value)
	}
	return out
}

// checkRows runs, for each row (a condition picking one row) and each
// column, a count of that row where the column's condition holds, and
// reports every one that does not.
func checkRows(t *testing.T, ch driver.Conn, table string, rows map[string]map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, row := range keys {
		for col, cond := range rows[row] {
			q := fmt.Sprintf("SELECT count() FROM %s WHERE %s AND (%s)", table, row, cond)
			if n := uint64Of(t, ch, q); n != 1 {
				t.Errorf("row %s: column %s: %s holds for %d rows; want 1", row, col, cond, n)
			}
		}
	}
}

// The captured table's values that 18.16's Date (1970 to 2149) and
// DateTime (1970 to 2106) cannot hold, and the values a test on 18.16
// moves them to: the records are otherwise as captured.
var oldServerMoves = []struct{ from, to string }{
	{`"ts3":-1,`, `"ts3":1715949296000,`},
	{`"d":-25567,`, `"d":1,`},
	{`"ts":-2208988800000,`, `"ts":0,`},
	{`"ts3":9223372036854,`, `"ts3":4294967295000,`},
}

// schema.create: if_missing on records the real JsonConverter wrote: the
// created columns are typed by the envelope's schema (system.columns),
// and every value in ClickHouse is the source's: the numeric(12,2) exact,
// the date, the timestamps to the millisecond (to the second in 18.16's
// DateTime), NaN and the infinities, NULLs, arrays, bytes.
func TestCreateConnectJSONTable(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
		old := !s.AtLeast(21, 9)
		values := capturedValues(t, connectCapture)
		if old {
			for i, v := range values {
				for _, m := range oldServerMoves {
					v = []byte(strings.ReplaceAll(string(v), m.from, m.to))
				}
				values[i] = v
			}
		}
		produceBytes(t, topic, values...)
		cfg := evolveConfigFormat(t, s, topic, db, "", "{create: if_missing, engine: MergeTree, order_by: id}")
		done, stop := startPipeline(t, cfg)
		waitCommitted(t, done, cfg.Kafka.Group, topic, int64(len(values)))
		stopClean(t, done, stop)

		b, d, ms, ns := "Bool", "Date32", "DateTime64(3)", "DateTime64(9)"
		if old {
			b, d, ms, ns = "UInt8", "Date", "DateTime", "DateTime"
		}
		expectColumns(t, columnsOf(t, ch, db), []string{"id Int64", "i2 Nullable(Int16)", "i4 Nullable(Int32)", "f4 Nullable(Float32)",
			"f8 Nullable(Float64)", "b Nullable(" + b + ")", "dec Nullable(Decimal(12, 2))", "num Nullable(String)", "d Nullable(" + d + ")",
			"tm Nullable(String)", "tm3 Nullable(String)", "ts Nullable(" + ms + ")", "ts3 Nullable(" + ms + ")", "tstz Nullable(" + ns + ")",
			"u Nullable(String)", "j Nullable(String)", "ia Array(Nullable(Int32))", "ta Array(Nullable(String))", "ba Nullable(String)",
			"s Nullable(String)", "dd Array(Nullable(Decimal(5, 2)))", "__deleted Nullable(String)", "__lsn Nullable(Int64)", "__op Nullable(String)"})
		expectCount(t, ch, "SELECT count() FROM "+db+".t", 5, "%d rows; want 5 (the tombstone carries none)")
		checkRows(t, ch, db+".t", capturedRows(old))
	})
}

// capturedRows are the conditions each captured row meets in ClickHouse:
// the source's values (TestConnectCaptured's INSERTs; Connect's Time and
// Timestamp hold milliseconds), on 18.16 with the moves above and its
// DateTime's whole seconds.
func capturedRows(old bool) map[string]map[string]string {
	instant := func(col string, ms int64) string {
		if old {
			return fmt.Sprintf("toUnixTimestamp(%s) = %d", col, ms/1000)
		}
		return fmt.Sprintf("toUnixTimestamp64Milli(%s) = %d", col, ms)
	}
	ts3First, day3, ts3, ts3Last := instant("ts3", -1), "toString(d) = '1900-01-01'", instant("ts", -2208988800000), instant("ts3", 9223372036854)
	if old {
		ts3First, day3, ts3, ts3Last = instant("ts3", 1715949296000), "toString(d) = '1970-01-02'", instant("ts", 0), instant("ts3", 4294967295000)
	}
	one := map[string]string{
		"i2": "i2 = 7", "i4": "i4 = -42", "f4": "f4 = 1.5", "f8": "isNaN(f8)", "b": "b = 1",
		"dec": "dec = CAST('12345.67' AS Decimal(12, 2))", "num": "num = '3.14159265358979'", "d": "toString(d) = '2024-05-17'",
		"tm": "tm = '13:14:15.123'", "tm3": "tm3 = '01:02:03.456'", "ts": instant("ts", 1715949296789), "ts3": ts3First,
		"tstz": instant("tstz", 1715942096000), "u": "u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
		"j": `j = '{"a": [1, 2, {"b": null}]}'`, "ia": "length(ia) = 3 AND ia[1] = 1 AND isNull(ia[2]) AND ia[3] = 3",
		"ta": "length(ta) = 3 AND ta[1] = 'x' AND isNull(ta[2]) AND ta[3] = 'y z'", "ba": "ba = unhex('00FF10')",
		"s": `s = 'héllo "q"'`, "dd": "length(dd) = 2 AND dd[1] = CAST('1.50' AS Decimal(5, 2)) AND dd[2] = CAST('-2.25' AS Decimal(5, 2))",
		"__deleted": "__deleted = 'false'", "__lsn": "__lsn = 110607544",
	}
	three := map[string]string{
		"i2": "i2 = -32768", "i4": "i4 = 2147483647", "f4": "isInfinite(f4) AND f4 < 0", "f8": "isInfinite(f8) AND f8 > 0", "b": "b = 0",
		"dec": "dec = CAST('-0.01' AS Decimal(12, 2))", "num": "num = '-123456789012345678901234567890.123456789'", "d": day3,
		"tm": "tm = '24:00:00'", "tm3": "tm3 = '23:59:59.999'", "ts": ts3, "ts3": ts3Last, "tstz": instant("tstz", 0),
		"u": "u = '00000000-0000-0000-0000-000000000000'", "j": "j = '[]'", "ia": "length(ia) = 0", "ba": "ba = ''", "s": "s = ''",
		"dd": "length(dd) = 0",
	}
	nulls := map[string]string{}
	for _, c := range []string{"i2", "i4", "f4", "f8", "b", "dec", "num", "d", "tm", "tm3", "ts", "ts3", "tstz", "u", "j", "ba", "s"} {
		nulls[c] = "isNull(" + c + ")"
	}
	nulls["ia"], nulls["dd"] = "length(ia) = 0", "length(dd) = 0"
	return map[string]map[string]string{
		"id = 1 AND __op = 'r'": one,
		"id = 2 AND __op = 'r'": nulls,
		"id = 3 AND __op = 'r'": three,
		"id = 1 AND __op = 'u'": {"s": "s = 'upd'", "dec": "dec = CAST('0.50' AS Decimal(12, 2))", "ts": one["ts"], "__lsn": "__lsn = 110611616"},
		"id = 3 AND __op = 'd'": {"__deleted": "__deleted = 'true'", "dec": three["dec"], "tm": three["tm"], "__lsn": "__lsn = 110612328"},
	}
}

// connectEvolveSchema is a JsonConverter schema (schemas.enable=true) of
// a row whose second version adds an optional Decimal(10, 2) with
// Debezium's connect.decimal.precision, and a required int16 with a
// default.
func connectEvolveSchema(v2 bool) string {
	fields := `{"type":"int64","optional":false,"field":"id"}`
	if v2 {
		fields += `,{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,` +
			`"parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"price"}` +
			`,{"type":"int16","optional":false,"default":7,"field":"tier"}`
	}
	return `{"type":"struct","fields":[` + fields + `],"optional":false,"name":"shop.public.t.Value"}`
}

// schema.evolve: add_columns on envelopes whose schema gains an optional
// Decimal midway: the column added is Nullable(Decimal(10, 2)) (not
// String, as its base64 text would infer), the required int16 with a
// default gets Int16 DEFAULT 7, and the rows hold the exact amounts,
// NULL where the payload has none, and the default before the columns
// existed.
func TestEvolveConnectJSONDecimal(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id Int64")
		v1, v2 := connectEvolveSchema(false), connectEvolveSchema(true)
		var values []string
		for i := range 50 {
			values = append(values, fmt.Sprintf(`{"schema":%s,"payload":{"id":%d}}`, v1, i))
		}
		for i := 50; i < 100; i++ {
			price := "null"
			if i%2 == 0 {
				// id × -12.34, so that negative two's complements are
				// read too: -1234 × id cents.
				price = b64Decimal(int64(-1234 * i))
			}
			values = append(values, fmt.Sprintf(`{"schema":%s,"payload":{"id":%d,"price":%s,"tier":%d}}`, v2, i, price, i))
		}
		cfg := evolveConfigFormat(t, s, topic, db, "", "{evolve: add_columns}")
		done, stop := startPipeline(t, cfg)
		sendValues(t, done, cfg, topic, 100, values...)
		expectEvolved(t, ch, db, done, []string{"id Int64", "price Nullable(Decimal(10, 2))", "tier Int16"})
		stopClean(t, done, stop)
		expectCount(t, ch, "SELECT count() FROM system.columns WHERE database = '"+db+"' AND table = 't' AND name = 'tier' AND default_kind = 'DEFAULT'"+
			" AND replaceAll(default_expression, 'CAST(', '') LIKE '7%'", 1, "%d columns tier with DEFAULT 7; want 1")
		expectCount(t, ch, "SELECT count() FROM "+db+".t", 100, "%d rows; want 100")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id < 50 AND isNull(price) AND tier = 7", 50,
			"%d of the 50 rows from before the columns hold NULL and the default; want 50")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id >= 50 AND id % 2 = 0 AND price * 100 = -1234 * id AND tier = id", 25,
			"%d of the 25 rows with a price hold it exactly; want 25")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id >= 50 AND id % 2 = 1 AND isNull(price) AND tier = id", 25,
			"%d of the 25 rows without a price hold NULL; want 25")
	})
}
