//go:build integration

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"

	"sink/internal/testenv"
)

// offsetsFixture is a 2-partition topic, a table with the source columns
// and a connector config, for the `sink offsets` tests.
type offsetsFixture struct {
	ch           driver.Conn
	topic, table string
	group, path  string
	mid          string // a time between the first 100 and the next 100 records of each partition
}

func newOffsetsFixture(t *testing.T, s testenv.Server, delivery string) *offsetsFixture {
	f := &offsetsFixture{ch: s.Conn(t), topic: testenv.NewTopic(t, 2)}
	db := s.NewDatabase(t)
	f.table = db + ".events"
	settings := ""
	if delivery == "exactly_once" {
		settings = " SETTINGS non_replicated_deduplication_window = 1000"
	}
	testenv.Exec(t, f.ch, "CREATE TABLE "+f.table+" (id UInt64, _topic String, _partition Int32, _offset Int64) ENGINE = MergeTree ORDER BY (_partition, _offset)"+settings)
	rec := func(base int) func(int) string {
		return func(i int) string { return fmt.Sprintf(`{"id":%d}`, base+i) }
	}
	produceSpread(t, f.topic, 200, rec(0))
	time.Sleep(1100 * time.Millisecond)
	f.mid = time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(1100 * time.Millisecond)
	produceSpread(t, f.topic, 200, rec(200))
	f.group = testenv.UniqueName(t, "offsets")
	f.path = writeConfig(t, fmt.Sprintf(`
name: %s
delivery: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 50, max_wait: 300ms}
routes: [{topic: %q, table: events}]
http: {listen: ""}
`, f.group, delivery, testenv.Kafka(t)[0], f.topic, s.Addr, db, f.topic))
	return f
}

