package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/offsets"
)

// BenchmarkRouteRecord measures the owner's per-record work (route, decode
// into each target's block, track, batch; inserts into the fake sink are
// acknowledged as they come) for one route, for three routes chosen by
// when: (first match), and for fanout: all into three tables.
func BenchmarkRouteRecord(b *testing.B) {
	for _, bc := range []struct{ name, extra string }{
		{"one_route", ""},
		{"when_first_match", threeTables},
		{"fanout_all_3_tables", allTables},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, cfg := benchPipeline(b, bc.extra)
			recs := make([]*kgo.Record, 1024)
			for i := range recs {
				r := fanRecord(int64(i), fmt.Sprintf("eu-%d", i%3), []string{"order", "", "x"}[i%3], []string{"click", "view", "other"}[i%3])
				r.Value = fmt.Appendf(nil, `{"id":%d,"s":"user-%d signed in from 10.0.%d.%d","kind":%q,"amount":%d.5,"tags":["a","b"]}`,
					i, i, i%256, i%7, []string{"click", "view", "other"}[i%3], i)
				recs[i] = r
			}
			ctx, now := context.Background(), time.Now()
			for i, r := range recs[:3] { // one of each kind: every table's first
				settle(b, p, r, int64(i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for i := range b.N {
				r := recs[i%len(recs)]
				r.Offset = int64(i)
				p.in.Record(ctx, now, unitTP, r)
				for done := false; !done; {
					select {
					case e := <-p.inbox:
						e.Apply(ctx)
					default:
						done = p.disp.InFlight() < 4*cfg.ClickHouse.MaxInFlight
						if !done {
							(<-p.inbox).Apply(ctx)
						}
					}
				}
			}
			// The process's CPU time per record (GC included).
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// settle routes a copy of r (at offset of partition 1) until it is no longer held,
// answering the table re-reads it asks for: the first record carrying a
// field no column takes waits for one (evolve.go), the records after it
// do not. Without it the benchmark would time records waiting for a
// re-read that no loop answers.
func settle(b *testing.B, p *Pipeline, r *kgo.Record, offset int64) {
	b.Helper()
	ctx := context.Background()
	c := *r
	c.Partition, c.Offset = 1, offset
	for range 10 {
		if _, held := p.in.Record(ctx, time.Now(), offsets.TP{Topic: c.Topic, Partition: 1}, &c); !held {
			return
		}
		select {
		case e := <-p.inbox: // the table's re-read
			e.Apply(ctx)
		case <-time.After(5 * time.Second):
			b.Fatal("a held record's table re-read did not come back")
		}
	}
	b.Fatal("the record is still held after 10 table re-reads")
}

// benchPipeline is a pipeline on the fake source and sink for benchmarks
// that drive the owner's methods directly: batches of 5,000 rows, four
// INSERTs in flight.
func benchPipeline(b *testing.B, extra string) (*Pipeline, *config.Config) {
	cfg := unitConfig(&testing.T{}, extra)
	cfg.Batch.MaxRows = 5000
	cfg.ClickHouse.MaxInFlight = 4
	p, err := New(context.Background(), cfg, zerolog.Nop(), newFakeSink(nil))
	if err != nil {
		b.Fatal(err)
	}
	p.Attach(newFakeSource())
	return p, cfg
}
