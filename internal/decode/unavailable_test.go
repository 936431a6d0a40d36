package decode

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/route"
)

func TestIsPlaceholder(t *testing.T) {
	f := func(jsonValue string, want bool) {
		t.Helper()
		var st column.State
		var in column.Value
		st.FromJSON(fastjson.MustParse(jsonValue), &in)
		if got := isPlaceholder(&in); got != want {
			t.Errorf("isPlaceholder(%s) = %v, want %v", jsonValue, got, want)
		}
	}
	bytes := "["
	for i := 0; i < len(Placeholder); i++ {
		if i > 0 {
			bytes += ","
		}
		bytes += jsonNumber(int(Placeholder[i]))
	}
	bytes += "]"
	f(`"__debezium_unavailable_value"`, true)                                                                           // text, varchar, json, jsonb
	f(`"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="`, true)                                                               // bytea (base64)
	f(`["__debezium_unavailable_value"]`, true)                                                                         // text[]
	f(bytes, true)                                                                                                      // int[]: the text's bytes
	f(`"__debezium_unavailable_value "`, false)                                                                         // not the placeholder
	f(`"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ"`, false)                                                                // base64 cut short
	f(`["__debezium_unavailable_value", "x"]`, false)                                                                   // a real array
	f(bytes[:strings.LastIndex(bytes, ",")]+"]", false)                                                                 // one number short
	f(`[95,95,100,101,98,101,122,105,117,109,95,117,110,97,118,97,105,108,97,98,108,101,95,118,97,108,117,102]`, false) // last byte off
	f(`null`, false)
	f(`95`, false)
	f(`{"a": "__debezium_unavailable_value"}`, false)
}

func jsonNumber(n int) string { b, _ := json.Marshal(n); return string(b) }

// toastCols is the part of the captured table the tests read: the key, a
// plain column the UPDATE changed, the four TOASTed columns it left alone.
var toastCols = []chschema.ColumnSchema{
	{Name: "id", Type: "Int32"},
	{Name: "c_text", Type: "String"},
	{Name: "big_text", Type: "String"},
	{Name: "big_jsonb", Type: "Nullable(String)"},
	{Name: "big_bytea", Type: "String"},
	{Name: "big_int_arr", Type: "Array(Nullable(Int32))"},
	{Name: "_version", Type: "UInt64"},
	{Name: "_deleted", Type: "UInt8"},
}

// toastRecords reads the UPDATE of a row whose TOASTed columns it did not
// change, as Debezium 3.6.1 wrote it from PostgreSQL 15 under REPLICA
// IDENTITY DEFAULT: with the JSON converter's schemas, then without.
func toastRecords(t *testing.T) []*kgo.Record {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "debezium", "pg15_dbz361_toast_unchanged.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []*kgo.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct{ Key, Value string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "dbz.public.types_default", Key: []byte(r.Key), Value: []byte(r.Value), Offset: int64(len(recs))})
	}
	if len(recs) != 2 {
		t.Fatalf("fixture has %d records, want 2", len(recs))
	}
	return recs
}

