package main

import (
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
	})
}
