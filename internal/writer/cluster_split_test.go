package writer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/decode"
)

// splitTypes is one column of every kind of data decode's ColumnData
// returns (see TestColumnDataTypes in internal/decode), plus types that
// take the reflection path.
var splitTypes = []string{
	"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
	"Float32", "Float64", "Decimal(18, 4)", "Decimal(38, 4)", "String", "FixedString(3)",
	"Date", "Date32", "DateTime", "DateTime64(3, 'UTC')", "UUID", "Enum8('a' = 1, 'b' = 2)",
	"Enum16('a' = 1, 'b' = 2)", "Bool", "IPv4", "IPv6", "Int128", "UInt256",
	"Nullable(Int8)", "Nullable(Int16)", "Nullable(Int32)", "Nullable(Int64)",
	"Nullable(UInt8)", "Nullable(UInt16)", "Nullable(UInt32)", "Nullable(UInt64)",
	"Nullable(Float32)", "Nullable(Float64)", "Nullable(Decimal(9, 2))", "Nullable(Decimal(38, 2))",
	"Nullable(String)", "Nullable(DateTime)", "Nullable(Date)", "Nullable(DateTime64(6, 'UTC'))",
	"Nullable(UUID)", "Nullable(Bool)", "Nullable(IPv6)", "Nullable(Int128)",
	"LowCardinality(String)", "LowCardinality(Nullable(String))",
	"Array(String)", "Array(Int64)", "Array(UInt64)", "Array(Float64)", "Array(Nullable(UInt8))",
	"Array(Decimal(9, 2))", "Array(Array(Int32))", "Map(String, UInt64)", "Array(Map(String, UInt64))",
	"Tuple(a String, b Int64)",
}

// splitValue is the JSON value of row i for a column of type typ: null on
// every third row (the column's default, or NULL where it is Nullable),
// otherwise a value that differs from row to row.
func splitValue(typ string, i int) any {
	if i%3 == 0 {
		return nil
	}
	base := typ
	for _, w := range []string{"Nullable(", "LowCardinality("} {
		for len(base) > len(w) && base[:len(w)] == w {
			base = base[len(w) : len(base)-1]
		}
	}
	switch {
	case base == "String":
		return fmt.Sprintf("s%d", i)
	case base == "FixedString(3)":
		return fmt.Sprintf("%03d", i%1000)
	case base == "Date" || base == "Date32":
		return fmt.Sprintf("2026-01-%02d", 1+i%28)
	case base == "DateTime" || len(base) > 10 && base[:10] == "DateTime64":
		return fmt.Sprintf("2026-01-02T03:04:%02dZ", i%60)
	case base == "UUID":
		return fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
	case len(base) > 4 && base[:4] == "Enum":
		return []string{"a", "b"}[i%2]
	case base == "Bool":
		return i%2 == 0
	case base == "IPv4":
		return fmt.Sprintf("10.0.%d.%d", i/256%256, i%256)
	case base == "IPv6":
		return fmt.Sprintf("2001:db8::%x", i)
	case len(base) > 6 && base[:6] == "Array(":
		elem := base[6 : len(base)-1]
		return []any{splitValue(elem, i+1), splitValue(elem, i+2)}
	case len(base) > 4 && base[:4] == "Map(":
		return map[string]any{fmt.Sprintf("k%d", i): i}
	case len(base) > 6 && base[:6] == "Tuple(":
		return map[string]any{"a": fmt.Sprintf("t%d", i), "b": i}
	case base == "Int8" || base == "Enum8":
		return i % 100
	case base[:1] == "F" || len(base) > 7 && base[:7] == "Decimal":
		return float64(i) + 0.25
	default:
		return i % 100
	}
}

