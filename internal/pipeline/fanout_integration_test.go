//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/testenv"
)

// fanKinds and the header decide where a record of the fan-out test goes:
// table a takes kind x or y, table b header type t1, table c every record.
var fanKinds = []string{"x", "y", "z"}

type fanRec struct {
	id        int
	partition int32
	offset    int64
}

// fanTargets lists the tables record id goes to.
func fanTargets(id int) []string {
	out := []string{"c"}
	if id%3 != 2 {
		out = append(out, "a")
	}
	if id%2 == 0 {
		out = append(out, "b")
	}
	return out
}

// TestFanoutKill9Replays runs `sink run` as a child process on one topic
// feeding three tables (fanout: all, two routes with when:), kills it with
// SIGKILL while it inserts, checks that every record below the committed
// offsets is in every table it routes to (committed only after all
// targets), restarts it, and checks that each table ends with exactly its
// records (FINAL collapses the replayed ones) and the group committed the
// end of every partition. On both ClickHouse servers. Parallel with the
// package's other parallel tests: it uses its own topic, tables and group,
// kills only its own child process and measures no time.
func TestFanoutKill9Replays(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	bin := filepath.Join(t.TempDir(), "sink")
	build := exec.Command("go", "build", "-o", bin, "sink/cmd/sink")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		for _, tbl := range []string{"a", "b", "c"} {
			testenv.Exec(t, ch, fmt.Sprintf("CREATE TABLE %s.%s (id UInt64, kind String, _partition Int32, _offset UInt64) ENGINE = ReplacingMergeTree ORDER BY (_partition, _offset)", db, tbl))
		}
		// Table b's INSERTs are slow (a view sleeping 0.5 ms per row), so
		// its batches are acknowledged well after a's and c's of the same
		// records: a commit that waited for fewer than all targets (say,
		// only for c, the first route, which takes every record) would
		// show below as rows missing from b.
		testenv.Exec(t, ch,
			fmt.Sprintf("CREATE TABLE %s.b_slow_sink (n UInt8) ENGINE = Null", db),
			fmt.Sprintf("CREATE MATERIALIZED VIEW %s.b_slow TO %s.b_slow_sink AS SELECT sleepEachRow(0.0005) AS n FROM %s.b", db, db, db))
		topic := testenv.NewTopic(t, 4)
		const n = 40_000
		recs := produceFan(t, topic, n)

		group := "fanout-" + topic
		cfgPath := filepath.Join(t.TempDir(), "sink.yaml")
		yaml := fmt.Sprintf(`name: %s
kafka:
  brokers: [%s]
  topics: [%s]
  fetch_min_bytes: 1
  fetch_max_wait: 100ms
  fetch_max_bytes: 256KiB
  max_partition_fetch_bytes: 64KiB
clickhouse:
  addrs: [%s]
  database: %s
batch:
  max_rows: 1500
  max_wait: 200ms
fanout: all
routes:
  - topic: %s
    table: c
  - topic: %s
    table: a
    when: {field.kind: [x, y]}
  - topic: %s
    table: b
    when: {header.type: t1}
http:
  listen: ""
log:
  level: warn
`, group, brokers[0], topic, s.Addr, db, topic, topic, topic)
		if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		count := func(table, final string) uint64 {
			var c uint64
			if err := ch.QueryRow(context.Background(), fmt.Sprintf("SELECT count() FROM %s.%s %s", db, table, final)).Scan(&c); err != nil {
				t.Fatal(err)
			}
			return c
		}

		// First run: killed while it is inserting.
		child := startSink(t, bin, cfgPath)
		deadline := time.Now().Add(2 * time.Minute)
		// Kill once something is committed (else the check below proves
		// nothing) and table c has a quarter of the records.
		for count("c", "") < n/4 || len(fetchCommitted(t, group, topic)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("table c has %d rows and the group committed %v after 2 minutes", count("c", ""), fetchCommitted(t, group, topic))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
		committed := fetchCommitted(t, group, topic)
		if len(committed) == 0 {
			t.Fatal("the group's commit vanished after the kill")
		}
		want := map[string]map[[2]int64]bool{"a": {}, "b": {}, "c": {}}
		var below int
		for _, r := range recs {
			if r.offset >= committed[r.partition] {
				continue
			}
			below++
			for _, tbl := range fanTargets(r.id) {
				want[tbl][[2]int64{int64(r.partition), r.offset}] = true
			}
		}
		for tbl, keys := range want {
			have := map[[2]int64]bool{}
			rows, err := ch.Query(context.Background(), fmt.Sprintf("SELECT _partition, _offset FROM %s.%s", db, tbl))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var p int32
				var o uint64
				if err := rows.Scan(&p, &o); err != nil {
					t.Fatal(err)
				}
				have[[2]int64{int64(p), int64(o)}] = true
			}
			rows.Close()
			missing := 0
			for k := range keys {
				if !have[k] {
					missing++
				}
			}
			if missing > 0 {
				t.Errorf("table %s: %d of the %d records below the committed offsets %v are missing: committed before every target had them", tbl, missing, len(keys), committed)
			}
		}
		t.Logf("killed with %d of %d records committed; c had %d rows", below, n, count("c", ""))

		// Second run: replays from the committed offsets to the end.
		child = startSink(t, bin, cfgPath)
		exp := map[string]uint64{"a": 0, "b": 0, "c": 0}
		for i := range n {
			for _, tbl := range fanTargets(i) {
				exp[tbl]++
			}
		}
		deadline = time.Now().Add(3 * time.Minute)
		for count("a", "FINAL") < exp["a"] || count("b", "FINAL") < exp["b"] || count("c", "FINAL") < exp["c"] {
			if time.Now().After(deadline) {
				t.Fatalf("after the restart: a %d/%d, b %d/%d, c %d/%d rows", count("a", "FINAL"), exp["a"], count("b", "FINAL"), exp["b"], count("c", "FINAL"), exp["c"])
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := child.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := child.Wait(); err != nil {
			t.Fatalf("sink run after SIGTERM: %v", err)
		}
		for tbl, e := range exp {
			var rows, distinct, bad uint64
			q := fmt.Sprintf("SELECT count(), uniqExact(id), countIf(kind NOT IN ('x','y','z')) FROM %s.%s FINAL", db, tbl)
			if err := ch.QueryRow(context.Background(), q).Scan(&rows, &distinct, &bad); err != nil {
				t.Fatal(err)
			}
			if rows != e || distinct != e || bad != 0 {
				t.Errorf("table %s: %d rows, %d distinct ids, %d bad kinds; want %d, %d, 0", tbl, rows, distinct, bad, e, e)
			}
		}
		var wrongA, wrongB uint64
		_ = ch.QueryRow(context.Background(), fmt.Sprintf("SELECT count() FROM %s.a WHERE kind = 'z'", db)).Scan(&wrongA)
		_ = ch.QueryRow(context.Background(), fmt.Sprintf("SELECT count() FROM %s.b WHERE id %% 2 = 1", db)).Scan(&wrongB)
		if wrongA != 0 || wrongB != 0 {
			t.Errorf("misrouted rows: %d of kind z in a, %d odd ids in b", wrongA, wrongB)
		}
		end := endOffsets(t, topic)
		if got := fetchCommitted(t, group, topic); !equalOffsets(got, end) {
			t.Errorf("committed %v after the clean stop; want the end offsets %v", got, end)
		}
	})
}

