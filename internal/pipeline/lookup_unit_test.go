package pipeline

// Unit tests of schema look-ups off the owner goroutine (lookup.go): a
// registry that stalls holds only the records of its schema id (and the
// rest of their partition, in order), never the owner: revokes, other
// partitions and the shutdown go on; a look-up that fails or times out is
// retried after the held records' backoff, one at a time per id.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/offsets"
	"sink/internal/pipeline/intake"
	"sink/internal/registry"
)

// kgoPartition is one partition's records of a fetch: values in offset
// order from first.
type kgoPartition struct {
	tp    offsets.TP
	first int64
	vals  [][]byte
}

func part(tp offsets.TP, first int64, vals ...[]byte) kgoPartition {
	return kgoPartition{tp: tp, first: first, vals: vals}
}

// sendRawParts hands the pipeline one fetch of several partitions' records.
func (s *fakeSource) sendRawParts(parts ...kgoPartition) {
	var f kgo.FetchTopic
	f.Topic = unitTopic
	for _, p := range parts {
		recs := make([]*kgo.Record, len(p.vals))
		for i, v := range p.vals {
			recs[i] = &kgo.Record{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: p.first + int64(i), Value: v, Timestamp: time.Now()}
		}
		f.Partitions = append(f.Partitions, kgo.FetchPartition{Partition: p.tp.Partition, HighWatermark: p.first + int64(len(p.vals)), Records: recs})
	}
	s.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{f}}}
}

// stallRegistry is a unitRegistry whose look-ups of the ids in gates wait
// until the gate is closed or their context ends (then they fail as a
// timed-out request does). It counts the look-ups of each id and the most
// that ran at once.
type stallRegistry struct {
	unitRegistry
	smu       sync.Mutex
	gates     map[int]chan struct{}
	asked     map[int]int
	active    atomic.Int32
	maxActive atomic.Int32
}

func newStallRegistry(known ...int) *stallRegistry {
	r := &stallRegistry{gates: map[int]chan struct{}{}, asked: map[int]int{}}
	r.known = map[int]bool{}
	for _, id := range known {
		r.known[id] = true
	}
	return r
}

// stall makes the look-ups of id wait; the returned func lets them go.
func (r *stallRegistry) stall(id int) (release func()) {
	g := make(chan struct{})
	r.smu.Lock()
	r.gates[id] = g
	r.smu.Unlock()
	return func() {
		r.smu.Lock()
		delete(r.gates, id)
		r.smu.Unlock()
		close(g)
	}
}

func (r *stallRegistry) askedFor(id int) int {
	r.smu.Lock()
	defer r.smu.Unlock()
	return r.asked[id]
}

func (r *stallRegistry) Schema(ctx context.Context, id int) (*registry.Schema, error) {
	r.smu.Lock()
	g := r.gates[id]
	r.asked[id]++
	r.smu.Unlock()
	n := r.active.Add(1)
	defer r.active.Add(-1)
	for m := r.maxActive.Load(); n > m && !r.maxActive.CompareAndSwap(m, n); m = r.maxActive.Load() {
	}
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			r.lookups.Add(1)
			return nil, fmt.Errorf("%w: schema id %d: %w", registry.ErrUnavailable, id, ctx.Err())
		}
	}
	return r.unitRegistry.Schema(ctx, id)
}

// TestUnitLookupStallRevoke: while the look-up of a new schema id stalls,
// a revoke of its partition seals and commits what came before it and
// returns at once (it does not wait for the registry), the held records
// are dropped uncommitted, and when the partition is consumed again from
// the committed offset every row arrives exactly once, in order.
func TestUnitLookupStallRevoke(t *testing.T) { synctest.Test(t, testUnitLookupStallRevoke) }

