//go:build integration

package report_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"sink/internal/command/report"
	"sink/internal/testenv"
)

// TestQueryCountsRealInserts feeds a table a known sequence of INSERTs in
// two known minutes (query_log's event_time cannot be faked, so the test
// waits for a minute boundary between the phases) and checks the report
// finds exactly those INSERTs, rows and parts per minute, in the three
// statement shapes it must recognise, and none of the decoys. On 18.16 the
// statement text decides; on 26.9 query_log's tables column does.
func TestQueryCountsRealInserts(t *testing.T) {
	t.Parallel()
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		t.Parallel() // both servers wait for the same minute boundaries
		queryCountsRealInserts(t, s)
	})
}

func queryCountsRealInserts(t *testing.T, s testenv.Server) {
	ctx := context.Background()
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	other := s.NewDatabase(t)
	testenv.Exec(t, ch,
		"CREATE TABLE "+db+".t (id UInt64) ENGINE = MergeTree ORDER BY id",
		"CREATE TABLE "+db+".t_other (id UInt64) ENGINE = MergeTree ORDER BY id",
		"CREATE TABLE "+other+".t (id UInt64) ENGINE = MergeTree ORDER BY id")
	// Other tools' shapes go over ClickHouse's HTTP interface, as curl or a
	// JDBC driver would send them; the database parameter sets the current
	// database for unqualified names.
	httpExec := func(database, q string) {
		t.Helper()
		u := "http://" + s.HTTPAddr + "/?database=" + url.QueryEscape(database)
		resp, err := http.Post(u, "text/plain", strings.NewReader(q))
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d: %s", q, resp.StatusCode, body)
		}
	}

	native := func(rows int) { // the sink's shape: INSERT INTO `db`.`t` (`id`) and a block
		t.Helper()
		testenv.InsertSeq(t, ch, db, "t", "id", rows)
	}

	// Phase A, all within one minute: 3 INSERTs, 6 rows, plus decoys.
	if s := time.Now().Second(); s > 50 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
	since := time.Now().Add(-time.Second)
	minuteA := time.Now().Truncate(time.Minute)
	native(1)
	httpExec("default", "INSERT INTO "+db+".t VALUES (1), (2)")
	httpExec(db, "/* loader */ insert into t SELECT number FROM system.numbers LIMIT 3")
	httpExec("default", "INSERT INTO "+db+".t_other VALUES (9)")     // another table
	httpExec("default", "INSERT INTO "+other+".t VALUES (9)")        // same name, other database
	httpExec("default", "SELECT count() FROM "+db+".t WHERE id = 1") // not an INSERT
	httpExec(db, "INSERT INTO t_other SELECT id FROM t")             // reads db.t, writes another table
	if time.Now().Truncate(time.Minute) != minuteA {
		t.Fatal("phase A crossed a minute boundary; the test's timing assumption broke")
	}

	// Phase B, in the next minute: 2 INSERTs of 1,000 rows.
	split := minuteA.Add(time.Minute)
	time.Sleep(time.Until(split) + 300*time.Millisecond)
	native(1000)
	native(1000)
	until := time.Now().Add(2 * time.Second)

	// 18.16 can queue an INSERT's query_log row after the client has its
	// answer, so a flush right after may miss it (and, under load, a
	// part_log row the same way): ask again (a few seconds at most) until
	// phase B's INSERTs and parts are there. The assertions below stay
	// exact.
	var r report.Report
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var err error
		r, err = report.Query(ctx, ch, report.Options{
			Target: report.Target{Database: db, Table: "t", DefaultDatabase: db},
			Since:  since, Until: until, Split: &split, Flush: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(r.Minutes); (n == 2 && r.Minutes[1].Inserts >= 2 && r.Minutes[1].NewParts >= 2) || time.Now().After(deadline) {
			break
		}
	}
	if !r.PartLog || len(r.Notes) != 0 {
		t.Fatalf("part_log %v, notes %q", r.PartLog, r.Notes)
	}
	wantMatch := report.MatchedByText
	if s.AtLeast(23, 2) { // the stack's 26.9
		wantMatch = report.MatchedByTables
	}
	if r.MatchedBy != wantMatch {
		t.Fatalf("INSERTs matched by %q on %s, want %q", r.MatchedBy, s.Version, wantMatch)
	}
	type want struct {
		start          time.Time
		inserts, parts int
		rows           uint64
	}
	f := func(i int, w want) {
		t.Helper()
		m := r.Minutes[i]
		if !m.Start.Equal(w.start) || m.Inserts != w.inserts || m.Rows != w.rows || m.NewParts != w.parts ||
			m.Bytes == 0 || m.P99MS < m.P50MS {
			t.Fatalf("minute %d = %+v, want %+v", i, m, w)
		}
	}
	if len(r.Minutes) != 2 {
		t.Fatalf("%d minutes, want 2: %+v", len(r.Minutes), r.Minutes)
	}
	f(0, want{minuteA, 3, 3, 6})
	f(1, want{split, 2, 2, 2000})
	if r.Before.Inserts != 3 || r.After.Inserts != 2 || r.Before.RowsPerInsert.Mean != 2 || r.After.RowsPerInsert.Mean != 1000 ||
		r.Change.RowsPerInsert != 500 || r.Change.InsertsPerMin != float64(2)/3 {
		t.Fatalf("before %+v\nafter %+v\nchange %+v", *r.Before, *r.After, *r.Change)
	}

	// With the default database elsewhere, the unqualified INSERT is not
	// attributed to db.t where only the statement text tells (18.16); where
	// query_log records the client's current database, it still is.
	r, err := report.Query(ctx, ch, report.Options{
		Target: report.Target{Database: db, Table: "t", DefaultDatabase: "default"},
		Since:  since, Until: until,
	})
	if err != nil {
		t.Fatal(err)
	}
	wantInserts, wantRows := 4, uint64(2003)
	if r.MatchedBy == report.MatchedByTables {
		wantInserts, wantRows = 5, 2006
	}
	if r.Total.Inserts != wantInserts || r.Total.Rows != wantRows {
		t.Fatalf("DefaultDatabase default, matched by %s: %d inserts, %d rows; want %d, %d",
			r.MatchedBy, r.Total.Inserts, r.Total.Rows, wantInserts, wantRows)
	}

	// A range with nothing in it says so. (Not the hour before the test:
	// an unqualified INSERT INTO t from anyone, into any database, counts
	// for DefaultDatabase.t, which is the documented limit of the rule.)
	r, err = report.Query(ctx, ch, report.Options{
		Target: report.Target{Database: db, Table: "t", DefaultDatabase: db},
		Since:  time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2001, 1, 2, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Minutes) != 0 || len(r.Notes) != 1 {
		t.Fatalf("empty range: %d minutes %+v, notes %q", len(r.Minutes), r.Minutes, r.Notes)
	}
}
