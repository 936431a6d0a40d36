package pipeline

// Unit tests of records whose schema the registry cannot serve now
// (held.go): held in partition order with fetching paused, retried, never
// dead-lettered, never committed past, and decoded once the registry
// answers; and of ids the registry says do not exist (dead-lettered).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
	"sink/internal/offsets"
	"sink/internal/registry"
	"sink/internal/route"
)

// unitAvroSchema matches fakeSink's table (id UInt64, s String).
const unitAvroSchema = `{"type":"record","name":"Row","fields":[{"name":"id","type":"long"},{"name":"s","type":"string"}]}`

// unitRegistry is a decode.Registry whose schemas are all unitAvroSchema,
// for the ids in known; down makes it unreachable.
type unitRegistry struct {
	mu      sync.Mutex
	known   map[int]bool
	down    atomic.Bool
	lookups atomic.Int32
}

func (r *unitRegistry) Schema(_ context.Context, id int) (*registry.Schema, error) {
	r.lookups.Add(1)
	if r.down.Load() {
		return nil, fmt.Errorf("%w: schema id %d: dial tcp: connection refused", registry.ErrUnavailable, id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.known[id] {
		return nil, fmt.Errorf("%w: schema id %d: the registry says it does not exist (40403)", registry.ErrBadRecord, id)
	}
	return &registry.Schema{ID: id, Type: sr.TypeAvro, Text: unitAvroSchema}, nil
}

// avroRow is row id as a registry-framed Avro record of schema id.
func avroRow(t *testing.T, schemaID, id int) []byte {
	t.Helper()
	b, err := avro.Marshal(avro.MustParse(unitAvroSchema), map[string]any{"id": int64(id), "s": fmt.Sprintf("row %d", id)})
	if err != nil {
		t.Fatal(err)
	}
	return append(registry.AppendFrame(nil, schemaID, false), b...)
}

// sendRaw hands the pipeline one fetch of tp's records with these values.
func (s *fakeSource) sendRaw(tp offsets.TP, first int64, values ...[]byte) {
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: first + int64(i), Value: v, Timestamp: time.Now()}
	}
	s.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: tp.Topic, Partitions: []kgo.FetchPartition{{
		Partition: tp.Partition, HighWatermark: first + int64(len(values)), Records: recs}}}}}}
}

func avroUnitConfig(t *testing.T, extra string) *config.Config {
	cfg := unitConfig(t, extra)
	cfg.Routes[0].Format = route.Avro
	return cfg
}

// TestUnitRegistryOutageHoldsAndResumes: with the registry down, records of
// a cached schema id keep flowing; the first record of an id not cached is
// held with everything after it in its partition (even records of the
// cached id, to keep the order), nothing past it is committed or
// dead-lettered, and no fetch is requested; when the registry answers, the
// held records are decoded in order and every row arrives exactly once.
func TestUnitRegistryOutageHoldsAndResumes(t *testing.T) {
	synctest.Test(t, testUnitRegistryOutageHoldsAndResumes)
}

func testUnitRegistryOutageHoldsAndResumes(t *testing.T) {
	reg := &unitRegistry{known: map[int]bool{1: true, 2: true}}
	cfg := avroUnitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n")
	r := start(t, cfg, newFakeSink(nil), WithRegistry(reg))

	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0), avroRow(t, 1, 1))
	eventually(t, 2*time.Second, "offset 2 committed", func() bool { return r.src.committed(unitTP) == 2 })

	reg.down.Store(true)
	polls := r.src.polls.Load()
	r.src.sendRaw(unitTP, 2, avroRow(t, 1, 2), avroRow(t, 1, 3), avroRow(t, 2, 4), avroRow(t, 1, 5), avroRow(t, 1, 6))
	eventually(t, 2*time.Second, "offset 4 committed (the cached id's rows before the unknown one)", func() bool { return r.src.committed(unitTP) == 4 })
	eventually(t, 2*time.Second, "the held record retried", func() bool { return reg.lookups.Load() >= 3 })
	time.Sleep(300 * time.Millisecond)
	if got := r.src.committed(unitTP); got != 4 {
		t.Fatalf("committed %d while offset 4 waits for the registry", got)
	}
	// The poll that was waiting when the fetch came returned it; no poll
	// has started since.
	if got := r.src.polls.Load(); got != polls {
		t.Fatalf("%d polls started while records were held, want none", got-polls)
	}
	if n := r.p.in.Held().Now(); n != 3 {
		t.Fatalf("%d records held, want 3 (offsets 4, 5, 6)", n)
	}

	reg.down.Store(false)
	// Batches of two rows: 4 and 5 are inserted at once, 6 waits in the
	// open batch, so the committed offset stops at 6 until the shutdown.
	eventually(t, 3*time.Second, "the held records decoded and committed", func() bool { return r.src.committed(unitTP) == 6 })
	eventually(t, 2*time.Second, "fetching resumed", func() bool { return r.src.polls.Load() > polls })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.src.committed(unitTP); got != 7 {
		t.Fatalf("committed %d after the shutdown, want 7", got)
	}
	st := r.p.Stats()
	if st.Records != 7 || st.Rows != 7 || st.DLQ != 0 || r.sink.inserted("db.t") != 7 {
		t.Fatalf("stats %+v, sink has %d rows; want 7 records, 7 rows, no DLQ", st, r.sink.inserted("db.t"))
	}
	if len(r.src.dlqSent) != 0 {
		t.Fatalf("dead-lettered %v", r.src.dlqSent)
	}
}

