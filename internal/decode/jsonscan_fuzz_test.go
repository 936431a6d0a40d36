package decode

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/decode/drift"
	"sink/internal/jsonscan"
)

// The json format reads records with its scanner (jsonscan.go); fastjson's
// tree, the way the format read every record before, is the reference.
// FuzzJSONScanDifferential feeds the same records to a plan of each kind
// and requires the same outcome: the same rows in every column, the same
// error (the same column and reason for a value that does not convert; for
// a record that is not JSON, both refusing it as invalid JSON), the same
// defaults counted and the same unmapped fields with the same counts,
// examples and types.

// scanShape is one plan shape: columns, mapping, policy.
type scanShape struct {
	name    string
	cols    []chschema.ColumnSchema
	mapping map[string]string
	policy  Policy
}

// scanShapes are the plan shapes of the package's tests, with short
// column names so that the fuzzer finds the keys: every scalar type the
// conversions treat differently, every composite (Array, Map, Tuple, JSON,
// typed JSON paths, Dynamic, Variant, a String column reading an object),
// the Nested fallbacks (n.a, and p.1 for an array of tuples), nested and
// array-index paths, and the benchmarks' tables.
func scanShapes() []scanShape {
	scalars := []chschema.ColumnSchema{
		{Name: "a", Type: "UInt64"}, {Name: "b", Type: "String"}, {Name: "c", Type: "Float64"},
		{Name: "d", Type: "Nullable(Int32)"}, {Name: "e", Type: "DateTime64(3)"}, {Name: "f", Type: "Decimal(18, 4)"},
		{Name: "g", Type: "Bool"}, {Name: "h", Type: "LowCardinality(String)"}, {Name: "i", Type: "Enum8('x' = 1, 'y' = 2)"},
		{Name: "k", Type: "UUID"}, {Name: "l", Type: "IPv4"}, {Name: "m", Type: "FixedString(3)"},
		{Name: "o", Type: "Date"}, {Name: "q", Type: "Int128"}, {Name: "r", Type: "Float32"},
		{Name: "x.y", Type: "String"}, {Name: "_offset", Type: "UInt64"},
	}
	composites := []chschema.ColumnSchema{
		{Name: "a", Type: "Array(UInt32)"}, {Name: "b", Type: "Map(String, UInt64)"},
		{Name: "c", Type: "Tuple(x UInt32, y String)"}, {Name: "d", Type: "JSON"},
		{Name: "e", Type: "JSON(n UInt32, t DateTime64(3))"}, {Name: "f", Type: "String"},
		{Name: "g", Type: "Dynamic"}, {Name: "h", Type: "Variant(String, UInt64)"},
		{Name: "n.a", Type: "Array(String)"}, {Name: "n.b", Type: "Array(UInt8)"},
		{Name: "p.1", Type: "Array(UInt8)"}, {Name: "p.2", Type: "Array(String)"},
		{Name: "s", Type: "Array(Nullable(String))"}, {Name: "t", Type: "Array(Array(Int8))"},
	}
	nested := []chschema.ColumnSchema{
		{Name: "a", Type: "String"}, {Name: "v", Type: "Nullable(UInt32)"}, {Name: "w", Type: "String"},
		{Name: "x", Type: "Float64"}, {Name: "y", Type: "Array(UInt8)"}, {Name: "z", Type: "Map(String, String)"},
		{Name: "u", Type: "JSON"}, {Name: "t", Type: "Nullable(String)"},
	}
	nestedMap := map[string]string{
		"v": "a.b", "w": "a.b.c", "x": "a.0", "y": "a.1.b", "z": "b.c", "u": "b.c.d", "t": "c.0.0",
	}
	return []scanShape{
		{name: "scalars", cols: scalars},
		{name: "scalars-strict", cols: scalars, policy: Policy{MissingBad: true, NullBad: true, TombstoneBad: true}},
		{name: "composites", cols: composites},
		{name: "nested", cols: nested, mapping: nestedMap},
		{name: "nested-strict", cols: nested, mapping: nestedMap, policy: Policy{MissingBad: true}},
		{name: "bench", cols: InsertColumns(benchCols)},
		{name: "wide", cols: wideCols()},
		{name: "bench-nested", cols: benchNestedCols, mapping: benchNestedMapping},
		{name: "wide-nested", cols: wideCols(), mapping: wideNestedMapping()},
	}
}

