//go:build integration

package writer_test

import (
	"context"
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
