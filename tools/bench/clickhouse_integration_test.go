//go:build integration

package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"sink/internal/testenv"
)

// insertStats must count exactly the INSERTs into one table, whether the
// client quotes the name (the sink, clickhouse-go) or not (clickhouse-client,
// HTTP), and not those into a table whose name it is a prefix of, on each
// server.
func TestInsertStatsAgainstClickHouse(t *testing.T) {
	testenv.EachServer(t, testInsertStatsAgainstClickHouse)
}

func testInsertStatsAgainstClickHouse(t *testing.T, s testenv.Server) {
	conn := s.Conn(t)
	db := s.NewDatabase(t)
	ch := newCH("http://" + s.HTTPAddr + "/")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	for _, tbl := range []string{"t_1", "t_10"} {
		if err := ch.exec(ctx, fmt.Sprintf("CREATE TABLE %s.%s (a UInt64) ENGINE = MergeTree ORDER BY a", db, tbl)); err != nil {
			t.Fatal(err)
		}
	}
	native := func(tbl string, rows int) { // the sink's shape
		t.Helper()
		testenv.InsertSeq(t, conn, db, tbl, "a", rows)
	}
	viaHTTP := func(tbl string, rows int) {
		t.Helper()
		body := strings.Repeat(`{"a":7}`+"\n", rows)
		resp, err := http.Post(ch.insertURL(db+"."+tbl, "JSONEachRow"), "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP insert: %s", resp.Status)
		}
	}
	native("t_1", 5)
	native("t_1", 7)
	viaHTTP("t_1", 3)
	native("t_10", 100)
	viaHTTP("t_10", 1)

	f := func(tbl string, inserts, rows, parts int64) {
		t.Helper()
		st, err := ch.insertStats(ctx, db, tbl, t0)
		if err != nil {
			t.Fatal(err)
		}
		if st.inserts != inserts || st.rows != rows || st.parts != parts {
			t.Fatalf("%s: %d inserts, %d rows, %d parts; want %d, %d, %d", tbl, st.inserts, st.rows, st.parts, inserts, rows, parts)
		}
		// tiny INSERTs: well under a CPU-second each (the kernel may count 0 for one)
		if st.queryCPU < 0 || st.queryCPU > float64(inserts) {
			t.Fatalf("%s: %d inserts used %.6f CPU-s in the server", tbl, inserts, st.queryCPU)
		}
	}
	f("t_1", 3, 15, 3)
	f("t_10", 2, 101, 2)
	f("t_2", 0, 0, 0)

	got, err := ch.insertsOf(ctx, db, "t_1", t0, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// event_time has one-second resolution: the order within a second is the server's
	slices.Sort(got)
	if fmt.Sprint(got) != "[3 5 7]" {
		t.Fatalf("insertsOf t_1 = %v, want 3, 5 and 7 rows", got)
	}
}
