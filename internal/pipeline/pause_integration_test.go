//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/internal/pipeline"
	"sink/internal/status"
	"sink/internal/testenv"
)

// TestPauseDuringClickHouseOutage, on each server: 300 records sit in an
// open batch (max_wait an hour) when the connection to ClickHouse is cut
// and POST /pause arrives. The pause seals the batch and stays PAUSING
// while its INSERT is retried, committing nothing; once ClickHouse is back
// the batch is inserted and committed and the state turns PAUSED. Records
// produced while paused wait in Kafka until the resume.
func TestPauseDuringClickHouseOutage(t *testing.T) {
	eachServerWithTopic(t, 1, func(t *testing.T, s testenv.Server, ch driver.Conn, db, topic, broker string) {
		testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
		values := func(from, n int) []string {
			out := make([]string, n)
			for i := range out {
				out[i] = fmt.Sprintf(`{"id":%d,"s":"x"}`, from+i)
			}
			return out
		}
		testenv.Produce(t, topic, values(0, 300)...)
		proxy := testenv.NewProxy(t, s.Addr)
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 100ms, retry_max: 300ms}
batch: {max_rows: 100000, max_wait: 1h}
routes: [{topic: %q, table: events}]
http: {listen: ""}
`, testenv.UniqueName(t, "pauseout"), broker, topic, proxy.Addr, db, topic))
		p, done, stop := startRunning(t, cfg)
		snap := waitSnapshot(t, p, "300 rows in the open batch", func(s *status.Snapshot) bool {
			return len(s.Tables) == 1 && s.Tables[0].OpenRows == 300
		})
		if snap.State != status.Running {
			t.Fatalf("state %s, want RUNNING", snap.State)
		}
		proxy.Cut()
		if st, err := p.Pause(context.Background()); err != nil || st != status.Pausing {
			t.Fatalf("Pause: %s, %v; want PAUSING", st, err)
		}
		snap = waitSnapshot(t, p, "the INSERT retried", func(s *status.Snapshot) bool {
			return s.Tables[0].LastError != nil && s.Tables[0].LastError.Retries >= 2
		})
		if snap.State != status.Pausing || snap.Tables[0].InFlightBatches != 1 || snap.Tables[0].OpenBatches != 0 {
			t.Fatalf("during the outage: state %s, table %+v; want PAUSING with the sealed batch in flight", snap.State, snap.Tables[0])
		}
		expectCount(t, ch, "SELECT count() FROM "+db+".events", 0, "%d rows during the outage, want 0")
		if c := committed(t, cfg.Kafka.Group, topic, 0); c > 0 {
			t.Fatalf("offset %d committed before the batch is in", c)
		}
		proxy.Restore()
		waitSnapshot(t, p, "PAUSED", func(s *status.Snapshot) bool { return s.State == status.Paused })
		expectCount(t, ch, "SELECT count() FROM "+db+".events", 300, "%d rows once PAUSED, want 300")
		if c := committed(t, cfg.Kafka.Group, topic, 0); c != 300 {
			t.Fatalf("offset %d committed once PAUSED, want 300", c)
		}
		testenv.Produce(t, topic, values(300, 40)...)
		time.Sleep(2 * time.Second)
		expectCount(t, ch, "SELECT count() FROM "+db+".events", 300, "%d rows while paused, want still 300")
		if st, err := p.Resume(context.Background()); err != nil || st != status.Running {
			t.Fatalf("Resume: %s, %v", st, err)
		}
		waitSnapshot(t, p, "the 40 fetched after the resume", func(s *status.Snapshot) bool { return s.Tables[0].OpenRows == 40 })
		stop() // SIGTERM flushes them
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		expectCount(t, ch, "SELECT count() FROM "+db+".events", 340, "%d rows after the resume and the stop, want 340")
	})
}

// waitSnapshot polls p's published snapshot until ok, for 30 s.
func waitSnapshot(t *testing.T, p *pipeline.Pipeline, what string, ok func(*status.Snapshot) bool) *status.Snapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s := p.Status(); s != nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("status not %s after 30s: %+v", what, p.Status())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
