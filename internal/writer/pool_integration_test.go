//go:build integration

package writer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestConnMaxLifetime: clickhouse.conn_max_lifetime reaches the pool. A
// connection idling past it is closed (with the buffers it holds), while
// one under a long lifetime stays idle for the next INSERT.
func TestConnMaxLifetime(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		open := func(life time.Duration) *writer.Writer {
			cfg := chConfig(t, s.Addr)
			cfg.ConnMaxLifetime = life
			w, err := writer.Open(ctx, "w", cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close() })
			// Open pinged once: that connection is back in the pool.
			if st := w.Conn().Stats(); st.Idle != 1 {
				t.Fatalf("lifetime %v: %d idle connections after the first ping, want 1", life, st.Idle)
			}
			return w
		}
		short, long := open(time.Second), open(time.Hour)
		deadline := time.Now().Add(10 * time.Second)
		for short.Conn().Stats().Idle > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("lifetime 1s: still %d idle connections after 10s", short.Conn().Stats().Idle)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if st := long.Conn().Stats(); st.Idle != 1 {
			t.Errorf("lifetime 1h: %d idle connections, want the 1 it had", st.Idle)
		}
		// The pool dials again when asked: a closed connection is not an error.
		if err := short.Conn().Ping(ctx); err != nil {
			t.Errorf("ping after the idle connection expired: %v", err)
		}
	})
}

// TestReadsQueueForConnections: more reads than the pool has connections,
// issued at once while slow queries hold the pool's query connections, all
// succeed: they wait for a connection in the sink's own queue, however
// long, and never fail with the driver's "acquire conn timeout" (which
// comes after dial_timeout, here 200ms).
func TestReadsQueueForConnections(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		cfg := chConfig(t, s.Addr)
		cfg.DialTimeout = 200 * time.Millisecond
		cfg.MaxInFlight = 1 // a pool of chtable.InsertConns(1) + 2 = 6
		w, err := writer.Open(ctx, "w", cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		db := s.NewDatabase(t)
		if err := w.Conn().Exec(ctx, "CREATE TABLE "+db+".t (a UInt64, b String) ENGINE = MergeTree ORDER BY a"); err != nil {
			t.Fatal(err)
		}
		const slow, describes = 8, 50 // 8 sleeps would hold the whole pool (6)
		errs := make(chan error, slow+describes)
		var wg sync.WaitGroup
		for i := 0; i < slow; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var n uint8
				errs <- w.Conn().QueryRow(ctx, "SELECT sleep(0.5)").Scan(&n)
			}()
		}
		for i := 0; i < describes; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cols, err := w.Describe(ctx, db, "t")
				if err == nil && len(cols) != 2 {
					err = fmt.Errorf("%d columns, want 2", len(cols))
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			if err != nil {
				failed++
				if failed <= 3 {
					t.Error(err)
				}
			}
		}
		if failed > 0 {
			t.Errorf("%d of %d reads failed", failed, slow+describes)
		}
	})
}
