package decode

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/decode/drift"
)

func unmappedOf(p *Plan) map[string]drift.UnmappedField {
	out := map[string]drift.UnmappedField{}
	p.TakeUnmapped(func(f *drift.UnmappedField) { out[f.Name] = *f }, func(n uint64) {
		out[drift.OverflowField] = drift.UnmappedField{Name: drift.OverflowField, Count: n}
	})
	return out
}

func TestUnmappedFieldsCounted(t *testing.T) {
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "n", Type: "String"}}, map[string]string{"n": "a.b"})
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for i, v := range []string{
		`{"id":1,"a":{"b":"x"}}`,            // every field taken
		`{"id":2,"a":{"b":"x"},"extra":1}`,  // one new field
		`{"id":3,"extra":2.5,"tags":["a"]}`, // a missing mapped field and two new ones
		`{"id":4,"extra":"` + strings.Repeat("x", 100) + `"}`,
		`{"id":"bad","zzz":1}`, // fails to decode: not counted
	} {
		_ = p.Append(blk, &kgo.Record{Value: []byte(v), Offset: int64(i)})
	}
	got := unmappedOf(p)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if fmt.Sprint(keys) != "[extra tags]" {
		t.Fatalf("unmapped fields %v, want [extra tags]", keys)
	}
	e := got["extra"]
	if e.Count != 3 || e.Example != "1" || e.Type.Kind != drift.FieldString || !e.New() {
		t.Errorf("extra: %+v (count 3, example 1, merged int+float+string = string, new)", e)
	}
	if tg := got["tags"]; tg.Count != 1 || tg.Example != `["a"]` || tg.Type.String() != "array(string)" {
		t.Errorf("tags: %+v", tg)
	}
	// Counts reset; the field is no longer new.
	_ = p.Append(blk, &kgo.Record{Value: []byte(`{"id":5,"tags":[]}`)})
	again := unmappedOf(p)
	if len(again) != 1 || again["tags"].Count != 1 || again["tags"].New() {
		t.Errorf("after take: %+v", again)
	}
	if len(unmappedOf(p)) != 0 {
		t.Error("nothing appended, yet fields reported")
	}
}

