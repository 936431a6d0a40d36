package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/offsets"
	"sink/internal/writer"
)

// cdcSink is a fakeSink whose tables have a debezium-json route's
// columns and which runs TRUNCATE TABLE: it logs each INSERT (when it
// ends, with its ids) and each TRUNCATE in order.
type cdcSink struct {
	*fakeSink
	truncErr error // what every TRUNCATE answers

	logMu  sync.Mutex
	events []string
}

func newCDCSink(script func(n int) insertScript) *cdcSink {
	return &cdcSink{fakeSink: newFakeSink(script)}
}

func (k *cdcSink) Describe(context.Context, string, string) ([]chschema.ColumnSchema, error) {
	return []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "_version", Type: "UInt64"}, {Name: "_deleted", Type: "UInt8"}}, nil
}

func (k *cdcSink) Insert(ctx context.Context, t *chtable.Table, block chschema.Block, id uint64, onRetry func(chtable.Attempt), refresh chtable.Refresh) error {
	err := k.fakeSink.Insert(ctx, t, block, id, onRetry, refresh)
	if err == nil {
		k.log(fmt.Sprintf("insert %v", block.ColumnData(0)))
	}
	return err
}

func (k *cdcSink) Truncate(_ context.Context, db, table, cluster string) (string, error) {
	ddl := writer.TruncateDDL(db, table, cluster)
	k.log(ddl)
	return ddl, k.truncErr
}

func (k *cdcSink) log(e string) {
	k.logMu.Lock()
	defer k.logMu.Unlock()
	k.events = append(k.events, e)
}

func (k *cdcSink) logged() []string {
	k.logMu.Lock()
	defer k.logMu.Unlock()
	return append([]string(nil), k.events...)
}

// cdcRow is a Debezium insert of row id at LSN 100+id.
func cdcRow(id int) string {
	return fmt.Sprintf(`{"op":"c","before":null,"after":{"id":%d},"source":{"connector":"postgresql","lsn":%d},"ts_ms":1}`, id, 100+id)
}

// truncateEvent is a TRUNCATE event as Debezium 3.6.1 wrote it for
// PostgreSQL 15 (with the JSON converter's schema).
func truncateEvent(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../decode/testdata/debezium/dbz361_pg15_types_default_truncate.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b))
}

// syncBuffer is a log the pipeline's goroutines write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startCDC runs a debezium-json route into db.t with route options extra,
// logging into the returned buffer.
func startCDC(t *testing.T, extra string, sink *cdcSink) (*running, *syncBuffer) {
	t.Helper()
	cfg := unitConfig(t, "    format: debezium-json\n"+extra)
	cfg.ShutdownTimeout = 2 * time.Second
	logs := &syncBuffer{}
	p, err := New(context.Background(), cfg, zerolog.New(logs), sink)
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	return launch(t, p, src, src, sink.fakeSink), logs
}

// TestUnitTruncateApplied: with truncate: apply, the table's rows before
// the TRUNCATE event are all inserted (the open batch sealed, the INSERT
// in flight finished) before TRUNCATE TABLE runs, and the rows after it
// are inserted after it; every offset is committed.
func TestUnitTruncateApplied(t *testing.T) { synctest.Test(t, testUnitTruncateApplied) }

func testUnitTruncateApplied(t *testing.T) {
	// Slow INSERTs: a TRUNCATE that did not wait would run while one is
	// in flight and be logged before it.
	sink := newCDCSink(func(int) insertScript { return insertScript{delay: 50 * time.Millisecond} })
	r, logs := startCDC(t, "    truncate: apply\n", sink)
	r.src.send(unitTP, 0, cdcRow(1), cdcRow(2), cdcRow(3), truncateEvent(t), cdcRow(4), cdcRow(5))
	eventually(t, 2*time.Second, "offset 6 committed", func() bool { return r.src.committed(unitTP) == 6 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"insert [1 2]", "insert [3]", "TRUNCATE TABLE `db`.`t`", "insert [4 5]"}
	if got := sink.logged(); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("sink saw\n%q\nwant\n%q", got, want)
	}
	if st := r.p.Stats(); st.Skipped != 1 || st.Rows != 5 {
		t.Errorf("stats %+v: want 5 rows and the TRUNCATE event handled without a row", st)
	}
	if !strings.Contains(logs.String(), "TRUNCATE event applied") {
		t.Errorf("no log of the applied TRUNCATE:\n%s", logs)
	}
}

