//go:build integration

package pgcdc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"sink/internal/testenv"
)

// These tests capture the seeded workload with a real Debezium PostgreSQL
// connector whose records Kafka Connect's JsonConverter writes with
// schemas.enable=true, {"schema": ..., "payload": ...}, and run `sink run`
// with routes of format json, which recognizes the envelope and reads each
// record by its schema. Every table is then compared with PostgreSQL key by
// key and value by value (decimals, dates, times, timestamps, NULLs,
// bytes, arrays), on both servers. The worker holds no plain Connect
// source connector (only Debezium's), so Connect's own logical types come
// from Debezium with time.precision.mode=connect.

// connectCase is one way the JsonConverter writes the workload's changes.
type connectCase struct {
	tables []string
	millis bool              // the workload's times are whole ms (Connect's Time and Timestamp)
	dbz    map[string]string // Debezium settings added to testenv's
	meta   []string          // the mirrors' version and delete-marker columns
	// chType gives a column another ClickHouse type than its kind's ("": the kind's).
	chType func(c Column) string
	// routes are the sink's routes for the connector's topics.
	routes   func(dbz *testenv.Connector, pattern string, w *Workload) string
	unrouted string // errors.unrouted
}

// connectUnwrapped: Debezium's ExtractNewRecordState makes each record the
// row (a delete the before image with __deleted "true", and the LSN in
// __lsn); time.precision.mode=connect makes dates, times and timestamps
// Connect's Date, Time and Timestamp (ms), numeric(12,2) is Connect's
// Decimal. One regex route for every table; items gains a column midway,
// so its records change schema.
var connectUnwrapped = connectCase{
	tables: []string{"items", "items_full", "docs_full", "lines"},
	millis: true,
	dbz: map[string]string{
		"time.precision.mode":    "connect",
		"transforms":             "unwrap",
		"transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
		"transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
		"transforms.unwrap.add.fields":                     "lsn",
	},
	meta: []string{"_version UInt64", "__deleted String", "_deleted UInt8 MATERIALIZED __deleted = 'true'"},
	// Connect's Time is ms since midnight: a String column holds the time
	// of day, where the Int64 mirror column is compared as µs.
	chType: func(c Column) string {
		if c.Kind == KTime {
			return "String"
		}
		return ""
	},
	routes: func(_ *testenv.Connector, pattern string, _ *Workload) string {
		return fmt.Sprintf(`[{topic_regex: '%s', table: '${topic.last}', format: json, columns: {_version: __lsn}}]`, pattern)
	},
}

// connectEnvelope: the whole change event, read by paths into it. Two
// routes per table, chosen by the event's op through a field condition
// (which looks into the payload): inserts, snapshot reads and updates
// write the after image, deletes the before image; op d marks the row
// deleted. Debezium's own time types (µs) and VariableScaleDecimal.
// Tombstones are off: no route would take them.
var connectEnvelope = connectCase{
	tables: []string{"items_full", "docs_full", "lines"},
	dbz:    map[string]string{"tombstones.on.delete": "false"},
	meta:   []string{"_version UInt64", "op String", "_deleted UInt8 MATERIALIZED op = 'd'"},
	chType: func(Column) string { return "" },
	routes: func(dbz *testenv.Connector, _ string, w *Workload) string {
		var routes []string
		for _, t := range w.Tables {
			for _, r := range []struct{ ops, image string }{{"[c, r, u]", "after"}, {"d", "before"}} {
				cols := []string{"_version: source.lsn", "op: op"}
				for _, c := range t.Columns {
					cols = append(cols, c.Name+": "+r.image+"."+c.Name)
				}
				routes = append(routes, fmt.Sprintf("{topic: '%s', table: %s, format: json, when: {field.op: %s}, columns: {%s}}",
					dbz.Topic(t.Name), t.Name, r.ops, strings.Join(cols, ", ")))
			}
		}
		return "[" + strings.Join(routes, ",\n  ") + "]"
	},
	unrouted: "dlq",
}

