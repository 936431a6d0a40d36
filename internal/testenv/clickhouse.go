package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// chOptions are the connection options for a test server: user default without
// a password, as testdata/clickhouse/users.xml and testdata/clickhouse26/users.xml
// configure it.
func chOptions(addr string) *clickhouse.Options {
	return &clickhouse.Options{
		Protocol:    clickhouse.Native,
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Database: "default", Username: "default"},
		DialTimeout: 5 * time.Second,
	}
}

// Exec runs each statement on conn in order (the setup of a test: CREATE
// TABLE, ALTER, INSERT … VALUES) and fails the test, naming the statement,
// at the first error.
func Exec(t testing.TB, conn driver.Conn, statements ...string) {
	t.Helper()
	for _, q := range statements {
		if err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// InsertSeq inserts the numbers 0 … rows-1 into one UInt64 column of
// db.table as one INSERT over the native protocol, in the shape the sink
// sends (INSERT INTO `db`.`table` (`column`) and a block), and fails the
// test on an error.
func InsertSeq(t testing.TB, conn driver.Conn, db, table, column string, rows int) {
	t.Helper()
	b, err := conn.PrepareBatch(context.Background(), "INSERT INTO `"+db+"`.`"+table+"` (`"+column+"`)")
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := b.Append(uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}
