//go:build integration

package testenv_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/testenv"
)

// TestNewTopic runs against the real broker: the topic exists with the requested
// partitions, takes a record, and is gone after the test that made it ends.
func TestNewTopic(t *testing.T) {
	var topic string
	t.Run("create", func(t *testing.T) {
		topic = testenv.NewTopic(t, 3)
		adm := kadm.NewClient(testenv.KafkaClient(t))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := td[topic]; !ok || len(d.Partitions) != 3 {
			t.Fatalf("topic %s: got %+v, want 3 partitions", topic, td[topic])
		}

		cl := testenv.KafkaClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500*time.Millisecond))
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("hello")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" {
			t.Fatalf("fetched %d records, want the one produced", len(recs))
		}
	})
	if topic == "" {
		return // skipped or failed above
	}

	// Deletion is asynchronous in the broker: poll briefly.
	adm := kadm.NewClient(testenv.KafkaClient(t))
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		td, err := adm.ListTopics(ctx)
		cancel()
		if err == nil && !td.Has(topic) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s still exists after cleanup (err %v)", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNewDatabase runs against each real server: the database exists, takes
// an explicit-column batch insert into a MergeTree table (the way the sink
// writes), the insert shows up in query_log and part_log (the stack's configs
// flush them every second), and the database is gone after the test that made
// it ends.
func TestNewDatabase(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		var db string
		t.Run("create", func(t *testing.T) {
			db = s.NewDatabase(t)
			conn := s.Conn(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			var n uint64
			if err := conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", db).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Fatalf("database %s not in system.databases", db)
			}

			if err := conn.Exec(ctx, fmt.Sprintf(
				"CREATE TABLE %s.events (day Date, id UInt64, msg String) ENGINE = MergeTree ORDER BY id", db)); err != nil {
				t.Fatal(err)
			}
			batch, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.events (day, id, msg)", db))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				if err := batch.Append(time.Now().UTC(), uint64(i), "m"); err != nil {
					t.Fatal(err)
				}
			}
			if err := batch.Send(); err != nil {
				t.Fatalf("insert: %v", err)
			}
			if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM %s.events", db)).Scan(&n); err != nil || n != 100 {
				t.Fatalf("count: %d, %v; want 100", n, err)
			}

			waitRows(t, conn.QueryRow, "part_log", fmt.Sprintf(
				"SELECT count() FROM system.part_log WHERE database = '%s' AND table = 'events' AND event_type = 1", db))
			waitRows(t, conn.QueryRow, "query_log", fmt.Sprintf(
				"SELECT count() FROM system.query_log WHERE type = 2 AND query LIKE 'INSERT INTO %s.events%%'", db))
		})
		if db == "" {
			return
		}
		var n uint64
		if err := s.Conn(t).QueryRow(context.Background(), "SELECT count() FROM system.databases WHERE name = ?", db).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("database %s still exists after cleanup", db)
		}
	})
}

type rowScanner interface{ Scan(...any) error }

// waitRows polls a count query until it is positive; the system logs flush every
// second in the stack's config, so 10 s is generous.
func waitRows[R rowScanner](t *testing.T, queryRow func(context.Context, string, ...any) R, what, q string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n uint64
		err := queryRow(context.Background(), q).Scan(&n)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rows in system.%s 10s after the insert (err %v): %s", what, err, q)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestUnreachable needs no stack: a closed port skips by default and fails under
// SINK_REQUIRE_STACK=1, with the message that says how to start the stack.
func TestUnreachable(t *testing.T) {
	const closed = "127.0.0.1:1"
	t.Setenv(testenv.EnvKafka, closed)
	t.Setenv(testenv.EnvClickHouse, closed)
	t.Setenv(testenv.EnvClickHouse26, closed)

	for _, require := range []string{"", "1"} {
		t.Setenv(testenv.EnvRequireStack, require)
		for name, call := range map[string]func(testing.TB){
			"Kafka":             func(tb testing.TB) { testenv.Kafka(tb) },
			"ClickHouse (ch18)": func(tb testing.TB) { testenv.Server18(tb) },
			"ClickHouse (ch26)": func(tb testing.TB) { testenv.Server26(tb) },
		} {
			r := &recorder{TB: t}
			call(r)
			got, other := r.skipped, r.failed
			if require == "1" {
				got, other = r.failed, r.skipped
			}
			want := "integration: " + name + " not reachable at " + closed + "; run `make stack-up`"
			if !strings.HasPrefix(got, want) || other != "" {
				t.Errorf("%s with %s=%q: skipped %q, failed %q; want %q…", name,
					testenv.EnvRequireStack, require, r.skipped, r.failed, want)
			}
		}
	}
}

func TestServersAnswerWithTheirVersions(t *testing.T) {
	servers := testenv.Servers(t)
	if len(servers) != 2 {
		t.Fatalf("got %d servers, want 2", len(servers))
	}
	if !servers[1].AtLeast(26, 0) || servers[0].AtLeast(19, 0) {
		t.Errorf("versions %q and %q: want 18.x first and 26.x second", servers[0].Version, servers[1].Version)
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		var v string
		if err := s.Conn(t).QueryRow(context.Background(), "SELECT version()").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != s.Version {
			t.Errorf("version %q, Server says %q", v, s.Version)
		}
		db := s.NewDatabase(t)
		if db == "" {
			t.Error("empty database name")
		}
	})
}

// TestEachServerConcurrently: the servers' subtests run at the same time
// (each waits until every one has started, which a run one after the other
// never reaches), each on its own server, under the names EachServer gives,
// and the call returns only once both have ended.
func TestEachServerConcurrently(t *testing.T) {
	servers := testenv.Servers(t)
	var (
		mu      sync.Mutex
		started = map[string]bool{}
		ended   = map[string]bool{}
	)
	all := make(chan struct{})
	testenv.EachServerConcurrently(t, func(t *testing.T, s testenv.Server) {
		if want := s.Name(); !strings.HasSuffix(t.Name(), "/"+want) {
			t.Errorf("subtest %q, want it named %q", t.Name(), want)
		}
		mu.Lock()
		started[s.Label] = true
		if len(started) == len(servers) {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the other server's subtest did not start within 30 s: the subtests ran one after the other", s.Label)
		}
		var v string
		if err := s.Conn(t).QueryRow(context.Background(), "SELECT version()").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != s.Version {
			t.Errorf("version %q, Server says %q", v, s.Version)
		}
		mu.Lock()
		ended[s.Label] = true
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	if len(ended) != len(servers) {
		t.Errorf("returned with %d of %d subtests ended", len(ended), len(servers))
	}
}
