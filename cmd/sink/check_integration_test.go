//go:build integration

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sink/internal/testenv"
)

// TestCheckPrintsServerFeatures: `sink check` names the server's version and
// which of the features the sink cares about it has, and each routed table's
// deduplication window, on both servers and over both protocols where the
// server speaks them; on 18.16, protocol http is refused by check and run in
// one line.
func TestCheckPrintsServerFeatures(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 1)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64) ENGINE = MergeTree ORDER BY id")
		config := func(protocol, addr string) string {
			return writeConfig(t, fmt.Sprintf(`
name: checkfeatures
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {protocol: %s, addrs: [%q], database: %s}
routes: [{topic: %q, table: events, format: json}]
http: {listen: ""}
`, brokers[0], topic, protocol, addr, db, topic))
		}
		modern := s.AtLeast(23, 2)
		yes := map[bool]string{true: "yes", false: "no"}[modern]
		// The stack's 26.9 turns async_insert on by default.
		async := map[bool]string{true: "yes, on for this user", false: "no"}[modern]
		window := "non_replicated_deduplication_window = 0 (server default): INSERT blocks are not deduplicated"
		if !modern {
			window = "INSERT blocks are not deduplicated (this server has no non_replicated_deduplication_window)"
		}
		want := func(protocol, addr string) []string {
			return []string{
				"clickhouse: " + addr + " (protocol " + protocol + ")",
				"clickhouse: server version " + s.Version,
				"clickhouse: insert deduplication tokens (setting insert_deduplication_token): " + yes,
				"clickhouse: async inserts (setting async_insert): " + async,
				"clickhouse: JSON type: " + yes,
				"clickhouse: ReplacingMergeTree is_deleted column (ClickHouse 23.2+): " + yes,
				"route: table " + db + ".events (MergeTree): " + window,
				"check: ok",
			}
		}
		f := func(protocol, addr string) {
			t.Helper()
			code, out, errOut := sinkCmd(t, "check", "--config", config(protocol, addr))
			if code != 0 {
				t.Fatalf("check over %s: exit %d\nstdout %s\nstderr %s", protocol, code, out, errOut)
			}
			t.Logf("sink check, protocol %s:\n%s", protocol, out)
			lines := strings.Split(out, "\n")
			for _, w := range want(protocol, addr) {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					t.Fatalf("check over %s: no line %q in\n%s", protocol, w, out)
				}
			}
		}
		f("native", s.Addr)
		if modern {
			f("http", s.HTTPAddr)
			return
		}
		path := config("http", s.HTTPAddr)
		refusal := "clickhouse: protocol http needs ClickHouse 23.2 or newer; " + s.HTTPAddr + " runs " + s.Version + "; use protocol: native\n"
		for cmd, wantErr := range map[string]string{"check": "sink check: " + refusal, "run": "sink: " + refusal} {
			code, _, errOut := sinkCmd(t, cmd, "--config", path)
			if code != 1 || errOut != wantErr {
				t.Fatalf("sink %s over http on %s: exit %d, stderr %q; want %q", cmd, s.Version, code, errOut, wantErr)
			}
		}
	})
}

