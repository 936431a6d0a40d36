package decode

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/chschema"
	"sink/internal/route"
)

// dflt is a DEFAULT column whose expression the server computed to value
// (JSON text, as writer.Describe hands it over).
func dflt(name, typ, value string) chschema.ColumnSchema {
	return chschema.ColumnSchema{Name: name, Type: typ, DefaultKind: "DEFAULT", DefaultExpr: "expr", Default: value}
}

func TestInsertColumnsTakesComputedDefaults(t *testing.T) {
	table := []chschema.ColumnSchema{
		{Name: "id", Type: "Int64"},
		dflt("tier", "Int32", "7"),
		{Name: "at", Type: "DateTime", DefaultKind: "DEFAULT", DefaultExpr: "now()", DefaultWhy: "it calls now, which is not deterministic"},
		{Name: "twice", Type: "Int64", DefaultKind: "DEFAULT", DefaultExpr: "id * 2", DefaultWhy: "the server cannot compute it without a row"},
		dflt("bad", "Int8", "300"),                         // does not convert: left to the server
		dflt("agg", "AggregateFunction(sum, UInt64)", "0"), // a type the sink cannot fill
		{Name: "m", Type: "Int64", DefaultKind: "MATERIALIZED", DefaultExpr: "id + 1"},
		{Name: "e", Type: "Int64", DefaultKind: "EPHEMERAL"},
	}
	tests := []struct {
		mappings []map[string]string
		want     []string
	}{
		{nil, []string{"id", "tier"}},
		{[]map[string]string{{"at": "$timestamp"}}, []string{"id", "tier", "at"}},
		{[]map[string]string{{"twice": "x"}, {"e": "y"}}, []string{"id", "tier", "twice", "e"}},
	}
	for _, tt := range tests {
		var got []string
		for _, c := range InsertColumns(table, tt.mappings...) {
			got = append(got, c.Name)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("mappings %v: insert %v; want %v", tt.mappings, got, tt.want)
		}
	}
	whys := map[string]string{
		"id":    "",
		"tier":  "",
		"at":    "cannot be computed once: it calls now, which is not deterministic",
		"twice": "cannot be computed once: the server cannot compute it without a row",
		"bad":   "does not convert to Int8",
		"agg":   "cannot fill type AggregateFunction",
		"m":     "",
	}
	for _, c := range table {
		want, ok := whys[c.Name]
		if !ok {
			continue
		}
		got := UnfilledDefault(c)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("UnfilledDefault(%s) = %q; want it to contain %q", c.Name, got, want)
		}
	}
}

