package pipeline

import (
	"context"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/offsets"
	"sink/internal/pipeline/intake"
)

// sendParts hands the pipeline one fetch holding n records (from offset 0)
// of each partition of unitTopic named in counts.
func (s *fakeSource) sendParts(counts map[int32]int) {
	ft := kgo.FetchTopic{Topic: unitTopic}
	for part := int32(0); part < 16; part++ {
		n, ok := counts[part]
		if !ok {
			continue
		}
		recs := make([]*kgo.Record, n)
		for i, v := range rows(int(part)*1_000_000, n) {
			recs[i] = &kgo.Record{Topic: unitTopic, Partition: part, Offset: int64(i), Value: []byte(v), Timestamp: time.Now()}
		}
		ft.Partitions = append(ft.Partitions, kgo.FetchPartition{Partition: part, HighWatermark: int64(n), Records: recs})
	}
	s.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{ft}}}
}

// TestUnitWholeFetchDecodedInTurns: a fetch of several times intake.MaxDecode
// records, over two partitions, is decoded over several turns of the loop,
// in order: every record is inserted once and both partitions are
// committed to their end.
func TestUnitWholeFetchDecodedInTurns(t *testing.T) {
	synctest.Test(t, testUnitWholeFetchDecodedInTurns)
}

func testUnitWholeFetchDecodedInTurns(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = 7_000
	cfg.ClickHouse.MaxInFlight = 2
	r := start(t, cfg, newFakeSink(nil))
	p1 := offsets.TP{Topic: unitTopic, Partition: 1}
	n0, n1 := 2*intake.MaxDecode+500, intake.MaxDecode/2
	r.src.sendParts(map[int32]int{0: n0, 1: n1})
	eventually(t, 5*time.Second, "one batch of 7,000 rows per full batch inserted", func() bool {
		return r.sink.inserted("db.t") >= (n0+n1)/7_000*7_000
	})
	if err := r.stop(t); err != nil { // the shutdown inserts the last, partial batch
		t.Fatalf("Run: %v", err)
	}
	if got := r.sink.inserted("db.t"); got != n0+n1 {
		t.Fatalf("%d rows inserted, want %d", got, n0+n1)
	}
	if c0, c1 := r.src.committed(unitTP), r.src.committed(p1); c0 != int64(n0) || c1 != int64(n1) {
		t.Fatalf("committed offsets %d and %d, want %d and %d", c0, c1, n0, n1)
	}
}

// TestUnitRevokeDropsPendingRecords: records polled but not decoded yet
// (the buffer budget is used up by a batch whose INSERT waits) are
// dropped when their partition is revoked: never inserted, never
// committed, left for the partition's next owner. The other partition's
// pending records are decoded once the budget has room again.
func TestUnitRevokeDropsPendingRecords(t *testing.T) {
	synctest.Test(t, testUnitRevokeDropsPendingRecords)
}

func testUnitRevokeDropsPendingRecords(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = intake.MaxDecode // the first turn seals exactly one batch
	cfg.Batch.BufferMemory = 1           // which uses up the budget
	cfg.Kafka.RebalanceTimeout = 20 * time.Second
	gate := make(chan struct{})
	r := start(t, cfg, newFakeSink(func(n int) insertScript {
		if n == 1 {
			return insertScript{gate: gate}
		}
		return insertScript{}
	}))
	p1 := offsets.TP{Topic: unitTopic, Partition: 1}
	r.src.sendParts(map[int32]int{0: intake.MaxDecode + 2, 1: 3})
	r.insertStarted(t)
	if took := revoke(r, p1); took > 2*time.Second {
		t.Fatalf("revoking a partition with only undecoded records took %s", took)
	}
	close(gate)
	eventually(t, 2*time.Second, "the first batch committed", func() bool { return r.src.committed(unitTP) >= int64(intake.MaxDecode) })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.sink.inserted("db.t"); got != intake.MaxDecode+2 {
		t.Fatalf("%d rows inserted, want %d (partition 0 only; the revoked partition's records were not decoded)", got, intake.MaxDecode+2)
	}
	if c0, c1 := r.src.committed(unitTP), r.src.committed(p1); c0 != int64(intake.MaxDecode+2) || c1 != -1 {
		t.Fatalf("committed offsets %d and %d, want %d and none", c0, c1, intake.MaxDecode+2)
	}
}

// BenchmarkDecodeFetch is the owner's side of one polled fetch of 10,000
// records of one partition: queued (takeFetches), then decoded in turns
// (decodeSome) into batches of 5,000 rows inserted by the fake sink.
// Reported per record.
func BenchmarkDecodeFetch(b *testing.B) {
	p, _ := benchPipeline(b, "")
	const n = 10_000
	values := rows(0, n)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var cpu int64
	for i := range b.N {
		b.StopTimer()
		recs := make([]*kgo.Record, n)
		for j := range recs {
			recs[j] = &kgo.Record{Topic: unitTopic, Offset: int64(i*n + j), Value: []byte(values[j]), Timestamp: time.Now()}
		}
		f := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: unitTopic, Partitions: []kgo.FetchPartition{{
			HighWatermark: int64((i + 1) * n), Records: recs}}}}}}
		b.StartTimer()
		start := cpuTime()
		decodeFetch(ctx, p, f)
		cpu += cpuTime() - start
	}
	reportPerRecord(b, cpu, n)
}

// decodeFetch has the owner decode every record of f and insert every
// batch (the fake sink acknowledges at once).
func decodeFetch(ctx context.Context, p *Pipeline, f kgo.Fetches) {
	p.in.Take(f)
	for p.in.HasPending() {
		p.in.DecodeSome(ctx)
	}
	for p.disp.InFlight() > 0 {
		(<-p.inbox).Apply(ctx)
	}
}

// reportPerRecord reports a benchmark of n records per iteration per
// record: wall time, and the process's CPU time (cpu, GC and the fake
// sink included), which on a machine shared with other work says more.
func reportPerRecord(b *testing.B, cpu int64, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
	b.ReportMetric(float64(cpu)/float64(b.N*n), "cpu-ns/record")
}

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