// With schema.create: if_missing and no table, `sink check` prints the
// CREATE TABLE that run would execute, typed from the topic's records for
// that server, creates nothing, and checks the other routes as usual.
func TestCheckPrintsCreateDDL(t *testing.T) {
	brokers := testenv.Kafka(t)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		topic, other := testenv.NewTopic(t, 1), testenv.NewTopic(t, 1)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".existing (id UInt64) ENGINE = MergeTree ORDER BY id")
		produceJSON(t, topic, 20, func(i int) string { return fmt.Sprintf(`{"id":%d,"ok":true,"name":"n%d"}`, i, i) })
		path := writeConfig(t, fmt.Sprintf(`
name: checkcreate
kafka: {brokers: [%q], topics: [%q, %q]}
clickhouse: {addrs: [%q], database: %s}
routes:
  - {topic: %q, table: fresh, schema: {create: if_missing, order_by: id, partition_by: "intDiv(id, 10)"}}
  - {topic: %q, table: existing, schema: {create: if_missing, order_by: id}}
http: {listen: ""}
`, brokers[0], topic, other, s.Addr, db, topic, other))
		code, out, errOut := sinkCmd(t, "check", "--config", path)
		boolType, ts := "UInt8", "DateTime"
		if s.AtLeast(21, 12) {
			boolType = "Bool"
		}
		if s.AtLeast(20, 1) {
			ts = "DateTime64(3)"
		}
		ddl := fmt.Sprintf("create:   CREATE TABLE IF NOT EXISTS `%s`.`fresh` (`id` Int64, `ok` %s, `name` String, `_topic` String, `_partition` Int32, `_offset` Int64, `_timestamp` %s)"+
			" ENGINE = ReplacingMergeTree(`_offset`) PARTITION BY intDiv(id, 10) ORDER BY id\n", db, boolType, ts)
		for _, want := range []string{
			fmt.Sprintf("create: table %s.fresh does not exist; from 20 records sampled from topic %s, run would create it with:\n", db, topic),
			ddl,
			fmt.Sprintf("create: table %s.existing exists: schema.create has nothing to do\n", db),
			fmt.Sprintf("route: table %s.existing: INSERT names 1 of 1 columns", db),
			"check: ok\n",
		} {
			if code != 0 || !strings.Contains(out, want) {
				t.Fatalf("check: exit %d; stdout lacks %q:\n%s\nstderr:\n%s", code, want, out, errOut)
			}
		}
		var n uint64
		if err := ch.QueryRow(t.Context(), "SELECT count() FROM system.tables WHERE database = ? AND name = 'fresh'", db).Scan(&n); err != nil || n != 0 {
			t.Fatalf("check created the table (%d, %v): it must only print the DDL", n, err)
		}
	})
}

// `sink run` with schema.create on an empty topic waits for a first
// record (saying so once), and SIGTERM while it waits exits 0 with the
// table still missing.
func TestRunWaitingToCreateStopsClean(t *testing.T) {
	s := testenv.Servers(t)[0]
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 1)
	path := writeConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: fresh, schema: {create: if_missing, order_by: id}}]
http: {listen: ""}
`, testenv.UniqueName(t, "createwait"), testenv.Kafka(t)[0], topic, s.Addr, db, topic))
	r := startSink(t, path)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.stderr.String(), "waiting for the first records") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of waiting for records after 30 s; log:\n%s", r.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("SIGTERM while waiting to create the table: exit %d; log:\n%s", code, r.stderr.String())
	}
	var n uint64
	if err := s.Conn(t).QueryRow(t.Context(), "SELECT count() FROM system.tables WHERE database = ? AND name = 'fresh'", db).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the table exists (%d, %v) with no record to type it by", n, err)
	}
}

// TestCheckTruncateApply: `sink check` accepts truncate: apply for a
// single-partition topic that feeds its table alone, saying so, and
// refuses it for a topic of two partitions.
func TestCheckTruncateApply(t *testing.T) {
	brokers := testenv.Kafka(t)
	one, two := testenv.NewTopic(t, 1), testenv.NewTopic(t, 2)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".t (id Int32, _version UInt64, _deleted UInt8) ENGINE = ReplacingMergeTree(_version) ORDER BY id")
		check := func(topic string) (int, string, string) {
			return sinkCmd(t, "check", "--config", writeConfig(t, fmt.Sprintf(`
name: checktruncate
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: t, format: debezium-json, truncate: apply}]
http: {listen: ""}
`, brokers[0], topic, s.Addr, db, topic)))
		}
		code, out, errOut := check(one)
		if code != 0 || !strings.Contains(out, "route: routes[0] (table t) applies TRUNCATE events") {
			t.Fatalf("one partition: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}
		code, out, errOut = check(two)
		want := "routes[0].truncate: apply needs one partition per topic, and topic " + two + " has 2"
		if code == 0 || !strings.Contains(errOut, want) {
			t.Fatalf("two partitions: exit %d, want a refusal with %q\nstdout %s\nstderr %s", code, want, out, errOut)
		}
	})
}
