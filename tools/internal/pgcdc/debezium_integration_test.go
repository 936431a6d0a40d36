//go:build integration

package pgcdc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/testenv"
)

// These tests drive a real PostgreSQL 15 with the seeded workload, capture
// it with a real Debezium PostgreSQL connector (pgoutput, JsonConverter with
// schemas) on the stack's Kafka Connect worker, run `sink run` processes
// with one debezium-json route (`table: '${topic.last}'`) into the
// ReplacingMergeTree mirrors, and compare every table with PostgreSQL key by
// key and value by value once the sinks have caught up.

// target is one sink process and the mirror database it writes.
type target struct {
	name     string
	server   testenv.Server
	ch       driver.Conn
	dialect  Dialect
	db       string
	delivery string // at_least_once or exactly_once
	// truncateApplied: the route applies TRUNCATE (routes[].truncate:
	// apply, which exactly-once refuses).
	truncateApplied bool
	group, dlq      string
	cfgPath         string
	proc            *exec.Cmd
	exited          chan error // receives the process's exit, once
	kills           int
	killedAt        int64 // records committed at the last kill
}

// buildSink builds cmd/sink once per test.
func buildSink(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sink")
	if out, err := exec.Command("go", "build", "-o", bin, "sink/cmd/sink").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// truncateKey is the route setting for TRUNCATE in a delivery mode:
// at-least-once applies it; exactly-once refuses truncate: apply (a
// TRUNCATE replayed after a crash could wipe rows inserted after it), so
// the truncated table keeps its rows there, as the test then expects. The
// refusal is checked here, so that the expectation cannot go stale.
func truncateKey(t *testing.T, delivery string) string {
	t.Helper()
	yaml := fmt.Sprintf(`name: probe
delivery: %s
kafka: {brokers: ["127.0.0.1:9092"], topics: [a]}
clickhouse: {addrs: ["127.0.0.1:9000"]}
routes: [{topic: a, table: a, format: debezium-json, truncate: apply}]
`, delivery)
	_, err := config.Parse([]byte(yaml), nil)
	if delivery == "exactly_once" {
		if err == nil {
			t.Fatal("delivery exactly_once took truncate: apply; the test expects it refused")
		}
		return ""
	}
	if err != nil {
		t.Fatalf("truncate: apply refused with delivery %s: %v", delivery, err)
	}
	return "truncate: apply"
}

func (tg *target) start(t *testing.T, bin string) {
	t.Helper()
	tg.proc = exec.Command(bin, "run", "--config", tg.cfgPath)
	log, err := os.Create(tg.cfgPath + fmt.Sprintf(".%d.log", tg.kills))
	if err != nil {
		t.Fatal(err)
	}
	tg.proc.Stdout, tg.proc.Stderr = log, log
	if err := tg.proc.Start(); err != nil {
		t.Fatal(err)
	}
	p, exited := tg.proc, make(chan error, 1)
	tg.exited = exited
	go func() { exited <- p.Wait() }()
	t.Cleanup(func() {
		_ = p.Process.Kill()
		<-exited
		exited <- nil // for a later receive, as by wait
		log.Close()
	})
}

// logTail is the end of the target's current log, for a failure message.
func (tg *target) logTail() string {
	b, _ := os.ReadFile(tg.cfgPath + fmt.Sprintf(".%d.log", tg.kills))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// wait returns the exit of the current process, once it has exited.
func (tg *target) wait() error {
	err := <-tg.exited
	tg.exited <- err
	return err
}

// running reports whether the current process has not exited.
func (tg *target) running() bool {
	select {
	case err := <-tg.exited:
		tg.exited <- err
		return false
	default:
		return true
	}
}

func (tg *target) kill9(t *testing.T, bin string) {
	t.Helper()
	if err := tg.proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	tg.wait()
	tg.kills++
	tg.start(t, bin)
}

// committed sums the group's committed offsets and the topics' end offsets.
func committed(ctx context.Context, adm *kadm.Client, group string, topics []string) (done, end int64, err error) {
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, 0, err
	}
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, 0, err
	}
	ends.Each(func(o kadm.ListedOffset) {
		end += o.Offset
		if c, ok := got.Lookup(o.Topic, o.Partition); ok && c.At >= 0 {
			done += min(c.At, o.Offset)
		}
	})
	return done, end, nil
}

