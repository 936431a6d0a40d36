package route

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseWhen(t *testing.T) {
	f := func(format Format, spec map[string]any, want, wantErr string) {
		t.Helper()
		w, err := ParseWhen(format, spec)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("ParseWhen(%v) error %v; want one containing %q", spec, err, wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseWhen(%v): %v", spec, err)
		}
		if got := w.String(); got != want {
			t.Fatalf("ParseWhen(%v) = %s; want %s", spec, got, want)
		}
	}
	f(JSON, nil, "{}", "")
	f(JSON, map[string]any{"header.type": "order"}, "{header.type: [order]}", "")
	f(JSON, map[string]any{"key": []any{"a", "b", "a"}}, "{key: [a, b]}", "")
	f(JSON, map[string]any{"field.kind": []any{"a", 1, 2.5, true}}, "{field.kind: [a, 1, 2.5, true]}", "")
	f(JSON, map[string]any{"field.a.b": "x", "key": "k"}, "{field.a.b: [x], key: [k]}", "") // sorted
	f(JSON, map[string]any{"field": "kind", "in": []any{"a", "b"}}, "{field.kind: [a, b]}", "")
	f(JSON, map[string]any{"header": "type", "in": "order"}, "{header.type: [order]}", "")
	f(Debezium, map[string]any{"header.type": "order", "key": "k"}, "{header.type: [order], key: [k]}", "")

	f(JSON, map[string]any{"kind": "x"}, "", `unknown condition "kind" (want key, header.NAME or field.PATH)`)
	f(JSON, map[string]any{"header.": "x"}, "", "header.: needs a header name")
	f(JSON, map[string]any{"field.a..b": "x"}, "", "field.a..b: needs a field path without empty elements")
	f(JSON, map[string]any{"field.": "x"}, "", "field.: needs a field path")
	f(Debezium, map[string]any{"field.op": "c"}, "", "field.op: field conditions need format json or connect-json")
	f(ConnectJSON, map[string]any{"field.op": "c"}, "{field.op: [c]}", "")
	f(JSON, map[string]any{"field.payload.op": "c"}, "{field.payload.op: [c]}", "")
	f(ConnectJSON, map[string]any{"field.payload.op": "c"}, "", "field.payload.op: format connect-json reads the fields of the envelope's payload: write the path below it (a, not payload.a)")
	f(JSON, map[string]any{"key": []any{}}, "", "key: empty list")
	f(JSON, map[string]any{"key": nil}, "", "key: null")
	f(JSON, map[string]any{"key": map[string]any{"a": 1}}, "", "key: want a string, number or boolean")
	f(JSON, map[string]any{"key": []any{[]any{"a"}}}, "", "key: want a string")
	f(JSON, map[string]any{"in": "a"}, "", `"in" goes with exactly one of field: NAME or header: NAME`)
	f(JSON, map[string]any{"key": "a", "in": "a"}, "", `"in" goes with field: NAME or header: NAME`)
	f(JSON, map[string]any{"field": 3, "in": "a"}, "", "field: want a name")
	f(JSON, map[string]any{"field": "", "in": "a"}, "", "field.: needs a field path")
}

