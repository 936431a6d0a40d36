//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/consumer"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestExactlyOnceInsertRateOn26 compares exactly_once with at_least_once on
// the same workload (set EO_BENCH=1; it takes about a minute): both
// modes consume one paced stream at the same time, each with its own group
// and plain MergeTree table, and the INSERTs per minute must stay within
// 1.5x; then each mode loads the same backlog alone, for rows per second.
func TestExactlyOnceInsertRateOn26(t *testing.T) {
	if os.Getenv("EO_BENCH") == "" {
		t.Skip("set EO_BENCH=1 to measure exactly_once against at_least_once")
	}
	s := testenv.Server26(t)
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 8)
	const rate, secs = 5000, 30 // records per second, seconds
	mode := func(name, delivery string) (*pipeline.Pipeline, func() pipeline.Stats) {
		eoTable(t, ch, db+"."+name)
		cfg := eoConfig(t, s, testenv.UniqueName(t, name), topic, db, name)
		cfg.Delivery = delivery
		cfg.Batch.MaxRows = 20000
		ctx := context.Background()
		w, err := writer.Open(ctx, cfg.Name, cfg.ClickHouse)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		p, err := pipeline.New(ctx, cfg, zerolog.Nop(), w, runOpts(t, cfg, w)...)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ExactlyOnce() {
			if err := p.CheckExactlyOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cons, err := consumer.New(ctx, cfg, zerolog.Nop(), consumer.HooksOf(p))
		if err != nil {
			t.Fatal(err)
		}
		p.Attach(cons)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(runCtx) }()
		return p, func() pipeline.Stats {
			stop()
			if err := <-done; err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			cons.Close()
			return p.Stats()
		}
	}
	count := func(table string) uint64 {
		var n uint64
		if err := ch.QueryRow(context.Background(), "SELECT count() FROM "+db+"."+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor := func(table string, n uint64) time.Time {
		for deadline := time.Now().Add(3 * time.Minute); count(table) < n; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d rows, want %d", table, count(table), n)
			}
		}
		return time.Now()
	}

	// Live: one paced stream, both modes at once.
	_, stopALO := mode("live_alo", "at_least_once")
	_, stopEO := mode("live_eo", "exactly_once")
	time.Sleep(3 * time.Second) // both joined
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < rate*secs; i++ {
		if due := start.Add(time.Duration(i) * time.Second / rate); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		wg.Add(1)
		v := fmt.Sprintf(`{"id":%d,"user_id":%d,"ts":"2024-05-01 10:00:00","event_type":"e","cost":1.25,"payload":"p-%d"}`, i, i%1000, i)
		cl.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	n := uint64(rate * secs)
	waitFor("live_alo", n)
	waitFor("live_eo", n)
	alo, eo := stopALO(), stopEO()
	exact(t, ch, db+".live_eo", n)
	minutes := float64(secs) / 60
	t.Logf("live %d records/s for %ds: at_least_once %d inserts (%.0f/min, %.0f rows each), exactly_once %d inserts (%.0f/min, %.0f rows each), ratio %.2f",
		rate, secs, alo.Inserts, float64(alo.Inserts)/minutes, float64(alo.Rows)/float64(alo.Inserts),
		eo.Inserts, float64(eo.Inserts)/minutes, float64(eo.Rows)/float64(eo.Inserts), float64(eo.Inserts)/float64(alo.Inserts))
	if float64(eo.Inserts) > 1.5*float64(alo.Inserts) {
		t.Fatalf("exactly_once made %d inserts, at_least_once %d: more than 1.5x", eo.Inserts, alo.Inserts)
	}

	// Backlog: the same records again, each mode alone.
	for _, m := range []struct{ name, delivery string }{{"backlog_alo", "at_least_once"}, {"backlog_eo", "exactly_once"}} {
		t0 := time.Now()
		_, stop := mode(m.name, m.delivery)
		took := waitFor(m.name, n).Sub(t0)
		st := stop()
		t.Logf("backlog of %d records, %s: %s, %.0f rows/s, %d inserts", n, m.delivery, took.Round(10*time.Millisecond), float64(n)/took.Seconds(), st.Inserts)
	}
	exact(t, ch, db+".backlog_eo", n)
}
