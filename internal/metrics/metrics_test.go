package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"sink/internal/batch"
)

func TestNilIsNoOp(t *testing.T) {
	var m *Metrics
	// Every call a pipeline without metrics makes must be harmless.
	tb, tp, pt := m.Table("db.t"), m.Topic("t"), m.Partition("t", 0)
	tb.Inserted(10, time.Second, time.Now())
	tb.Sealed(batch.ReasonRows)
	tb.Retry(252)
	tp.Consumed(1, 2)
	tp.DLQ()
	tp.Skipped()
	pt.SetLag(5, time.Now())
	m.ForgetPartition("t", 0)
	m.SetBuffer(1, 2, true)
	m.SetMaxWait(time.Second)
	m.Committed(time.Now())
	m.Assigned(3)
	m.Revoked(1)
	m.Left()
	m.SetPinger(nil)
	if tb != nil || tp != nil || pt != nil || m.Registry() != nil {
		t.Fatal("a nil Metrics handed out non-nil handles")
	}
	if ok, _ := m.Ready(context.Background()); ok {
		t.Fatal("a nil Metrics is ready")
	}
}

func TestCounters(t *testing.T) {
	m := New("g")
	tb := m.Table("db.t")
	tb.Inserted(100, 20*time.Millisecond, time.Time{})
	tb.Inserted(50, 40*time.Millisecond, time.Time{})
	tb.Sealed(batch.ReasonRows)
	tb.Sealed(batch.ReasonWait)
	tb.Sealed(batch.ReasonWait)
	tb.Sealed(batch.Reason(0)) // not a reason: ignored, not a panic
	tb.Retry(252)
	tb.Retry(252)
	tb.Retry(0)
	tp := m.Topic("events")
	tp.Consumed(3, 300)
	tp.Consumed(2, 50)
	tp.DLQ()
	tp.Skipped()
	tp.Skipped()
	m.Partition("events", 7).SetLag(42, time.Time{})
	m.SetBuffer(1000, 4096, true)
	m.SetMaxWait(2500 * time.Millisecond)
	m.SetRegistryWaiting(3)
	m.SetSchemaWaiting(4)
	m.RegistryRetry()
	m.RegistryRetry()

	f := func(name string, want float64, labels ...string) {
		t.Helper()
		var got float64
		switch name {
		case RowsInserted:
			got = testutil.ToFloat64(m.rows.WithLabelValues(labels...))
		case Inserts:
			got = testutil.ToFloat64(m.inserts.WithLabelValues(labels...))
		case BatchesSealed:
			got = testutil.ToFloat64(m.sealed.WithLabelValues(labels...))
		case InsertRetries:
			got = testutil.ToFloat64(m.retries.WithLabelValues(labels...))
		case RecordsConsumed:
			got = testutil.ToFloat64(m.records.WithLabelValues(labels...))
		case BytesConsumed:
			got = testutil.ToFloat64(m.bytes.WithLabelValues(labels...))
		case DLQRecords:
			got = testutil.ToFloat64(m.dlq.WithLabelValues(labels...))
		case SkippedRecords:
			got = testutil.ToFloat64(m.skipped.WithLabelValues(labels...))
		case ConsumerLag:
			got = testutil.ToFloat64(m.lag.WithLabelValues(labels...))
		case BufferBytes:
			got = testutil.ToFloat64(m.buffer)
		case BufferLimit:
			got = testutil.ToFloat64(m.limit)
		case FetchPaused:
			got = testutil.ToFloat64(m.paused)
		case BatchMaxWait:
			got = testutil.ToFloat64(m.maxWait)
		case RegistryWaiting:
			got = testutil.ToFloat64(m.regWaiting)
		case RegistryRetries:
			got = testutil.ToFloat64(m.regRetries)
		case SchemaWaiting:
			got = testutil.ToFloat64(m.schemaWaiting)
		}
		if got != want {
			t.Fatalf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	f(RowsInserted, 150, "db.t")
	f(Inserts, 2, "db.t")
	f(BatchesSealed, 1, "db.t", "rows")
	f(BatchesSealed, 2, "db.t", "wait")
	f(BatchesSealed, 0, "db.t", "shutdown")
	f(InsertRetries, 2, "db.t", "252")
	f(InsertRetries, 1, "db.t", "0")
	f(RecordsConsumed, 5, "events")
	f(BytesConsumed, 350, "events")
	f(DLQRecords, 1, "events")
	f(SkippedRecords, 2, "events")
	f(ConsumerLag, 42, "events", "7")
	f(BufferBytes, 1000)
	f(BufferLimit, 4096)
	f(FetchPaused, 1)
	f(BatchMaxWait, 2.5)
	f(RegistryWaiting, 3)
	f(RegistryRetries, 2)
	f(SchemaWaiting, 4)
	m.SetBuffer(0, 4096, false)
	f(FetchPaused, 0)

	m.ForgetPartition("events", 7)
	if n := testutil.CollectAndCount(m.lag); n != 0 {
		t.Fatalf("%d lag series after ForgetPartition, want 0", n)
	}
	if n := testutil.CollectAndCount(m.perInsert); n != 1 {
		t.Fatalf("%d rows-per-insert histograms, want 1", n)
	}
}

func TestLastCommitAge(t *testing.T) {
	m := New("g")
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	m.Committed(time.Unix(990, 0))
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == LastCommitAge {
			if got := f.GetMetric()[0].GetGauge().GetValue(); got != 10 {
				t.Fatalf("%s = %v, want 10", LastCommitAge, got)
			}
			return
		}
	}
	t.Fatalf("%s not gathered", LastCommitAge)
}

// TestReadiness runs in a synctest bubble: the hanging ClickHouse's probe
// ends at the probe's timeout on the bubble's fake clock, at once.
func TestReadiness(t *testing.T) { synctest.Test(t, testReadiness) }

func testReadiness(t *testing.T) {
	m := New("grp")
	ctx := context.Background()
	f := func(wantOK bool, wantWhy string) {
		t.Helper()
		ok, why := m.Ready(ctx)
		if ok != wantOK || !strings.Contains(why, wantWhy) {
			t.Fatalf("Ready() = %v %q, want %v containing %q", ok, why, wantOK, wantWhy)
		}
	}
	f(false, `has not joined group "grp"`)
	m.Assigned(3)
	f(false, "clickhouse: not connected yet")
	pingErr := errors.New("dial tcp 127.0.0.1:9000: connection refused\nsecond line")
	m.SetPinger(func(context.Context) error { return pingErr })
	f(false, "clickhouse: dial tcp 127.0.0.1:9000: connection refused")
	if _, why := m.Ready(ctx); strings.Contains(why, "second line") {
		t.Fatalf("reason is not one line: %q", why)
	}
	time.Sleep(readyCache) // the failed ping's answer is kept that long
	pingErr = nil
	f(true, "ok")
	m.Revoked(3)
	f(true, "ok") // a cooperative revoke keeps the member in the group
	m.Left()
	f(false, "has not joined")
	m.Assigned(1)
	m.SetPinger(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	f(false, "deadline exceeded") // a hanging ClickHouse is not ready, and the probe returns
}

func TestServer(t *testing.T) {
	m := New("grp")
	s, err := Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	f := func(path string, wantCode int, wantIn string) {
		t.Helper()
		code, body := get(path)
		if code != wantCode || !strings.Contains(body, wantIn) {
			t.Fatalf("GET %s: %d %q, want %d containing %q", path, code, body, wantCode, wantIn)
		}
	}
	m.Table("db.t").Inserted(7, time.Millisecond, time.Now())
	f("/healthz", 200, "ok")
	f("/readyz", 503, "has not joined")
	m.Assigned(1)
	m.SetPinger(func(context.Context) error { return nil })
	f("/readyz", 200, "ok")
	f("/metrics", 200, `sink_rows_inserted_total{table="db.t"} 7`)
	f("/metrics", 200, "go_goroutines")
	f("/nope", 404, "")

	// A second server on the same port fails at once, naming the address.
	_, err = Serve(s.Addr(), m)
	if err == nil || !strings.Contains(err.Error(), "http.listen "+s.Addr()) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("second Serve on %s: %v", s.Addr(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		t.Fatal("server still answers after Close")
	}
}

func TestLagSeconds(t *testing.T) {
	now := time.Unix(10_000, 0)
	f := func(records int64, last time.Time, want float64, wantOK bool) {
		t.Helper()
		got, ok := LagSeconds(records, last, now)
		if got != want || ok != wantOK {
			t.Fatalf("LagSeconds(%d, %v) = %v %v, want %v %v", records, last, got, ok, want, wantOK)
		}
	}
	f(0, now.Add(-time.Hour), 0, true)               // caught up: nothing waits, however old the last record
	f(0, time.Time{}, 0, true)                       // caught up, timestamp unknown: still 0
	f(5, now.Add(-90*time.Second), 90, true)         // behind: the next record is at most 90s old
	f(1, now.Add(-1500*time.Millisecond), 1.5, true) // sub-second precision
	f(5, now.Add(time.Minute), 0, true)              // producer clock ahead: not negative
	f(5, time.Time{}, 0, false)                      // behind, no timestamp: no honest value
	f(5, time.UnixMilli(-1), 0, false)               // a record without timestamp (message format v0)
	f(-1, now.Add(-time.Minute), 0, true)            // a high watermark below the position (truncated log): not behind
}

// gauge reads the sample of name whose label values are exactly labels (in
// any order) from m's registry; ok is false when there is no such series.
func gauge(t *testing.T, m *Metrics, name string, labels ...string) (v float64, ok bool) {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			var got []string
			for _, l := range s.GetLabel() {
				got = append(got, l.GetValue())
			}
			if slices.Equal(sorted(got), sorted(labels)) {
				return s.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// The time-based series follow the clock of the scrape: lag seconds grow
// while records wait and drop to 0 once a fetch reaches the log end; the
// insert age counts from start, then from each insert; the end-to-end
// histogram gets one observation per insert with a known timestamp.
func TestTimeMetrics(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	m := New("g")
	m.now = func() time.Time { return now }
	m.ages = newAges(m.clock) // restart the clock-dependent collector on the fake clock
	m.reg = prometheus.NewRegistry()
	m.reg.MustRegister(m.e2e, m.ages)

	f := func(name string, want float64, labels ...string) {
		t.Helper()
		got, ok := gauge(t, m, name, labels...)
		if !ok || got != want {
			t.Fatalf("%s%v = %v (present %v), want %v", name, labels, got, ok, want)
		}
	}
	absent := func(name string, labels ...string) {
		t.Helper()
		if v, ok := gauge(t, m, name, labels...); ok {
			t.Fatalf("%s%v = %v, want no series", name, labels, v)
		}
	}

	p := m.Partition("events", 2)
	f(ConsumerLagSeconds, 0, "events", "2") // resolved, nothing fetched yet: nothing known to wait
	p.SetLag(100, now.Add(-30*time.Second))
	f(ConsumerLagSeconds, 30, "events", "2")
	now = now.Add(10 * time.Second) // no fetch for 10s: the waiting records got older
	f(ConsumerLagSeconds, 40, "events", "2")
	p.SetLag(0, now.Add(-time.Second)) // the next fetch reached the log end
	f(ConsumerLagSeconds, 0, "events", "2")
	p.SetLag(3, time.Time{})
	absent(ConsumerLagSeconds, "events", "2")
	p.SetLag(3, now.Add(-2*time.Second))
	m.ForgetPartition("events", 2)
	absent(ConsumerLagSeconds, "events", "2")

	tb := m.Table("db.t")
	now = now.Add(5 * time.Second)
	f(LastInsertAge, 15, "db.t") // no insert yet: since the start
	tb.Inserted(10, time.Second, now.Add(-4*time.Second))
	f(LastInsertAge, 0, "db.t")
	now = now.Add(7 * time.Second)
	f(LastInsertAge, 7, "db.t")
	tb.Inserted(10, time.Second, now.Add(-500*time.Millisecond))
	tb.Inserted(10, time.Second, time.Time{})        // no timestamp: counted as an insert, not as a latency
	tb.Inserted(10, time.Second, now.Add(time.Hour)) // producer clock ahead: 0, not negative
	f(LastInsertAge, 0, "db.t")

	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range fams {
		if fam.GetName() != EndToEndLatency {
			continue
		}
		hist := fam.GetMetric()[0].GetHistogram()
		if hist.GetSampleCount() != 3 || hist.GetSampleSum() != 4.5 {
			t.Fatalf("%s: count %d sum %v, want 3 observations summing to 4.5s (4s, 0.5s, 0s)", EndToEndLatency, hist.GetSampleCount(), hist.GetSampleSum())
		}
		return
	}
	t.Fatalf("%s not gathered", EndToEndLatency)
}
