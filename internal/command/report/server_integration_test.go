//go:build integration

package report_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"sink/internal/command/report"
	"sink/internal/testenv"
)

// TestQueryServerTotals writes INSERTs with a connector's query_ids into
// three tables (and decoys: a connector whose name starts the same, an
// INSERT with no such id) and checks the per-server view's totals and
// per-table counts against system.query_log's and system.part_log's own
// counts of those query_ids and tables, on both servers.
func TestQueryServerTotals(t *testing.T) {
	t.Parallel()
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		t.Parallel()
		ctx := context.Background()
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		for i := range 3 {
			testenv.Exec(t, ch, fmt.Sprintf("CREATE TABLE %s.t%d (id UInt64) ENGINE = MergeTree ORDER BY id", db, i))
		}
		connector := "rep-" + db
		since := time.Now().Add(-time.Second)
		n := 0
		insert := func(qid, table string, rows int) {
			t.Helper()
			n++
			q := fmt.Sprintf("INSERT INTO `%s`.`%s` SELECT number FROM system.numbers LIMIT %d", db, table, rows)
			c := ctx
			if qid != "" {
				c = clickhouse.Context(ctx, clickhouse.WithQueryID(fmt.Sprintf("%s-%d-%d-1", qid, time.Now().UnixNano(), n)))
			}
			if err := ch.Exec(c, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		mine := "sink-" + connector
		insert(mine, "t0", 10)
		insert(mine, "t0", 20)
		insert(mine, "t0", 30)
		insert(mine, "t1", 5)
		insert(mine, "t1", 5)
		insert(mine, "t2", 1)
		insert(mine+"-x", "t0", 7) // connector <name>-x
		insert("", "t1", 3)        // another client
		until := time.Now().Add(2 * time.Second)

		// The server's own counts of the connector's INSERTs and its
		// tables' new parts (18.16 may log an INSERT a moment after the
		// client has its answer: ask until all six are there).
		var logged, loggedRows, parts uint64
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			testenv.Exec(t, ch, "SYSTEM FLUSH LOGS")
			if err := ch.QueryRow(ctx, "SELECT count(), sum(written_rows) FROM system.query_log WHERE type = 2 AND event_date >= yesterday() AND event_time >= toDateTime(?) "+
				"AND match(query_id, ?)", since.Unix(), "^"+mine+"-[0-9]+-[0-9]+-[0-9]+$").Scan(&logged, &loggedRows); err != nil {
				t.Fatal(err)
			}
			if logged >= 6 || time.Now().After(deadline) {
				break
			}
		}
		if err := ch.QueryRow(ctx, "SELECT count() FROM system.part_log WHERE event_type = 1 AND event_date >= yesterday() AND event_time >= toDateTime(?) AND database = ?",
			since.Unix(), db).Scan(&parts); err != nil {
			t.Fatal(err)
		}
		if logged != 6 || loggedRows != 71 {
			t.Fatalf("query_log has %d INSERTs of %d rows with the connector's query_id, want 6 and 71", logged, loggedRows)
		}
		v, err := report.QueryServer(ctx, ch, connector, report.Options{Since: since, Until: until, Flush: true,
			Target: report.Target{DefaultDatabase: db}})
		if err != nil {
			t.Fatal(err)
		}
		tot := v.Summed.Total
		// New parts are those of the connector's tables, whoever wrote
		// them (part_log does not say): here every table of db, the
		// decoys' parts too, 8 in all.
		if uint64(tot.Inserts) != logged || tot.Rows != loggedRows || uint64(tot.NewParts) != parts || parts != 8 || !v.Summed.PartLog {
			t.Fatalf("per-server view: %d inserts, %d rows, %d new parts; query_log %d, %d; part_log %d in the database (want 8)",
				tot.Inserts, tot.Rows, tot.NewParts, logged, loggedRows, parts)
		}
		var got []string
		for _, tt := range v.Tables {
			got = append(got, fmt.Sprintf("%s:%d/%d/%d", strings.TrimPrefix(tt.Table, db+"."), tt.Inserts, tt.Rows, tt.NewParts))
		}
		// t0's and t1's parts include the decoys': 4 and 3.
		if want := "t0:3/60/4,t1:2/10/3,t2:1/1/1"; strings.Join(got, ",") != want {
			t.Fatalf("tables %s, want %s", strings.Join(got, ","), want)
		}
	})
}
