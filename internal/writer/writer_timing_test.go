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
var benchTable = []decode.ColumnSchema{
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
var benchWideTable = append(append([]decode.ColumnSchema(nil), benchTable...),
	decode.ColumnSchema{Name: "event_lc", Type: "LowCardinality(String)"},
	decode.ColumnSchema{Name: "channel_n", Type: "Nullable(String)"},
	decode.ColumnSchema{Name: "user_n", Type: "Nullable(UInt64)"},
	decode.ColumnSchema{Name: "tags", Type: "Array(String)"},
	decode.ColumnSchema{Name: "attrs", Type: "Map(String, String)"},
	decode.ColumnSchema{Name: "ts64", Type: "DateTime64(3)"},
	decode.ColumnSchema{Name: "_partition", Type: "Int32"},
	decode.ColumnSchema{Name: "_offset", Type: "UInt64"},
)

// benchBlock decodes n events of the bench's generator (180 bytes, seed 1)
// into a block of schema, mapping the extra columns to event fields.
func benchBlock(tb testing.TB, schema []decode.ColumnSchema, n int) (*decode.Plan, *decode.Block, []*kgo.Record) {
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
		if schema[len(schema)-1].Name == "_offset" {
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

// driverColumns builds the driver's columns for schema the way the driver
// does from the server's (empty) INSERT header block.
func driverColumns(tb testing.TB, schema []decode.ColumnSchema) []column.Interface {
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
func benchmarkEncode(b *testing.B, schema []decode.ColumnSchema) {
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
	for _, schema := range [][]decode.ColumnSchema{benchTable, benchWideTable} {
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
	want := "[id user_id event_type channel cost payload channel_n user_n _partition _offset]"
	if fmt.Sprint(got) != want {
		t.Fatalf("installed %v, want %s", got, want)
	}
	refuse := []struct {
		typ string
		n   chproto.ColInput
	}{
		{"UInt64", chproto.ColUInt32{1}},
		{"Nullable(String)", chproto.ColStr{}},
		{"String", decode.NullableNative{Nulls: chproto.ColUInt8{0}, Values: chproto.ColStr{}}},
		{"Nullable(UInt64)", decode.NullableNative{Nulls: chproto.ColUInt8{0}, Values: chproto.ColUInt32{1}}},
		{"Array(Nullable(String))", decode.NullableNative{Nulls: chproto.ColUInt8{0}, Values: chproto.ColStr{}}},
		{"LowCardinality(Nullable(String))", decode.NullableNative{Nulls: chproto.ColUInt8{0}, Values: chproto.ColStr{}}},
		{"LowCardinality(String)", chproto.ColStr{}},
		{"Decimal(38, 2)", &chproto.ColDecimal64{1}},
		{"DateTime", chproto.ColUInt32{1}},
	}
	for _, r := range refuse {
		c := driverColumns(t, []decode.ColumnSchema{{Name: "c", Type: r.typ}})[0]
		if install(c, r.n) {
			t.Errorf("install put a %T into a %s column", r.n, r.typ)
		}
	}
	full := driverColumns(t, []decode.ColumnSchema{{Name: "c", Type: "UInt64"}})[0]
	if _, err := full.Append([]uint64{7}); err != nil {
		t.Fatal(err)
	}
	if install(full, chproto.ColUInt64{1, 2}) || full.Rows() != 1 {
		t.Error("install replaced a column that already had rows")
	}
}
