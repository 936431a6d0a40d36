package chtable

import (
	"testing"

	"sink/internal/chschema"
)

func TestNewTableQuery(t *testing.T) {
	tb := NewTable("db", "t`x", nil, []chschema.ColumnSchema{{Name: "a"}, {Name: "b c"}})
	want := "INSERT INTO `db`.`t\\`x` (`a`, `b c`)"
	if tb.query != want {
		t.Fatalf("query = %s, want %s", tb.query, want)
	}
}
