package consumer

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/offsets"
)

// member is one group member in a test: a Consumer polling in the
// background, recording its partition callbacks.
type member struct {
	mu       sync.Mutex
	owned    map[int32]bool
	revokes  [][]int32
	assigned time.Time
	released time.Time // when the last revoke callback returned
}

func (m *member) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.owned)
}

// TestRevokeCompletesBeforePartitionsMove: under either group protocol
// (classic with cooperative-sticky balancing, consumer with the broker's
// uniform assignor) and with rebalances blocked on poll, a second member
// gets partitions only after the first member's revoke callback (where the
// pipeline flushes and commits) has returned, and the first keeps the
// partitions it is not asked to give up.
func TestRevokeCompletesBeforePartitionsMove(t *testing.T) {
	eachProtocol(t, testRevokeCompletesBeforePartitionsMove)
}

// eachProtocol runs test under each kafka.group_protocol.
func eachProtocol(t *testing.T, test func(t *testing.T, protocol string)) {
	for _, p := range []string{config.GroupClassic, config.GroupConsumer} {
		t.Run(p, func(t *testing.T) { test(t, p) })
	}
}

func testRevokeCompletesBeforePartitionsMove(t *testing.T, protocol string) {
	_, cfg := fake(t, "src", "dlq")
	cfg.Kafka.GroupProtocol = protocol
	const flush = 300 * time.Millisecond // several heartbeats (TestMain): a second member told to take the partition early would have it by then
	start := func(m *member, slowRevoke bool) *Consumer {
		c, err := New(context.Background(), cfg, zerolog.Nop(), Hooks{
			Assigned: func(_ context.Context, parts map[string][]int32) {
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, p := range parts["src"] {
					m.owned[p] = true
				}
				if len(parts["src"]) > 0 {
					m.assigned = time.Now()
				}
			},
			Revoked: func(_ context.Context, parts map[string][]int32) {
				if len(parts["src"]) == 0 {
					return
				}
				if slowRevoke {
					time.Sleep(flush) // the pipeline's flush and commit
				}
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, p := range parts["src"] {
					delete(m.owned, p)
				}
				m.revokes = append(m.revokes, parts["src"])
				m.released = time.Now()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				f := c.Poll(context.Background())
				c.AllowRebalance()
				if f.IsClientClosed() {
					return
				}
			}
		}()
		t.Cleanup(c.Close)
		return c
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	a := &member{owned: map[int32]bool{}}
	if got := waitProtocol(t, start(a, true)); got != protocol {
		t.Fatalf("the group runs %q, want %q", got, protocol)
	}
	wait("the first member to own both partitions", func() bool { return a.count() == 2 })

	b := &member{owned: map[int32]bool{}}
	start(b, false)
	wait("the second member to get a partition", func() bool { return b.count() == 1 })
	wait("the first member to keep exactly one", func() bool { return a.count() == 1 })

	a.mu.Lock()
	defer a.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(a.revokes) != 1 || len(a.revokes[0]) != 1 {
		t.Fatalf("first member's revokes %v: want one revoke of one partition (cooperative: the other stays)", a.revokes)
	}
	moved := a.revokes[0][0]
	if !b.owned[moved] || a.owned[moved] {
		t.Fatalf("partition %d was revoked from the first member but is not the second's", moved)
	}
	if b.assigned.Before(a.released) {
		t.Fatalf("second member got partition %d at %s, before the first member's revoke returned at %s",
			moved, b.assigned.Format(time.StampMilli), a.released.Format(time.StampMilli))
	}
}

// TestSeekInRevokeCallback: Seek called from the revoke callback (as the
// exactly-once pipeline does when it drops a batch holding a revoked
// partition) makes the member read the partition it keeps again from the
// given offset, in order, and nothing of it from before the seek comes
// after the seek, under either group protocol.
func TestSeekInRevokeCallback(t *testing.T) {
	eachProtocol(t, testSeekInRevokeCallback)
}

func testSeekInRevokeCallback(t *testing.T, protocol string) {
	cluster, cfg := fake(t, "src", "dlq")
	cfg.Kafka.GroupProtocol = protocol
	prod, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for part := int32(0); part < 2; part++ {
		for i := 0; i < 10; i++ {
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "src", Partition: part, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var (
		mu      sync.Mutex
		seen    = map[int32][]int64{} // offsets polled per partition, in order
		sought  = int32(-1)           // the kept partition, once sought back
		atSeek  int                   // len(seen[sought]) when the seek was made
		a       *Consumer
		once    sync.Once
		release = make(chan struct{})
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen[0]) + len(seen[1])
	}
	start := func(h Hooks) *Consumer {
		c, err := New(context.Background(), cfg, zerolog.Nop(), h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	a = start(Hooks{Revoked: func(_ context.Context, parts map[string][]int32) {
		if len(parts["src"]) != 1 {
			return
		}
		once.Do(func() { // the first revoke: the second member joined
			keep := 1 - parts["src"][0]
			mu.Lock()
			sought, atSeek = keep, len(seen[keep])
			mu.Unlock()
			a.Seek(map[offsets.TP]int64{{Topic: "src", Partition: keep}: 3})
			close(release)
		})
	}})
	go func() {
		for {
			f := a.Poll(context.Background())
			f.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[r.Partition] = append(seen[r.Partition], r.Offset)
				mu.Unlock()
			})
			a.AllowRebalance()
			if f.IsClientClosed() {
				return
			}
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for count() < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("the first member polled %d of 20 records", count())
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := start(Hooks{})
	go func() {
		for {
			f := b.Poll(context.Background())
			b.AllowRebalance()
			if f.IsClientClosed() {
				return
			}
		}
	}()
	select {
	case <-release:
	case <-time.After(20 * time.Second):
		t.Fatal("the first member was never asked to give a partition up")
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := append([]int64(nil), seen[sought][atSeek:]...)
		mu.Unlock()
		if len(got) >= 7 {
			want := []int64{3, 4, 5, 6, 7, 8, 9}
			if !slices.Equal(got, want) {
				t.Fatalf("partition %d after the seek to 3: polled %v, want %v", sought, got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %d after the seek to 3: polled only %v", sought, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