func TestUnavailableCellsListed(t *testing.T) {
	for _, r := range toastRecords(t) {
		p, err := Compile(route.Debezium, toastCols, nil)
		if err != nil {
			t.Fatal(err)
		}
		blk := p.NewBlock()
		if err := p.Append(blk, r); err != nil {
			t.Fatalf("Append: %v", err)
		}
		want := []Cell{{Row: 0, Col: 2}, {Row: 0, Col: 3}, {Row: 0, Col: 4}, {Row: 0, Col: 5}}
		if got := blk.Unfilled(); !reflect.DeepEqual(got, want) {
			t.Fatalf("Unfilled = %v, want %v", got, want)
		}
		keys, ver, del := blk.FillKeys()
		if !reflect.DeepEqual(keys, []int{0}) || ver != 6 || del != 7 {
			t.Fatalf("FillKeys = %v, %d, %d; want [0], 6, 7", keys, ver, del)
		}
		// Until filled, the cells hold the columns' zeros, never the placeholder.
		if got := blk.ColumnData(2).([]string)[0]; got != "" {
			t.Fatalf("big_text before Fill = %q", got)
		}
		if got := blk.ColumnData(1).([]string)[0]; got != "one updated" {
			t.Fatalf("c_text = %q, want the event's value", got)
		}

		text, seven := "the value PostgreSQL holds", int32(7)
		for _, c := range []struct {
			cell column.Cell
			v    any
		}{{want[0], text}, {want[1], &text}, {want[2], "\x00\x01"}, {want[3], []*int32{nil, &seven}}} {
			if err := blk.Fill(c.cell, c.v); err != nil {
				t.Fatalf("Fill(%v, %#v): %v", c.cell, c.v, err)
			}
		}
		if got := blk.Unfilled(); len(got) != 0 {
			t.Fatalf("Unfilled after Fill = %v", got)
		}
		if got := blk.ColumnData(2).([]string)[0]; got != text {
			t.Fatalf("big_text = %q", got)
		}
		if got := *blk.ColumnData(3).([]*string)[0]; got != text {
			t.Fatalf("big_jsonb = %q", got)
		}
		if got := blk.ColumnData(5).([][]*int32)[0]; len(got) != 2 || got[0] != nil || *got[1] != 7 {
			t.Fatalf("big_int_arr = %v", got)
		}
		if blk.Native(2) != nil {
			t.Fatal("a filled column still hands its buffer to the driver, which does not carry the filled values")
		}
		if blk.Native(1) == nil {
			t.Fatal("an unfilled String column lost its native form")
		}
		if err := blk.Fill(want[0], 7); err == nil {
			t.Fatal("Fill took an int for a String column")
		}
		if err := blk.Fill(column.Cell{Row: 1, Col: 2}, "x"); err == nil {
			t.Fatal("Fill took a row outside the block")
		}
		if err := blk.Fill(column.Cell{Row: 0, Col: 2}, nil); err == nil {
			t.Fatal("Fill took NULL for a String column")
		}
		blk.Reset()
		if len(blk.Unfilled()) != 0 {
			t.Fatal("Reset kept unfilled cells")
		}
	}
}

