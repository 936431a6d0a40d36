//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/testenv"
)

func schemaConfig(t *testing.T, s testenv.Server, topic, db, refresh string) *config.Config {
	return newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 50ms, retry_max: 300ms, schema_refresh: %s}
batch: {max_rows: 1000, max_wait: 200ms}
routes: [{topic: %q, table: t}]
http: {listen: ""}
`, testenv.UniqueName(t, "schema"), testenv.Kafka(t)[0], topic, s.Addr, db, refresh, topic))
}

// withExtra returns JSON records id from..to-1 that carry a field extra.
func withExtra(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf(`{"id": %d, "n": "%d", "extra": "e%d"}`, i, i, i))
	}
	return out
}

// waitCommitted waits until the group committed want on partition 0 and the
// connector is still running.
func waitCommitted(t *testing.T, done <-chan error, group, topic string, want int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for committed(t, group, topic, 0) < want {
		select {
		case err := <-done:
			t.Fatalf("connector stopped before committing %d: %v", want, err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("offset %d not committed after a minute (at %d)", want, committed(t, group, topic, 0))
		}
	}
}

func uint64Of(t *testing.T, ch driver.Conn, q string) uint64 {
	t.Helper()
	var n uint64
	if err := ch.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

type schemaRun struct {
	ch        driver.Conn
	db, topic string
	cfg       *config.Config
	done      <-chan error
	stop      context.CancelFunc
}

// startOnTable creates table t (columns) on s and a one-partition topic,
// starts a connector with schema_refresh refresh, produces first and waits
// for its 100 records to be committed.
func startOnTable(t *testing.T, s testenv.Server, columns, refresh string, first []string) schemaRun {
	t.Helper()
	r := schemaRun{ch: s.Conn(t), db: s.NewDatabase(t), topic: testenv.NewTopic(t, 1)}
	if err := r.ch.Exec(context.Background(), "CREATE TABLE "+r.db+".t ("+columns+") ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	r.cfg = schemaConfig(t, s, r.topic, r.db, refresh)
	r.done, r.stop = startPipeline(t, r.cfg)
	produceValues(t, r.topic, first...)
	waitCommitted(t, r.done, r.cfg.Kafka.Group, r.topic, int64(len(first)))
	return r
}

// A column added to the table while the sink runs is filled from the
// records that carry it once the periodic re-read saw it, without a
// restart; records before the ALTER still land once each.
func TestColumnAddedWhileRunningIsFilled(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		r := startOnTable(t, s, "id UInt64, n String", "300ms", withExtra(0, 100))
		ch, db, topic, cfg, done, stop := r.ch, r.db, r.topic, r.cfg, r.done, r.stop
		ctx := context.Background()

		if err := ch.Exec(ctx, "ALTER TABLE "+db+".t ADD COLUMN extra String"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // ten schema_refresh periods
		produceValues(t, topic, withExtra(100, 1100)...)
		waitCommitted(t, done, cfg.Kafka.Group, topic, 1100)

		if n := uint64Of(t, ch, "SELECT count() FROM "+db+".t"); n != 1100 {
			t.Fatalf("%d rows; want 1100", n)
		}
		if n := uint64Of(t, ch, "SELECT uniqExact(id) FROM "+db+".t"); n != 1100 {
			t.Fatalf("%d distinct ids; want 1100", n)
		}
		if n := uint64Of(t, ch, "SELECT count() FROM "+db+".t WHERE id >= 100 AND extra = concat('e', toString(id))"); n != 1000 {
			t.Fatalf("%d of the 1000 records after the ALTER have their extra value; want all", n)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatalf("clean stop: %v", err)
		}
	})
}

// A column dropped while the sink runs: the next batch, decoded with the
// column, fails with an unknown column, is retried without it (its other
// values intact), and the batches after it are decoded without the column.
// The periodic re-read is off, so only the INSERT error can notice.
func TestColumnDroppedWhileRunningKeepsEveryRow(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		r := startOnTable(t, s, "id UInt64, n String, extra String", "0s", withExtra(0, 100))
		ch, db, topic, cfg, done, stop := r.ch, r.db, r.topic, r.cfg, r.done, r.stop
		ctx := context.Background()

		if err := ch.Exec(ctx, "ALTER TABLE "+db+".t DROP COLUMN extra"); err != nil {
			t.Fatal(err)
		}
		produceValues(t, topic, withExtra(100, 200)...)
		waitCommitted(t, done, cfg.Kafka.Group, topic, 200)
		produceValues(t, topic, withExtra(200, 300)...)
		waitCommitted(t, done, cfg.Kafka.Group, topic, 300)

		if n := uint64Of(t, ch, "SELECT count() FROM "+db+".t"); n != 300 {
			t.Fatalf("%d rows; want 300", n)
		}
		if n := uint64Of(t, ch, "SELECT count() FROM "+db+".t WHERE n = toString(id)"); n != 300 {
			t.Fatalf("%d rows have their n; want 300", n)
		}
		if n := uint64Of(t, ch, "SELECT uniqExact(id) FROM "+db+".t"); n != 300 {
			t.Fatalf("%d distinct ids; want 300", n)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatalf("clean stop: %v", err)
		}
	})
}

// A table dropped while the sink runs stops the connector with one line
// saying so, instead of retrying forever; nothing after the last insert is
// committed.
func TestTableDroppedWhileRunningStops(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		r := startOnTable(t, s, "id UInt64, n String", "0s", jsonRows(0, 100))
		ch, db, topic, cfg, done, _ := r.ch, r.db, r.topic, r.cfg, r.done, r.stop
		ctx := context.Background()
		if err := ch.Exec(ctx, "DROP TABLE "+db+".t"); err != nil {
			t.Fatal(err)
		}
		produceValues(t, topic, jsonRows(100, 200)...)
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatal("the connector did not stop after its table was dropped")
		}
		if err == nil || !strings.Contains(err.Error(), "the table no longer exists") {
			t.Fatalf("Run error %v; want one saying the table no longer exists", err)
		}
		if c := committed(t, cfg.Kafka.Group, topic, 0); c != 100 {
			t.Fatalf("committed %d; want 100", c)
		}
	})
}
