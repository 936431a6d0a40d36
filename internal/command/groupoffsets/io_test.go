package groupoffsets

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/offsets"
)

// TestCommitted: every offset the group committed, of any topic, sorted,
// with its metadata; none for a group that never committed.
func TestCommitted(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := &config.Config{Kafka: config.Kafka{Brokers: c.ListenAddrs(), Group: "g", Topics: []string{"a"}, RequestTimeout: 10 * time.Second}}
	g, err := OpenGroup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := g.Committed(ctx); err != nil || len(got) != 0 {
		t.Fatalf("no group yet: %+v, %v; want none", got, err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "b", Partition: 0, At: 7, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "a", Partition: 1, At: 12, LeaderEpoch: -1, Metadata: "m1"})
	os.Add(kadm.Offset{Topic: "a", Partition: 0, At: 3, LeaderEpoch: -1})
	if _, err := kadm.NewClient(cl).CommitOffsets(ctx, "g", os); err != nil {
		t.Fatal(err)
	}
	got, err := g.Committed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		tp       offsets.TP
		at       int64
		metadata string
	}{{offsets.TP{Topic: "a", Partition: 0}, 3, ""}, {offsets.TP{Topic: "a", Partition: 1}, 12, "m1"}, {offsets.TP{Topic: "b", Partition: 0}, 7, ""}}
	if len(got) != len(want) {
		t.Fatalf("Committed = %+v; want %d partitions", got, len(want))
	}
	for i, w := range want {
		if got[i].TP != w.tp || got[i].Committed != w.at || got[i].Metadata != w.metadata || got[i].End != -1 {
			t.Fatalf("Committed[%d] = %+v; want %v at %d with %q", i, got[i], w.tp, w.at, w.metadata)
		}
	}
}

// TestErrorsClassified: the refusals a caller tells apart by type.
func TestErrorsClassified(t *testing.T) {
	_, err := Select(parts(), Target{Explicit: map[offsets.TP]int64{{Topic: "z", Partition: 3}: 1}}, "", -1)
	if !errors.Is(err, ErrNotConsumed) {
		t.Fatalf("unknown partition: %v; want ErrNotConsumed", err)
	}
	var me *MembersError
	err = error(&MembersError{Group: "g", Members: []string{"sink-x on 10.0.0.1 (member m-1)"}})
	if !errors.As(err, &me) || err.Error() != "group g has 1 active member (sink-x on 10.0.0.1 (member m-1)): stop every sink of the group first (SIGTERM, or PUT /connectors/NAME/stop on its HTTP listener), then run this again (docs/operations.md#offsets)" {
		t.Fatalf("members: %v", err)
	}
}
