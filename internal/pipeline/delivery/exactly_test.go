package delivery

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
	"sink/internal/chschema"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// TestCanonicalBatchOrder: rows that arrive interleaved across partitions
// are sent grouped by (topic, partition), each partition in arrival
// (offset) order, which is the order a rebuild reads them back in; the
// token is the one the ranges give.
func TestCanonicalBatchOrder(t *testing.T) {
	e, _ := testExactly(t, time.Now)
	ts := e.Catalog.Table("db.t")
	a0, a1, b1 := offsets.TP{Topic: "a", Partition: 0}, offsets.TP{Topic: "a", Partition: 1}, offsets.TP{Topic: "b", Partition: 1}
	for _, tp := range []offsets.TP{b1, a0, b1, a0, a1} {
		e.OnRow(7, tp)
	}
	b := &Batch{ID: 7, Ranges: []batch.Range{{TP: b1, First: 10, Last: 11}, {TP: a0, First: 3, Last: 4}, {TP: a1, First: 0, Last: 0}}}
	e.OnSeal(ts, b)
	eb := e.batches[7]
	// rows 0..4 are b1, a0, b1, a0, a1: a0's rows (1, 3), a1's (4), b1's (0, 2)
	if want := []int{1, 3, 4, 0, 2}; !reflect.DeepEqual(eb.perm, want) {
		t.Fatalf("perm %v, want %v", eb.perm, want)
	}
	want := eos.Token("db.t", []eos.Range{{TP: a0, First: 3, Last: 4}, {TP: a1, First: 0, Last: 0}, {TP: b1, First: 10, Last: 11}})
	if eb.token != want {
		t.Fatalf("token %s, want %s", eb.token, want)
	}
	if _, left := e.rows[7]; left {
		t.Fatal("the open batch's row partitions were not reset at seal")
	}
	// One partition, or partitions already in order: no permutation.
	for _, tp := range []offsets.TP{a0, a0, a1} {
		e.OnRow(8, tp)
	}
	e.OnSeal(ts, &Batch{ID: 8, Ranges: []batch.Range{{TP: a0, First: 5, Last: 6}, {TP: a1, First: 1, Last: 1}}})
	if perm := e.batches[8].perm; perm != nil {
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
	e, q := testExactly(t, func() time.Time { return now })
	e.cfg.ClickHouse.RetryInitial, e.cfg.ClickHouse.RetryMax = 100*time.Millisecond, 350*time.Millisecond
	draws := 0
	e.Jitter = func(n int64) int64 { // n-1: the whole step; 0: half of it
		if draws++; draws <= 4 {
			return n - 1
		}
		return 0
	}
	ts := e.Catalog.Table("db.t")
	b1, b2 := &Batch{ID: 1}, &Batch{ID: 2}
	q.waiting = []*Batch{b2} // batch 1 out for its INSERT, as pump takes it
	err := &intentError{fmt.Errorf("commit: %w", kerr.CoordinatorNotAvailable)}
	if !e.retryLater(ts, b1, err) {
		t.Fatal("a retriable intent failure was not retried")
	}
	if w := q.waiting; len(w) != 2 || w[0] != b1 || w[1] != b2 {
		t.Fatalf("queue %v; want batch 1 back at the head", w)
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 350 * time.Millisecond, 350 * time.Millisecond} {
		if i > 0 {
			q.start()
			e.retryLater(ts, b1, err)
		}
		if d, ok := e.NextRetry(now); !ok || d != want {
			t.Fatalf("attempt %d: next retry in %v (%v), want %v", i+1, d, ok, want)
		}
		if !e.Waiting(ts) {
			t.Fatalf("attempt %d: the table does not wait", i+1)
		}
	}
	if s := e.StuckOn(); !strings.Contains(s, "recording a batch for db.t in Kafka") || !strings.Contains(s, "4 attempts") {
		t.Fatalf("StuckOn = %q", s)
	}
	q.start()
	e.retryLater(ts, b1, err)
	if d, _ := e.NextRetry(now); d != 175*time.Millisecond {
		t.Fatalf("attempt 5 with the smallest draw: next retry in %v, want 175ms (half of retry_max)", d)
	}
	now = now.Add(350 * time.Millisecond)
	if e.Waiting(ts) {
		t.Fatal("still waiting after the backoff")
	}
	e.recorded(ts)
	if _, ok := e.NextRetry(now); ok {
		t.Fatal("a recorded intent left a retry behind")
	}
	if e.retryLater(ts, b1, &intentError{kerr.FencedInstanceID}) {
		t.Fatal("a fenced static member's intent was retried")
	}
}

// testExactly is an exactly-once delivery for one route into db.t, with
// now for its clock and a queue of db.t's sealed batches standing in for
// the pipeline's dispatch.
func testExactly(t *testing.T, now func() time.Time) (*Exactly, *testQueue) {
	t.Helper()
	cfg, err := config.Parse([]byte(`
name: unit
delivery: exactly_once
kafka:
  topics: [events]
clickhouse:
  database: db
routes:
  - topic: events
    table: t
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := tables.Open(context.Background(), cfg, tables.Options{Sink: testDescriber{}, Owner: testOwner{},
		Log: zerolog.Nop(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	q := &testQueue{}
	commits := testCommits{}
	return New(cfg, Deps{Catalog: cat, Batches: q, Commits: commits, Owner: testOwner{}, Log: zerolog.Nop(), Now: now}), q
}

// testQueue is one table's queue of sealed batches waiting for an insert
// slot, as the pipeline's dispatch keeps it.
type testQueue struct{ waiting []*Batch }

// start takes the head batch for its INSERT.
func (q *testQueue) start() { q.waiting = q.waiting[1:] }

func (q *testQueue) Requeue(_ *tables.Table, b *Batch)         { q.waiting = append([]*Batch{b}, q.waiting...) }
func (q *testQueue) Pump(context.Context, *tables.Table)       {}
func (q *testQueue) EachSealed(func(*tables.Table, *Batch))    {}
func (q *testQueue) EachOpen(func(uint64, []batch.Range))      {}
func (q *testQueue) Withdraw(uint64) (*tables.Table, int, int) { return nil, 0, -1 }
func (q *testQueue) Discard(uint64) int                        { return 0 }

type testCommits struct{}

func (testCommits) InOrder(func() (Intent, bool)) bool { return false }
func (testCommits) Stalled() bool                      { return false }
func (testCommits) SendStalled()                       {}

type testOwner struct{}

func (testOwner) Spawn(f func())                         { go f() }
func (testOwner) Described(tables.Result)                {}
func (testOwner) Stopping() bool                         { return false }
func (testOwner) Reshape(context.Context, *tables.Table) {}
func (testOwner) TableAdded(*tables.Table)               {}
func (testOwner) TableBounded(*tables.Table)             {}
func (testOwner) Fail(error)                             {}
func (testOwner) Seek(map[offsets.TP]int64) error        { return nil }
func (testOwner) SyncLookups(f func())                   { f() }

type testDescriber struct{}

func (testDescriber) Describe(context.Context, string, string) ([]chschema.ColumnSchema, error) {
	return []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "s", Type: "String"}}, nil
}