func testUnitLookupStallRevoke(t *testing.T) {
	reg := newStallRegistry(1, 2)
	cfg := avroUnitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n")
	cfg.Batch.MaxRows = 100
	cfg.Kafka.RebalanceTimeout = 20 * time.Second // the revoke deadline (10s) is not what ends the revoke
	r := start(t, cfg, newFakeSink(nil), WithRegistry(reg))

	release := reg.stall(2)
	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0), avroRow(t, 1, 1), avroRow(t, 2, 2), avroRow(t, 1, 3))
	eventually(t, 2*time.Second, "offsets 2 and 3 held behind the stalled look-up", func() bool {
		return r.p.in.Held().Now() == 2 && reg.askedFor(2) == 1
	})

	took := revoke(r, unitTP)
	if took > 100*time.Millisecond {
		t.Fatalf("revoke took %s while a schema look-up stalled; it must not wait for the registry", took)
	}
	if got := r.src.committed(unitTP); got != 2 {
		t.Fatalf("committed %d after the revoke, want 2 (the rows before the held record)", got)
	}
	if n := r.p.in.Held().Now(); n != 0 {
		t.Fatalf("%d records still held after their partition was revoked", n)
	}
	if got := r.sink.insertedIDs("db.t"); !slices.Equal(got, []uint64{0, 1}) {
		t.Fatalf("inserted ids %v by the revoke, want [0 1]", got)
	}

	// The partition comes back; its next fetch starts at the committed
	// offset, as it would for any next owner.
	r.p.Assigned(context.Background(), map[string][]int32{unitTopic: {0}})
	release()
	polls := r.src.polls.Load()
	r.src.sendRaw(unitTP, 2, avroRow(t, 2, 2), avroRow(t, 1, 3), avroRow(t, 2, 4))
	// A poll that began before the send may be the one that takes it, so
	// a poll counted since is no proof the fetch was handled: wait until
	// every goroutine of the bubble is blocked again first.
	synctest.Wait()
	eventually(t, 2*time.Second, "offsets 2 to 4 decoded and the next fetch asked for", func() bool {
		return r.p.in.Held().Now() == 0 && r.src.polls.Load() > polls
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.sink.insertedIDs("db.t"); !slices.Equal(got, []uint64{0, 1, 2, 3, 4}) {
		t.Fatalf("inserted ids %v, want [0 1 2 3 4] (each once, in order)", got)
	}
	if got := r.src.committed(unitTP); got != 5 {
		t.Fatalf("committed %d, want 5", got)
	}
	if len(r.src.dlqSent) != 0 {
		t.Fatalf("dead-lettered %v", r.src.dlqSent)
	}
}

// TestUnitLookupStallKeepsOrder: the records behind a stalled look-up wait
// in partition order (records of a known id after it too), while another
// partition's records flow and are committed; one look-up runs for the id
// however many records ask; once the registry answers, the held records
// are decoded in their order.
func TestUnitLookupStallKeepsOrder(t *testing.T) { synctest.Test(t, testUnitLookupStallKeepsOrder) }

func testUnitLookupStallKeepsOrder(t *testing.T) {
	reg := newStallRegistry(1, 2)
	cfg := avroUnitConfig(t, "")
	cfg.Batch.MaxRows = 1 // one INSERT per row, in decode order
	other := offsets.TP{Topic: unitTopic, Partition: 1}
	r := start(t, cfg, newFakeSink(nil), WithRegistry(reg))

	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0))
	eventually(t, 2*time.Second, "offset 0 committed", func() bool { return r.src.committed(unitTP) == 1 })

	release := reg.stall(2)
	r.src.sendRaw(unitTP, 1, avroRow(t, 2, 1), avroRow(t, 1, 2), avroRow(t, 2, 3), avroRow(t, 1, 4))
	eventually(t, 2*time.Second, "offsets 1 to 4 held", func() bool { return r.p.in.Held().Now() == 4 })
	time.Sleep(time.Second)
	if got := r.sink.insertedIDs("db.t"); !slices.Equal(got, []uint64{0}) {
		t.Fatalf("inserted ids %v while offset 1's look-up stalls, want [0]", got)
	}
	if got := r.src.committed(unitTP); got != 1 {
		t.Fatalf("committed %d while offset 1 waits for the registry", got)
	}
	if n := reg.askedFor(2); n != 1 {
		t.Fatalf("schema id 2 asked for %d times while its look-up stalls, want 1", n)
	}

	release()
	eventually(t, 2*time.Second, "the held records decoded and committed", func() bool { return r.src.committed(unitTP) == 5 })
	r.src.sendRaw(other, 0, avroRow(t, 2, 10), avroRow(t, 1, 11))
	eventually(t, 2*time.Second, "the other partition committed", func() bool { return r.src.committed(other) == 2 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.sink.insertedIDs("db.t"); !slices.Equal(got, []uint64{0, 1, 2, 3, 4, 10, 11}) {
		t.Fatalf("inserted ids %v, want [0 1 2 3 4 10 11]", got)
	}
	if n := reg.askedFor(2); n != 1 {
		t.Fatalf("schema id 2 asked for %d times, want 1 (its answer is kept)", n)
	}
}

// TestUnitLookupStallOtherPartitionFlows: records of another partition
// that are already fetched go on while one partition's records wait for a
// stalled look-up, and an ack and a commit happen meanwhile.
func TestUnitLookupStallOtherPartitionFlows(t *testing.T) {
	synctest.Test(t, testUnitLookupStallOtherPartitionFlows)
}

func testUnitLookupStallOtherPartitionFlows(t *testing.T) {
	reg := newStallRegistry(1, 2)
	cfg := avroUnitConfig(t, "")
	cfg.Batch.MaxRows = 1
	other := offsets.TP{Topic: unitTopic, Partition: 1}
	r := start(t, cfg, newFakeSink(nil), WithRegistry(reg))
	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0))
	eventually(t, 2*time.Second, "schema id 1 known", func() bool { return r.src.committed(unitTP) == 1 })

	release := reg.stall(2)
	// One fetch of both partitions: partition 0's second record waits for
	// schema id 2, partition 1's records are of the known id.
	r.src.sendRawParts(part(unitTP, 1, avroRow(t, 2, 1), avroRow(t, 1, 2)), part(other, 0, avroRow(t, 1, 10), avroRow(t, 1, 11)))
	eventually(t, 2*time.Second, "the other partition inserted and committed while the look-up stalls", func() bool {
		return r.src.committed(other) == 2
	})
	if got := r.src.committed(unitTP); got != 1 {
		t.Fatalf("committed %d on the stalled partition, want 1", got)
	}
	release()
	eventually(t, 2*time.Second, "the held records committed", func() bool { return r.src.committed(unitTP) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.sink.insertedIDs("db.t"); !slices.Equal(got, []uint64{0, 10, 11, 1, 2}) {
		t.Fatalf("inserted ids %v, want [0 10 11 1 2]", got)
	}
}

// TestUnitLookupTimeoutRetried: a look-up that never answers ends after
// intake.LookupTimeout as the registry's error; the held records back off and
// ask again, so the id is looked up a bounded number of times (never two
// at once, though two partitions wait for it), and nothing is committed
// past the held records or dead-lettered. When the registry answers, the
// records go on.
func TestUnitLookupTimeoutRetried(t *testing.T) { synctest.Test(t, testUnitLookupTimeoutRetried) }

func testUnitLookupTimeoutRetried(t *testing.T) {
	reg := newStallRegistry(1, 2)
	cfg := avroUnitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n")
	cfg.Batch.MaxRows = 1
	other := offsets.TP{Topic: unitTopic, Partition: 1}
	r := start(t, cfg, newFakeSink(nil), WithRegistry(reg))

	release := reg.stall(2)
	r.src.sendRawParts(part(unitTP, 0, avroRow(t, 2, 0), avroRow(t, 1, 1)), part(other, 0, avroRow(t, 2, 10)))
	const window = time.Minute
	time.Sleep(window)
	asked := reg.askedFor(2)
	// Each look-up takes intake.LookupTimeout, then the backoff (from
	// heldRetryFirst, doubling, at most heldRetryMax, with jitter)
	// passes before the next.
	if asked < 3 || asked > int(window/intake.LookupTimeout)+1 {
		t.Fatalf("schema id 2 looked up %d times in %s, want between 3 and %d", asked, window, int(window/intake.LookupTimeout)+1)
	}
	if m := reg.maxActive.Load(); m != 1 {
		t.Fatalf("%d look-ups ran at once, want 1 (one per id in flight)", m)
	}
	if got := r.src.committed(unitTP); got != -1 || r.src.committed(other) != -1 || len(r.src.dlqSent) != 0 {
		t.Fatalf("committed %d and %d, dead-lettered %v while the registry does not answer; want nothing",
			got, r.src.committed(other), r.src.dlqSent)
	}
	if n := r.p.in.Held().Now(); n != 3 {
		t.Fatalf("%d records held, want 3", n)
	}
	release()
	eventually(t, 15*time.Second, "the held records committed", func() bool {
		return r.src.committed(unitTP) == 2 && r.src.committed(other) == 1
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestUnitLookupStallShutdown: a shutdown while a look-up stalls takes no
// longer than without it (the look-up is canceled, its goroutine ends
// before Run returns), and the held records stay uncommitted.
func TestUnitLookupStallShutdown(t *testing.T) { synctest.Test(t, testUnitLookupStallShutdown) }

func testUnitLookupStallShutdown(t *testing.T) {
	reg := newStallRegistry(1, 2)
	cfg := avroUnitConfig(t, "")
	cfg.Batch.MaxRows = 100
	r := start(t, cfg, newFakeSink(nil), WithRegistry(reg))
	reg.stall(2)
	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0), avroRow(t, 2, 1))
	eventually(t, 2*time.Second, "offset 1 held", func() bool { return r.p.in.Held().Now() == 1 && reg.active.Load() == 1 })
	began := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(began); took > 100*time.Millisecond {
		t.Fatalf("shutdown took %s while a look-up stalled", took)
	}
	if n := reg.active.Load(); n != 0 {
		t.Fatalf("%d look-ups still running after Run returned", n)
	}
	if got := r.src.committed(unitTP); got != 1 {
		t.Fatalf("committed %d, want 1 (offset 0; offset 1 is read again on restart)", got)
	}
}
