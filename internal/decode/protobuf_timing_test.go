package decode

import (
	"fmt"
	"reflect"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"sink/internal/chtype"
	"sink/internal/decode/protofmt"
	"sink/internal/registry"
	"sink/internal/route"
)

// benchProto carries benchEvents' JSON event field for field: ts as a
// Timestamp, cost as a double.
const benchProto = `syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Event {
  uint64 user_id = 1;
  google.protobuf.Timestamp ts = 2;
  string event_type = 3;
  string channel = 4;
  double cost = 5;
  string payload = 6;
  string session = 7;
}
`

var benchProtoSchema = &registry.Schema{ID: 10, Type: sr.TypeProtobuf, Text: benchProto}

// benchProtoEvents are benchEvents as framed Protobuf records (protojson
// reads the JSON event; protobuf-go writes the payload).
func benchProtoEvents(t testing.TB, n int) [][]byte {
	fd, err := protofmt.CompileSchema(benchProtoSchema)
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().ByName("Event")
	out := make([][]byte, n)
	for i, js := range benchEvents(n) {
		m := dynamicpb.NewMessage(md)
		if err := protojson.Unmarshal(js, m); err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = append(registry.AppendFrame(nil, benchProtoSchema.ID, true), b...)
	}
	return out
}

func benchProtoPlan(t testing.TB) *Plan {
	reg := newFakeRegistry()
	reg.schemas[benchProtoSchema.ID] = benchProtoSchema
	p, err := Compile(route.Protobuf, InsertColumns(benchCols), nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// BenchmarkAppendProtobuf is BenchmarkAppend with the same events as
// registry-framed Protobuf.
//
//	go test ./internal/decode/ -run '^$' -bench 'Append$|AppendProtobuf' -benchmem
func BenchmarkAppendProtobuf(b *testing.B) {
	p := benchProtoPlan(b)
	events := benchProtoEvents(b, 1024)
	recs, total := framedRecords(events)
	b.SetBytes(int64(total / len(events)))
	cpu := appendLoop(b, p, recs)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	// CPU time the process used per record (GC included): on a machine
	// shared with other work it says more than the wall time.
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestProtobufZeroAllocsPerRecord pins BenchmarkAppendProtobuf's steady
// state: a record allocates nothing.
func TestProtobufZeroAllocsPerRecord(t *testing.T) {
	requireZeroAllocs(t, benchProtoPlan(t), benchProtoEvents(t, 64))
}

// requireZeroAllocs appends values (in turn) to one block of p, resetting
// it every 5,000 rows like a flush, and fails if a record allocates once
// the buffers have grown.
func requireZeroAllocs(t *testing.T, p *Plan, values [][]byte) {
	t.Helper()
	blk := p.NewBlock()
	i := 0
	next := func() {
		if blk.Rows() == 5000 {
			blk.Reset()
		}
		if err := p.Append(blk, &kgo.Record{Topic: "events", Value: values[i%len(values)]}); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for j := 0; j < 6000; j++ {
		next()
	}
	if allocs := testing.AllocsPerRun(2000, next); allocs > 0.1 {
		t.Fatalf("%.2f allocations per record", allocs)
	}
}

// TestProtobufBenchEventDecodes checks the benchmark decodes what the JSON
// plan does from the same event.
func TestProtobufBenchEventDecodes(t *testing.T) {
	pj, err := Compile("json", InsertColumns(benchCols), nil)
	if err != nil {
		t.Fatal(err)
	}
	pp := benchProtoPlan(t)
	bj, bp := pj.NewBlock(), pp.NewBlock()
	js, pb := benchEvents(50), benchProtoEvents(t, 50)
	for i := range js {
		if err := pj.Append(bj, &kgo.Record{Topic: "events", Value: js[i]}); err != nil {
			t.Fatal(err)
		}
		if err := pp.Append(bp, &kgo.Record{Topic: "events", Value: pb[i]}); err != nil {
			t.Fatal(err)
		}
	}
	for c, col := range bj.Columns() {
		for r := 0; r < 50; r++ {
			typ := col.Type
			want := norm(chtype.Parse(typ), indexOf(bj.ColumnData(c), r))
			got := norm(chtype.Parse(typ), indexOf(bp.ColumnData(c), r))
			if fmtAny(want) != fmtAny(got) {
				t.Fatalf("row %d column %s: protobuf %v, json %v", r, col.Name, got, want)
			}
		}
	}
}

func indexOf(data any, i int) any { return reflect.ValueOf(data).Index(i).Interface() }

func fmtAny(v any) string { return fmt.Sprint(v) }