func TestUnmappedFieldsBounded(t *testing.T) {
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for i := 0; i < drift.MaxUnmappedFields+10; i++ {
		if err := p.Append(blk, &kgo.Record{Value: fmt.Appendf(nil, `{"id":1,"f%d":1}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := unmappedOf(p)
	if len(got) != drift.MaxUnmappedFields+1 || got[drift.OverflowField].Count != 10 {
		t.Errorf("%d fields tracked, overflow %d; want %d and 10", len(got)-1, got[drift.OverflowField].Count, drift.MaxUnmappedFields)
	}
}

func TestUnmappedDebeziumImage(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "_version", Type: "UInt64"}, {Name: "_deleted", Type: "UInt8"}}
	p, err := Compile("debezium-json", cols, map[string]string{"_version": "$version", "_deleted": "$deleted"})
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	v := `{"op":"c","after":{"id":1,"email":"a@b"},"source":{"lsn":5},"ts_ms":1}`
	if err := p.Append(blk, &kgo.Record{Value: []byte(v)}); err != nil {
		t.Fatal(err)
	}
	got := unmappedOf(p)
	if len(got) != 1 || got["email"].Count != 1 || got["email"].Example != `"a@b"` {
		t.Errorf("debezium unmapped: %+v, want email once", got)
	}
}

// TestUnmappedNoAllocs pins the cost: a record with a field already seen
// counts it without allocating, like a record whose fields are all taken.
func TestUnmappedNoAllocs(t *testing.T) {
	p, err := Compile("json", InsertColumns(benchCols), nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	events := benchEvents(64) // each has "session", which no column takes
	for i := 0; i < drift.InferSamples+1; i++ {
		if err := p.Append(blk, &kgo.Record{Value: events[i%len(events)]}); err != nil {
			t.Fatal(err)
		}
	}
	rec := &kgo.Record{Value: events[0]}
	allocs := testing.AllocsPerRun(1000, func() {
		if blk.Rows() > 5000 {
			blk.Reset()
		}
		_ = p.Append(blk, rec)
	})
	if allocs > 0.05 {
		t.Errorf("%.2f allocations per record with an unmapped field, want 0", allocs)
	}
	if got := unmappedOf(p)["session"].Count; got < 1000 {
		t.Errorf("session counted %d times, want at least 1000", got)
	}
}

// FuzzUnmappedAppend: any record value, appended by a plan, never panics,
// and the unmapped fields it reports are never a field a column reads
// (escaped keys included: "\u0069d" is id).
func FuzzUnmappedAppend(f *testing.F) {
	for _, s := range []string{`{"id":1,"x":2}`, `{"\u0069d":1,"y":[1,{"z":null}]}`, `{"id":1,"id":2,"x":1}`, `{"s":"","":1}`, `[1]`, `{"a":`} {
		f.Add([]byte(s))
	}
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "s", Type: "Nullable(String)"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	blk := p.NewBlock()
	f.Fuzz(func(t *testing.T, value []byte) {
		if blk.Rows() > 1000 {
			blk.Reset()
		}
		noPanic(t, p.Append(blk, &kgo.Record{Value: value}))
		p.TakeUnmapped(func(u *drift.UnmappedField) {
			if u.Name == "id" || u.Name == "s" || u.Count == 0 {
				t.Fatalf("%q: reported %+v", value, *u)
			}
		}, nil)
	})
}

// TestUnmappedRepeatedFieldSets: the shortcut for a record with the same
// extra fields as the one before counts exactly what a walk would, as the
// set of extra fields changes, grows, shrinks and meets duplicate keys.
func TestUnmappedRepeatedFieldSets(t *testing.T) {
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for _, v := range []string{
		`{"id":1,"a":1}`, `{"id":1,"a":1}`, `{"a":1,"id":1}`, // a ×3
		`{"id":1,"b":1}`,                               // b (same count, other field)
		`{"id":1,"a":1,"b":1}`, `{"id":1,"b":1,"a":1}`, // a, b ×2
		`{"id":1,"a":1}`,              // a
		`{"id":1,"id":2,"a":1}`,       // a (the duplicate id is no field)
		`{"id":1,"a":1,"a":2}`,        // a twice in one record: counted per key
		`{"id":1}`, `{"id":1,"c":[]}`, // nothing, then c
	} {
		if err := p.Append(blk, &kgo.Record{Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	got := unmappedOf(p)
	want := map[string]uint64{"a": 9, "b": 3, "c": 1}
	if len(got) != len(want) {
		t.Fatalf("fields %v; want %v", got, want)
	}
	for k, n := range want {
		if got[k].Count != n {
			t.Errorf("%s counted %d; want %d", k, got[k].Count, n)
		}
	}
}

// TestLastUnmappedAndUnappend: LastUnmapped names the fields of the record
// just appended that no column reads (none for a record without any, on
// the scanned and on the tree path: an escaped key takes the tree), and
// Unappend takes that row back with its counts, leaving the block and the
// drift counts as if it had never been appended.
func TestLastUnmappedAndUnappend(t *testing.T) {
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "s", Type: "String"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(Policy{}) // count the defaults
	b := p.NewBlock()
	names := func() string {
		var out []string
		for _, u := range p.LastUnmapped() {
			out = append(out, u.Name)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	for _, tc := range []struct{ rec, want string }{
		{`{"id":1,"s":"a"}`, ""},
		{`{"id":2,"x":1,"y":"b"}`, "x,y"},
		{`{"id":3,"x":2,"y":"c"}`, "x,y"},    // the same fields again
		{`{"id":4,"\u0078":3,"s":"d"}`, "x"}, // an escaped key: the tree path
		{`{"id":5,"s":null}`, ""},
	} {
		rows, bytes := b.Rows(), b.Bytes()
		if err := p.Append(b, &kgo.Record{Value: []byte(tc.rec)}); err != nil {
			t.Fatalf("%s: %v", tc.rec, err)
		}
		if got := names(); got != tc.want {
			t.Fatalf("%s: LastUnmapped %q, want %q", tc.rec, got, tc.want)
		}
		if tc.want == "" {
			continue
		}
		p.Unappend(b)
		if b.Rows() != rows || b.Bytes() != bytes {
			t.Fatalf("%s: after Unappend %d rows, %d bytes; want %d, %d", tc.rec, b.Rows(), b.Bytes(), rows, bytes)
		}
	}
	// Only the kept rows (ids 1 and 5) are in the block and counted: the
	// taken-back ones left no unmapped count and no default behind.
	if b.Rows() != 2 || fmt.Sprint(b.ColumnData(0)) != "[1 5]" {
		t.Fatalf("block rows %d, ids %v; want 2 rows, [1 5]", b.Rows(), b.ColumnData(0))
	}
	p.TakeUnmapped(func(u *drift.UnmappedField) {
		t.Errorf("field %s counted %d times after its rows were taken back", u.Name, u.Count)
	}, nil)
	defaults := 0
	p.TakeDefaults(func(column, reason string, n uint64) { defaults += int(n) })
	if defaults != 1 { // id 5's null s (ids 2 and 3, which lack s, were taken back)
		t.Fatalf("%d defaults counted, want 1", defaults)
	}
}
