//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sink/internal/testenv"
	"sink/internal/writer"
)

// insertGoroutines counts the goroutines that are inside the pipeline's
// INSERT right now (dispatch's, internal/pipeline/dispatch/insert.go).
func insertGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sink/internal/pipeline/dispatch.(*inserts).insert(") {
			n++
		}
	}
	return n
}

// SIGTERM (a canceled Run) while an INSERT is slow on the server: a
// materialized view sleeps 2 s per block, shutdown_timeout is 300 ms. Run
// gives up on the INSERT after shutdown_timeout, cancels it, and returns
// only once the INSERT's goroutine has returned: at that moment no
// goroutine is inside the INSERT, so the ClickHouse pool closed next is
// closed under nothing. Nothing was committed past the cut-off batch, and
// a second run loads every record (at least once: the cut-off INSERT may
// have written the table before the view's sleep).
func TestShutdownDuringSlowInsertJoinsIt(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		for _, q := range []string{
			"CREATE TABLE " + db + ".t (id UInt64, n String) ENGINE = MergeTree ORDER BY id",
			"CREATE TABLE " + db + ".slow (id UInt64) ENGINE = MergeTree ORDER BY id",
			"CREATE MATERIALIZED VIEW " + db + ".mv TO " + db + ".slow AS SELECT id FROM " + db + ".t WHERE sleep(2) = 0",
		} {
			if err := ch.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		topic := testenv.NewTopic(t, 1)
		produceValues(t, topic, jsonRows(0, 50)...)
		cfg := fatalConfig(t, s, topic, db, "t")
		cfg.ShutdownTimeout = 300 * time.Millisecond

		var inInsert atomic.Int32 // goroutines inside the INSERT when Run returned
		done, stop := startPipelineThen(t, cfg, func() { inInsert.Store(int32(insertGoroutines())) })
		deadline := time.Now().Add(30 * time.Second)
		for insertGoroutines() == 0 {
			if time.Now().After(deadline) {
				stop()
				t.Fatal("no INSERT started within 30s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // the INSERT is on the server, in the view's sleep
		stop()                             // SIGTERM
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return within 20s of the stop")
		}
		t.Logf("Run ended with: %v", err)
		if n := inInsert.Load(); n != 0 {
			t.Fatalf("Run returned with %d goroutines still inside the INSERT; the pool would be closed under them", n)
		}
		if err == nil || !strings.Contains(err.Error(), "shutdown_timeout") || !strings.Contains(err.Error(), "committed nothing new") {
			t.Fatalf("Run: %v; want shutdown_timeout passed with nothing committed", err)
		}
		if got := committed(t, cfg.Kafka.Group, topic, 0); got != 0 {
			t.Fatalf("committed offset %d after the cut-off INSERT; want none", got)
		}

		// The next run (no slow view) loads everything.
		if err := ch.Exec(ctx, "DROP TABLE "+db+".mv"); err != nil {
			t.Fatal(err)
		}
		runWhile(t, cfg, time.Minute, func(*writer.Writer) (bool, string) {
			var rows, ids uint64
			if err := ch.QueryRow(ctx, "SELECT count(), uniqExact(id) FROM "+db+".t").Scan(&rows, &ids); err != nil {
				t.Fatal(err)
			}
			c := committed(t, cfg.Kafka.Group, topic, 0)
			return ids == 50 && c == 50, fmt.Sprintf("%d rows, %d ids, committed %d; want 50 ids, committed 50", rows, ids, c)
		})
	})
}
