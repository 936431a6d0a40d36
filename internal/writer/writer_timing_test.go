package writer

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/ch-go/compress"
	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/decode"
	"sink/tools/gen"
)

// The insert path without a server: a decoded block goes into the driver's
// columns exactly as InsertOnce puts it there (fill), and the driver's
// Native encoder writes it into a buffer the way it does before sending.
// Only the network write is missing.
//
//	go test ./internal/writer -run '^$' -bench 'Encode|Compress' -benchmem

// benchTable is the bench's event table (tools/bench's eventColumns).
var benchTable = []chschema.ColumnSchema{
	{Name: "id", Type: "UInt64"},
	{Name: "user_id", Type: "UInt64"},
	{Name: "ts", Type: "DateTime"},
	{Name: "event_type", Type: "String"},
	{Name: "channel", Type: "String"},
	{Name: "cost", Type: "Decimal(18, 2)"},
	{Name: "payload", Type: "String"},
}

// benchWideTable adds the wrappers and kinds that take the general path:
// Nullable, LowCardinality, Array, Map, DateTime64, Kafka coordinates.
var benchWideTable = append(append([]chschema.ColumnSchema(nil), benchTable...),
	chschema.ColumnSchema{Name: "event_lc", Type: "LowCardinality(String)"},
	chschema.ColumnSchema{Name: "channel_n", Type: "Nullable(String)"},
	chschema.ColumnSchema{Name: "user_n", Type: "Nullable(UInt64)"},
	chschema.ColumnSchema{Name: "tags", Type: "Array(String)"},
	chschema.ColumnSchema{Name: "attrs", Type: "Map(String, String)"},
	chschema.ColumnSchema{Name: "ts64", Type: "DateTime64(3)"},
	chschema.ColumnSchema{Name: "_partition", Type: "Int32"},
	chschema.ColumnSchema{Name: "_offset", Type: "UInt64"},
)

// benchBlock decodes n events of the bench's generator (180 bytes, seed 1)
// into a block of schema, mapping the extra columns to event fields.
func benchBlock(tb testing.TB, schema []chschema.ColumnSchema, n int) (*decode.Plan, *decode.Block, []*kgo.Record) {
	tb.Helper()
	// the wide table's extra columns copy event fields
	sources := map[string]string{"event_lc": "event_type", "channel_n": "channel", "user_n": "user_id",
		"ts64": "ts", "_partition": "$partition", "_offset": "$offset"}
	mapping := map[string]string{}
	for _, c := range schema {
		if s, ok := sources[c.Name]; ok {
			mapping[c.Name] = s
		}
	}
	p, err := decode.Compile("json", decode.InsertColumns(schema), mapping)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := gen.New(gen.Config{Size: 180, Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		ev, _ := g.Append(nil)
		if hasColumn(schema, "tags") || hasColumn(schema, "attrs") {
			// give the wide table's Array and Map something to carry
			ev = append(ev[:len(ev)-1], fmt.Sprintf(`,"tags":["a","b%d"],"attrs":{"k":"v%d"}}`, i%7, i%3)...)
		}
		recs[i] = &kgo.Record{Topic: "events", Partition: 3, Offset: int64(i), Value: ev, Timestamp: time.Unix(1715949296, 0)}
	}
	blk := p.NewBlock()
	for _, r := range recs {
		if err := p.Append(blk, r); err != nil {
			tb.Fatal(err)
		}
	}
	return p, blk, recs
}

func hasColumn(schema []chschema.ColumnSchema, name string) bool {
	for _, c := range schema {
		if c.Name == name {
			return true
		}
	}
	return false
}

// driverColumns builds the driver's columns for schema the way the driver
// does from the server's (empty) INSERT header block.
func driverColumns(tb testing.TB, schema []chschema.ColumnSchema) []column.Interface {
	tb.Helper()
	sc := &column.ServerContext{Timezone: time.UTC, VersionMajor: 26, VersionMinor: 9, Revision: proto.DBMS_TCP_PROTOCOL_VERSION}
	out := make([]column.Interface, len(schema))
	for i, c := range schema {
		col, err := column.Type(c.Type).Column(c.Name, sc)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = col
	}
	return out
}

// encodeBlock is the driver's sendData minus compression and the socket:
// the block header, then every column with its name and type.
func encodeBlock(tb testing.TB, buf *chproto.Buffer, cols []column.Interface) {
	blk := &proto.Block{Columns: cols}
	if err := blk.EncodeHeader(buf, proto.DBMS_TCP_PROTOCOL_VERSION); err != nil {
		tb.Fatal(err)
	}
	for i := range cols {
		if err := blk.EncodeColumn(buf, proto.DBMS_TCP_PROTOCOL_VERSION, i); err != nil {
			tb.Fatal(err)
		}
	}
}

// benchmarkEncode measures one 10,000-row block per op: fill the driver's
// columns and encode them (what every insert attempt does).
func benchmarkEncode(b *testing.B, schema []chschema.ColumnSchema) {
	const rows = 10_000
	_, blk, recs := benchBlock(b, schema, rows)
	bytesIn := 0
	for _, r := range recs {
		bytesIn += len(r.Value)
	}
	var buf chproto.Buffer
	b.SetBytes(int64(bytesIn))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cols := driverColumns(b, schema)
		if err := fill(cols, blk); err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		encodeBlock(b, &buf, cols)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
}

// BenchmarkEncode is the bench's event table (UInt64, DateTime, String,
// Decimal(18, 2)).
func BenchmarkEncode(b *testing.B) { benchmarkEncode(b, benchTable) }

// BenchmarkEncodeWide adds Nullable, LowCardinality, Array, Map,
// DateTime64 and Kafka coordinate columns.
func BenchmarkEncodeWide(b *testing.B) { benchmarkEncode(b, benchWideTable) }

// BenchmarkEncodeKind is one column of each kind that once went through
// the driver's Append (a copy of every value, boxed for LowCardinality),
// beside the UInt64 id: per 10,000-row block, as BenchmarkEncode.
func BenchmarkEncodeKind(b *testing.B) {
	for _, c := range []chschema.ColumnSchema{
		{Name: "event_lc", Type: "LowCardinality(String)"},
		{Name: "tags", Type: "Array(String)"},
		{Name: "attrs", Type: "Map(String, String)"},
		{Name: "ts", Type: "DateTime"},
		{Name: "ts64", Type: "DateTime64(3)"},
	} {
		b.Run(c.Type, func(b *testing.B) { benchmarkEncode(b, []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, c}) })
	}
}

