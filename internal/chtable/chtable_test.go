package chtable

import (
	"strings"
	"testing"

	"sink/internal/chschema"
)

func TestCheckColumnName(t *testing.T) {
	f := func(name string, ok bool) {
		t.Helper()
		err := CheckColumnName(name)
		if (err == nil) != ok {
			t.Fatalf("CheckColumnName(%q) = %v; want ok=%v", name, err, ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "column "+`"`) || strings.Contains(err.Error(), "\n")) {
			t.Fatalf("CheckColumnName(%q): %q is not one line naming the column", name, err)
		}
	}
	f("id", true)
	f("with space", true)
	f(`quo"te's`, true)
	f("a, b", true)
	f("VALUES", true)
	f("FORMAT JSON", true)
	f("-- comment", true)
	f("имя", true)
	f("back`tick", false)
	f(`back\slash`, false)
	f("f(x)", false)
	f("line\nbreak", false)
	f("x SETTINGS max_threads=1", false)
	f("x settings a =", false)
}

// Every INSERT names its columns as written, in backticks, after a quoted
// table; a column the driver cannot carry makes the table unsendable.
func TestNewTableUnsendable(t *testing.T) {
	tb := NewTable("db", "t (x)", nil, []chschema.ColumnSchema{{Name: "a"}, {Name: "b c"}})
	if want := "INSERT INTO `db`.`t\\x20\\x28x\\x29` (`a`, `b c`)"; tb.query != want || tb.unsendable != nil {
		t.Fatalf("query %s (%v); want %s", tb.query, tb.unsendable, want)
	}
	tb = NewTable("db", "t", nil, []chschema.ColumnSchema{{Name: "a"}, {Name: "b`c"}})
	if tb.unsendable == nil || !strings.Contains(tb.unsendable.Error(), "table db.t: column \"b`c\" cannot be inserted into") {
		t.Fatalf("unsendable = %v", tb.unsendable)
	}
}

// A cluster's local table behind t inserts into its own name with t's
// columns, and keeps t's refusal, which names t.
func TestRenamed(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "a"}, {Name: "b`c"}}
	lt := NewTable("db", "t", cols, cols).Renamed("ldb", "t_local")
	if want := "INSERT INTO `ldb`.`t_local` (`a`, `b`c`)"; lt.Query() != want || lt.FullName() != "ldb.t_local" {
		t.Fatalf("query %s (%s); want %s", lt.Query(), lt.FullName(), want)
	}
	if lt.Err() == nil || !strings.Contains(lt.Err().Error(), "table db.t: ") {
		t.Fatalf("Err() = %v; want the refusal naming db.t", lt.Err())
	}
	if len(lt.NamesAndTypes()) != 2 || lt.NamesAndTypes()[1].Name != "b`c" {
		t.Fatalf("NamesAndTypes() = %v", lt.NamesAndTypes())
	}
}
