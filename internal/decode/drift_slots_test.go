package decode

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/decode/drift"
	"sink/internal/route"
)

// appendJSON appends each JSON value with a plan whose only column is id.
func appendJSON(t *testing.T, p *Plan, blk *column.Block, values ...string) {
	t.Helper()
	for _, v := range values {
		if err := p.Append(blk, &kgo.Record{Value: []byte(v)}); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
}

func idPlan(t *testing.T, accept func(string) bool) (*Plan, *column.Block) {
	t.Helper()
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(Policy{Unmapped: accept})
	return p, p.NewBlock()
}

// TestUnmappedNamesStorable: a name is kept only when it is 1 to
// MaxFieldName bytes of UTF-8 without control characters; any other is
// counted as overflow and never handed out by name.
func TestUnmappedNamesStorable(t *testing.T) {
	for _, tc := range []struct {
		key  string // as written in the JSON text
		name string // as unescaped, when kept
	}{
		{`a b`, "a b"},
		{`é€`, "é€"},
		{strings.Repeat("x", drift.MaxFieldName), strings.Repeat("x", drift.MaxFieldName)},
		{strings.Repeat("x", drift.MaxFieldName+1), ""},
		{strings.Repeat("é", drift.MaxFieldName/2+1), ""}, // 130 bytes, 65 characters
		{``, ""},
		{`a\nb`, ""},
		{`a\u0000b`, ""},
		{"a\x7fb", ""},
		{"bad\xffname", ""},
	} {
		p, blk := idPlan(t, nil)
		appendJSON(t, p, blk, `{"id":1,"`+tc.key+`":1}`)
		got := unmappedOf(p)
		if tc.name == "" {
			if len(got) != 1 || got[drift.OverflowField].Count != 1 {
				t.Errorf("%q: got %v, want it counted as overflow only", tc.key, got)
			}
			continue
		}
		if len(got) != 1 || got[tc.name].Count != 1 {
			t.Errorf("%q: got %v, want %q counted once", tc.key, got, tc.name)
		}
	}
}

// TestUnmappedRefusedApart: names the policy refuses have slots of their
// own. Past MaxUnmappedFields of them they are overflow, and a name the
// policy accepts still gets a slot, marked accepted.
func TestUnmappedRefusedApart(t *testing.T) {
	accept := func(name string) bool { return strings.HasPrefix(name, "good") }
	p, blk := idPlan(t, accept)
	for i := range drift.MaxUnmappedFields + 10 {
		appendJSON(t, p, blk, fmt.Sprintf(`{"id":1,"junk%d":1}`, i))
	}
	appendJSON(t, p, blk, `{"id":1,"good":1}`)
	if u := p.LastUnmapped(); len(u) != 1 || u[0] == nil || u[0].Name != "good" || u[0].Refused {
		t.Fatalf("LastUnmapped after good: %v, want good, accepted", u)
	}
	got := unmappedOf(p)
	if len(got) != drift.MaxUnmappedFields+2 || got[drift.OverflowField].Count != 10 || got["good"].Count != 1 {
		t.Fatalf("%d fields, overflow %d; want %d refused, good, and 10 overflow", len(got)-1, got[drift.OverflowField].Count, drift.MaxUnmappedFields)
	}
	for name, u := range got {
		if name != "good" && name != drift.OverflowField && !u.Refused {
			t.Errorf("%s: not marked refused", name)
		}
	}
}

// TestUnmappedIdleFreed: a full kind frees the slot of a field counted in
// neither the current period (since the last TakeUnmapped) nor the one
// before; a field counted in the last period keeps its slot.
func TestUnmappedIdleFreed(t *testing.T) {
	p, blk := idPlan(t, nil)
	for i := range drift.MaxUnmappedFields - 1 {
		appendJSON(t, p, blk, fmt.Sprintf(`{"id":1,"old%d":1}`, i))
	}
	appendJSON(t, p, blk, `{"id":1,"live":1}`)
	unmappedOf(p)
	appendJSON(t, p, blk, `{"id":1,"new0":1}`) // full, and none idle yet
	if u := p.LastUnmapped(); len(u) != 0 {
		t.Fatalf("new0 kept while every field was counted in the last period: %v", u)
	}
	appendJSON(t, p, blk, `{"id":1,"live":2}`)
	unmappedOf(p) // the old fields were not counted in this period: idle now
	for i := 1; i <= 3; i++ {
		appendJSON(t, p, blk, fmt.Sprintf(`{"id":1,"new%d":1}`, i))
		if u := p.LastUnmapped(); len(u) != 1 || u[0] == nil {
			t.Fatalf("new%d: not kept although idle fields hold slots: %v", i, u)
		}
	}
	appendJSON(t, p, blk, `{"id":1,"live":3}`)
	got := unmappedOf(p)
	if got["live"].Count != 1 || got["new1"].Count != 1 || got["new3"].Count != 1 {
		t.Fatalf("after freeing: %v; want live, new1..new3 counted once", got)
	}
	if got["live"].New() {
		t.Error("live was made again: a field counted in the last period lost its slot")
	}
}

// TestUnmappedSchemaFieldsRebound: a schema's fields that found the slots
// full are counted as overflow, and get slots once fields of an older
// schema are idle; no count of them is lost meanwhile.
func TestUnmappedSchemaFieldsRebound(t *testing.T) {
	var fields []string
	rec := map[string]any{"id": int64(1)}
	for i := range drift.MaxUnmappedFields {
		name := fmt.Sprintf("f%02d", i)
		fields = append(fields, `{"name":"`+name+`","type":"int"}`)
		rec[name] = int32(i)
	}
	old := `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},` + strings.Join(fields, ",") + `]}`
	const next = `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"city","type":"string"}]}`
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, old)
	reg.add(2, sr.TypeAvro, next)
	p, err := Compile(route.Avro, []chschema.ColumnSchema{{Name: "id", Type: "Int64"}}, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	add := func(id int, schema string, v map[string]any) {
		t.Helper()
		if err := p.Append(blk, &kgo.Record{Value: avroFrame(t, id, schema, v)}); err != nil {
			t.Fatal(err)
		}
	}
	add(1, old, rec)
	add(2, next, map[string]any{"id": int64(2), "city": "x"})
	if got := unmappedOf(p); got[drift.OverflowField].Count != 1 || got["city"].Count != 0 {
		t.Fatalf("with every slot counted: %v; want city as overflow", got)
	}
	add(2, next, map[string]any{"id": int64(3), "city": "y"})
	unmappedOf(p) // the old schema's fields idle from here
	add(2, next, map[string]any{"id": int64(4), "city": "z"})
	got := unmappedOf(p)
	if got["city"].Count != 1 || got[drift.OverflowField].Count != 0 || got["city"].Schema == nil {
		t.Fatalf("after the old fields went idle: %v; want city counted by name, with its schema type", got)
	}
}
