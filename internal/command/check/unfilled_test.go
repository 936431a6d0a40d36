package check

import (
	"bytes"
	"strings"
	"testing"

	"sink/internal/decode"
	"sink/internal/tables"
)

// TestUnfilled: a column no sampled record fills fails the check, naming
// the column, the field looked for and the similar field found; one most
// records leave unfilled is printed only; --allow-unfilled accepts a
// column by name, table.column or db.table.column.
func TestUnfilled(t *testing.T) {
	col := func(c, src string, rows, of uint64, similar string) tables.UnfilledColumn {
		return tables.UnfilledColumn{Unfilled: decode.Unfilled{Column: c, Source: src, Rows: rows, Of: of}, Similar: similar}
	}
	r := tables.DriftReport{Topic: "ev", Table: "db.events", Unfilled: []tables.UnfilledColumn{
		col("note", "note", 5, 10, ""),         // half: not printed
		col("region", "geo.region", 8, 10, ""), // most: printed, no error
		col("user_id", "user_id", 10, 10, "userId"),
	}}
	var out bytes.Buffer
	err := unfilled(&out, r, Options{})
	want := "topic ev -> db.events: column user_id: no sampled record (of 10) has a value for user_id; the records have a field userId (map it: columns: {user_id: userId})"
	if err == nil || err.Error() != want+" (--allow-unfilled user_id accepts it)" {
		t.Errorf("error %v; want %q", err, want)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[0] != "unfilled: topic ev -> db.events: column region: 8 of 10 sampled records have no value for geo.region" || lines[1] != "unfilled: "+want {
		t.Errorf("printed:\n%s", out.String())
	}
	for _, allow := range []string{"user_id", "events.user_id", "db.events.user_id"} {
		out.Reset()
		if err := unfilled(&out, r, Options{AllowUnfilled: []string{"x", allow}}); err != nil || !strings.Contains(out.String(), "(allowed by --allow-unfilled)") {
			t.Errorf("--allow-unfilled %s: %v\n%s", allow, err, out.String())
		}
	}
	if err := unfilled(&out, r, Options{AllowUnfilled: []string{"other.user_id"}}); err == nil {
		t.Error("--allow-unfilled other.user_id accepted db.events.user_id")
	}
}
