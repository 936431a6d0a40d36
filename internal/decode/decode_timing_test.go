package decode

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/decode/column"
)

// benchCols is a typical event table: an id, a time, a low-cardinality
// type, free text, money and the Kafka coordinates.
var benchCols = []chschema.ColumnSchema{
	{Name: "user_id", Type: "UInt64"},
	{Name: "ts", Type: "DateTime"},
	{Name: "event_type", Type: "LowCardinality(String)"},
	{Name: "channel", Type: "String"},
	{Name: "cost", Type: "Decimal(18, 4)"},
	{Name: "payload", Type: "String"},
	{Name: "_topic", Type: "LowCardinality(String)"},
	{Name: "_partition", Type: "Int32"},
	{Name: "_offset", Type: "UInt64"},
	{Name: "inserted_at", Type: "DateTime", DefaultKind: "DEFAULT"},
}

// benchEvents vary the values the way a real stream does.
func benchEvents(n int) [][]byte {
	types := []string{"page_view", "click", "add_to_cart", "purchase"}
	channels := []string{"web", "ios", "android"}
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil,
			`{"user_id":%d,"ts":"2024-05-17T12:%02d:%02dZ","event_type":%q,"channel":%q,"cost":%d.%04d,"payload":"{\"path\":\"/products/%d\",\"ref\":\"search\"}","session":"s-%08x"}`,
			1_000_000_000+i*7919, i/60%60, i%60, types[i%len(types)], channels[i%len(channels)], i%1000, i%10000, i%5000, i*2654435761)
	}
	return out
}

// BenchmarkAppend decodes realistic ~180-byte events into a block, one record
// per op, resetting the block every 10,000 rows like a batch flush.
//
//	go test ./internal/decode/ -run '^$' -bench Append -benchmem
func BenchmarkAppend(b *testing.B) { benchmarkAppend(b, reuseBlock) }

// BenchmarkAppendNewBlock is BenchmarkAppend with a new block for every
// 10,000 rows, as the first batches of a run get them (the pipeline keeps
// reset blocks for reuse after that).
func BenchmarkAppendNewBlock(b *testing.B) { benchmarkAppend(b, newAfterReset) }

// BenchmarkAppendNewBlockInFlight is BenchmarkAppend with a new block for
// every 10,000 rows while the full one is kept unreset, as the pipeline
// opens a block while the sealed one is still being inserted (before any
// block comes back for reuse).
func BenchmarkAppendNewBlockInFlight(b *testing.B) { benchmarkAppend(b, newInFlight) }

// How benchmarkAppend gets the block after each 10,000 rows.
const (
	reuseBlock    = iota // Reset it and fill it again
	newAfterReset        // Reset it, then fill a new one
	newInFlight          // leave it full, fill a new one
)