// BenchmarkCompress is the driver's block compression of one encoded
// 10,000-row block of the bench table (clickhouse.compression), per MB of
// Native data: lz4 (the default), zstd, and none for comparison.
func BenchmarkCompress(b *testing.B) {
	_, blk, _ := benchBlock(b, benchTable, 10_000)
	cols := driverColumns(b, benchTable)
	if err := fill(cols, blk); err != nil {
		b.Fatal(err)
	}
	var buf chproto.Buffer
	encodeBlock(b, &buf, cols)
	for _, m := range []struct {
		name   string
		method compress.Method
	}{{"lz4", compress.LZ4}, {"zstd", compress.ZSTD}, {"none", compress.None}} {
		b.Run(m.name, func(b *testing.B) {
			w := compress.NewWriter(compress.LevelZero, m.method)
			b.SetBytes(int64(len(buf.Buf)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := w.Compress(buf.Buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(w.Data))/float64(len(buf.Buf)), "ratio")
		})
	}
}

// TestEncodeMatchesAppend checks that fill gives the driver the same
// Native bytes as appending ColumnData row slices column by column (the
// driver's documented way), for the bench tables.
func TestEncodeMatchesAppend(t *testing.T) {
	for _, schema := range [][]chschema.ColumnSchema{benchTable, benchWideTable} {
		_, blk, _ := benchBlock(t, schema, 2_000)
		want := driverColumns(t, schema)
		for i := range want {
			if _, err := want[i].Append(blk.ColumnData(i)); err != nil {
				t.Fatal(err)
			}
		}
		got := driverColumns(t, schema)
		if err := fill(got, blk); err != nil {
			t.Fatal(err)
		}
		var wb, gb chproto.Buffer
		encodeBlock(t, &wb, want)
		encodeBlock(t, &gb, got)
		if !bytes.Equal(wb.Buf, gb.Buf) {
			t.Fatalf("%d columns: fill encodes %d bytes, Append %d bytes, and they differ", len(schema), len(gb.Buf), len(wb.Buf))
		}
	}
}

func strs(v ...string) chproto.ColStr {
	var c chproto.ColStr
	for _, x := range v {
		c.Append(x)
	}
	return c
}

// TestEncodeMatchesAppendNested is TestEncodeMatchesAppend for the
// element, key and value types of Array and Map and the wrappers the
// native path handles or hands back to the driver: the bytes must be the
// driver's own, whichever way each column went.
func TestEncodeMatchesAppendNested(t *testing.T) {
	schema := []chschema.ColumnSchema{
		{Name: "au", Type: "Array(UInt64)"},
		{Name: "ans", Type: "Array(Nullable(String))"},
		{Name: "alc", Type: "Array(LowCardinality(String))"},
		{Name: "aa", Type: "Array(Array(String))"},
		{Name: "adt", Type: "Array(DateTime)"},
		{Name: "msu", Type: "Map(String, UInt64)"},
		{Name: "mlc", Type: "Map(LowCardinality(String), Array(String))"},
		{Name: "mnd", Type: "Map(String, Nullable(Decimal(18, 2)))"},
		{Name: "dtz", Type: "DateTime('Europe/Moscow')"},
		{Name: "nd64", Type: "Nullable(DateTime64(3))"},
		{Name: "d64", Type: "DateTime64(6, 'UTC')"},
		{Name: "d9", Type: "DateTime64(9)"},
		{Name: "lcn", Type: "LowCardinality(Nullable(String))"},
		{Name: "lc", Type: "LowCardinality(String)"},
	}
	p, err := decode.Compile("json", decode.InsertColumns(schema), nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for i := 0; i < 600; i++ {
		v := fmt.Sprintf(`{"au":[%d,2],"ans":["x",null],"alc":["a","b%d"],"aa":[["p"],[]],"adt":[%d],"msu":{"k%d":%d},`+
			`"mlc":{"l%d":["v"],"m":[]},"mnd":{"a":null,"b":"1.25"},"dtz":"2024-05-17 12:34:56","nd64":%s,`+
			`"d64":"1950-01-02T03:04:05.123456Z","d9":"2261-12-31T23:59:59.999999999Z","lcn":%s,"lc":"v%d"}`,
			i, i%3, 1715949296+i, i%5, i, i%4, map[bool]string{true: "null", false: `"2199-12-31T23:59:59.999Z"`}[i%2 == 0],
			map[bool]string{true: "null", false: `"n"`}[i%3 == 0], i%300)
		if i%7 == 0 {
			v = `{}` // every column's missing value
		}
		if err := p.Append(blk, &kgo.Record{Value: []byte(v)}); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	matchesAppend(t, schema, blk)
}

// matchesAppend encodes every column of blk twice, through fill's native
// hand-off (or Append where there is none) and through the driver's Append
// of ColumnData, and fails where the bytes differ.
func matchesAppend(t *testing.T, schema []chschema.ColumnSchema, blk *decode.Block) {
	t.Helper()
	for i, c := range schema {
		want := driverColumns(t, schema[i:i+1])
		if _, err := want[0].Append(blk.ColumnData(i)); err != nil {
			t.Fatalf("%s: %v", c.Type, err)
		}
		got := driverColumns(t, schema[i:i+1])
		installed := install(got[0], blk.Native(i))
		if !installed {
			if _, err := got[0].Append(blk.ColumnData(i)); err != nil {
				t.Fatal(err)
			}
		}
		var wb, gb chproto.Buffer
		encodeBlock(t, &wb, want)
		encodeBlock(t, &gb, got)
		if !bytes.Equal(wb.Buf, gb.Buf) {
			t.Errorf("%s (native: %v): encodes %d bytes, Append %d bytes, and they differ", c.Type, installed, len(gb.Buf), len(wb.Buf))
		}
	}
}

// FuzzNativeMatchesAppend feeds arbitrary records (newline-separated, the
// ones decode rejects skipped) into the native column kinds and checks
// that the block encodes exactly as the driver's own Append would encode
// it.
func FuzzNativeMatchesAppend(f *testing.F) {
	schema := []chschema.ColumnSchema{
		{Name: "s", Type: "String"},
		{Name: "lc", Type: "LowCardinality(String)"},
		{Name: "a", Type: "Array(String)"},
		{Name: "an", Type: "Array(Nullable(Int32))"},
		{Name: "alc", Type: "Array(LowCardinality(String))"},
		{Name: "m", Type: "Map(String, String)"},
		{Name: "mu", Type: "Map(LowCardinality(String), UInt64)"},
		{Name: "t", Type: "DateTime"},
		{Name: "t3", Type: "DateTime64(3)"},
		{Name: "nt", Type: "Nullable(DateTime)"},
	}
	p, err := decode.Compile("json", decode.InsertColumns(schema), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"s":"x","lc":"a","a":["p","q"],"an":[1,null],"alc":["u"],"m":{"k":"v"},"mu":{"c":3},"t":1715949296,"t3":"2024-05-17T12:34:56.789Z","nt":null}` + "\n{}\n" +
		`{"lc":"","a":[],"m":{"":""},"t3":"1900-01-01 00:00:00","nt":"2024-05-17 12:00:00"}`))
	f.Add([]byte(`{"lc":"a"}` + "\n" + `{"lc":"b"}` + "\n" + `{"lc":"a","alc":["a","a",""]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		blk := p.NewBlock()
		for _, line := range bytes.Split(data, []byte("\n")) {
			_ = p.Append(blk, &kgo.Record{Value: line}) // a rejected record leaves the block as it was
		}
		if blk.Rows() > 0 {
			matchesAppend(t, schema, blk)
		}
	})
}

// TestInstall checks which columns take the zero-copy hand-off and that a
// mismatched or non-empty column is left alone.
func TestInstall(t *testing.T) {
	_, blk, _ := benchBlock(t, benchWideTable, 10)
	cols := driverColumns(t, benchWideTable)
	var got []string
	for i, c := range cols {
		if install(c, blk.Native(i)) {
			got = append(got, benchWideTable[i].Name)
			if c.Rows() != 10 {
				t.Fatalf("%s: %d rows after install, want 10", benchWideTable[i].Name, c.Rows())
			}
		}
	}
	want := "[id user_id ts event_type channel cost payload event_lc channel_n user_n tags attrs ts64 _partition _offset]"
	if fmt.Sprint(got) != want {
		t.Fatalf("installed %v, want %s", got, want)
	}
	refuse := []struct {
		typ string
		n   chproto.ColInput
	}{
		{"UInt64", chproto.ColUInt32{1}},
		{"Nullable(String)", chproto.ColStr{}},
		{"String", chschema.NullableNative{Nulls: chproto.ColUInt8{0}, Values: chproto.ColStr{}}},
		{"Nullable(UInt64)", chschema.NullableNative{Nulls: chproto.ColUInt8{0}, Values: chproto.ColUInt32{1}}},
		{"Array(Nullable(String))", chschema.NullableNative{Nulls: chproto.ColUInt8{0}, Values: chproto.ColStr{}}},
		{"LowCardinality(Nullable(String))", chschema.NullableNative{Nulls: chproto.ColUInt8{0}, Values: chproto.ColStr{}}},
		{"LowCardinality(String)", chproto.ColStr{}},
		{"Decimal(38, 2)", &chproto.ColDecimal64{1}},
		{"DateTime", chproto.ColUInt32{1}},
		{"DateTime", &chproto.ColDateTime64{Data: []chproto.DateTime64{1}}},
		{"Array(Array(String))", chschema.ArrayNative{Offsets: chproto.ColUInt64{1}, Values: chproto.ColStr{}}},
		{"Array(String)", chschema.ArrayNative{Offsets: chproto.ColUInt64{1}, Values: chproto.ColUInt64{1}}},
		{"Map(String, UInt64)", chschema.MapNative{Offsets: chproto.ColInt64{1}, Keys: strs("k"), Values: strs("v")}},
		{"Map(String, UInt64)", chschema.MapNative{Offsets: chproto.ColInt64{1}, Keys: chproto.ColUInt64{1}, Values: chproto.ColUInt64{1}}},
		{"LowCardinality(Nullable(String))", chschema.LowCardinalityNative{Dict: strs("", "a"), Keys: []int{1}}},
		{"String", chschema.LowCardinalityNative{Dict: strs("", "a"), Keys: []int{1}}},
	}
	for _, r := range refuse {
		c := driverColumns(t, []chschema.ColumnSchema{{Name: "c", Type: r.typ}})[0]
		if install(c, r.n) {
			t.Errorf("install put a %T into a %s column", r.n, r.typ)
		}
		// a refused column is left as it was: empty, and it still encodes
		var buf chproto.Buffer
		if c.Rows() != 0 {
			t.Errorf("%s: %d rows after a refused install", r.typ, c.Rows())
		}
		encodeBlock(t, &buf, []column.Interface{c})
	}
	full := driverColumns(t, []chschema.ColumnSchema{{Name: "c", Type: "UInt64"}})[0]
	if _, err := full.Append([]uint64{7}); err != nil {
		t.Fatal(err)
	}
	if install(full, chproto.ColUInt64{1, 2}) || full.Rows() != 1 {
		t.Error("install replaced a column that already had rows")
	}
}