// TestUnitTruncateSkipped: by default a TRUNCATE event changes nothing in
// the table; it is skipped, committed past, and logged once per table.
func TestUnitTruncateSkipped(t *testing.T) { synctest.Test(t, testUnitTruncateSkipped) }

func testUnitTruncateSkipped(t *testing.T) {
	sink := newCDCSink(nil)
	r, logs := startCDC(t, "", sink)
	r.src.send(unitTP, 0, cdcRow(1), truncateEvent(t), cdcRow(2), truncateEvent(t))
	eventually(t, 2*time.Second, "offset 4 committed", func() bool { return r.src.committed(unitTP) == 4 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, e := range sink.logged() {
		if strings.HasPrefix(e, "TRUNCATE") {
			t.Fatalf("truncate: skip ran %s", e)
		}
	}
	if st := r.p.Stats(); st.Skipped != 2 || st.Rows != 2 {
		t.Errorf("stats %+v: want 2 rows, 2 skipped", st)
	}
	if n := strings.Count(logs.String(), "TRUNCATE event skipped"); n != 1 {
		t.Errorf("the skipped TRUNCATE logged %d times, want once per table:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), `"level":"warn","table":"db.t"`) {
		t.Errorf("the skipped TRUNCATE is not a warning naming the table:\n%s", logs)
	}
}

// TestUnitTruncateFails: a TRUNCATE TABLE that fails stops the connector;
// the rows before the event are committed, the event and what follows
// are not.
func TestUnitTruncateFails(t *testing.T) { synctest.Test(t, testUnitTruncateFails) }

func testUnitTruncateFails(t *testing.T) {
	sink := newCDCSink(nil)
	sink.truncErr = errors.New("code: 60, UNKNOWN_TABLE")
	r, _ := startCDC(t, "    truncate: apply\n", sink)
	r.src.send(unitTP, 0, cdcRow(1), truncateEvent(t), cdcRow(2), cdcRow(3))
	err := r.wait(t)
	if !errors.Is(err, sink.truncErr) || !strings.Contains(err.Error(), "offset 1") {
		t.Fatalf("Run returned %v, want the TRUNCATE's error naming the event", err)
	}
	if got := r.src.committed(unitTP); got != 1 {
		t.Fatalf("committed offset %d, want 1 (the row before the TRUNCATE event, nothing past it)", got)
	}
	if got := sink.inserted("db.t"); got != 1 {
		t.Fatalf("%d rows inserted, want the 1 before the event", got)
	}
}

// TestUnitTruncateUnsafe: the connector stops rather than apply a TRUNCATE
// event from a partition other than 0 (the topic has several), or to a
// table another partition feeds; nothing of the event is committed.
func TestUnitTruncateUnsafe(t *testing.T) { synctest.Test(t, testUnitTruncateUnsafe) }

func testUnitTruncateUnsafe(t *testing.T) {
	tp1 := offsets.TP{Topic: unitTopic, Partition: 1}
	for _, c := range []struct {
		name string
		send func(r *running)
		want string
	}{
		{"event in partition 1", func(r *running) { r.src.send(tp1, 0, truncateEvent(t)) }, "needs single-partition topics"},
		{"table fed by partition 1", func(r *running) {
			r.src.send(tp1, 0, cdcRow(1))
			r.src.send(unitTP, 0, truncateEvent(t))
		}, "also takes records of events partition 1"},
	} {
		sink := newCDCSink(nil)
		r, _ := startCDC(t, "    truncate: apply\n", sink)
		c.send(r)
		err := r.wait(t)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Run returned %v, want %q", c.name, err, c.want)
		}
		if got := r.src.committed(unitTP); got > 0 {
			t.Errorf("%s: committed offset %d of partition 0, want nothing past the event", c.name, got)
		}
		for _, e := range sink.logged() {
			if strings.HasPrefix(e, "TRUNCATE") {
				t.Errorf("%s: ran %s", c.name, e)
			}
		}
	}
}
