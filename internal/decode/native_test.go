package decode

import (
	"fmt"
	"testing"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
)

// The native columns: what Native hands over, that a failed record leaves
// them as they were, and that Reset does not change strings handed out.
func TestNativeColumns(t *testing.T) {
	cols := []chschema.ColumnSchema{
		{Name: "s", Type: "String"},
		{Name: "n", Type: "UInt64"},
		{Name: "d", Type: "Decimal(18, 2)"},
		{Name: "d9", Type: "Decimal(9, 3)"},
		{Name: "ns", Type: "Nullable(String)"},
		{Name: "lc", Type: "LowCardinality(String)"},
	}
	p, err := Compile("json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	add := func(v string) error { return p.Append(blk, &kgo.Record{Value: []byte(v)}) }
	for _, v := range []string{
		`{"s":"ab","n":1,"d":1.25,"d9":-0.5,"ns":"x","lc":"y"}`,
		`{"s":"","n":2,"d":"-3","d9":1,"ns":null,"lc":"y"}`,
		`{"s":{"k":[1,2]},"n":3,"d":0,"d9":0}`,
	} {
		if err := add(v); err != nil {
			t.Fatal(err)
		}
	}
	// a later column fails: every column rolls back, the String's bytes too
	if err := add(`{"s":"zzzz","n":4,"d":1,"d9":"abc","ns":"q","lc":"z"}`); err == nil {
		t.Fatal("a word into Decimal(9, 3) was accepted")
	}
	s := blk.Native(0).(proto.ColStr)
	if s.Rows() != 3 || string(s.Buf) != `ab{"k":[1,2]}` {
		t.Fatalf("String: %d rows, buffer %q", s.Rows(), s.Buf)
	}
	var got []string
	s.ForEach(func(_ int, v string) error { got = append(got, v); return nil })
	if len(got) != 3 || got[0] != "ab" || got[1] != "" || got[2] != `{"k":[1,2]}` {
		t.Fatalf("String values %q", got)
	}
	if n := blk.Native(1).(proto.ColUInt64); len(n) != 3 || n[2] != 3 {
		t.Fatalf("UInt64 %v", n)
	}
	if d := *blk.Native(2).(*proto.ColDecimal64); len(d) != 3 || d[0] != 125 || d[1] != -300 {
		t.Fatalf("Decimal(18, 2) %v", d)
	}
	if d := *blk.Native(3).(*proto.ColDecimal32); len(d) != 3 || d[0] != -500 || d[1] != 1000 {
		t.Fatalf("Decimal(9, 3) %v", d)
	}
	ns := blk.Native(4).(chschema.NullableNative)
	if fmt.Sprint(ns.Nulls) != "[0 1 1]" || string(ns.Values.(proto.ColStr).Buf) != "x" || ns.Type() != "Nullable(String)" {
		t.Fatalf("Nullable(String): nulls %v, values %q, type %s", ns.Nulls, ns.Values.(proto.ColStr).Buf, ns.Type())
	}
	if got := blk.ColumnData(4).([]*string); len(got) != 3 || *got[0] != "x" || got[1] != nil || got[2] != nil {
		t.Fatalf("ColumnData(Nullable(String)) %v", got)
	}
	// LowCardinality(String) is interned: the default "" first, then "y"
	// once for two rows and "" (the third record's missing value); the
	// failed record's "z" never reached it.
	lc := blk.Native(5).(chschema.LowCardinalityNative)
	if fmt.Sprint(lc.Keys) != "[1 1 2]" || lc.Dict.Rows() != 3 || lc.Dict.Row(0) != "" || lc.Dict.Row(1) != "y" || lc.Dict.Row(2) != "" {
		t.Fatalf("LowCardinality(String): keys %v, dictionary %d values", lc.Keys, lc.Dict.Rows())
	}
	if got := blk.ColumnData(5).([]string); fmt.Sprint(got) != "[y y ]" {
		t.Fatalf("ColumnData(LowCardinality(String)) %q", got)
	}
	if got := blk.ColumnData(0).([]string); len(got) != 3 || got[2] != `{"k":[1,2]}` {
		t.Fatalf("ColumnData(String) %q", got)
	}

	// Reset drops the String bytes; refilling does not touch what
	// ColumnData returned before.
	before := blk.ColumnData(0).([]string)
	blk.Reset()
	if blk.Native(0).Rows() != 0 {
		t.Fatal("rows after Reset")
	}
	if err := add(`{"s":"XY","n":1,"d":1,"d9":1}`); err != nil {
		t.Fatal(err)
	}
	if before[0] != "ab" {
		t.Fatalf("a string from before Reset changed to %q", before[0])
	}
}

// A block never points into a record: franz-go's Record.Value aliases the
// whole fetch buffer, which must be free to go once the record is decoded.
// Overwriting the record's bytes after Append must not change the block.
func TestBlockDoesNotAliasRecords(t *testing.T) {
	cols := []chschema.ColumnSchema{
		{Name: "s", Type: "String"},
		{Name: "lc", Type: "LowCardinality(String)"},
		{Name: "ns", Type: "Nullable(String)"},
		{Name: "fs", Type: "FixedString(3)"},
		{Name: "a", Type: "Array(String)"},
		{Name: "m", Type: "Map(String, String)"},
		{Name: "tu", Type: "Tuple(a String, b UInt8)"},
		{Name: "_key", Type: "String"},
		{Name: "h", Type: "String"},
	}
	p, err := Compile("json", cols, map[string]string{"h": "$header.h"})
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	var recs []*kgo.Record
	for i := 0; i < 3; i++ {
		r := &kgo.Record{
			Key:     []byte(fmt.Sprintf("key-%d", i)),
			Value:   []byte(fmt.Sprintf(`{"s":"str-%d","lc":"lc-%d","ns":"ns-%d","fs":"f%d","a":["a-%d","b"],"m":{"mk-%d":"mv-%d"},"tu":{"a":"ta-%d","b":%d}}`, i, i, i, i, i, i, i, i, i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprintf("hv-%d", i))}},
		}
		if err := p.Append(blk, r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	render := func() string {
		var b []byte
		for i := range cols {
			b = fmt.Appendf(b, "%s=%v\n", cols[i].Name, firstRowsAll(cols[i].Type, blk.ColumnData(i)))
		}
		return string(b)
	}
	before := render()
	for _, r := range recs {
		for _, bs := range [][]byte{r.Key, r.Value, r.Headers[0].Value} {
			for j := range bs {
				bs[j] = 'X'
			}
		}
	}
	if after := render(); after != before {
		t.Fatalf("the block changed when the records' bytes were overwritten:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// A reset block starts every LowCardinality dictionary anew, inside
// Arrays and Maps too, and keeps no element memory from the last fill.
func TestResetStartsNewDictionaries(t *testing.T) {
	p, err := Compile("json", []chschema.ColumnSchema{
		{Name: "lc", Type: "LowCardinality(String)"},
		{Name: "a", Type: "Array(LowCardinality(String))"},
		{Name: "m", Type: "Map(LowCardinality(String), String)"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	add := func(v string) {
		t.Helper()
		if err := p.Append(blk, &kgo.Record{Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	add(`{"lc":"old","a":["old1","old2"],"m":{"oldk":"v"}}`)
	blk.Reset()
	add(`{"lc":"new","a":["new"],"m":{"newk":"v"}}`)
	dicts := []proto.ColStr{
		blk.Native(0).(chschema.LowCardinalityNative).Dict,
		blk.Native(1).(chschema.ArrayNative).Values.(chschema.LowCardinalityNative).Dict,
		blk.Native(2).(chschema.MapNative).Keys.(chschema.LowCardinalityNative).Dict,
	}
	for i, d := range dicts {
		if d.Rows() != 2 || d.Row(1) == "" || d.Row(1)[:3] != "new" {
			t.Errorf("column %d: dictionary of %d values after Reset (want the default and one new value)", i, d.Rows())
		}
	}
	if s := blk.Native(2).(chschema.MapNative).Values.(proto.ColStr); s.Rows() != 1 || string(s.Buf) != "v" {
		t.Errorf("map values after Reset: %d rows, %q", s.Rows(), s.Buf)
	}
}