func benchmarkAppend(b *testing.B, mode int) {
	// The String buffers a reset block gives up are kept for the next
	// blocks, as the sink keeps them (consumer.SpareLimit's default).
	column.SetSpareLimit(32 << 20)
	b.Cleanup(func() { column.SetSpareLimit(0) })
	p, err := Compile("json", InsertColumns(benchCols), nil)
	if err != nil {
		b.Fatal(err)
	}
	events := benchEvents(1024)
	recs := make([]*kgo.Record, len(events))
	total := 0
	for i, e := range events {
		recs[i] = &kgo.Record{Topic: "events", Partition: 3, Offset: int64(i), Value: e, Timestamp: time.Unix(1715949296, 0)}
		total += len(e)
	}
	blk := p.NewBlock()
	b.SetBytes(int64(total / len(events)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if blk.Rows() == 10_000 {
			if mode != newInFlight {
				blk.Reset()
			}
			if mode != reuseBlock {
				blk = p.NewBlock()
			}
		}
		if err := p.Append(blk, recs[i%len(recs)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") // see BenchmarkAppendProtobuf
}

// BenchmarkColumnData measures building the clickhouse-go slices of a
// 10,000-row block (done once per insert, not per record).
func BenchmarkColumnData(b *testing.B) {
	p, err := Compile("json", InsertColumns(benchCols), nil)
	if err != nil {
		b.Fatal(err)
	}
	blk := p.NewBlock()
	for i, e := range benchEvents(10_000) {
		if err := p.Append(blk, &kgo.Record{Topic: "events", Offset: int64(i), Value: e}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for c := range blk.Columns() {
			_ = blk.ColumnData(c)
		}
	}
}

// BenchmarkAppendModern measures the cost per record of the newer column
// types: the benchCols event table plus one column of the type, so the
// difference to BenchmarkAppend is that column's share.
//
//	go test ./internal/decode/ -run '^$' -bench AppendModern -benchmem
func BenchmarkAppendModern(b *testing.B) {
	for _, bc := range []struct{ name, typ, value string }{
		{"JSON", "JSON", `{"path":"/products/1","ref":"search","n":42,"tags":["a","b"]}`},
		{"JSONTyped", "JSON(n UInt32, t DateTime64(3))", `{"path":"/products/1","ref":"search","n":42,"t":1715949296789}`},
		{"JSONString", "JSON", `"{\"path\":\"/products/1\",\"ref\":\"search\",\"n\":42}"`},
		{"Dynamic", "Dynamic", `"search"`},
		{"DynamicNumber", "Dynamic", `42`},
		{"Variant", "Variant(String, UInt64)", `42`},
		{"Tuple", "Tuple(a UInt32, b String)", `{"a":1,"b":"x"}`},
		{"Int128", "Int128", `"170141183460469231731687303715884105727"`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cols := append(append([]chschema.ColumnSchema(nil), benchCols...), chschema.ColumnSchema{Name: "extra", Type: bc.typ})
			p, err := Compile("json", InsertColumns(cols), nil)
			if err != nil {
				b.Fatal(err)
			}
			events := benchEvents(1024)
			recs := make([]*kgo.Record, len(events))
			for i, e := range events {
				v := append(e[:len(e)-1:len(e)-1], `,"extra":`...)
				v = append(append(v, bc.value...), '}')
				recs[i] = &kgo.Record{Topic: "events", Partition: 3, Offset: int64(i), Value: v, Timestamp: time.Unix(1715949296, 0)}
			}
			appendLoop(b, p, recs)
		})
	}
}

// BenchmarkColumnDataModern measures building clickhouse-go's slices of a
// 10,000-row block of one newer column type (once per insert), per row.
//
//	go test ./internal/decode/ -run '^$' -bench ColumnDataModern -benchmem
func BenchmarkColumnDataModern(b *testing.B) {
	for _, bc := range []struct{ name, typ, value string }{
		{"JSON", "JSON", `{"path":"/products/1","n":42}`},
		{"Dynamic", "Dynamic", `"search"`},
		{"Variant", "Variant(String, UInt64)", `42`},
		{"Tuple", "Tuple(a UInt32, b String)", `{"a":1,"b":"x"}`},
		{"Int128", "Int128", `"170141183460469231731687303715884105727"`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := Compile("json", []chschema.ColumnSchema{{Name: "c", Type: bc.typ}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			blk := p.NewBlock()
			rec := &kgo.Record{Value: []byte(`{"c":` + bc.value + `}`)}
			for i := 0; i < 10_000; i++ {
				if err := p.Append(blk, rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = blk.ColumnData(0)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/row")
		})
	}
}

// BenchmarkAppendUnmapped measures what schema drift detection costs per
// record: the benchCols events (each carries "session", which no column
// takes) against the same events with a "session" column (every field
// taken, so the keys are never walked) and with four more unknown fields.
//
//	go test ./internal/decode/ -run '^$' -bench AppendUnmapped -benchmem
func BenchmarkAppendUnmapped(b *testing.B) {
	withSession := append(append([]chschema.ColumnSchema(nil), benchCols...), chschema.ColumnSchema{Name: "session", Type: "String"})
	for _, bc := range []struct {
		name  string
		cols  []chschema.ColumnSchema
		extra string
	}{
		{"none", withSession, ""},
		{"one", benchCols, ""},
		{"five", benchCols, `,"a":1,"b":"x","c":[1],"d":{"e":1}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := Compile("json", InsertColumns(bc.cols), nil)
			if err != nil {
				b.Fatal(err)
			}
			events := benchEvents(1024)
			recs := make([]*kgo.Record, len(events))
			for i, e := range events {
				v := append(e[:len(e)-1:len(e)-1], bc.extra...)
				recs[i] = &kgo.Record{Topic: "events", Partition: 3, Offset: int64(i), Value: append(v, '}'), Timestamp: time.Unix(1715949296, 0)}
			}
			appendLoop(b, p, recs)
		})
	}
}

// appendLoop appends recs round-robin, b.N records, into one block reset
// every 10,000 rows (a batch flush), reporting allocations. It stops the
// timer after the loop and returns the process's CPU time the loop used,
// in ns (see cpuTime).
func appendLoop(b *testing.B, p *Plan, recs []*kgo.Record) int64 {
	blk := p.NewBlock()
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if blk.Rows() == 10_000 {
			blk.Reset()
		}
		if err := p.Append(blk, recs[i%len(recs)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	return cpuTime() - cpu0
}

// framedRecords wraps the encoded values as records of one partition, and
// returns them with the values' total size in bytes.
func framedRecords(values [][]byte) ([]*kgo.Record, int) {
	recs := make([]*kgo.Record, len(values))
	total := 0
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: "events", Partition: 3, Offset: int64(i), Value: v, Timestamp: time.Unix(1715949296, 0)}
		total += len(v)
	}
	return recs, total
}

// wideCols is a wide table: 50 columns of mixed types, each read from the
// top-level field of its name.
func wideCols() []chschema.ColumnSchema {
	types := []string{"UInt64", "String", "Float64", "Int32", "DateTime", "LowCardinality(String)", "Nullable(String)", "Decimal(18, 4)", "Bool", "UInt8"}
	cols := make([]chschema.ColumnSchema, 50)
	for i := range cols {
		cols[i] = chschema.ColumnSchema{Name: fmt.Sprintf("field_%02d", i), Type: types[i%len(types)]}
	}
	return cols
}

// wideEvents are records of 50 fields (about 2 KB), one per wideCols column.
func wideEvents(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		b := []byte{'{'}
		for c := 0; c < 50; c++ {
			if c > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `"field_%02d":`, c)
			switch c % 10 {
			case 0:
				b = fmt.Appendf(b, "%d", 1_000_000_000+i*7919+c)
			case 1, 6:
				b = fmt.Appendf(b, `"text value %d of column %d, somewhat longer"`, i, c)
			case 2:
				b = fmt.Appendf(b, "%d.%03d", i%1000, c)
			case 3:
				b = fmt.Appendf(b, "%d", -i*31-c)
			case 4:
				b = fmt.Appendf(b, `"2024-05-17T12:%02d:%02dZ"`, i/60%60, i%60)
			case 5:
				b = fmt.Appendf(b, `"kind-%d"`, (i+c)%7)
			case 7:
				b = fmt.Appendf(b, "%d.%04d", i%100000, c)
			case 8:
				b = fmt.Appendf(b, "%t", (i+c)%2 == 0)
			case 9:
				b = fmt.Appendf(b, "%d", (i+c)%256)
			}
		}
		out[i] = append(b, '}')
	}
	return out
}

// BenchmarkAppendWide decodes 50-field records of about 2 KB into a
// 50-column block, one record per op.
//
//	go test ./internal/decode/ -run '^$' -bench AppendWide -benchmem
func BenchmarkAppendWide(b *testing.B) {
	benchmarkJSON(b, wideCols(), nil, wideEvents(1024))
}

// benchmarkJSON appends values to a json plan of cols and mapping, one
// record per op, and reports the process's CPU time per record.
func benchmarkJSON(b *testing.B, cols []chschema.ColumnSchema, mapping map[string]string, values [][]byte) {
	p, err := Compile("json", cols, mapping)
	if err != nil {
		b.Fatal(err)
	}
	recs, total := framedRecords(values)
	b.SetBytes(int64(total / len(recs)))
	cpu := appendLoop(b, p, recs)
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkAppendNested decodes records whose columns read nested paths
// (a.b.c, an array element) next to a subtree no column reads.
//
//	go test ./internal/decode/ -run '^$' -bench AppendNested -benchmem
func BenchmarkAppendNested(b *testing.B) {
	benchmarkJSON(b, benchNestedCols, benchNestedMapping, benchNestedEvents(1024))
}

// benchNestedCols and benchNestedMapping read nested paths of
// benchNestedEvents.
var benchNestedCols = []chschema.ColumnSchema{
	{Name: "id", Type: "UInt64"},
	{Name: "user_name", Type: "String"},
	{Name: "user_city", Type: "LowCardinality(String)"},
	{Name: "lat", Type: "Float64"},
	{Name: "first_item", Type: "String"},
	{Name: "total", Type: "Decimal(18, 2)"},
	{Name: "ts", Type: "DateTime64(3)"},
}

var benchNestedMapping = map[string]string{
	"user_name":  "user.name",
	"user_city":  "user.address.city",
	"lat":        "user.address.geo.lat",
	"first_item": "order.items.0.sku",
	"total":      "order.total",
	"ts":         "meta.ts",
}

// benchNestedEvents are records of nested objects (about 290 bytes), with
// a subtree no column reads.
func benchNestedEvents(n int) [][]byte {
	values := make([][]byte, n)
	for i := range values {
		values[i] = fmt.Appendf(nil, `{"id":%d,"user":{"name":"user %d","address":{"street":"%d Main St","city":"city-%d","geo":{"lat":%d.25,"lon":-%d.5}}},`+
			`"order":{"items":[{"sku":"sku-%d","qty":%d},{"sku":"sku-%d","qty":1}],"total":%d.99},"debug":{"trace":[1,2,3,{"x":[4,5]}],"host":"h-%d"},"meta":{"ts":%d}}`,
			i, i, i, i%50, i%90, i%180, i, i%5, i+1, i, i%9, 1715949296000+int64(i))
	}
	return values
}

// BenchmarkAppendWideNested decodes the 50 fields of wideEvents one level
// down ({"meta":…,"data":{…50 fields…}}), each column reading data.NAME:
// 50 paths below one top-level key, as a wrapped event's columns read.
//
//	go test ./internal/decode/ -run '^$' -bench AppendWideNested -benchmem
func BenchmarkAppendWideNested(b *testing.B) {
	benchmarkJSON(b, wideCols(), wideNestedMapping(), wideNestedEvents(1024))
}

// wideNestedMapping reads each wideCols column from data.NAME.
func wideNestedMapping() map[string]string {
	m := map[string]string{}
	for _, c := range wideCols() {
		m[c.Name] = "data." + c.Name
	}
	return m
}

// wideNestedEvents are wideEvents below a "data" key, after a small object
// no column reads.
func wideNestedEvents(n int) [][]byte {
	out := wideEvents(n)
	for i, v := range out {
		out[i] = fmt.Appendf(nil, `{"meta":{"source":"app-%d","v":2},"data":%s}`, i%5, v)
	}
	return out
}
