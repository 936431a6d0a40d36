//go:build integration

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// TestCheckExactlyOnce: with delivery exactly_once, `sink check` and `sink
// run` refuse in one line a server without deduplication tokens (18.16), a
// table without _topic/_partition/_offset, and a MergeTree table whose
// window is 0 (printing the ALTER TABLE to run); after that ALTER, check
// passes.
func TestCheckExactlyOnce(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 1)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, ch,
			"CREATE TABLE "+db+".bare (id UInt64) ENGINE = MergeTree ORDER BY id",
			"CREATE TABLE "+db+".events (id UInt64, _topic String, _partition Int32, _offset Int64) ENGINE = MergeTree ORDER BY id")
		config := func(table string) string {
			return writeConfig(t, fmt.Sprintf(`
name: checkeo
delivery: exactly_once
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: %s}]
http: {listen: ""}
`, brokers[0], topic, s.Addr, db, topic, table))
		}
		// f runs cmd and wants exit 1 with exactly one stderr line containing want.
		f := func(cmd, table, want string) {
			t.Helper()
			code, _, errOut := sinkCmd(t, cmd, "--config", config(table))
			if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) {
				t.Fatalf("sink %s, table %s: exit %d, stderr %q; want one line containing %q", cmd, table, code, errOut, want)
			}
			t.Logf("sink %s: %s", cmd, strings.TrimSpace(errOut))
		}
		if !s.AtLeast(22, 2) {
			want := "delivery exactly_once needs insert_deduplication_token (ClickHouse 22.2 or newer); this server runs " + s.Version
			f("check", "events", want)
			f("run", "events", want)
			return
		}
		f("check", "bare", "table "+db+".bare has no _topic, _partition, _offset column")
		alter := "ALTER TABLE `" + db + "`.`events` MODIFY SETTING non_replicated_deduplication_window = 1000"
		f("check", "events", "run: "+alter)
		f("run", "events", "run: "+alter)
		testenv.Exec(t, ch, alter)
		code, out, errOut := sinkCmd(t, "check", "--config", config("events"))
		if code != 0 || !strings.Contains(out, "delivery: exactly_once: server and tables support it\n") {
			t.Fatalf("after the ALTER: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}

		// Materialized views downstream: one writing into a table without
		// a window, then one fed by that table (a cascade) writing into its
		// implicit inner table. Each is refused with the ALTER to run.
		testenv.Exec(t, ch,
			"CREATE TABLE "+db+".agg (id UInt64, n UInt64) ENGINE = SummingMergeTree ORDER BY id",
			"CREATE MATERIALIZED VIEW "+db+".mv TO "+db+".agg AS SELECT id, count() AS n FROM "+db+".events GROUP BY id")
		aggAlter := "ALTER TABLE `" + db + "`.`agg` MODIFY SETTING non_replicated_deduplication_window = 1000"
		f("check", "events", "materialized view "+db+".mv (on "+db+".events) writes into "+db+".agg, which has non_replicated_deduplication_window = 0, so a replayed batch would reach it twice; run: "+aggAlter)
		f("run", "events", "run: "+aggAlter)
		testenv.Exec(t, ch, aggAlter,
			"CREATE MATERIALIZED VIEW "+db+".mv2 ENGINE = MergeTree ORDER BY id AS SELECT id FROM "+db+".agg")
		var uuid string
		if err := ch.QueryRow(context.Background(), "SELECT toString(uuid) FROM system.tables WHERE database = ? AND name = 'mv2'", db).Scan(&uuid); err != nil {
			t.Fatal(err)
		}
		inner := "`" + db + "`.`.inner_id." + uuid + "`"
		f("check", "events", "materialized view "+db+".mv2 (on "+db+".agg) writes into "+db+"..inner_id."+uuid+", which has non_replicated_deduplication_window = 0")
		innerAlter := "ALTER TABLE " + inner + " MODIFY SETTING non_replicated_deduplication_window = 1000"
		f("check", "events", "run: "+innerAlter)
		testenv.Exec(t, ch, innerAlter)
		code, out, errOut = sinkCmd(t, "check", "--config", config("events"))
		wantView := "route: view " + db + ".mv on " + db + ".events writes into table " + db + ".agg (SummingMergeTree): non_replicated_deduplication_window = 1000 (table setting)"
		if code != 0 || !strings.Contains(out, wantView) || !strings.Contains(out, "delivery: exactly_once: server and tables support it\n") {
			t.Fatalf("after the views' ALTERs: exit %d\nstdout %s\nstderr %s\nwant a line %q", code, out, errOut, wantView)
		}
	})
}

// TestCheckExactlyOnceDLQTableOn26: with delivery exactly_once the
// dead-letter table is checked like a target: one the user created without
// a deduplication window is refused by `sink check` in one line with the
// ALTER TABLE to run, and passes after it.
func TestCheckExactlyOnceDLQTableOn26(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 1)
	s := testenv.Server26(t)
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	testenv.Exec(t, ch,
		"CREATE TABLE "+db+".events (id UInt64, _topic String, _partition Int32, _offset Int64) ENGINE = MergeTree ORDER BY id SETTINGS non_replicated_deduplication_window = 1000",
		"CREATE TABLE "+db+".events_dead (_topic String, _partition Int32, _offset Int64, value String, error String) ENGINE = MergeTree ORDER BY (_topic, _partition, _offset)")
	cfg := writeConfig(t, fmt.Sprintf(`
name: checkeodlq
delivery: exactly_once
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: events}]
errors: {tolerance: all, dlq_table: events_dead}
http: {listen: ""}
`, brokers[0], topic, s.Addr, db, topic))
	alter := "ALTER TABLE `" + db + "`.`events_dead` MODIFY SETTING non_replicated_deduplication_window = 1000"
	code, _, errOut := sinkCmd(t, "check", "--config", cfg)
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "table "+db+".events_dead has non_replicated_deduplication_window = 0") || !strings.Contains(errOut, "run: "+alter) {
		t.Fatalf("sink check: exit %d, stderr %q; want one line refusing %s.events_dead with %q", code, errOut, db, alter)
	}
	testenv.Exec(t, ch, alter)
	code, out, errOut := sinkCmd(t, "check", "--config", cfg)
	if code != 0 || !strings.Contains(out, "delivery: exactly_once: server and tables support it\n") {
		t.Fatalf("after the ALTER: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}
