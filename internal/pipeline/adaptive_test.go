package pipeline

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/adapt"
	"sink/internal/chtable"
	"sink/internal/metrics"
	"sink/internal/pipeline/dispatch"
)

// partsSink is a fakeSink whose tables have the parts the test sets; it
// counts the reads and the tables each asked for.
type partsSink struct {
	*fakeSink
	mu     sync.Mutex
	parts  adapt.Parts
	reads  int
	asked  int // the tables the last read asked for
	inRead int // reads running now
	most   int // the most reads running at once
}

func (s *partsSink) PartsOf(_ context.Context, tables []chtable.TableName) (map[chtable.TableName]adapt.Parts, error) {
	s.mu.Lock()
	s.reads++
	s.asked = len(tables)
	s.inRead++
	s.most = max(s.most, s.inRead)
	out := map[chtable.TableName]adapt.Parts{}
	for _, t := range tables {
		out[t] = s.parts
	}
	s.mu.Unlock()
	time.Sleep(time.Millisecond) // a query takes time: a tick may come meanwhile
	s.mu.Lock()
	s.inRead--
	s.mu.Unlock()
	return out, nil
}

func (s *partsSink) set(p adapt.Parts) {
	s.mu.Lock()
	s.parts = p
	s.mu.Unlock()
}

// gauge reads one of the table's adaptive gauges.
func gauge(m *metrics.Metrics, name string) float64 {
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, x := range mf.GetMetric() {
				return x.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// TestUnitAdaptive drives batch.mode adaptive through the owner goroutine:
// the cadence's wait seals the batches (not max_rows), parts at
// parts_to_delay_insert stretch the wait smoothly, parts halfway to
// parts_to_throw_insert push it past max_latency (reported), and once the parts are gone the
// wait comes back.
func TestUnitAdaptive(t *testing.T) { synctest.Test(t, testUnitAdaptive) }

func testUnitAdaptive(t *testing.T) {
	sink := &partsSink{fakeSink: newFakeSink(nil)}
	m, _, src := startAdaptive(t, sink)
	wait := func() float64 { return gauge(m, metrics.BatchTargetWait) }
	if got := wait(); got != 0.1 {
		t.Fatalf("initial wait %gs, want 0.1s (600 inserts/min)", got)
	}

	// max_rows (2 in unitConfig) does not seal in adaptive mode: 10 rows
	// are one batch, sealed by the wait.
	src.send(unitTP, 0, rows(0, 10)...)
	eventually(t, 2*time.Second, "10 rows inserted", func() bool { return sink.inserted("db.t") == 10 })
	if got := gauge(m, metrics.BatchInputRate); got <= 0 {
		t.Errorf("input rate %g after a batch, want > 0", got)
	}

	// At parts_to_delay_insert: pressure 5, reached in steps (at most ×2 per
	// decision, adapt's tests show; two decisions per parts read here).
	sink.set(adapt.Parts{Active: 20, DelayAt: 20, ThrowAt: 40})
	var seen []float64
	eventually(t, 2*time.Second, "wait 0.5s at parts_to_delay_insert", func() bool {
		w := wait()
		if len(seen) == 0 || seen[len(seen)-1] != w {
			seen = append(seen, w)
		}
		return w == 0.5
	})
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Errorf("wait went back from %g to %g on the way up: %v", seen[i-1], seen[i], seen)
		}
	}
	if gauge(m, metrics.BatchPressure) != 5 || gauge(m, metrics.BatchOverLatency) != 0 || gauge(m, metrics.TableActiveParts) != 20 {
		t.Errorf("at delay: pressure %g over %g parts %g, want 5, 0, 20", gauge(m, metrics.BatchPressure),
			gauge(m, metrics.BatchOverLatency), gauge(m, metrics.TableActiveParts))
	}
	// Halfway to throw: pressure 20 → 2s, past max_latency minus the fetch wait.
	sink.set(adapt.Parts{Active: 30, DelayAt: 20, ThrowAt: 40})
	eventually(t, 2*time.Second, "over max_latency", func() bool { return gauge(m, metrics.BatchOverLatency) == 1 && wait() == 2 })

	// Parts gone: the pressure relaxes and the wait comes back to 100ms.
	sink.set(adapt.Parts{Active: 1, DelayAt: 20, ThrowAt: 40})
	eventually(t, 5*time.Second, "back to 0.1s", func() bool { return wait() == 0.1 && gauge(m, metrics.BatchOverLatency) == 0 })
}

// startAdaptive runs a pipeline in adaptive mode (600 inserts/min, so a
// 100ms wait; max_latency 2s, fetch wait 500ms) with metrics, reading
// parts every 10ms; it is stopped when the test ends.
func startAdaptive(t *testing.T, sink Sink) (*metrics.Metrics, *Pipeline, *fakeSource) {
	t.Helper()
	old := dispatch.PartsInterval
	dispatch.PartsInterval = 10 * time.Millisecond
	cfg := unitConfig(t, "")
	cfg.Batch.Mode = "adaptive"
	cfg.Batch.TargetInsertsPerMinute = 600
	cfg.Batch.MaxLatency = 2 * time.Second
	cfg.Kafka.FetchMaxWait = 500 * time.Millisecond
	m := metrics.New("unit")
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink, WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	p.Attach(src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		dispatch.PartsInterval = old
	})
	return m, p, src
}

// TestUnitAdaptiveTooManyParts: an INSERT retried after TOO_MANY_PARTS
// (counted on the insert goroutine) raises the pressure at the owner, which
// then says the wait is decided by it.
func TestUnitAdaptiveTooManyParts(t *testing.T) { synctest.Test(t, testUnitAdaptiveTooManyParts) }

func testUnitAdaptiveTooManyParts(t *testing.T) {
	sink := newFakeSink(func(n int) insertScript {
		if n == 1 {
			return insertScript{retries: 1}
		}
		return insertScript{}
	})
	m, _, src := startAdaptive(t, sink) // no parts reader: errors alone
	src.send(unitTP, 0, rows(0, 3)...)
	eventually(t, 2*time.Second, "rows inserted", func() bool { return sink.inserted("db.t") == 3 })
	eventually(t, time.Second, "too_many_parts decides", func() bool {
		return gauge(m, metrics.BatchPressure) > 1.9 && reason(m) == "too_many_parts"
	})
	if got := gauge(m, metrics.BatchTargetWait); got < 0.19 {
		t.Errorf("wait %gs after TOO_MANY_PARTS, want about 0.2s", got)
	}
}

// reason is the reason label whose sink_batch_target_reason is 1.
func reason(m *metrics.Metrics) string {
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() != metrics.BatchTargetReason {
			continue
		}
		for _, x := range mf.GetMetric() {
			if x.GetGauge().GetValue() == 1 {
				for _, l := range x.GetLabel() {
					if l.GetName() == "reason" {
						return l.GetValue()
					}
				}
			}
		}
	}
	return ""
}
