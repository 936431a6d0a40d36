//go:build integration

package writer_test

import (
	"context"
	"strings"
	"testing"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/decode"
	"sink/internal/testenv"
)

// defaultCases are DEFAULT columns on both servers: row 0 carries the
// field, row 1 lacks it, row 2 has null. A record's value is inserted; a
// missing value (or null into a column that is not Nullable) reads the
// column's default, not the type's zero. A default that reads another
// column or is not deterministic is left to the server: the column is not
// in the INSERT and the records' values for it are not inserted.
var defaultCases = []typeCase{
	{col: "tier", typ: "Int32 DEFAULT 7", in: []string{`3`, "", `null`}, want: []string{"3", "7", "7"}},
	{col: "s", typ: `String DEFAULT 'a\'b'`, in: []string{`"x"`, "", `null`}, want: []string{"x", `a\'b`, `a\'b`}},
	{col: "d", typ: "Date DEFAULT toDate('2020-01-02')", in: []string{`"2024-05-17"`, "", `null`}, want: []string{"2024-05-17", "2020-01-02", "2020-01-02"}},
	{col: "dt", typ: "DateTime DEFAULT toDateTime('2020-01-02 03:04:05')", in: []string{`1715949296`, "", ""}, want: []string{"1", "1", "1"},
		expr: "toUnixTimestamp(dt) = if(id = 0, 1715949296, toUnixTimestamp(toDateTime('2020-01-02 03:04:05')))"},
	{col: "a", typ: "Array(Int32) DEFAULT [1, 2]", in: []string{`[5]`, "", `null`}, want: []string{"[5]", "[1,2]", "[1,2]"}},
	{col: "n", typ: "Nullable(Int32) DEFAULT 5", in: []string{`1`, "", `null`}, want: []string{"1", "5", `\N`}},
	{col: "lc", typ: "LowCardinality(String) DEFAULT 'web'", in: []string{`"app"`, "", `null`}, want: []string{"app", "web", "web"}},
	{col: "e", typ: "Enum8('a' = 1, 'b' = 2) DEFAULT 'b'", in: []string{`"a"`, "", ""}, want: []string{"a", "b", "b"}},
	{col: "dc", typ: "Decimal(10, 2) DEFAULT 1.5", in: []string{`"2.25"`, "", ""}, want: []string{"1", "1", "1"},
		expr: "dc = if(id = 0, toDecimal32('2.25', 2), toDecimal32('1.5', 2))"},
	{col: "f", typ: "Float64 DEFAULT nan", in: []string{`1.5`, "", ""}, want: []string{"1.5", "nan", "nan"}},
	{col: "c", typ: "UInt8 DEFAULT 1 + 2", in: []string{`9`, "", ""}, want: []string{"9", "3", "3"}},
	{col: "twice", typ: "Int64 DEFAULT id * 2", in: []string{`100`, `100`, ""}, want: []string{"0", "2", "4"}},
	{col: "at", typ: "DateTime DEFAULT now()", in: []string{`0`, "", ""}, want: []string{"1", "1", "1"}, expr: "at > toDateTime('2020-01-01 00:00:00')"},
}

func TestDefaultsEndToEnd(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		runTypes(t, s, defaultCases, nil)
	})
}

