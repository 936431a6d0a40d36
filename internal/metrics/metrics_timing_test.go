package metrics

import (
	"testing"
	"time"

	"sink/internal/batch"
)

// BenchmarkHotPath is what the pipeline's owner goroutine pays per
// partition fetch (Consumed, SetLag) and per batch (Sealed, Inserted) on
// pre-resolved handles: atomic adds and stores, no label lookups, no
// allocations (the time-based lag and insert age are computed at scrape
// time, not here).
func BenchmarkHotPath(b *testing.B) {
	m := New("g")
	tb, tp, pt := m.Table("db.t"), m.Topic("events"), m.Partition("events", 3)
	ts := time.Now().Add(-time.Second) // a record timestamp
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tp.Consumed(500, 90_000)
		pt.SetLag(int64(i), ts)
		tb.Sealed(batch.ReasonRows)
		tb.Inserted(100_000, 300*time.Millisecond, ts)
	}
}

// BenchmarkNil is the cost without metrics: nil checks only.
func BenchmarkNil(b *testing.B) {
	var m *Metrics
	tb, tp, pt := m.Table("db.t"), m.Topic("events"), m.Partition("events", 3)
	ts := time.Now().Add(-time.Second) // a record timestamp
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tp.Consumed(500, 90_000)
		pt.SetLag(int64(i), ts)
		tb.Sealed(batch.ReasonRows)
		tb.Inserted(100_000, 300*time.Millisecond, ts)
	}
}