// TestDefaultFillsMissingAndNull: a field present is inserted, even into a
// DEFAULT column; a field absent (or null into a column that is not
// Nullable) gets the column's computed default, which is neither policed by
// errors.on_missing / on_null nor counted as a default given.
func TestDefaultFillsMissingAndNull(t *testing.T) {
	cols := []chschema.ColumnSchema{
		{Name: "id", Type: "Int64"},
		dflt("tier", "Int32", "7"),
		dflt("name", "String", `"a\"b\u0000\u00e9`+"\xff"+`"`),
		dflt("day", "Date", `"2020-01-02"`),
		dflt("at", "DateTime64(3)", `"2021-02-03T04:05:06.789Z"`),
		dflt("tags", "Array(LowCardinality(String))", `["x","y"]`),
		dflt("n", "Nullable(Int32)", "5"),
		dflt("nn", "Nullable(Int32)", "null"),
		dflt("f", "Float64", `"NaN"`),
		dflt("d", "Decimal(10, 2)", "1.5"),
		dflt("e", "Enum8('a' = 1, 'b' = 2)", `"b"`),
	}
	for _, format := range []string{"json", "debezium-json"} {
		all := cols
		if format == "debezium-json" {
			all = append(all[:len(all):len(all)], chschema.ColumnSchema{Name: "_version", Type: "UInt64"}, chschema.ColumnSchema{Name: "_deleted", Type: "UInt8"})
		}
		p, err := Compile(route.Format(format), InsertColumns(all), nil)
		if err != nil {
			t.Fatal(err)
		}
		p.SetPolicy(Policy{MissingBad: true, NullBad: true})
		blk := p.NewBlock()
		values := []string{
			`{"id": 1, "tier": 3, "name": "z", "day": "2024-05-06", "at": 0, "tags": [], "n": 1, "nn": 2, "f": 1.5, "d": "2.25", "e": "a"}`,
			`{"id": 2}`,
			`{"id": 3, "tier": null, "name": null, "n": null, "nn": null, "tags": null, "f": null}`,
		}
		for i, v := range values {
			if format == "debezium-json" {
				v = `{"op": "c", "ts_ms": 1700000000000, "after": ` + v + `}`
			}
			if err := p.Append(blk, &kgo.Record{Offset: int64(i), Value: []byte(v)}); err != nil {
				t.Fatalf("%s %s: %v", format, v, err)
			}
		}
		p.TakeDefaults(func(col, reason string, n uint64) {
			t.Errorf("%s: %d defaults counted for %s (%s)", format, n, col, reason)
		})
		at := time.Date(2021, 2, 3, 4, 5, 6, 789e6, time.UTC)
		want := map[string]string{
			"tier": "[3 7 7]",
			"name": fmt.Sprint([]string{"z", "a\"b\x00\u00e9\xff", "a\"b\x00\u00e9\xff"}),
			"day":  "[2024-05-06 2020-01-02 2020-01-02]",
			"at":   fmt.Sprint([]time.Time{time.Unix(0, 0).UTC(), at, at}),
			"tags": "[[] [x y] [x y]]",
			"f":    "[1.5 NaN NaN]",
			"d":    "[2.25 1.5 1.5]",
			"e":    "[1 2 2]",
		}
		for i, c := range blk.Columns() {
			got := blk.ColumnData(i)
			switch c.Name {
			case "day":
				var s []string
				for _, d := range got.([]time.Time) {
					s = append(s, d.Format("2006-01-02"))
				}
				got = s
			case "n", "nn":
				var s []string
				for _, v := range got.([]*int32) {
					if v == nil {
						s = append(s, "NULL")
					} else {
						s = append(s, fmt.Sprint(*v))
					}
				}
				got = strings.Join(s, " ")
				want["n"], want["nn"] = "1 5 NULL", "2 NULL NULL"
			}
			if w, ok := want[c.Name]; ok && fmt.Sprint(got) != w {
				t.Errorf("%s: column %s = %v; want %s", format, c.Name, got, w)
			}
		}
	}
}

// A DEFAULT column without a computed default keeps the type's zero for a
// missing value, policed and counted as before, when a route maps it.
func TestMappedDefaultWithoutValueIsPoliced(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"},
		{Name: "twice", Type: "Int64", DefaultKind: "DEFAULT", DefaultExpr: "id * 2", DefaultWhy: "reads id"}}
	m := map[string]string{"twice": "t"}
	p, err := Compile("json", InsertColumns(cols, m), m)
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(Policy{MissingBad: true})
	if err := p.Append(p.NewBlock(), &kgo.Record{Value: []byte(`{"id": 1}`)}); err == nil || !strings.Contains(err.Error(), "errors.on_missing") {
		t.Fatalf("error %v; want the on_missing policy's", err)
	}
}

// The registry formats too: a record of an older Avro schema that lacks
// the field gets the column's computed default; a record of the newer one
// inserts its value.
func TestAvroDefaultColumn(t *testing.T) {
	v1 := `{"type":"record","name":"E","fields":[{"name":"id","type":"long"}]}`
	v2 := `{"type":"record","name":"E","fields":[{"name":"id","type":"long"},{"name":"tier","type":"int"}]}`
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, v1)
	reg.add(2, sr.TypeAvro, v2)
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, dflt("tier", "Int32", "7")}
	p, err := Compile(route.Avro, InsertColumns(cols), nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(Policy{MissingBad: true})
	blk := p.NewBlock()
	for i, rec := range [][]byte{
		avroFrame(t, 1, v1, map[string]any{"id": int64(1)}),
		avroFrame(t, 2, v2, map[string]any{"id": int64(2), "tier": 9}),
	} {
		if err := p.Append(blk, &kgo.Record{Offset: int64(i), Value: rec}); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(blk.ColumnData(1)); got != "[7 9]" {
		t.Fatalf("tier %s; want [7 9]", got)
	}
}