// splitBlock decodes n JSON records into a block with one column per type.
// Its columns' data is taken once (decode's ColumnData builds it anew on
// every call, and a Map row refers into the data it was built with), so
// the split and its oracle read the very same cells.
func splitBlock(tb testing.TB, types []string, n int) (*rowsBlock, []chschema.ColumnSchema) {
	tb.Helper()
	blk, cols := decodedBlock(tb, types, n)
	out := &rowsBlock{cols: blk.Columns(), data: make([]any, len(cols)), rows: blk.Rows()}
	for i := range out.data {
		out.data[i] = blk.ColumnData(i)
	}
	return out, cols
}

// decodedBlock decodes n JSON records (values by splitValue) into a
// decoder block with one column per type.
func decodedBlock(tb testing.TB, types []string, n int) (*decode.Block, []chschema.ColumnSchema) {
	tb.Helper()
	cols := make([]chschema.ColumnSchema, len(types))
	for i, typ := range types {
		cols[i] = chschema.ColumnSchema{Name: fmt.Sprintf("c%d", i), Type: typ}
	}
	p, err := decode.Compile("json", cols, nil)
	if err != nil {
		tb.Fatal(err)
	}
	blk := p.NewBlock()
	for i := 0; i < n; i++ {
		rec := make(map[string]any, len(cols))
		for c, col := range cols {
			if v := splitValue(col.Type, i); v != nil {
				rec[fmt.Sprintf("c%d", c)] = v
			}
		}
		b, err := json.Marshal(rec)
		if err != nil {
			tb.Fatal(err)
		}
		if err := p.Append(blk, &kgo.Record{Value: b}); err != nil {
			tb.Fatalf("row %d %s: %v", i, b, err)
		}
	}
	return blk, cols
}

// TestSplitMatchesReflect splits a block holding every column type the
// decoder produces and checks every sub-block equals, row by row and in
// its Go type, what the reflection copy makes of the same rows.
func TestSplitMatchesReflect(t *testing.T) {
	const n = 200
	blk, cols := splitBlock(t, splitTypes, n)
	shardOf := make([]int, n)
	for i := range shardOf {
		shardOf[i] = (i*7 + i/5) % 3
	}
	parts, err := splitByShard(blk, shardOf, make([]chschema.Block, 4))
	if err != nil {
		t.Fatal(err)
	}
	if parts[3] != nil {
		t.Errorf("shard 3 has no rows but got a part of %d", parts[3].Rows())
	}
	total := 0
	for s := 0; s < 3; s++ {
		var rows []int
		for i, si := range shardOf {
			if si == s {
				rows = append(rows, i)
			}
		}
		part := parts[s]
		if part == nil || part.Rows() != len(rows) {
			t.Fatalf("shard %d: part %v, want %d rows", s, part, len(rows))
		}
		total += part.Rows()
		for c, col := range cols {
			want, err := reflectGather(blk.ColumnData(c), rows)
			if err != nil {
				t.Fatal(err)
			}
			got := part.ColumnData(c)
			if reflect.TypeOf(got) != reflect.TypeOf(want) {
				t.Fatalf("shard %d column %s: %T, want %T", s, col.Type, got, want)
			}
			gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
			if gv.Len() != wv.Len() {
				t.Fatalf("shard %d column %s: %d rows, want %d", s, col.Type, gv.Len(), wv.Len())
			}
			for j := 0; j < gv.Len(); j++ {
				if !reflect.DeepEqual(gv.Index(j).Interface(), wv.Index(j).Interface()) {
					t.Errorf("shard %d column %s row %d (block row %d): %v, want %v",
						s, col.Type, j, rows[j], gv.Index(j).Interface(), wv.Index(j).Interface())
				}
			}
		}
	}
	if total != n {
		t.Errorf("parts hold %d rows, block %d", total, n)
	}
}

