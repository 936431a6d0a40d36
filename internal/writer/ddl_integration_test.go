//go:build integration

package writer_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"sink/internal/chtable"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestAddColumnRace: eight writers add the same column to one table at the
// same moment (as sink instances evolving one table do). Every call
// succeeds (18.16 has no IF NOT EXISTS: the loser's "already exists" is a
// success once the column is there), the table gets the column once, and a
// later call finds it and runs nothing. An existing column is never
// changed: asking for another type leaves it as it is.
func TestAddColumnRace(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		ch, db := s.Conn(t), s.NewDatabase(t)
		if err := ch.Exec(ctx, "CREATE TABLE "+db+".t (id UInt64) ENGINE = MergeTree ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		const n = 8
		writers := make([]*writer.Writer, n)
		for i := range writers {
			writers[i], _ = openTable(t, s.Addr, db, "t")
		}
		info, err := writer.Probe(ctx, writers[0].Conn())
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		added := make([]bool, n)
		start := make(chan struct{})
		for i, w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, added[i], errs[i] = w.AddColumn(ctx, info, db, "t", "", "new field", "Int64")
			}()
		}
		close(start)
		wg.Wait()
		nAdded := 0
		for i, err := range errs {
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
			if added[i] {
				nAdded++
			}
		}
		if nAdded < 1 {
			t.Error("no writer reports having added the column")
		}
		schema, err := writers[0].Describe(ctx, db, "t")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range schema {
			got = append(got, c.Name+" "+c.Type)
		}
		if strings.Join(got, ", ") != "id UInt64, new field Int64" {
			t.Fatalf("columns %v; want id UInt64, new field Int64", got)
		}
		ddl, ok, err := writers[1].AddColumn(ctx, info, db, "t", "", "new field", "String")
		if err != nil || ok || ddl != "" {
			t.Fatalf("adding an existing column: %q, %v, %v; want nothing run", ddl, ok, err)
		}
		if schema, _ = writers[0].Describe(ctx, db, "t"); schema[1].Type != "Int64" {
			t.Fatalf("existing column changed to %s", schema[1].Type)
		}
		t.Logf("%d of %d concurrent ALTERs reported adding the column (IF NOT EXISTS: %v)", nAdded, n, info.AddIfNotExists())
	})
}

func TestAddColumnDDL(t *testing.T) {
	for _, tc := range []struct {
		db, table, cluster, name, typ string
		ifNotExists                   bool
		want                          string
	}{
		{"d", "t", "", "a", "Int64", false, "ALTER TABLE `d`.`t` ADD COLUMN `a` Int64"},
		{"d", "t", "", "a", "Int64", true, "ALTER TABLE `d`.`t` ADD COLUMN IF NOT EXISTS `a` Int64"},
		{"d", "t", "main", "a b", "Nullable(String)", false, "ALTER TABLE `d`.`t` ON CLUSTER `main` ADD COLUMN `a\\x20b` Nullable(String)"},
		{"d", "t", "", "x`; DROP TABLE t; --", "String", false, "ALTER TABLE `d`.`t` ADD COLUMN `x\\`;\\x20DROP\\x20TABLE\\x20t;\\x20--` String"},
	} {
		if got := chtable.AddColumnDDL(tc.db, tc.table, tc.cluster, tc.name, tc.typ, tc.ifNotExists); got != tc.want {
			t.Errorf("AddColumnDDL(%q, %q, %q, %q, %q, %v)\n got %s\nwant %s", tc.db, tc.table, tc.cluster, tc.name, tc.typ, tc.ifNotExists, got, tc.want)
		}
	}
}

// TestTruncate: the TRUNCATE of a CDC route's truncate: apply quotes every
// name, adds ON CLUSTER when a cluster is named, and empties the table on
// both servers (a name with a space and a backquote included).
func TestTruncate(t *testing.T) {
	for _, tc := range []struct{ db, table, cluster, want string }{
		{"db", "t", "", "TRUNCATE TABLE `db`.`t`"},
		{"db", "my `t`", "c1", "TRUNCATE TABLE `db`.`my\\x20\\`t\\`` ON CLUSTER `c1`"},
	} {
		if got := writer.TruncateDDL(tc.db, tc.table, tc.cluster); got != tc.want {
			t.Errorf("TruncateDDL(%q, %q, %q) = %s, want %s", tc.db, tc.table, tc.cluster, got, tc.want)
		}
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		ch, db := s.Conn(t), s.NewDatabase(t)
		if err := ch.Exec(ctx, "CREATE TABLE "+db+".`my t` (id UInt64) ENGINE = MergeTree ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		if err := ch.Exec(ctx, "INSERT INTO "+db+".`my t` SELECT number FROM system.numbers LIMIT 2"); err != nil {
			t.Fatal(err)
		}
		var n uint64
		if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".`my t`").Scan(&n); err != nil || n != 2 {
			t.Fatalf("before: %d rows, %v; want 2", n, err)
		}
		w, _ := openTable(t, s.Addr, db, "my t")
		ddl, err := w.Truncate(ctx, db, "my t", "")
		if err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
		if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".`my t`").Scan(&n); err != nil || n != 0 {
			t.Fatalf("after %s: %d rows, %v; want 0", ddl, n, err)
		}
	})
}

// TestTableEngine: the engine of a table, of a view and of a missing
// table ("") on each server, as the catalog reads them to refuse a table
// named after a topic that takes no INSERT.
func TestTableEngine(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		db := s.NewDatabase(t)
		testenv.Exec(t, s.Conn(t), "CREATE TABLE "+db+".t (id UInt64) ENGINE = MergeTree ORDER BY id",
			"CREATE VIEW "+db+".v AS SELECT id FROM "+db+".t")
		w, _ := openTable(t, s.Addr, db, "t")
		for table, want := range map[string]string{"t": "MergeTree", "v": "View", "missing": ""} {
			if got, err := w.TableEngine(ctx, db, table); err != nil || got != want {
				t.Errorf("%s: engine %q, %v; want %q", table, got, err, want)
			}
		}
	})
}