// compileBoth compiles shape twice: read by the scanner, and by the tree.
func compileBoth(t testing.TB, s scanShape) (scan, tree *Plan) {
	var err error
	if scan, err = Compile("json", s.cols, s.mapping); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	if tree, err = Compile("json", s.cols, s.mapping); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	tree.format.(*jsonFormat).treeOnly = true
	scan.SetPolicy(s.policy)
	tree.SetPolicy(s.policy)
	return scan, tree
}

// errorClass is what must be equal of two Append errors: a record that is
// not JSON is refused by the two readers in their own words.
func errorClass(err error) string {
	var re *RecordError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrSkip):
		return "skip: " + err.Error()
	case errors.As(err, &re):
		if re.Column == "" && strings.HasPrefix(re.Reason, "invalid JSON: ") && !strings.HasPrefix(re.Reason, "invalid JSON: want an object") {
			return "not JSON"
		}
		return fmt.Sprintf("column %q: %s", re.Column, re.Reason)
	}
	return "other: " + err.Error()
}

// renderBlock renders every column of b.
func renderBlock(b *column.Block) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "rows %d bytes %d\n", b.Rows(), b.Bytes())
	for i, c := range b.Columns() {
		sb.WriteString(c.Name + ": ")
		render(&sb, reflect.ValueOf(b.ColumnData(i)))
		sb.WriteByte('\n')
	}
	return sb.String()
}