// TestSplitNativeStrings splits a decoder block (which hands String
// columns over natively) and checks that every part's String and
// Nullable(String) columns are native, share the block's buffer rather
// than copying it, encode exactly as the same rows appended to a fresh
// column, and give the same Go values as the block's rows; the other
// columns are gathered as before.
func TestSplitNativeStrings(t *testing.T) {
	const n = 300
	types := []string{"String", "Nullable(String)", "UInt64", "LowCardinality(String)", "Array(String)"}
	blk, cols := decodedBlock(t, types, n)
	shardOf := make([]int, n)
	for i := range shardOf {
		shardOf[i] = (i*5 + i/7) % 3
	}
	parts, err := splitByShard(blk, shardOf, make([]chschema.Block, 3))
	if err != nil {
		t.Fatal(err)
	}
	rowsOf := shardRows(shardOf, 3)
	for s, part := range parts {
		rows := rowsOf[s]
		if part == nil || part.Rows() != len(rows) {
			t.Fatalf("shard %d: part %v, want %d rows", s, part, len(rows))
		}
		nb, ok := part.(nativeBlock)
		if !ok {
			t.Fatalf("shard %d: part %T has no native columns", s, part)
		}
		for c, col := range cols {
			want, err := reflectGather(blk.ColumnData(c), rows)
			if err != nil {
				t.Fatal(err)
			}
			if got := part.ColumnData(c); !reflect.DeepEqual(got, want) {
				t.Errorf("shard %d column %s: %v, want %v", s, col.Type, got, want)
			}
			nat := nb.Native(c)
			var str, whole proto.ColStr
			switch col.Type {
			case "String":
				str, _ = nat.(proto.ColStr)
				whole = blk.Native(c).(proto.ColStr)
			case "Nullable(String)":
				nn, _ := nat.(chschema.NullableNative)
				str, _ = nn.Values.(proto.ColStr)
				wn := blk.Native(c).(chschema.NullableNative)
				whole = wn.Values.(proto.ColStr)
				for j, r := range rows {
					if nn.Nulls[j] != wn.Nulls[r] {
						t.Errorf("shard %d column %s row %d: NULL flag %d, want %d", s, col.Type, j, nn.Nulls[j], wn.Nulls[r])
					}
				}
			default:
				if nat != nil {
					t.Errorf("shard %d column %s: native %T, want none", s, col.Type, nat)
				}
				continue
			}
			if str.Rows() != len(rows) {
				t.Fatalf("shard %d column %s: native %T with %d rows, want a String column of %d", s, col.Type, nat, str.Rows(), len(rows))
			}
			if unsafe.SliceData(str.Buf) != unsafe.SliceData(whole.Buf) {
				t.Errorf("shard %d column %s: the part copied the string buffer", s, col.Type)
			}
			var fresh proto.ColStr
			for _, r := range rows {
				fresh.Append(whole.Row(r))
			}
			var enc, encFresh proto.Buffer
			str.EncodeColumn(&enc)
			fresh.EncodeColumn(&encFresh)
			if !bytes.Equal(enc.Buf, encFresh.Buf) {
				t.Errorf("shard %d column %s: encodes %d bytes unlike the rows appended (%d bytes)", s, col.Type, len(enc.Buf), len(encFresh.Buf))
			}
		}
	}
}

// TestGatherColumnTypedAndFallback checks the typed copies and the
// reflection fallback agree on a value of each, and that a non-slice is a
// clear error.
func TestGatherColumnTypedAndFallback(t *testing.T) {
	rows := []int{0, 2, 3}
	for _, data := range []any{
		[]int64{1, 2, 3, 4}, []string{"a", "b", "c", "d"}, []*string{nil, new(string), nil, nil},
		[]complex64{1, 2, 3, 4}, [][2]any{{1, 2}, {3, 4}, {5, 6}, {7, 8}},
	} {
		got, err := gatherColumn(data, rows)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := reflectGather(data, rows)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T: %v, want %v", data, got, want)
		}
	}
	if _, err := gatherColumn(42, rows); err == nil {
		t.Error("gatherColumn(42) succeeded, want an error")
	}
}

