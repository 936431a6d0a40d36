package writer

import (
	"testing"

	"sink/internal/decode"
)

func TestQuoteIdent(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := QuoteIdent(in); got != want {
			t.Fatalf("QuoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
	f("events", "`events`")
	f("a`b", "`a\\`b`")
	f("x` ; DROP TABLE t; --", "`x\\`\\x20;\\x20DROP\\x20TABLE\\x20t;\\x20--`")
	f(`back\slash`, "`back\\\\slash`")
	f("", "``")
	f("имя", "`имя`")
}

func TestNewTableQuery(t *testing.T) {
	tb := NewTable("db", "t`x", nil, []decode.ColumnSchema{{Name: "a"}, {Name: "b c"}})
	want := "INSERT INTO `db`.`t\\`x` (`a`, `b c`)"
	if tb.query != want {
		t.Fatalf("query = %s, want %s", tb.query, want)
	}
}
