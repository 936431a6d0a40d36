//go:build integration

package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// TestUnfilledColumn: on both servers, records whose field is userId while
// the column is user_id. check fails naming the column, the field it
// looked for and userId; with --allow-unfilled it passes; run inserts
// the rows with user_id empty, logs the warning naming userId and counts
// the batches in sink_batches_mostly_defaulted_total.
func TestUnfilledColumn(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		topic := testenv.NewTopic(t, 1)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64, user_id String) ENGINE = MergeTree ORDER BY id")
		produceJSON(t, topic, 20, func(i int) string { return fmt.Sprintf(`{"id": %d, "userId": "u-%d"}`, i, i) })
		listen := freeAddr(t)
		path := writeConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_wait: 300ms}
routes: [{topic: %q, table: events}]
http: {listen: %q}
`, testenv.UniqueName(t, "unfilled"), testenv.Kafka(t)[0], s.Addr, db, topic, listen))

		code, out, errOut := sinkCmd(t, "check", "--config", path)
		want := "column user_id: no sampled record (of 20) has a value for user_id; the records have a field userId (map it: columns: {user_id: userId})"
		if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(out, "unfilled: topic "+topic+" -> "+db+".events: "+want) {
			t.Fatalf("check: exit %d\nstdout %s\nstderr %s\nwant exit 1 and %q", code, out, errOut, want)
		}
		code, out, errOut = sinkCmd(t, "check", "--config", path, "--allow-unfilled", "other,events.user_id")
		if code != 0 || !strings.Contains(out, "(allowed by --allow-unfilled)") || !strings.Contains(out, "check: ok") {
			t.Fatalf("check --allow-unfilled: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}

		r := startSink(t, path)
		waitRows(t, r, ch, db+".events", 20)
		_, metrics := get(t, "http://"+listen+"/metrics")
		series := regexp.MustCompile(`(?m)^sink_batches_mostly_defaulted_total\{column="user_id",table="` + regexp.QuoteMeta(db) + `\.events"\} (\d+)$`).FindStringSubmatch(metrics)
		if code := r.stop(t); code != 0 {
			t.Fatalf("sink exit %d; log:\n%s", code, r.stderr.String())
		}
		if series == nil || series[1] == "0" {
			t.Errorf("no batch counted in sink_batches_mostly_defaulted_total for user_id:\n%s", grepLines(metrics, "mostly_defaulted"))
		}
		log := r.stderr.String()
		if strings.Count(log, `"similar_field":"userId"`) != 1 || !strings.Contains(log, `"column":"user_id"`) || !strings.Contains(log, "map it: columns: {user_id: userId}") {
			t.Errorf("run's log lacks one warning naming user_id and userId:\n%s", log)
		}
		var empty uint64
		if err := ch.QueryRow(t.Context(), "SELECT countIf(user_id = '') FROM "+db+".events").Scan(&empty); err != nil || empty != 20 {
			t.Errorf("rows with an empty user_id: %d (%v); want all 20", empty, err)
		}
	})
}

// grepLines returns the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