// modernDefaultCases are DEFAULT columns of types only current servers
// have. A Map default is not read back: the column is left to the server.
var modernDefaultCases = []typeCase{
	{col: "dt64", typ: "DateTime64(3) DEFAULT toDateTime64('2020-01-02 03:04:05.678', 3, 'UTC')", in: []string{`"2024-05-17T12:34:56.789Z"`, "", `null`},
		want: []string{"1715949296789", "1577934245678", "1577934245678"}, expr: "toUnixTimestamp64Milli(dt64)"},
	{col: "b", typ: "Bool DEFAULT true", in: []string{`false`, "", `null`}, want: []string{"false", "true", "true"}},
	{col: "ip", typ: "IPv4 DEFAULT '10.0.0.1'", in: []string{`"1.2.3.4"`, "", ""}, want: []string{"1.2.3.4", "10.0.0.1", "10.0.0.1"}},
	{col: "u", typ: "UUID DEFAULT '61f0c404-5cb3-11e7-907b-a6006ad3dba0'", in: []string{`"6ba7b810-9dad-11d1-80b4-00c04fd430c8"`, "", ""},
		want: []string{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "61f0c404-5cb3-11e7-907b-a6006ad3dba0", "61f0c404-5cb3-11e7-907b-a6006ad3dba0"}},
	{col: "i128", typ: "Int128 DEFAULT toInt128('-12345678901234567890123')", in: []string{`5`, "", ""}, want: []string{"5", "-12345678901234567890123", "-12345678901234567890123"}},
	{col: "d32", typ: "Date32 DEFAULT '1950-01-01'", in: []string{`"2024-05-17"`, "", ""}, want: []string{"2024-05-17", "1950-01-01", "1950-01-01"}},
	{col: "m", typ: "Map(String, Int32) DEFAULT map('a', 1)", in: []string{`{"b": 2}`, "", ""}, want: []string{"{'a':1}", "{'a':1}", "{'a':1}"}},
}

func TestModernDefaultsOn26(t *testing.T) {
	runTypes(t, testenv.Server26(t), modernDefaultCases, nil)
}

// TestDefaultsHTTPOn26: the defaults are computed and read back over
// clickhouse.protocol: http too.
func TestDefaultsHTTPOn26(t *testing.T) {
	s := testenv.Server26(t)
	cfg := chConfig(t, s.HTTPAddr)
	cfg.Protocol = config.ProtocolHTTP
	runTypesWith(t, s, cfg, append(append([]typeCase(nil), defaultCases...), modernDefaultCases...), nil)
}

// Describe computes each DEFAULT expression that can be computed once and
// says why for the others.
func TestDescribeComputesDefaults(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		db := s.NewDatabase(t)
		testenv.Exec(t, s.Conn(t), "CREATE TABLE "+db+".t (id Int64, tier Int32 DEFAULT 7, twice Int64 DEFAULT id * 2, at DateTime DEFAULT now(), "+
			"r UInt32 DEFAULT rand(), m Int64 MATERIALIZED id + 1, a Array(String) DEFAULT ['x', 'y']) ENGINE = MergeTree ORDER BY id")
		w, _ := openTable(t, s.Addr, db, "t")
		cols, err := w.Describe(ctx, db, "t")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][2]string{
			"id":    {"", ""},
			"tier":  {"7", ""},
			"twice": {"", "cannot compute it without a row"},
			"at":    {"", "it calls now, which is not deterministic"},
			"r":     {"", "it calls rand, which is not deterministic"},
			"m":     {"", ""},
			"a":     {`["x","y"]`, ""},
		}
		for _, c := range cols {
			w := want[c.Name]
			if c.Default != w[0] || (w[1] == "") != (c.DefaultWhy == "") || !strings.Contains(c.DefaultWhy, w[1]) {
				t.Errorf("%s (%s %s): Default %q, DefaultWhy %q; want %q and %q", c.Name, c.DefaultKind, c.DefaultExpr, c.Default, c.DefaultWhy, w[0], w[1])
			}
		}
		var insert []string
		for _, c := range decode.InsertColumns(cols) {
			insert = append(insert, c.Name)
		}
		if got := strings.Join(insert, " "); got != "id tier a" {
			t.Errorf("INSERT names %s; want id tier a", got)
		}
		var left []string
		decode.UnfilledDefaults(cols, decode.InsertColumns(cols), func(c chschema.ColumnSchema, why string) { left = append(left, c.Name) })
		if got := strings.Join(left, " "); got != "twice at r" {
			t.Errorf("left to the server: %s; want twice at r", got)
		}
	})
}