// renderCounts renders the defaults and unmapped fields p counted.
func renderCounts(p *Plan) string {
	var lines []string
	p.TakeDefaults(func(column, reason string, n uint64) {
		lines = append(lines, fmt.Sprintf("default %s %s %d", column, reason, n))
	})
	p.TakeUnmapped(func(f *drift.UnmappedField) {
		lines = append(lines, fmt.Sprintf("unmapped %q %d %q %s new=%t", f.Name, f.Count, f.Example, f.TypeName(), f.New()))
	}, func(n uint64) { lines = append(lines, fmt.Sprintf("overflow %d", n)) })
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// recordSep splits one fuzz input into several records, so that a
// sequence of records (the unmapped fields of the record before, a
// block's later rows) is compared too.
const recordSep = "\x1e"

// diffRecords appends each record to a scanned and a tree plan of every
// shape and fails on the first difference.
func diffRecords(t *testing.T, values [][]byte) {
	for _, s := range scanShapes() {
		scan, tree := compileBoth(t, s)
		bs, bt := scan.NewBlock(), tree.NewBlock()
		for i, v := range values {
			r := kgo.Record{Topic: "t", Partition: 1, Offset: int64(i), Value: v}
			rt := r
			es, et := scan.Append(bs, &r), tree.Append(bt, &rt)
			noPanic(t, es)
			noPanic(t, et)
			if cs, ct := errorClass(es), errorClass(et); cs != ct {
				t.Fatalf("%s: record %d %q:\n scanner: %v\n    tree: %v", s.name, i, v, es, et)
			}
			if es != nil && strings.HasPrefix(es.(*RecordError).Reason, "invalid JSON") && len(es.(*RecordError).Reason) > 200 {
				t.Fatalf("%s: record %d: error text of %d bytes: %v", s.name, i, len(es.Error()), es)
			}
		}
		if rs, rt := renderBlock(bs), renderBlock(bt); rs != rt {
			t.Fatalf("%s: records %q: blocks differ:\n scanner: %s\n    tree: %s", s.name, values, rs, rt)
		}
		if cs, ct := renderCounts(scan), renderCounts(tree); cs != ct {
			t.Fatalf("%s: records %q: counts differ:\n scanner: %s\n    tree: %s", s.name, values, cs, ct)
		}
	}
}

// scanSeeds are records that reach every rule: each column type's good and
// bad values, duplicates, escapes in keys and strings, NaN and Infinity,
// the grammar's corners, deep nesting, unmapped fields.
var scanSeeds = []string{
	`{"a":1,"b":"x","c":1.5,"d":null,"e":"2024-05-17T12:00:00.123Z","f":"12.5","g":true,"h":"lc","i":"x","k":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","l":"10.0.0.1","m":"abc","o":"2024-01-02","q":"-170141183460469231731687303715884105728","r":3.25,"x.y":"dot"}`,
	`{"a":"1","c":"NaN","c":NaN,"d":"x","g":2,"i":3,"m":"abcd","f":1e400,"r":1e39}`,
	`{"c":NaN}`, `{"c":-Infinity}`, `{"c":inf}`, `{"c":nan}`, `{"c":-nan}`, `{"c":1.2.3}`, `{"c":-}`, `{"c":+1}`, `{"a":1e3,"a":2}`,
	`{"a":1,"a":2,"b":"x","b":"y","z":1,"z":2}`,
	`{"\u0061":1,"a":2}`, `{"a":2,"\u0061":1}`, `{"b":"\u00e9\ud83d\ude00\u12\uZZZZ\x","\\":1}`,
	`{"b":"\ud800","f":"\u0031"}`, `{"b":"bad utf8 \xff\xfe"}`, "{\"b\":\"ctl \x01\"}",
	`{"a":[1,2,3],"b":{"k":1,"l":2},"c":{"x":1,"y":"s"},"d":{"p":{"q":[1,{"r":2}]},"s":"t"},"e":{"n":5,"t":1715949296789,"o":{}},"f":{"z":[1,2]},"g":"s","h":42}`,
	`{"c":[7,"arr"],"d":"{\"a\":1}","e":{"n":"x"},"d":{"a":1,"a.b":2}}`,
	`{"n":[{"a":"x","b":1},{"a":"y","b":2}],"p":[[1,"u"],[2,"v"]]}`,
	`{"n":{"a":["x","y"],"b":[1,2]},"p":{"1":[1],"2":["a"]}}`,
	`{"n.a":["direct"],"n":[{"a":"ignored"}]}`,
	`{"s":[null,"x"],"t":[[1,-2],[]]}`,
	`{"a":{"b":{"c":"deep"}},"b":{"c":{"d":{"e":1}}},"c":[["x"]]}`,
	`{"a":[1.5,{"b":[1,2]}],"b":{"c":{"k":"v"}}}`,
	`{"a":{"b":7},"a":{"b":8}}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"b":1}]}`, `{"a":{"0":1}}`,
	`{"a":"x"}` + recordSep + `{"a":"y","new":1}` + recordSep + `{"a":"z","new":2.5,"other":[1]}` + recordSep + `{"new":"s","new":3}`,
	`{}`, `[]`, `null`, `"x"`, `12`, ``, ` `, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,}`, `{"a" 1}`, `{"a":1}}`, `{"a":1} x`,
	`{"a":tru}`, `{"a":nul}`, `{"a":"unterminated}`, `{"a":"esc\"}`, `{"a":[1,]}`, `{"a":[1 2]}`, "\t{\"a\":\r\n1 }\n",
	"{\"a\":1}\x00", `{"a":1e}`, `{"a":--1}`, `{"a":.5}`, `{"a":01}`,
	strings.Repeat("[", 300) + strings.Repeat("]", 300),
	`{"a":` + strings.Repeat("[", 299) + strings.Repeat("]", 299) + `}`,
	`{"a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`,
	`{"b":` + strings.Repeat(`{"b":`, 298) + `1` + strings.Repeat("}", 298) + `}`,
}

// TestJSONScanMatchesTree runs the differential check on the seeds (the
// fuzz target does on everything it finds).
func TestJSONScanMatchesTree(t *testing.T) {
	for _, s := range scanSeeds {
		diffRecords(t, bytes.Split([]byte(s), []byte(recordSep)))
	}
	for _, v := range benchEvents(20) {
		diffRecords(t, [][]byte{v})
	}
	for _, v := range wideEvents(5) {
		diffRecords(t, [][]byte{v})
	}
	diffRecords(t, benchNestedEvents(20))
	diffRecords(t, driftOrderEvents(130))
	diffRecords(t, wordEvents())
}

// wordEvents put what the scanner looks for eight bytes at a time (a
// string's '"' and '\\', escapes, control bytes, invalid UTF-8) at every
// position of an 8-byte word, in keys and in values of the columns that
// store text, convert it or skip it, and in the numbers beside them.
func wordEvents() [][]byte {
	var out [][]byte
	for _, p := range []string{`\"`, `\\`, `\u00e9`, `\ud83d\ude00`, `\n`, "\x01", "\xff", "\xc3", "é"} {
		for pre := 0; pre < 9; pre++ {
			str := strings.Repeat("s", pre) + p + strings.Repeat("t", 8-pre)
			out = append(out,
				fmt.Appendf(nil, `{"b":"%s","h":"%s","u":"%s","f":"1%s","c":%d.5,"m":"%s"}`, str, str, str, str[:pre], pre, str),
				fmt.Appendf(nil, `{"%s":1,"b":"%s"}`, str, str)) // a key with an escape is read through the tree
		}
	}
	return out
}

// driftOrderEvents are records whose unmapped fields come back in other
// orders and at other positions, sometimes repeated or missing, with now
// and then a record whose key is escaped (read through the tree): the
// drift counter's guess of where a field is must never change a count,
// before or after a field's values stop being sampled (inferSamples).
func driftOrderEvents(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		switch i % 7 {
		case 0, 1, 2:
			out[i] = fmt.Appendf(nil, `{"a":%d,"u1":"x%d","u2":%d,"b":"s"}`, i, i, i)
		case 3:
			out[i] = fmt.Appendf(nil, `{"u2":%d.5,"a":%d,"b":"s","u1":"y"}`, i, i)
		case 4:
			out[i] = fmt.Appendf(nil, `{"a":%d,"u1":1,"u1":"dup","u2":[%d]}`, i, i)
		case 5:
			out[i] = fmt.Appendf(nil, `{"a":%d,"u1":"only"}`, i)
		case 6:
			out[i] = fmt.Appendf(nil, `{"\u0061":%d,"u2":{"k":%d},"u1":null}`, i, i)
		}
	}
	return out
}

