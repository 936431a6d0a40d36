package pipeline

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"sink/config"
	"sink/internal/batch"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// TestCanonicalBatchOrder: rows that arrive interleaved across partitions
// are sent grouped by (topic, partition), each partition in arrival
// (offset) order, which is the order a rebuild reads them back in; the
// token is the one the ranges give.
func TestCanonicalBatchOrder(t *testing.T) {
	p := &Pipeline{cfg: &config.Config{Delivery: config.DeliveryExactlyOnce}}
	p.initDelivery()
	ts := unitTable(t)
	a := &accState{key: accKey{table: ts}}
	a0, a1, b1 := offsets.TP{Topic: "a", Partition: 0}, offsets.TP{Topic: "a", Partition: 1}, offsets.TP{Topic: "b", Partition: 1}
	for _, tp := range []offsets.TP{b1, a0, b1, a0, a1} {
		p.eo.onRow(a, tp)
	}
	b := &sealedBatch{ID: 7, Ranges: []batch.Range{{TP: b1, First: 10, Last: 11}, {TP: a0, First: 3, Last: 4}, {TP: a1, First: 0, Last: 0}}}
	p.eo.onSeal(a, b)
	eb := p.eo.batches[7]
	// rows 0..4 are b1, a0, b1, a0, a1: a0's rows (1, 3), a1's (4), b1's (0, 2)
	if want := []int{1, 3, 4, 0, 2}; !reflect.DeepEqual(eb.perm, want) {
		t.Fatalf("perm %v, want %v", eb.perm, want)
	}
	want := eos.Token("db.t", []eos.Range{{TP: a0, First: 3, Last: 4}, {TP: a1, First: 0, Last: 0}, {TP: b1, First: 10, Last: 11}})
	if eb.token != want {
		t.Fatalf("token %s, want %s", eb.token, want)
	}
	if _, left := p.eo.rows[a]; left {
		t.Fatal("the open batch's row partitions were not reset at seal")
	}
	// One partition, or partitions already in order: no permutation.
	for _, tp := range []offsets.TP{a0, a0, a1} {
		p.eo.onRow(a, tp)
	}
	p.eo.onSeal(a, &sealedBatch{ID: 8, Ranges: []batch.Range{{TP: a0, First: 5, Last: 6}, {TP: a1, First: 1, Last: 1}}})
	if perm := p.eo.batches[8].perm; perm != nil {
		t.Fatalf("rows in order: perm %v, want none", perm)
	}
}

// TestRetriableIntent: an intent commit that failed on the way (the broker
// down, a timeout, the coordinator moving, a rebalance running) or was
// refused for a stale generation is tried again (a loss of its partitions
// drops the batch first); static-membership fencing and errors about the
// batch itself are not.
func TestRetriableIntent(t *testing.T) {
	f := func(err error, want bool) {
		t.Helper()
		if got := retriableIntent(err); got != want {
			t.Errorf("retriableIntent(%v) = %v, want %v", err, got, want)
		}
	}
	wrap := func(err error) error { return &intentError{fmt.Errorf("commit: %w", err)} }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	f(wrap(refused), true)
	f(wrap(context.DeadlineExceeded), true)
	f(wrap(kerr.CoordinatorNotAvailable), true)
	f(wrap(kerr.NotCoordinator), true)
	f(wrap(kerr.RequestTimedOut), true)
	f(wrap(kerr.RebalanceInProgress), true)
	f(wrap(kerr.IllegalGeneration), true) // recorded only once the member holds a generation again
	f(wrap(kerr.UnknownMemberID), true)
	f(wrap(kerr.FencedInstanceID), false)
	f(wrap(kerr.OffsetMetadataTooLarge), false)
	f(fmt.Errorf("exactly-once: batch 3 holds records of partitions given up"), false)
	f(refused, false) // not an intent commit
}

// TestIntentRetryBackoff: a retriable intent failure puts the batch back at
// the head of its table's queue and makes the table wait retry_initial,
// doubling per attempt up to retry_max, half of each step drawn at random
// (the draws fixed here: first the largest, then the smallest); a recorded
// intent ends the wait.
func TestIntentRetryBackoff(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &Pipeline{cfg: &config.Config{Delivery: config.DeliveryExactlyOnce}, now: func() time.Time { return now }}
	p.cfg.ClickHouse.RetryInitial, p.cfg.ClickHouse.RetryMax = 100*time.Millisecond, 350*time.Millisecond
	p.initDelivery()
	draws := 0
	p.jitter = func(n int64) int64 { // n-1: the whole step; 0: half of it
		if draws++; draws <= 4 {
			return n - 1
		}
		return 0
	}
	ts := unitTable(t)
	b1, b2 := &sealedBatch{ID: 1}, &sealedBatch{ID: 2}
	p.disp.enqueue(&flight{b: b1, table: ts})
	p.disp.enqueue(&flight{b: b2, table: ts})
	p.disp.start(ts) // batch 1 out for its INSERT, as pump takes it
	err := &intentError{fmt.Errorf("commit: %w", kerr.CoordinatorNotAvailable)}
	if !p.eo.retryLater(ts, b1, err) {
		t.Fatal("a retriable intent failure was not retried")
	}
	if q := p.disp.queues[ts].waiting; len(q) != 2 || q[0] != b1 || q[1] != b2 {
		t.Fatalf("queue %v; want batch 1 back at the head", q)
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 350 * time.Millisecond, 350 * time.Millisecond} {
		if i > 0 {
			p.disp.start(ts)
			p.eo.retryLater(ts, b1, err)
		}
		if d, ok := p.eo.nextRetry(now); !ok || d != want {
			t.Fatalf("attempt %d: next retry in %v (%v), want %v", i+1, d, ok, want)
		}
		if !p.eo.waiting(ts) {
			t.Fatalf("attempt %d: the table does not wait", i+1)
		}
	}
	if s := p.stuckOn(); !strings.Contains(s, "recording a batch for db.t in Kafka") || !strings.Contains(s, "4 attempts") {
		t.Fatalf("stuckOn = %q", s)
	}
	p.disp.start(ts)
	p.eo.retryLater(ts, b1, err)
	if d, _ := p.eo.nextRetry(now); d != 175*time.Millisecond {
		t.Fatalf("attempt 5 with the smallest draw: next retry in %v, want 175ms (half of retry_max)", d)
	}
	now = now.Add(350 * time.Millisecond)
	if p.eo.waiting(ts) {
		t.Fatal("still waiting after the backoff")
	}
	p.eo.recorded(ts)
	if _, ok := p.eo.nextRetry(now); ok {
		t.Fatal("a recorded intent left a retry behind")
	}
	if p.eo.retryLater(ts, b1, &intentError{kerr.FencedInstanceID}) {
		t.Fatal("a fenced static member's intent was retried")
	}
}

// unitTable is the table db.t, as New resolves it against the fake sink.
func unitTable(t *testing.T) *tables.Table {
	t.Helper()
	p, err := New(context.Background(), unitConfig(t, ""), zerolog.Nop(), newFakeSink(nil))
	if err != nil {
		t.Fatal(err)
	}
	return p.cat.Table("db.t")
}