// stopWhenCaughtUp waits until the target's group has committed every
// record of topics, then stops the sink with SIGTERM, which must end it
// cleanly.
func (tg *target) stopWhenCaughtUp(t *testing.T, adm *kadm.Client, topics []string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		done, end, err := committed(context.Background(), adm, tg.group, topics)
		if err != nil {
			t.Fatal(err)
		}
		if done == end {
			break
		}
		if !tg.running() || time.Now().After(deadline) {
			t.Fatalf("%s: committed %d of %d records (sink exited: %v)\n%s", tg.name, done, end, !tg.running(), tg.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := tg.proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := tg.wait(); err != nil {
		t.Errorf("%s: sink run after SIGTERM: %v\n%s", tg.name, err, tg.logTail())
	}
}

// scenario is one end-to-end run: the targets, and whether the sinks are
// killed with SIGKILL mid-stream.
type scenario struct {
	kill    bool
	targets []*target
}

func runScenario(t *testing.T, sc scenario) {
	ctx := context.Background()
	start := time.Now()
	bin := buildSink(t)
	brokers := testenv.Kafka(t)
	pg := testenv.Postgres(t)
	conn := pg.Conn(t)
	w := New(Config{Seed: 20261204, SnapshotRows: 50, Transactions: 400})
	if err := w.Setup(ctx, conn); err != nil {
		t.Fatal(err)
	}
	dbz := testenv.Debezium(t, pg, testenv.DebeziumConfig{Tables: w.TableNames()})
	dbz.WaitSnapshot(t)
	// One record that is not JSON, so that an empty dead-letter topic is
	// shown to mean something: it, and only it, must be dead-lettered.
	testenv.Produce(t, dbz.Topic("items"), poison)
	t.Logf("snapshot of %d rows in Kafka after %v", w.Stats.SnapshotRows, time.Since(start).Round(time.Millisecond))

	var topics []string
	for _, n := range w.TableNames() {
		topics = append(topics, dbz.Topic(n))
	}
	pattern := strings.ReplaceAll(dbz.TopicPrefix, ".", `\.`) + `\.public\.(` + strings.Join(w.TableNames(), "|") + `)`
	for _, tg := range sc.targets {
		tg.ch, tg.dialect = tg.server.Conn(t), DialectFor(tg.server.Major, tg.server.Minor)
		tg.db = tg.server.NewDatabase(t)
		for _, tb := range w.Tables {
			testenv.Exec(t, tg.ch, tb.ClickHouseDDL(tg.db, tg.dialect, MirrorOptions{ExactlyOnce: tg.delivery == "exactly_once"}))
		}
		tg.group, tg.dlq = testenv.UniqueName(t, "pgcdc-"+tg.name), testenv.NewTopic(t, 1)
		truncate := truncateKey(t, tg.delivery)
		tg.truncateApplied = truncate != ""
		route := fmt.Sprintf(`{topic_regex: '%s', table: '${topic.last}', format: debezium-json`, pattern)
		if truncate != "" {
			route += ", " + truncate
		}
		yaml := fmt.Sprintf(`name: %s
delivery: %s
kafka: {brokers: [%s], topic_regex: '%s', fetch_min_bytes: 1, fetch_max_wait: 200ms, commit_interval: 500ms, session_timeout: 6s}
clickhouse: {addrs: [%s], database: %s, schema_refresh: 1s}
batch: {max_rows: 400, max_wait: 300ms}
routes: [%s}]
errors: {tolerance: all, dlq_topic: %s}
http: {listen: ""}
log: {level: warn}
`, tg.group, tg.delivery, brokers[0], pattern, tg.server.Addr, tg.db, route, tg.dlq)
		tg.cfgPath = filepath.Join(t.TempDir(), tg.name+".yaml")
		if err := os.WriteFile(tg.cfgPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		tg.start(t, bin)
	}

	adm := kadm.NewClient(testenv.KafkaClient(t))
	// Kill points: before the ADD COLUMN, and after the TRUNCATE (so a
	// replay goes over both).
	killAt := map[int]bool{w.cfg.Transactions / 3: true, w.cfg.Transactions * 3 / 4: true}
	hooks := Hooks{
		// The documented order: the column goes into ClickHouse first, and
		// the running sinks see it within schema_refresh (1 s).
		BeforeAddColumn: func(ctx context.Context, tb *Table) error {
			for _, tg := range sc.targets {
				if err := tg.ch.Exec(ctx, tb.AddColumnClickHouse(tg.db, tg.dialect)); err != nil {
					return err
				}
			}
			time.Sleep(2 * time.Second)
			return nil
		},
		AfterTransaction: func(ctx context.Context, i int) error {
			if !sc.kill || !killAt[i] {
				return nil
			}
			// Kill each sink once it has committed part of the stream
			// (more than the snapshot, and more than at its last kill), so
			// the restart replays from a committed offset in the middle of
			// the changes.
			for _, tg := range sc.targets {
				deadline := time.Now().Add(time.Minute)
				for {
					done, _, err := committed(ctx, adm, tg.group, topics)
					if err != nil {
						return err
					}
					if done > max(int64(w.Stats.SnapshotRows), tg.killedAt) {
						tg.killedAt = done
						t.Logf("%s: kill -9 after transaction %d with %d records committed", tg.name, i, done)
						break
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("%s: nothing committed after a minute:\n%s", tg.name, tg.logTail())
					}
					time.Sleep(50 * time.Millisecond)
				}
				tg.kill9(t, bin)
			}
			return nil
		},
	}
	if err := w.Stream(ctx, conn, hooks); err != nil {
		t.Fatal(err)
	}
	dbz.WaitStreaming(t) // every committed change is in Kafka now
	t.Logf("workload %+v; in Kafka after %v", w.Stats, time.Since(start).Round(time.Millisecond))

	for _, tg := range sc.targets {
		tg.stopWhenCaughtUp(t, adm, topics)
	}
	t.Logf("sinks caught up after %v", time.Since(start).Round(time.Millisecond))

	for _, tg := range sc.targets {
		t.Run(tg.name, func(t *testing.T) {
			checkDLQ(t, tg)
			rep, err := Compare(ctx, conn, tg.ch, tg.db, tg.dialect, w, CompareOptions{TruncateApplied: tg.truncateApplied, Examples: 12})
			if err != nil {
				t.Fatal(err)
			}
			truncates := "skipped (exactly-once refuses truncate: apply): the truncated table keeps its old rows"
			if tg.truncateApplied {
				truncates = "applied"
			}
			if rep.Differences() != 0 {
				t.Errorf("%s (%s, %s, TRUNCATE %s, %d kill -9): ClickHouse differs from PostgreSQL:\n%s", tg.name, tg.server.Name(), tg.delivery, truncates, tg.kills, rep)
			} else {
				t.Logf("%s: equal to PostgreSQL (TRUNCATE %s):\n%s", tg.name, truncates, rep)
			}
			if tg.delivery == "exactly_once" {
				for _, tb := range w.Tables {
					var rows, distinct uint64
					q := fmt.Sprintf("SELECT count(), uniqExact(_topic, _partition, _offset) FROM %s.%s", tg.db, tb.Name)
					if err := tg.ch.QueryRow(ctx, q).Scan(&rows, &distinct); err != nil {
						t.Fatal(err)
					}
					if rows != distinct {
						t.Errorf("%s: %d rows but %d distinct (_topic, _partition, _offset): %d inserted twice", tb.Name, rows, distinct, rows-distinct)
					}
				}
			}
		})
	}
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

// offsetRE matches the record's offset in a dead-letter error, so that
// errors group by their cause.
var offsetRE = regexp.MustCompile(`offset \d+`)

// poison is the one record the tests plant in a table's topic.
const poison = "not a change event"

// checkDLQ requires the target's dead-letter topic to hold the planted
// poison record (more than once only after a replay) and nothing else, and
// names what else reached it (the error headers).
func checkDLQ(t *testing.T, tg *target) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ends, err := adm.ListEndOffsets(ctx, tg.dlq)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	cl := testenv.KafkaClient(t, kgo.ConsumeTopics(tg.dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var lines []string
	byError := map[string]int{}
	planted, other := 0, 0
	events := map[string]bool{} // by the error with its offset: a replay dead-letters an event again
	for read := int64(0); read < n && ctx.Err() == nil; {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			read++
			if string(r.Value) == poison {
				planted++
				return
			}
			other++
			var hs []string
			for _, h := range r.Headers {
				if h.Key == "sink.error" || strings.HasSuffix(h.Key, ".error") {
					events[string(h.Value)] = true
					hs = append(hs, offsetRE.ReplaceAllString(string(h.Value), "offset N"))
				}
			}
			key := strings.Join(hs, " ")
			if byError[key]++; byError[key] == 1 {
				lines = append(lines, key)
			}
		})
	}
	if planted == 0 {
		t.Errorf("%s: the planted poison record is not in the dead-letter topic (%d records there)", tg.name, n)
	}
	if other > 0 {
		for i, l := range lines {
			lines[i] = fmt.Sprintf("%d× %s", byError[l], l)
		}
		if len(lines) > 10 {
			lines = append(lines[:10], fmt.Sprintf("… %d more", len(lines)-10))
		}
		t.Errorf("%s: %d change events dead-lettered (%d records), by error:\n  %s", tg.name, len(events), other, strings.Join(lines, "\n  "))
	}
}

// TestDebeziumReproducesPostgres: no fault; one sink per ClickHouse server,
// at-least-once.
func TestDebeziumReproducesPostgres(t *testing.T) {
	var targets []*target
	for _, s := range testenv.Servers(t) {
		targets = append(targets, &target{name: s.Label, server: s, delivery: "at_least_once"})
	}
	runScenario(t, scenario{targets: targets})
}

// TestDebeziumReproducesPostgresKill9: each sink is killed with SIGKILL a
// third and three quarters into the stream (each time after it has
// committed more of it) and restarted at once: at-least-once on both servers, and exactly_once on 26.9 (18.16
// has no insert_deduplication_token), where the mirrors also carry
// _topic/_partition/_offset and no offset may be inserted twice.
func TestDebeziumReproducesPostgresKill9(t *testing.T) {
	var targets []*target
	for _, s := range testenv.Servers(t) {
		targets = append(targets, &target{name: s.Label + "-alo", server: s, delivery: "at_least_once"})
		if s.AtLeast(22, 2) {
			targets = append(targets, &target{name: s.Label + "-eo", server: s, delivery: "exactly_once"})
		}
	}
	runScenario(t, scenario{kill: true, targets: targets})
}
