//go:build integration

package eos

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/offsets"
	"sink/internal/testenv"
)

func exec(t *testing.T, conn driver.Conn, q string) {
	t.Helper()
	if err := conn.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func countRows(t *testing.T, conn driver.Conn, q string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// insertTok inserts values with a deduplication token.
func insertTok(t *testing.T, conn driver.Conn, table, token, values string) {
	t.Helper()
	ctx := clickhouse.Context(context.Background(), clickhouse.WithSettings(clickhouse.Settings{"insert_deduplication_token": token}))
	if err := conn.Exec(ctx, "INSERT INTO "+table+" VALUES "+values); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// TestTokenSemanticsOn26 pins what the design relies on: a repeated token
// is dropped per table partition whatever the row order, another token is
// not, and a window of 0 deduplicates nothing. (18.16 has no tokens.)
func TestTokenSemanticsOn26(t *testing.T) {
	s := testenv.Server26(t)
	conn := s.Conn(t)
	db := s.NewDatabase(t)
	tbl := db + ".t"
	exec(t, conn, "CREATE TABLE "+tbl+" (k UInt32, p UInt8, _topic String, _partition Int32, _offset Int64) ENGINE = MergeTree PARTITION BY p ORDER BY k SETTINGS non_replicated_deduplication_window = 100")
	insertTok(t, conn, tbl, "A", "(1,1,'a',0,1),(2,2,'a',0,2),(3,3,'a',1,3)")
	insertTok(t, conn, tbl, "A", "(3,3,'a',1,3),(1,1,'a',0,1),(2,2,'a',0,2)")
	if n := countRows(t, conn, "SELECT count() FROM "+tbl); n != 3 {
		t.Fatalf("same token, rows reordered, 3 table partitions: %d rows, want 3", n)
	}
	insertTok(t, conn, tbl, "A", "(4,4,'a',1,4),(1,1,'a',0,1)")
	if n := countRows(t, conn, "SELECT count() FROM "+tbl); n != 4 {
		t.Fatalf("same token with a row in a new table partition: %d rows, want 4 (per-partition dedup)", n)
	}
	insertTok(t, conn, tbl, "B", "(1,1,'a',0,1)")
	if n := countRows(t, conn, "SELECT count() FROM "+tbl); n != 5 {
		t.Fatalf("another token: %d rows, want 5", n)
	}
	// Deleting the rows does not make the table forget the token; setting
	// the window to 0 and back does (so does TRUNCATE).
	exec(t, conn, "ALTER TABLE "+tbl+" DELETE WHERE 1 SETTINGS mutations_sync = 2")
	insertTok(t, conn, tbl, "B", "(1,1,'a',0,1)")
	if n := countRows(t, conn, "SELECT count() FROM "+tbl); n != 0 {
		t.Fatalf("a token repeated after its rows were deleted: %d rows, want 0 (still remembered)", n)
	}
	exec(t, conn, "ALTER TABLE "+tbl+" MODIFY SETTING non_replicated_deduplication_window = 0")
	exec(t, conn, "ALTER TABLE "+tbl+" MODIFY SETTING non_replicated_deduplication_window = 100")
	insertTok(t, conn, tbl, "B", "(1,1,'a',0,1)")
	if n := countRows(t, conn, "SELECT count() FROM "+tbl); n != 1 {
		t.Fatalf("the token after the window went to 0 and back: %d rows, want 1 (forgotten)", n)
	}
	exec(t, conn, "TRUNCATE TABLE "+tbl)
	insertTok(t, conn, tbl, "B", "(1,1,'a',0,1)")
	if n := countRows(t, conn, "SELECT count() FROM "+tbl); n != 1 {
		t.Fatalf("the token after TRUNCATE: %d rows, want 1 (forgotten)", n)
	}
	exec(t, conn, "CREATE TABLE "+db+".z (k UInt32) ENGINE = MergeTree ORDER BY k SETTINGS non_replicated_deduplication_window = 0")
	insertTok(t, conn, db+".z", "A", "(1)")
	insertTok(t, conn, db+".z", "A", "(1)")
	if n := countRows(t, conn, "SELECT count() FROM "+db+".z"); n != 2 {
		t.Fatalf("window 0: %d rows, want 2 (no deduplication)", n)
	}
}

// TestMaterializedViewExactOn26: a repeated token reaches a materialized
// view's target table unless that table has a window of its own.
func TestMaterializedViewExactOn26(t *testing.T) {
	s := testenv.Server26(t)
	conn := s.Conn(t)
	db := s.NewDatabase(t)
	exec(t, conn, "CREATE TABLE "+db+".t (p UInt8) ENGINE = MergeTree ORDER BY p SETTINGS non_replicated_deduplication_window = 100")
	for _, w := range []int{0, 100} {
		agg := db + ".agg" + strconv.Itoa(w)
		exec(t, conn, "CREATE TABLE "+agg+" (p UInt8, n UInt64) ENGINE = SummingMergeTree ORDER BY p SETTINGS non_replicated_deduplication_window = "+strconv.Itoa(w))
		exec(t, conn, "CREATE MATERIALIZED VIEW "+db+".mv"+strconv.Itoa(w)+" TO "+agg+" AS SELECT p, count() AS n FROM "+db+".t GROUP BY p")
	}
	insertTok(t, conn, db+".t", "A", "(1),(2),(3)")
	insertTok(t, conn, db+".t", "A", "(3),(2),(1)")
	if n := countRows(t, conn, "SELECT count() FROM "+db+".t"); n != 3 {
		t.Fatalf("target: %d", n)
	}
	if n := countRows(t, conn, "SELECT sum(n) FROM "+db+".agg100"); n != 3 {
		t.Fatalf("view target with a window: sum %d, want 3", n)
	}
	if n := countRows(t, conn, "SELECT sum(n) FROM "+db+".agg0"); n != 6 {
		t.Fatalf("view target without a window: sum %d, want 6 (the repeat reaches it)", n)
	}
}

// TestPresentOn26 folds the offsets a table holds into spans.
func TestPresentOn26(t *testing.T) {
	s := testenv.Server26(t)
	conn := s.Conn(t)
	db := s.NewDatabase(t)
	tbl := "`" + db + "`.`t`"
	exec(t, conn, "CREATE TABLE "+tbl+" (_topic LowCardinality(String), _partition Int32, _offset Int64) ENGINE = MergeTree ORDER BY (_topic, _partition, _offset)")
	exec(t, conn, "INSERT INTO "+tbl+" VALUES ('a',0,0),('a',0,1),('a',0,2),('a',0,2),('a',0,5),('a',0,7),('a',0,8),('a',1,3),('b',0,4)")
	f := func(from, to int64, want []Span) {
		t.Helper()
		got, err := Present(context.Background(), conn, tbl, offsets.TP{Topic: "a", Partition: 0}, from, to)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Present(a[0], %d, %d) = %v, %v; want %v", from, to, got, err, want)
		}
	}
	f(0, -1, []Span{{0, 2}, {5, 5}, {7, 8}})
	f(1, 8, []Span{{1, 2}, {5, 5}, {7, 7}})
	f(9, -1, nil)
}

// TestReadRanges reads exact ranges of two partitions back from Kafka.
func TestReadRanges(t *testing.T) {
	topic := testenv.NewTopic(t, 2)
	cl := testenv.KafkaClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p0, p1 := offsets.TP{Topic: topic, Partition: 0}, offsets.TP{Topic: topic, Partition: 1}
	got, err := ReadRanges(ctx, []kgo.Opt{kgo.SeedBrokers(testenv.Kafka(t)...)}, []Range{{p0, 2, 4}, {p1, 9, 9}}, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	vals := func(rs []*kgo.Record) (out []string) {
		for _, r := range rs {
			out = append(out, strconv.FormatInt(r.Offset, 10)+"="+string(r.Value))
		}
		return out
	}
	if g := vals(got[p0]); !reflect.DeepEqual(g, []string{"2=4", "3=6", "4=8"}) {
		t.Fatalf("p0: %v", g)
	}
	if g := vals(got[p1]); !reflect.DeepEqual(g, []string{"9=19"}) {
		t.Fatalf("p1: %v", g)
	}
	// a range past the end is an error within the timeout, not a hang
	if _, err := ReadRanges(ctx, []kgo.Opt{kgo.SeedBrokers(testenv.Kafka(t)...)}, []Range{{p0, 5, 50}}, 2*time.Second); err == nil {
		t.Fatal("unreachable range: no error")
	}
}
