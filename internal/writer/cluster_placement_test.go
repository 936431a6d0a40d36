package writer

import (
	"testing"

	"sink/internal/cluster"
)

// TestPlacementOf: the fingerprint changes with what decides a row's shard
// (the key, its hash, the shards' numbers and weights) and with nothing
// else (the replicas).
func TestPlacementOf(t *testing.T) {
	topo := func(weights ...int) *cluster.Topology {
		tp := &cluster.Topology{Name: "c"}
		for i, w := range weights {
			tp.Shards = append(tp.Shards, cluster.Shard{Num: i + 1, Weight: w, Replicas: []cluster.Replica{{Addr: "a", Num: 1}}})
		}
		return tp
	}
	base := placementOf("user_id", "cityHash64", topo(1, 1))
	if len(base) != 16 {
		t.Fatalf("fingerprint %q, want 16 hex digits", base)
	}
	more := topo(1, 1)
	more.Shards[0].Replicas = append(more.Shards[0].Replicas, cluster.Replica{Addr: "b", Num: 2})
	if got := placementOf("user_id", "cityHash64", more); got != base {
		t.Fatalf("a replica added changed the fingerprint: %s, was %s", got, base)
	}
	for name, got := range map[string]string{
		"weights":      placementOf("user_id", "cityHash64", topo(1, 3)),
		"a shard more": placementOf("user_id", "cityHash64", topo(1, 1, 1)),
		"hash":         placementOf("user_id", "xxHash64", topo(1, 1)),
		"key":          placementOf("id", "cityHash64", topo(1, 1)),
	} {
		if got == base {
			t.Errorf("%s changed, the fingerprint did not", name)
		}
	}
}