// TestUnitRegistryOutageAtShutdown: records still held when the connector
// stops are neither committed nor dead-lettered: a restart reads them
// again.
func TestUnitRegistryOutageAtShutdown(t *testing.T) {
	synctest.Test(t, testUnitRegistryOutageAtShutdown)
}

func testUnitRegistryOutageAtShutdown(t *testing.T) {
	reg := &unitRegistry{known: map[int]bool{1: true}}
	reg.down.Store(true)
	r := start(t, avroUnitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n"), newFakeSink(nil), WithRegistry(reg))
	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0), avroRow(t, 1, 1))
	eventually(t, 2*time.Second, "the record held", func() bool { return reg.lookups.Load() >= 1 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.src.committed(unitTP); got != -1 || len(r.src.dlqSent) != 0 || r.sink.inserted("db.t") != 0 {
		t.Fatalf("committed %d, dead-lettered %v, inserted %d; want nothing", got, r.src.dlqSent, r.sink.inserted("db.t"))
	}
}

// TestUnitRegistryRevokeDropsHeld: a revoked partition's held records are
// dropped (its next owner reads them from the committed offset) and the
// connector fetches again.
func TestUnitRegistryRevokeDropsHeld(t *testing.T) { synctest.Test(t, testUnitRegistryRevokeDropsHeld) }

func testUnitRegistryRevokeDropsHeld(t *testing.T) {
	reg := &unitRegistry{known: map[int]bool{1: true}}
	reg.down.Store(true)
	cfg := avroUnitConfig(t, "")
	cfg.Kafka.RebalanceTimeout = 20 * time.Second
	r := start(t, cfg, newFakeSink(nil), WithRegistry(reg))
	polls := r.src.polls.Load()
	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0))
	eventually(t, 2*time.Second, "the record held", func() bool { return reg.lookups.Load() >= 1 })
	revoke(r, unitTP)
	eventually(t, 2*time.Second, "fetching resumed after the revoke", func() bool { return r.src.polls.Load() > polls })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.src.committed(unitTP); got != -1 {
		t.Fatalf("committed %d for a record never decoded", got)
	}
}

// TestUnitRegistryUnknownIDIsBad: an id the registry says does not exist,
// and a malformed frame, are bad records: dead-lettered, and the offsets
// move past them.
func TestUnitRegistryUnknownIDIsBad(t *testing.T) { synctest.Test(t, testUnitRegistryUnknownIDIsBad) }

func testUnitRegistryUnknownIDIsBad(t *testing.T) {
	reg := &unitRegistry{known: map[int]bool{1: true}}
	r := start(t, avroUnitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n"), newFakeSink(nil), WithRegistry(reg))
	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0), avroRow(t, 9, 1), []byte(`{"id":2}`), avroRow(t, 1, 3))
	eventually(t, 2*time.Second, "offset 4 committed", func() bool { return r.src.committed(unitTP) == 4 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.src.mu.Lock()
	defer r.src.mu.Unlock()
	if fmt.Sprint(r.src.dlqSent) != "[1 2]" || r.sink.inserted("db.t") != 2 {
		t.Fatalf("dead-lettered %v, inserted %d; want [1 2] and 2", r.src.dlqSent, r.sink.inserted("db.t"))
	}
}

// TestUnitRegistryOutageFanout: a record routed to several tables whose
// schema the registry cannot serve is held before any table takes a row,
// and once the registry answers every table gets each row exactly once.
func TestUnitRegistryOutageFanout(t *testing.T) { synctest.Test(t, testUnitRegistryOutageFanout) }

func testUnitRegistryOutageFanout(t *testing.T) {
	reg := &unitRegistry{known: map[int]bool{1: true, 2: true}}
	cfg := unitConfig(t, allTables+"errors: {tolerance: all, dlq_topic: dead}\n")
	for i := range cfg.Routes {
		cfg.Routes[i].Format = route.Avro
	}
	cfg.Batch.MaxRows = 100
	r := start(t, cfg, newFakeSink(nil), WithRegistry(reg))

	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0))
	r.drained(t) // offset 0 decoded, its schema cached
	reg.down.Store(true)
	r.src.sendRaw(unitTP, 1, avroRow(t, 2, 1), avroRow(t, 1, 2))
	eventually(t, 2*time.Second, "offsets 1 and 2 held", func() bool { return r.p.in.Held().Now() == 2 })
	lookups := reg.lookups.Load()
	eventually(t, 2*time.Second, "the held record retried", func() bool { return reg.lookups.Load() > lookups })
	if n := r.p.in.Held().Now(); n != 2 {
		t.Fatalf("%d records held after a retry, want 2 (offsets 1, 2)", n)
	}
	for _, table := range []string{"db.t", "db.b", "db.c"} {
		if got := r.sink.inserted(table); got > 1 {
			t.Fatalf("%s: %d rows while offset 1 waits, want at most 1", table, got)
		}
	}
	reg.down.Store(false)
	eventually(t, 3*time.Second, "the held records decoded", func() bool { return r.p.in.Held().Now() == 0 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, table := range []string{"db.t", "db.b", "db.c"} {
		if got := r.sink.inserted(table); got != 3 {
			t.Errorf("%s: %d rows, want 3", table, got)
		}
	}
	if got := r.src.committed(unitTP); got != 3 {
		t.Fatalf("committed %d, want 3", got)
	}
	if len(r.src.dlqSent) != 0 {
		t.Fatalf("dead-lettered %v", r.src.dlqSent)
	}
}
