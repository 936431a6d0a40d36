package tables

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sink/internal/chschema"
	"sink/internal/chtable"
)

// A DEFAULT column left to the server is logged once per table, column
// and reason, saying the records' values for it are not inserted; a column
// the INSERT names, or one whose default was computed, is not logged.
func TestUnfilledDefaultLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	c := &Catalog{log: zerolog.New(&buf)}
	schema := func(why string) []chschema.ColumnSchema {
		return []chschema.ColumnSchema{{Name: "id", Type: "Int64"},
			{Name: "tier", Type: "Int32", DefaultKind: "DEFAULT", DefaultExpr: "7", Default: "7"},
			{Name: "at", Type: "DateTime", DefaultKind: "DEFAULT", DefaultExpr: "now()", DefaultWhy: why},
			{Name: "mapped", Type: "Int64", DefaultKind: "DEFAULT", DefaultExpr: "id * 2", DefaultWhy: "reads id"}}
	}
	insert := func(s []chschema.ColumnSchema) []chschema.ColumnSchema {
		return []chschema.ColumnSchema{s[0], s[1], s[3]}
	}
	s1 := schema("it calls now, which is not deterministic")
	c.noteUnfilled(chtable.NewTable("db", "t", s1, insert(s1)))
	c.noteUnfilled(chtable.NewTable("db", "t", s1, insert(s1)))
	s2 := schema("another reason")
	c.noteUnfilled(chtable.NewTable("db", "t", s2, insert(s2)))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines; want 2 (one per reason):\n%s", len(lines), buf.String())
	}
	for i, why := range []string{"it calls now, which is not deterministic", "another reason"} {
		for _, want := range []string{`"column":"at"`, `"table":"db.t"`, "not inserted", why} {
			if !strings.Contains(lines[i], want) {
				t.Errorf("line %d %s: no %q", i, lines[i], want)
			}
		}
	}
}