// offsets runs `sink offsets ARGS --config …` and wants exit code want.
func (f *offsetsFixture) offsets(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, out, errOut := sinkCmd(t, append(append([]string{"offsets"}, args...), "--config", f.path)...)
	t.Logf("sink offsets %s:\n%s%s", strings.Join(args, " "), out, errOut)
	if code != want {
		t.Fatalf("sink offsets %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errOut)
	}
	return out + errOut
}

// counts returns count() and uniqExact(_partition, _offset) of the table.
func (f *offsetsFixture) counts(t *testing.T) (rows, distinct uint64) {
	t.Helper()
	if err := f.ch.QueryRow(context.Background(), "SELECT count(), uniqExact(_partition, _offset) FROM "+f.table).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	return rows, distinct
}

func (f *offsetsFixture) want(t *testing.T, rows, distinct uint64) {
	t.Helper()
	if r, d := f.counts(t); r != rows || d != distinct {
		t.Fatalf("%s: count() %d, distinct offsets %d; want %d and %d", f.table, r, d, rows, distinct)
	}
}

// committed returns the group's committed offset and metadata of a partition.
func (f *offsetsFixture) committed(t *testing.T, p int32) (int64, string) {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := adm.FetchOffsets(ctx, f.group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := got.Lookup(f.topic, p)
	if !ok {
		return -1, ""
	}
	return o.At, o.Metadata
}

// runUntilCommitted runs the sink until every partition's committed offset
// is at ends[p], then stops it cleanly (exit 0).
func (f *offsetsFixture) runUntilCommitted(t *testing.T, ends ...int64) {
	t.Helper()
	r := startSink(t, f.path)
	deadline := time.Now().Add(90 * time.Second)
	for p := 0; p < len(ends); {
		if o, _ := f.committed(t, int32(p)); o == ends[p] {
			p++
			continue
		}
		select {
		case code := <-r.code:
			r.code <- code
			t.Fatalf("sink exited with %d; log:\n%s", code, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %d not committed at %d within 90s; log:\n%s", p, ends[p], r.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A member still holds the group while it runs: a reset is refused.
	out := f.offsets(t, 1, "reset", "--to", "earliest", "--execute")
	if !strings.Contains(out, "active member") || !strings.Contains(out, "stop every sink of the group first (SIGTERM") {
		t.Fatalf("reset while the sink runs: want a refusal naming the member and how to stop it")
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("sink exit %d after SIGTERM; log:\n%s", code, r.stderr.String())
	}
}

// TestOffsetsResetAtLeastOnce: on both servers, a sink loads 400 records
// of 2 partitions and stops; `sink offsets show` reports the committed
// offsets and no member; then a rewind of partition 0 (dry run first, then
// executed) inserts its 200 records again, as the preview says; a reset to
// a time with --reload deletes the rows from offset 100 on and they load
// once; a forward move needs --yes and its records are never inserted.
func TestOffsetsResetAtLeastOnce(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		f := newOffsetsFixture(t, s, "at_least_once")
		out := f.offsets(t, 0, "show")
		if !strings.Contains(out, "no such group yet, 0 active members") || !strings.Contains(out, fmt.Sprintf("%s  1          -          0          200      200", f.topic)) {
			t.Fatal("show before any run: want no group and partition 1 with nothing committed, lag 200")
		}
		f.runUntilCommitted(t, 200, 200)
		f.want(t, 400, 400)
		out = f.offsets(t, 0, "show")
		if !strings.Contains(out, "0 active members") || !strings.Contains(out, fmt.Sprintf("%s  0          200        0          200      0", f.topic)) {
			t.Fatal("show: want no member and partition 0 committed at 200, log 0-200, lag 0")
		}

		// Rewind partition 0: a dry run changes nothing.
		out = f.offsets(t, 0, "reset", "--to", "earliest", "--topic", f.topic, "--partition", "0")
		if !strings.Contains(out, f.topic+"[0]: 200 -> 0 (rewind 200 offsets)") || !strings.Contains(out, "holds 200 rows (200 offsets, up to 199) at offset 0 or later: at-least-once inserts them again") ||
			!strings.Contains(out, "dry run: nothing changed") {
			t.Fatal("dry run of the rewind: want the move and the duplicates it makes")
		}
		if o, _ := f.committed(t, 0); o != 200 {
			t.Fatalf("after a dry run partition 0 is committed at %d, want 200", o)
		}
		f.offsets(t, 0, "reset", "--to", "earliest", "--topic", f.topic, "--partition", "0", "--execute")
		if o, _ := f.committed(t, 0); o != 0 {
			t.Fatalf("after the rewind partition 0 is committed at %d, want 0", o)
		}
		f.runUntilCommitted(t, 200, 200)
		f.want(t, 600, 400) // partition 0's 200 records twice

		// To the middle time, with --reload: rows from offset 100 on (both
		// copies on partition 0) are deleted, then loaded once.
		out = f.offsets(t, 0, "reset", "--to", f.mid, "--reload", "--execute")
		if !strings.Contains(out, f.topic+"[0]: 200 -> 100 (rewind 100 offsets)") || !strings.Contains(out, "holds 200 rows (100 offsets, up to 199) at offset 100 or later: deleted first") ||
			!strings.Contains(out, "done: ALTER TABLE") {
			t.Fatal("reset to a time with --reload: want the move to 100 and the delete")
		}
		f.want(t, 300, 200) // partition 0's first 100 twice, partition 1's first 100
		f.runUntilCommitted(t, 200, 200)
		f.want(t, 500, 400) // partition 0's first 100 still twice, the rest once

		// Forward: 100 more records; partition 0 is moved past its 50 new ones.
		produceSpread(t, f.topic, 100, func(i int) string { return fmt.Sprintf(`{"id":%d}`, 400+i) })
		out = f.offsets(t, 1, "reset", f.topic+":0=250", "--execute")
		if !strings.Contains(out, "up to 50 records (offsets 200-249) will never be inserted into "+f.table) || !strings.Contains(out, "add --yes to confirm") {
			t.Fatal("forward move without --yes: want the records lost and a refusal")
		}
		f.offsets(t, 0, "reset", f.topic+":0=250", "--execute", "--yes")
		f.runUntilCommitted(t, 250, 250)
		f.want(t, 550, 450)
		var late uint64
		if err := f.ch.QueryRow(context.Background(), "SELECT count() FROM "+f.table+" WHERE _partition = 0 AND _offset >= 200").Scan(&late); err != nil || late != 0 {
			t.Fatalf("partition 0 rows at offset 200 or later: %d (%v), want 0", late, err)
		}
	})
}

// TestOffsetsResetExactlyOnceOn26: exactly_once needs ClickHouse 22.2+.
// After a load of 400 records: a rewind of partition 0 to the earliest
// writes a ledger with a check region to 200 and inserts nothing (every
// record is recognised in the table); a reset to a time with --reload
// deletes the rows from offset 100 on and loads them again exactly once
// (the table forgets its tokens, so no reloaded batch is dropped as a
// repeat); an explicit forward move with --yes leaves its records out, and
// nothing is ever there twice.
func TestOffsetsResetExactlyOnceOn26(t *testing.T) {
	s := testenv.Server26(t)
	f := newOffsetsFixture(t, s, "exactly_once")
	f.runUntilCommitted(t, 200, 200)
	f.want(t, 400, 400)
	out := f.offsets(t, 0, "show")
	if !strings.Contains(out, "PENDING (LEDGER)") || strings.Count(out, "nothing pending") != 2 {
		t.Fatal("show: want the ledger column with nothing pending on both partitions after a clean stop")
	}

	out = f.offsets(t, 0, "reset", "--to", "earliest", "--topic", f.topic, "--partition", "0", "--execute")
	if !strings.Contains(out, "200 records (offsets up to 199) are already in "+f.table+": recognised by _offset and skipped") {
		t.Fatal("rewind: want the records recognised and skipped")
	}
	if o, md := f.committed(t, 0); o != 0 || !strings.HasPrefix(md, "sink-eo1 @0 t") || !strings.HasSuffix(md, " c200") {
		t.Fatalf("after the rewind partition 0 is committed at %d with %q; want 0 and a ledger with check region c200", o, md)
	}
	out = f.offsets(t, 0, "show")
	if !strings.Contains(out, "offsets 0-199 checked against the table before insert") {
		t.Fatal("show after the rewind: want the check region")
	}
	f.runUntilCommitted(t, 200, 200)
	f.want(t, 400, 400)

	out = f.offsets(t, 0, "reset", "--to", f.mid, "--reload", "--execute")
	if !strings.Contains(out, "holds 100 rows (100 offsets, up to 199) at offset 100 or later: deleted first, then loaded again once") ||
		!strings.Contains(out, "MODIFY SETTING non_replicated_deduplication_window = 0") {
		t.Fatal("reset to a time with --reload: want the delete and the window step")
	}
	f.want(t, 200, 200)
	for p := int32(0); p < 2; p++ {
		if o, md := f.committed(t, p); o != 100 || !strings.HasPrefix(md, "sink-eo1 @100 t") || strings.Contains(md, " c") {
			t.Fatalf("after --reload partition %d is committed at %d with %q; want 100 and a ledger with no check region", p, o, md)
		}
	}
	f.runUntilCommitted(t, 200, 200)
	f.want(t, 400, 400)

	produceSpread(t, f.topic, 100, func(i int) string { return fmt.Sprintf(`{"id":%d}`, 400+i) })
	out = f.offsets(t, 0, "reset", f.topic+":0=250")
	if !strings.Contains(out, "up to 50 records (offsets 200-249) will never be inserted into "+f.table+" (0 of those offsets are already there)") ||
		!strings.Contains(out, "--execute needs --yes") {
		t.Fatal("forward dry run: want the records never inserted and the need for --yes")
	}
	f.offsets(t, 0, "reset", f.topic+":0=250", "--execute", "--yes")
	f.runUntilCommitted(t, 250, 250)
	f.want(t, 450, 450)
}
