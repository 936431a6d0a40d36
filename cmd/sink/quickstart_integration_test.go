//go:build integration

package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/internal/testenv"
)

// readmeQuickStart returns the README's quick start: the five-key config,
// the CREATE TABLE it expects, the example record, and the schema.create
// routes, as the README writes them.
func readmeQuickStart(t *testing.T) (config, ddl, record, create string) {
	t.Helper()
	section := testenv.DocSection(t, "../../README.md", "Quick start: five keys")
	blocks := regexp.MustCompile("(?s)```(yaml|sql)\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 3 || blocks[0][1] != "yaml" || blocks[1][1] != "sql" || blocks[2][1] != "yaml" {
		t.Fatalf("the quick start's blocks are not yaml, sql, yaml: %q", blocks)
	}
	rec := regexp.MustCompile("`(\\{\"id\".*?\\})`").FindStringSubmatch(section)
	if rec == nil {
		t.Fatal("the quick start shows no example record")
	}
	return blocks[0][2], blocks[1][2], rec[1], blocks[2][2]
}

// TestReadmeQuickStart runs the README's quick start on both servers: its
// five-key config, as written but for the names of the topic and the
// servers' addresses (and a database of the test's own, from the
// environment), passes check and loads the README's record into the README's
// table; then its schema.create routes create the table from the records.
func TestReadmeQuickStart(t *testing.T) {
	cfg, ddl, rec, create := readmeQuickStart(t)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		brokers := testenv.Kafka(t)
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		t.Setenv("SINK_CLICKHOUSE__DATABASE", db)
		named := func(text, topic string) string {
			text = strings.ReplaceAll(text, "events", topic)
			text = strings.ReplaceAll(text, "127.0.0.1:9092", brokers[0])
			return strings.ReplaceAll(text, "127.0.0.1:9000", s.Addr)
		}

		topic := testenv.NewTopic(t, 2)
		testenv.Exec(t, ch, strings.Replace(named(ddl, topic), "CREATE TABLE "+topic, "CREATE TABLE "+db+"."+topic, 1))
		records := make([]string, 50)
		for i := range records {
			records[i] = strings.Replace(rec, `"id": 1`, fmt.Sprintf(`"id": %d`, i+1), 1)
		}
		testenv.Produce(t, topic, records...)
		path := writeConfig(t, named(cfg, topic)+"http: {listen: \"\"}\n")
		if code, out, errOut := sinkCmd(t, "check", "--config", path); code != 0 || !strings.Contains(out, "check: ok") {
			t.Fatalf("check of the README's config: exit %d\n%s\n%s", code, out, errOut)
		}
		r := startSink(t, path)
		waitRows(t, r, ch, db+"."+topic, 50)
		if code := r.stop(t); code != 0 {
			t.Fatalf("sink exit %d; log:\n%s", code, r.stderr.String())
		}
		var ids, users, actions uint64
		var at time.Time
		q := "SELECT uniqExact(id), uniqExact(user_id), uniqExact(action), max(at) FROM " + db + "." + topic + " WHERE user_id = 'u-1' AND action = 'click'"
		if err := ch.QueryRow(context.Background(), q).Scan(&ids, &users, &actions, &at); err != nil {
			t.Fatal(err)
		}
		if ids != 50 || users != 1 || actions != 1 || !at.Equal(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)) {
			t.Errorf("rows: %d ids, %d users, %d actions, at %v; want 50, 1, 1, 2026-12-07 10:00:00 UTC", ids, users, actions, at)
		}

		// The other way: the table created from the records.
		topic2 := testenv.NewTopic(t, 1)
		testenv.Produce(t, topic2, records[:10]...)
		routes := cfg[strings.Index(cfg, "routes:"):]
		withCreate := strings.Replace(cfg, routes, create, 1)
		path = writeConfig(t, named(withCreate, topic2)+"http: {listen: \"\"}\n")
		r = startSink(t, path)
		waitTable(t, r, ch, db, topic2)
		waitRows(t, r, ch, db+"."+topic2, 10)
		if code := r.stop(t); code != 0 {
			t.Fatalf("sink exit %d; log:\n%s", code, r.stderr.String())
		}
	})
}

// waitTable waits until db.table exists, failing early if the sink exits.
func waitTable(t *testing.T, r *runningSink, ch driver.Conn, db, table string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var n uint64
		q := "SELECT count() FROM system.tables WHERE database = ? AND name = ?"
		if err := ch.QueryRow(context.Background(), q, db, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		select {
		case code := <-r.code:
			r.code <- code
			t.Fatalf("sink exited with %d before creating %s.%s; log:\n%s", code, db, table, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s.%s not created within 90s; log:\n%s", db, table, r.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
