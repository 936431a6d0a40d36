package decode

import (
	"math/big"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/valyala/fastjson"

	"sink/internal/route"
)

// benchAvroSchema is the benchEvents event in Avro: the same fields, ts as
// timestamp-millis and cost as decimal(18, 4).
const benchAvroSchema = `{"type":"record","name":"Event","fields":[` +
	`{"name":"user_id","type":"long"},` +
	`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},` +
	`{"name":"event_type","type":"string"},` +
	`{"name":"channel","type":"string"},` +
	`{"name":"cost","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":4}},` +
	`{"name":"payload","type":"string"},` +
	`{"name":"session","type":"string"}]}`

// benchAvroEvents re-encodes benchEvents(n) as registry-framed Avro with
// schema id 1.
func benchAvroEvents(tb testing.TB, n int) [][]byte {
	var p fastjson.Parser
	out := make([][]byte, n)
	for i, e := range benchEvents(n) {
		v, err := p.ParseBytes(e)
		if err != nil {
			tb.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339, string(v.GetStringBytes("ts")))
		if err != nil {
			tb.Fatal(err)
		}
		cost, ok := new(big.Rat).SetString(v.Get("cost").String())
		if !ok {
			tb.Fatal("cost")
		}
		out[i] = avroFrame(tb, 1, benchAvroSchema, map[string]any{
			"user_id": v.GetInt64("user_id"), "ts": ts, "event_type": string(v.GetStringBytes("event_type")),
			"channel": string(v.GetStringBytes("channel")), "cost": cost, "payload": string(v.GetStringBytes("payload")),
			"session": string(v.GetStringBytes("session")),
		})
	}
	return out
}

func benchAvroPlan(tb testing.TB) *Plan {
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, benchAvroSchema)
	p, err := Compile(route.Avro, InsertColumns(benchCols), nil, WithRegistry(reg))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkAppendAvro is BenchmarkAppend's workload in Avro: the same
// events and columns, one registry-framed record per op.
//
//	go test ./internal/decode/ -run '^$' -bench AppendAvro -benchmem
func BenchmarkAppendAvro(b *testing.B) {
	p := benchAvroPlan(b)
	events := benchAvroEvents(b, 1024)
	recs, total := framedRecords(events)
	b.SetBytes(int64(total / len(events)))
	appendLoop(b, p, recs)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(total)/float64(len(events)), "bytes/record")
}

// TestAvroZeroAllocsPerRecord pins the steady state: decoding the benchmark
// event from Avro allocates nothing.
func TestAvroZeroAllocsPerRecord(t *testing.T) {
	p := benchAvroPlan(t)
	events := benchAvroEvents(t, 64)
	blk := p.NewBlock()
	i := 0
	next := func() {
		if blk.Rows() == 5000 {
			blk.Reset()
		}
		if err := p.Append(blk, &kgo.Record{Topic: "events", Value: events[i%len(events)]}); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for j := 0; j < 6000; j++ { // warm up buffers
		next()
	}
	if allocs := testing.AllocsPerRun(2000, next); allocs > 0.1 {
		t.Fatalf("%.2f allocations per record", allocs)
	}
}
