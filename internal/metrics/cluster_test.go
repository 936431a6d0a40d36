package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestClusterSeries(t *testing.T) {
	m := New("g")
	m.ShardFailed(1, "a:9000", 210, true)
	m.ShardFailed(1, "a:9000", 210, false)
	m.ShardInserted(1, "b:9000", 500)
	m.ShardInserted(2, "c:9000", 300)
	m.ShardInserted(2, "c:9000", 200)
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"errors 1 a 210", testutil.ToFloat64(m.cluster.errors.WithLabelValues("1", "a:9000", "210")), 2},
		{"failovers 1", testutil.ToFloat64(m.cluster.failovers.WithLabelValues("1")), 1},
		{"up 1 a", testutil.ToFloat64(m.cluster.up.WithLabelValues("1", "a:9000")), 0},
		{"up 1 b", testutil.ToFloat64(m.cluster.up.WithLabelValues("1", "b:9000")), 1},
		{"inserts 2 c", testutil.ToFloat64(m.cluster.inserts.WithLabelValues("2", "c:9000")), 2},
		{"rows 2 c", testutil.ToFloat64(m.cluster.rows.WithLabelValues("2", "c:9000")), 500},
		{"rows 1 b", testutil.ToFloat64(m.cluster.rows.WithLabelValues("1", "b:9000")), 500},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(m.Registry(), ShardInserts, ShardRows, ShardErrors, ShardFailovers, ReplicaHealthy); err != nil || n != 9 {
		t.Errorf("%d cluster series (%v), want 9", n, err)
	}
	var nilM *Metrics
	nilM.ShardInserted(1, "a", 1) // no metrics: nothing, no panic
	nilM.ShardFailed(1, "a", 0, true)
}
