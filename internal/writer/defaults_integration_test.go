//go:build integration

package writer_test

import (
	"context"
	"strings"
	"testing"

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