func runConnectCase(t *testing.T, cc connectCase) {
	ctx := context.Background()
	start := time.Now()
	bin := buildSink(t)
	brokers := testenv.Kafka(t)
	pg := testenv.Postgres(t)
	conn := pg.Conn(t)
	w := New(Config{Seed: 20261207, SnapshotRows: 40, Transactions: 250, Tables: cc.tables, Millis: cc.millis})
	for _, tb := range w.Tables {
		for i := range tb.Columns {
			tb.Columns[i].CH = cc.chType(tb.Columns[i])
		}
	}
	if err := w.Setup(ctx, conn); err != nil {
		t.Fatal(err)
	}
	dbz := testenv.Debezium(t, pg, testenv.DebeziumConfig{Tables: w.TableNames(), Extra: cc.dbz})
	dbz.WaitSnapshot(t)
	// One record that is not JSON: it, and only it, must be dead-lettered.
	testenv.Produce(t, dbz.Topic(w.Tables[0].Name), poison)

	var topics []string
	for _, n := range w.TableNames() {
		topics = append(topics, dbz.Topic(n))
	}
	pattern := strings.ReplaceAll(dbz.TopicPrefix, ".", `\.`) + `\.public\.(` + strings.Join(w.TableNames(), "|") + `)`
	var targets []*target
	for _, s := range testenv.Servers(t) {
		tg := &target{name: s.Label, server: s, delivery: "at_least_once"}
		tg.ch, tg.dialect = s.Conn(t), DialectFor(s.Major, s.Minor)
		tg.db = s.NewDatabase(t)
		for _, tb := range w.Tables {
			testenv.Exec(t, tg.ch, tb.ClickHouseDDL(tg.db, tg.dialect, MirrorOptions{Meta: cc.meta}))
		}
		tg.group, tg.dlq = testenv.UniqueName(t, "connectjson-"+tg.name), testenv.NewTopic(t, 1)
		unrouted := ""
		if cc.unrouted != "" {
			unrouted = ", unrouted: " + cc.unrouted
		}
		yaml := fmt.Sprintf(`name: %s
kafka: {brokers: [%s], topic_regex: '%s', fetch_min_bytes: 1, fetch_max_wait: 200ms, commit_interval: 500ms, session_timeout: 6s}
clickhouse: {addrs: [%s], database: %s, schema_refresh: 1s}
batch: {max_rows: 400, max_wait: 300ms}
routes: %s
errors: {tolerance: all, dlq_topic: %s%s}
http: {listen: ""}
log: {level: warn}
`, tg.group, brokers[0], pattern, s.Addr, tg.db, cc.routes(dbz, pattern, w), tg.dlq, unrouted)
		tg.cfgPath = filepath.Join(t.TempDir(), tg.name+".yaml")
		if err := os.WriteFile(tg.cfgPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		tg.start(t, bin)
		targets = append(targets, tg)
	}

	hooks := Hooks{BeforeAddColumn: func(ctx context.Context, tb *Table) error {
		for _, tg := range targets {
			if err := tg.ch.Exec(ctx, tb.AddColumnClickHouse(tg.db, tg.dialect)); err != nil {
				return err
			}
		}
		time.Sleep(2 * time.Second) // the sinks see the column within schema_refresh
		return nil
	}}
	if err := w.Stream(ctx, conn, hooks); err != nil {
		t.Fatal(err)
	}
	dbz.WaitStreaming(t)
	t.Logf("workload %+v; in Kafka after %v", w.Stats, time.Since(start).Round(time.Millisecond))

	adm := kadm.NewClient(testenv.KafkaClient(t))
	for _, tg := range targets {
		tg.stopWhenCaughtUp(t, adm, topics)
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			checkDLQ(t, tg)
			rep, err := Compare(ctx, conn, tg.ch, tg.db, tg.dialect, w, CompareOptions{Examples: 12})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Differences() != 0 {
				t.Errorf("%s (%s): ClickHouse differs from PostgreSQL:\n%s", tg.name, tg.server.Name(), rep)
			} else {
				t.Logf("%s: equal to PostgreSQL:\n%s", tg.name, rep)
			}
		})
	}
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

// TestConnectJSONReproducesPostgres: the JsonConverter's envelope, once
// unwrapped (Connect's logical types) and once the whole change event
// (Debezium's), read by format json on both servers.
func TestConnectJSONReproducesPostgres(t *testing.T) {
	t.Run("unwrapped", func(t *testing.T) { runConnectCase(t, connectUnwrapped) })
	t.Run("envelope", func(t *testing.T) { runConnectCase(t, connectEnvelope) })
}