// TestShardRows checks the counted row lists against appending row by row,
// and that one shard's list cannot grow into the next one's.
func TestShardRows(t *testing.T) {
	shardOf := []int{2, 0, 2, 1, 0, 2, 2}
	got := shardRows(shardOf, 4)
	want := [][]int{{1, 4}, {3}, {0, 2, 5, 6}, {}}
	for s := range want {
		if !reflect.DeepEqual(append([]int{}, got[s]...), want[s]) {
			t.Errorf("shard %d: %v, want %v", s, got[s], want[s])
		}
		if cap(got[s]) != len(want[s]) {
			t.Errorf("shard %d: cap %d, want %d", s, cap(got[s]), len(want[s]))
		}
	}
}

func TestFirstReplica(t *testing.T) {
	for _, tc := range []struct {
		order string
		want  func(got []int) bool
	}{
		{config.ReplicaRoundRobin, func(got []int) bool { return slices.Equal(got, []int{0, 1, 2, 0, 1, 2, 0, 1, 2}) }},
		{"", func(got []int) bool { return slices.Equal(got, []int{0, 1, 2, 0, 1, 2, 0, 1, 2}) }}, // the default
		{config.ReplicaInOrder, func(got []int) bool { return slices.Equal(got, []int{0, 0, 0, 0, 0, 0, 0, 0, 0}) }},
		{config.ReplicaRandom, func(got []int) bool {
			return !slices.ContainsFunc(got, func(i int) bool { return i < 0 || i > 2 })
		}},
	} {
		c := &Cluster{cfg: config.ClickHouse{ReplicaOrder: tc.order}}
		lay := &layout{next: make([]atomic.Uint64, 3)}
		var got []int
		for range 9 {
			got = append(got, c.firstReplica(lay, 1, 3))
		}
		if !tc.want(got) {
			t.Errorf("%q: first replicas %v", tc.order, got)
		}
		if r := c.firstReplica(lay, 0, 1); r != 0 {
			t.Errorf("%q: one replica: %d", tc.order, r)
		}
	}
	// Shards count separately.
	c := &Cluster{cfg: config.ClickHouse{ReplicaOrder: config.ReplicaRoundRobin}}
	lay := &layout{next: make([]atomic.Uint64, 3)}
	if a, b, a2 := c.firstReplica(lay, 0, 2), c.firstReplica(lay, 1, 2), c.firstReplica(lay, 0, 2); a != 0 || b != 0 || a2 != 1 {
		t.Errorf("per shard: %d %d %d, want 0 0 1", a, b, a2)
	}
}

func TestColumnDiffs(t *testing.T) {
	rc := func(shard int, addr string, cols ...string) ReplicaColumns {
		return ReplicaColumns{Shard: shard, Addr: addr, Exists: len(cols) > 0, Columns: cols}
	}
	for _, tc := range []struct {
		rs   []ReplicaColumns
		want []string
	}{
		{nil, nil},
		{[]ReplicaColumns{rc(1, "a", "i UInt32", "k UInt64"), rc(2, "b", "k UInt64", "i UInt32")}, nil}, // order does not matter
		{[]ReplicaColumns{rc(1, "a", "i UInt32"), rc(2, "b", "i UInt32", "x UInt8")}, []string{"shard 2 replica b has x UInt8"}},
		{[]ReplicaColumns{rc(1, "a", "i UInt32", "x UInt8"), rc(1, "a2", "i UInt32", "x UInt8"), rc(2, "b", "i UInt32")}, []string{"shard 2 replica b lacks x UInt8"}},
		{[]ReplicaColumns{rc(1, "a", "i UInt32"), rc(2, "b", "i UInt64")}, []string{"shard 2 replica b lacks i UInt32", "shard 2 replica b has i UInt64"}},
		{[]ReplicaColumns{rc(1, "a", "i UInt32"), rc(2, "b")}, []string{"shard 2 replica b has no such table"}},
		{[]ReplicaColumns{rc(1, "a"), rc(2, "b", "i UInt32")}, []string{"shard 1 replica a has no such table"}},
	} {
		if got := ColumnDiffs(tc.rs); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.rs, got, tc.want)
		}
	}
}