// produceFan writes n records to topic, round-robin over its partitions:
// value {"id":i,"kind":x|y|z}, header type t1 for even ids, and returns
// where each landed.
func produceFan(t *testing.T, topic string, n int) []fanRec {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range n {
		typ := "t2"
		if i%2 == 0 {
			typ = "t1"
		}
		recs[i] = &kgo.Record{Value: fmt.Appendf(nil, `{"id":%d,"kind":%q}`, i, fanKinds[i%3]),
			Headers: []kgo.RecordHeader{{Key: "type", Value: []byte(typ)}}}
	}
	return produceRoundRobin(t, topic, recs)
}

// produceRoundRobin writes recs to topic, round-robin over its partitions,
// and returns where each landed (id is the record's index).
func produceRoundRobin(t *testing.T, topic string, recs []*kgo.Record) []fanRec {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := make([]fanRec, len(recs))
	var mu sync.Mutex
	var failed error
	for i, r := range recs {
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = err
				return
			}
			out[i] = fanRec{id: i, partition: r.Partition, offset: r.Offset}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if failed != nil {
		t.Fatalf("produce: %v", failed)
	}
	return out
}

// startSink starts `sink run` and kills it when the test ends.
func startSink(t *testing.T, bin, cfgPath string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "run", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

func fetchCommitted(t *testing.T, group, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	resp, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

func endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func equalOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}

// TestFanoutUnroutedToDLQ: with errors.unrouted: dlq, the records no
// route's when: takes are in the dead-letter topic with the reason, the
// others in the table, and the group commits past all of them.
func TestFanoutUnroutedToDLQ(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := reproSetup(t, s)
		produceValues(t, topic, `{"id":0,"kind":"a"}`, `{"id":1,"kind":"b"}`, `{"id":2,"kind":"a"}`, `{"id":3}`)
		dlq := testenv.UniqueName(t, "unrouted_dlq")
		createTopic(t, dlq, 1)
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 100, max_wait: 200ms}
routes: [{topic: %q, table: repro, when: {field.kind: a}}]
errors: {tolerance: all, dlq_topic: %q, unrouted: dlq}
shutdown_timeout: 3s
http: {listen: ""}
`, testenv.UniqueName(t, "unrouted"), testenv.Kafka(t)[0], topic, s.Addr, db, topic, dlq))
		runUntilCommitted(t, cfg, topic, 4)
		if got := ids(t, ch, db+".repro"); !slices.Equal(got, []uint64{0, 2}) {
			t.Fatalf("rows %v; want 0 and 2", got)
		}
		recs := dlqRecords(t, dlq)
		var offs []string
		for _, r := range recs {
			off, _ := header(r, "sink.source.offset")
			offs = append(offs, off)
			if msg, _ := header(r, "sink.error"); !strings.Contains(msg, "no route takes the record") {
				t.Errorf("dead letter of offset %s: sink.error %q", off, msg)
			}
		}
		if !slices.Equal(offs, []string{"1", "3"}) {
			t.Fatalf("dead letters of offsets %v; want 1 and 3", offs)
		}
	})
}
