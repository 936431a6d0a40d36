package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
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
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r := recs[i%len(recs)]
				r.Offset = int64(i)
				p.handleRecord(ctx, now, unitTP, r)
				for done := false; !done; {
					select {
					case a := <-p.acks:
						p.handleAck(ctx, a)
					default:
						done = len(p.flights) < 4*cfg.ClickHouse.MaxInFlight
						if !done {
							p.handleAck(ctx, <-p.acks)
						}
					}
				}
			}
		})
	}
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