// FuzzJSONScanDifferential: the scanner and the tree agree on every input
// (records separated by recordSep), for every plan shape.
//
//	go test ./internal/decode/ -run '^$' -fuzz FuzzJSONScanDifferential -fuzztime 10m
func FuzzJSONScanDifferential(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	for _, v := range benchNestedEvents(2) {
		f.Add(v)
	}
	f.Add(wideEvents(1)[0])
	f.Add(wideNestedEvents(1)[0])
	for _, v := range wordEvents() {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		values := bytes.Split(data, []byte(recordSep))
		if len(values) > 8 {
			values = values[:8]
		}
		diffRecords(t, values)
	})
}

// FuzzJSONScan: the scanner alone accepts exactly what fastjson accepts,
// and never panics, on any bytes.
func FuzzJSONScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	for _, v := range wordEvents() {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var sc jsonscan.Scanner
		top, err := sc.Scan(data)
		var ref fastjson.Parser
		v, rerr := ref.ParseBytes(data)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("%q: scanner error %v, fastjson error %v", data, err, rerr)
		}
		if err != nil {
			return
		}
		if got := v.Type().String(); got != top {
			t.Fatalf("%q: scanner says %s, fastjson %s", data, top, got)
		}
		if top == "object" {
			o, _ := v.Object()
			if o.Len() != len(sc.Members) {
				t.Fatalf("%q: %d members, fastjson %d", data, len(sc.Members), o.Len())
			}
		}
	})
}
