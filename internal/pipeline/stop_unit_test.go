package pipeline

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rebalancingSource holds a poll that ends while a revoke callback runs
// until the callback returned, as franz-go does with BlockRebalanceOnPoll
// (PollFetches waits in waitAndAddPoller, whatever its context says).
type rebalancingSource struct {
	*fakeSource
	mu   sync.Mutex
	busy chan struct{} // open while a revoke runs
}

func (s *rebalancingSource) Poll(ctx context.Context) kgo.Fetches {
	f := s.fakeSource.Poll(ctx)
	s.mu.Lock()
	busy := s.busy
	s.mu.Unlock()
	if busy != nil {
		<-busy // a poll ending (or canceled) while a revoke runs waits for it
	}
	return f
}

// TestUnitStopDuringRevoke: SIGTERM arrives while a revoke waits for an
// INSERT. The stop must still handle that INSERT's ack, so the revoke
// returns, the rebalance (and the poll it holds) ends, and Run flushes and
// returns; before, it waited for the poll forever.
func TestUnitStopDuringRevoke(t *testing.T) { synctest.Test(t, testUnitStopDuringRevoke) }

func testUnitStopDuringRevoke(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Kafka.RebalanceTimeout = 20 * time.Second // the deadline is not what ends the revoke here
	cfg.ShutdownTimeout = 2 * time.Second
	gate := make(chan struct{})
	sink := newFakeSink(func(n int) insertScript {
		if n == 1 {
			return insertScript{gate: gate}
		}
		return insertScript{}
	})
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	src := &rebalancingSource{fakeSource: newFakeSource()}
	r := launch(t, p, src.fakeSource, src, sink)
	r.src.send(unitTP, 0, rows(0, 2)...)
	r.insertStarted(t)
	busy := make(chan struct{})
	src.mu.Lock()
	src.busy = busy
	src.mu.Unlock()
	revoked := make(chan time.Duration, 1)
	go func() { revoked <- revoke(r, unitTP); close(busy) }()
	// Let the owner take the revoke first (if the stop came first, the
	// stop handles the revoke event itself, which ends the same way).
	time.Sleep(200 * time.Millisecond)
	r.cancel() // SIGTERM
	time.Sleep(50 * time.Millisecond)
	close(gate)
	if err := r.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.src.committed(unitTP); got != 2 {
		t.Fatalf("committed offset %d, want 2", got)
	}
	<-revoked
}