func TestEvaluatorMatch(t *testing.T) {
	must := func(spec map[string]any) When {
		w, err := ParseWhen(JSON, spec)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	rec := &kgo.Record{
		Key:     []byte("eu-1"),
		Value:   []byte(`{"kind":"click","n":1.50,"ok":true,"nested":{"k":"v"},"esc":"a\"b","nul":null,"arr":[1]}`),
		Headers: []kgo.RecordHeader{{Key: "type", Value: []byte("order")}, {Key: "type", Value: []byte("second")}, {Key: "nil"}},
	}
	var e Evaluator
	f := func(r *kgo.Record, spec map[string]any, want bool) {
		t.Helper()
		e.Reset(r)
		if got := e.Match(must(spec)); got != want {
			t.Fatalf("Match(%v) = %v; want %v", spec, got, want)
		}
	}
	f(rec, nil, true)
	f(rec, map[string]any{"key": "eu-1"}, true)
	f(rec, map[string]any{"key": []any{"us", "eu-1"}}, true)
	f(rec, map[string]any{"key": "eu"}, false)
	f(rec, map[string]any{"header.type": "order"}, true)
	f(rec, map[string]any{"header.type": "second"}, false) // the first header of the name counts
	f(rec, map[string]any{"header.nil": "x"}, false)       // null header value
	f(rec, map[string]any{"header.missing": "x"}, false)
	f(rec, map[string]any{"field.kind": []any{"view", "click"}}, true)
	f(rec, map[string]any{"field": "kind", "in": []any{"view"}}, false)
	f(rec, map[string]any{"field.n": "1.50"}, true) // the literal as written
	f(rec, map[string]any{"field.n": 1.5}, false)
	f(rec, map[string]any{"field.ok": true}, true)
	f(rec, map[string]any{"field.nested.k": "v"}, true)
	f(rec, map[string]any{"field.nested": "v"}, false) // an object matches nothing
	f(rec, map[string]any{"field.esc": `a"b`}, true)   // unescaped
	f(rec, map[string]any{"field.nul": "null"}, false)
	f(rec, map[string]any{"field.arr": "[1]"}, false)
	f(rec, map[string]any{"field.missing": "x"}, false)
	f(rec, map[string]any{"field.kind": "click", "key": "eu-1", "header.type": "order"}, true)
	f(rec, map[string]any{"field.kind": "click", "key": "us"}, false)
	// Not JSON, not an object, no key: nothing matches, nothing panics.
	f(&kgo.Record{Value: []byte(`{"kind":`)}, map[string]any{"field.kind": "x"}, false)
	f(&kgo.Record{Value: []byte(`["kind"]`)}, map[string]any{"field.kind": "x"}, false)
	f(&kgo.Record{}, map[string]any{"key": ""}, false)
	f(&kgo.Record{Key: []byte{}}, map[string]any{"key": ""}, true)
	// Kafka Connect's JSON envelope: paths go into the payload, unless
	// they name the envelope (schema, payload).
	env := &kgo.Record{Value: []byte(`{"schema":{"type":"struct","fields":[{"type":"string","field":"kind"}]},"payload":{"kind":"click","schema":"s"}}`)}
	f(env, map[string]any{"field.kind": "click"}, true)
	f(env, map[string]any{"field.payload.kind": "click"}, true)
	f(env, map[string]any{"field.schema": "s"}, false) // the envelope's schema, an object
	f(env, map[string]any{"field.schema.type": "struct"}, true)
	f(&kgo.Record{Value: []byte(`{"schema":null,"payload":{"op":"d"}}`)}, map[string]any{"field.op": "d"}, true)
	f(&kgo.Record{Value: []byte(`{"schema":null,"payload":null}`)}, map[string]any{"field.op": "d"}, false)
	// Not an envelope (a third member): read as written.
	f(&kgo.Record{Value: []byte(`{"schema":null,"payload":{"op":"d"},"op":"c"}`)}, map[string]any{"field.op": "c"}, true)
	// The value is parsed once per record and a new record is parsed anew.
	e.Reset(rec)
	w := must(map[string]any{"field.kind": "click"})
	if !e.Match(w) || !e.Match(w) {
		t.Fatal("second match on the same record")
	}
	e.Reset(&kgo.Record{Value: []byte(`{"kind":"view"}`)})
	if e.Match(w) {
		t.Fatal("stale parse used for a new record")
	}
}

// FuzzWhen: no subject or record panics the parser or the evaluator.
func FuzzWhen(f *testing.F) {
	f.Add("field.kind", "click", []byte(`{"kind":"click"}`))
	f.Add("header.type", "order", []byte(`x`))
	f.Add("key", "k", []byte(`{"a":{"b":1}}`))
	f.Add("field.a.b", "1", []byte(`{"a":{"b":1}}`))
	f.Add("field.a", "1", []byte(`{"schema":{"type":"struct"},"payload":{"a":1}}`))
	f.Add("field.schema.type", "int8", []byte(`{"payload":[1],"schema":{"type":"int8"}}`))
	f.Fuzz(func(t *testing.T, subject, value string, body []byte) {
		w, err := ParseWhen(JSON, map[string]any{subject: value})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		var e Evaluator
		e.Reset(&kgo.Record{Key: body, Value: body, Headers: []kgo.RecordHeader{{Key: value, Value: body}}})
		e.Match(w)
	})
}

// BenchmarkEvaluator measures matching one record against three routes'
// conditions: a header, the key, and a JSON field (one parse per record).
func BenchmarkEvaluator(b *testing.B) {
	var ws []When
	for _, spec := range []map[string]any{
		{"header.type": "order"},
		{"key": []any{"eu-1", "eu-2"}},
		{"field.kind": []any{"view", "click"}},
	} {
		w, err := ParseWhen(JSON, spec)
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, w)
	}
	rec := &kgo.Record{
		Key:     []byte("us-1"),
		Value:   []byte(`{"id":12345,"kind":"click","user":"u-778","ts":"2026-11-30T21:00:00Z","amount":12.5,"tags":["a","b"]}`),
		Headers: []kgo.RecordHeader{{Key: "type", Value: []byte("event")}},
	}
	var e Evaluator
	b.ReportAllocs()
	b.SetBytes(int64(len(rec.Value)))
	for b.Loop() {
		e.Reset(rec)
		n := 0
		for _, w := range ws {
			if e.Match(w) {
				n++
			}
		}
		if n != 1 {
			b.Fatal("want exactly the field route to match")
		}
	}
}

// TestWhenErrorsOneLine: subjects and values with line breaks are quoted.
func TestWhenErrorsOneLine(t *testing.T) {
	for _, spec := range []map[string]any{
		{"field..\n": "0"},
		{"header.\n": map[string]any{}},
		{"x\ny": "0"},
		{"key": map[string]any{"a\nb": 1}},
		{"field": map[string]any{"a\nb": 1}, "in": "x"},
		{"field.a\nb": []any{}},
	} {
		_, err := ParseWhen(JSON, spec)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseWhen(%q): %q; want a one-line error", spec, err)
		}
	}
}