// TestUnavailableTakenBack: a row taken back (Unappend, or a later column
// that fails) takes its cells along.
func TestUnavailableTakenBack(t *testing.T) {
	r := toastRecords(t)[0]
	p, err := Compile(route.Debezium, toastCols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	if err := p.Append(blk, r); err != nil {
		t.Fatal(err)
	}
	if err := p.Append(blk, r); err != nil {
		t.Fatal(err)
	}
	if n := len(blk.Unfilled()); n != 8 {
		t.Fatalf("two rows: %d unfilled cells, want 8", n)
	}
	p.Unappend(blk)
	if got := blk.Unfilled(); len(got) != 4 || got[3].Row != 0 {
		t.Fatalf("after Unappend: %v", got)
	}

	// A column after the TOASTed ones that fails rolls the row back.
	bad := append(append([]chschema.ColumnSchema(nil), toastCols...), chschema.ColumnSchema{Name: "c_enum", Type: "Enum8('x' = 1)"})
	p, err = Compile(route.Debezium, bad, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk = p.NewBlock()
	if err := p.Append(blk, r); err == nil {
		t.Fatal("Append took 'happy' into Enum8('x' = 1)")
	}
	if blk.Rows() != 0 || len(blk.Unfilled()) != 0 {
		t.Fatalf("failed Append left rows=%d cells=%v", blk.Rows(), blk.Unfilled())
	}
}

// TestUnavailableInDelete: a delete's image only marks its key deleted;
// a placeholder in it is a value like any other it lacks, nothing to fill.
func TestUnavailableInDelete(t *testing.T) {
	p, err := Compile(route.Debezium, toastCols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	v := `{"before":{"id":3,"c_text":"x","big_text":"__debezium_unavailable_value"},"after":null,"op":"d","ts_ms":5,` +
		`"source":{"connector":"postgresql","lsn":77}}`
	if err := p.Append(blk, &kgo.Record{Key: []byte(`{"id":3}`), Value: []byte(v)}); err != nil {
		t.Fatal(err)
	}
	if len(blk.Unfilled()) != 0 {
		t.Fatalf("a delete listed cells to fill: %v", blk.Unfilled())
	}
	if got := blk.ColumnData(2).([]string)[0]; got != "" {
		t.Fatalf("big_text of the delete = %q, want the zero", got)
	}
}

// TestUnavailableKeyErrors: a placeholder in a record whose key cannot
// find the row is a bad record, named.
func TestUnavailableKeyErrors(t *testing.T) {
	p, err := Compile(route.Debezium, toastCols, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := `{"before":null,"after":{"id":3,"c_text":"x","big_text":"__debezium_unavailable_value"},"op":"u","ts_ms":5,` +
		`"source":{"connector":"postgresql","lsn":77}}`
	for key, want := range map[string]string{
		``:                                 "has no key",
		`{"nope":3}`:                       `key's field "nope" is no column`,
		`[1]`:                              "not an object",
		`{"id":3,`:                         "not JSON",
		`{"schema":{},"payload":{"id":3}}`: "",
	} {
		blk := p.NewBlock()
		err := p.Append(blk, &kgo.Record{Key: []byte(key), Value: []byte(v)})
		if want == "" {
			if err != nil || len(blk.Unfilled()) != 1 {
				t.Errorf("key %s: err %v, cells %v", key, err, blk.Unfilled())
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "TOASTed") {
			t.Errorf("key %q: err %v, want one saying %q", key, err, want)
		}
		if blk.Rows() != 0 || len(blk.Unfilled()) != 0 {
			t.Errorf("key %q: failed Append left rows=%d cells=%v", key, blk.Rows(), blk.Unfilled())
		}
	}
}

// TestUnavailableOldKey: the create event of a row whose primary key
// changed carries the old key in a header (as Debezium 3.6.1 writes it);
// its values are converted like the key columns, once per row.
func TestUnavailableOldKey(t *testing.T) {
	p, err := Compile(route.Debezium, toastCols, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := `{"before":null,"after":{"id":40,"c_text":"x","big_text":"__debezium_unavailable_value","big_bytea":"__debezium_unavailable_value"},"op":"c","ts_ms":5,` +
		`"source":{"connector":"postgresql","lsn":77}}`
	rec := func(hdr string) *kgo.Record {
		r := &kgo.Record{Key: []byte(`{"id":40}`), Value: []byte(v)}
		if hdr != "" {
			r.Headers = []kgo.RecordHeader{{Key: "__debezium.newkey", Value: []byte(`{"id":99}`)}, {Key: "__debezium.oldkey", Value: []byte(hdr)}}
		}
		return r
	}
	blk := p.NewBlock()
	for _, h := range []string{`{"id":4}`, ``, `{"schema":{"type":"struct"},"payload":{"id":5}}`} {
		if err := p.Append(blk, rec(h)); err != nil {
			t.Fatalf("header %q: %v", h, err)
		}
	}
	for row, want := range []any{int32(4), nil, int32(5)} {
		k, ok := blk.OldKey(row)
		if want == nil {
			if ok {
				t.Errorf("row %d: old key %v without a header", row, k)
			}
			continue
		}
		if !ok || len(k) != 1 || k[0] != want {
			t.Errorf("row %d: old key %v (%v), want [%v]", row, k, ok, want)
		}
	}
	p.Unappend(blk)
	if _, ok := blk.OldKey(2); ok {
		t.Error("Unappend kept the row's old key")
	}
	for _, h := range []string{`{"id":`, `{"other":4}`, `{"id":"four"}`} {
		if err := p.Append(blk, rec(h)); err == nil || !strings.Contains(err.Error(), "__debezium.oldkey") {
			t.Errorf("header %q: err %v, want one naming the header", h, err)
		}
	}
	if blk.Rows() != 2 {
		t.Fatalf("failed Appends left %d rows", blk.Rows())
	}
}
