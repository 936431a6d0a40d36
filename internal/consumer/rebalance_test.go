package consumer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
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

// TestRevokeCompletesBeforePartitionsMove: with cooperative-sticky
// balancing and rebalances blocked on poll, a second member gets partitions
// only after the first member's revoke callback (where the pipeline flushes
// and commits) has returned, and the first keeps the partitions it is not
// asked to give up.
func TestRevokeCompletesBeforePartitionsMove(t *testing.T) {
	_, cfg := fake(t, "src", "dlq")
	const flush = 500 * time.Millisecond
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
				f := c.Poll(context.Background(), 100)
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
	start(a, true)
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
