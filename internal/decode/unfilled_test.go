package decode

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
)

// TestUnfilledPerColumn: a column is unfilled in a row whose record gives
// it no value (missing or null), Nullable or not; a DEFAULT expression's
// column is not counted; a failed or taken-back row is not counted; the
// source named is the one the route reads.
func TestUnfilledPerColumn(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "user_id", Type: "String"},
		{Name: "note", Type: "Nullable(String)"}, {Name: "who", Type: "String"},
		{Name: "d", Type: "String", DefaultKind: "DEFAULT", DefaultExpr: "'x'", Default: `"x"`}}
	p, err := Compile("json", cols, map[string]string{"who": "a.b"})
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(Policy{})
	blk := p.NewBlock()
	for _, v := range []string{`{"id": 1, "userId": "u", "a": {"b": "w"}}`, `{"id": 2, "userId": "u", "note": null}`,
		`{"id": 3, "userId": "u", "note": "n", "a": {"b": null}}`, `{"id": "bad"}`} {
		_ = p.Append(blk, &kgo.Record{Value: []byte(v)})
	}
	if err := p.Append(blk, &kgo.Record{Value: []byte(`{"id": 4}`)}); err != nil {
		t.Fatal(err)
	}
	p.Unappend(blk)
	got := map[string]string{}
	p.TakeUnfilled(func(u Unfilled) { got[u.Column] = fmt.Sprintf("%s %d/%d", u.Source, u.Rows, u.Of) })
	want := map[string]string{"user_id": "user_id 3/3", "note": "note 2/3", "who": "a.b 2/3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("unfilled %v; want %v", got, want)
	}
	p.TakeUnfilled(func(u Unfilled) { t.Fatalf("counts not reset: %+v", u) })
}
