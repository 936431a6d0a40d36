package jsonscan

import (
	"strings"
	"testing"
)

// TestEnvelope: what is and is not Kafka Connect's JSON envelope, and
// where its schema and payload are.
func TestEnvelope(t *testing.T) {
	for _, tc := range []struct {
		text            string
		ok              bool
		schema, payload string
	}{
		{`{"schema":{"type":"struct","fields":[]},"payload":{"a":1}}`, true, `{"type":"struct","fields":[]}`, `{"a":1}`},
		{` { "payload" : 5 , "schema" : { "optional":true, "type" : "int32" } } `, true, `{ "optional":true, "type" : "int32" }`, `5`},
		{`{"schema":null,"payload":{"a":1}}`, true, `null`, `{"a":1}`},
		{`{"schema":{"type":"string"},"payload":null}`, true, `{"type":"string"}`, `null`},
		{`{"schema":{"type":"bytes"},"payload":"AP8="}`, true, `{"type":"bytes"}`, `"AP8="`},
		{`{"schema":{"type":"map","keys":{"type":"int32"},"values":{"type":"string"}},"payload":[[1,"a"]]}`, true,
			`{"type":"map","keys":{"type":"int32"},"values":{"type":"string"}}`, `[[1,"a"]]`},
		// Not one.
		{`{"schema":{"type":"struct"},"payload":{},"extra":1}`, false, "", ""},
		{`{"schema":{"type":"record"},"payload":{}}`, false, "", ""}, // not a Connect type
		{`{"schema":{"type":"Struct"},"payload":{}}`, false, "", ""},
		{`{"schema":{"fields":[]},"payload":{}}`, false, "", ""},
		{`{"schema":{"type":1},"payload":{}}`, false, "", ""},
		{`{"schema":"struct","payload":{}}`, false, "", ""},
		{`{"schema":NaN,"payload":{}}`, false, "", ""},
		{`{"schema":nan,"payload":{}}`, false, "", ""},
		{`{"schema":{"type":"struct"}}`, false, "", ""},
		{`{"schema":{"type":"struct"},"payloads":{}}`, false, "", ""},
		{`{"sch\u0065ma":{"type":"struct"},"payload":{}}`, false, "", ""}, // keys as written
		{`{"schema":{"type":"struct"},"schema":{"type":"struct"}}`, false, "", ""},
		{`{"payload":{"schema":1}}`, false, "", ""},
		{`[{"schema":null,"payload":1}]`, false, "", ""},
		{`null`, false, "", ""},
	} {
		var s Scanner
		if _, err := s.Scan([]byte(tc.text)); err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		sch, pl, ok := s.Envelope()
		if ok != tc.ok {
			t.Errorf("%s: envelope %v, want %v", tc.text, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if got := string(s.Doc[sch.Start:sch.End]); got != tc.schema {
			t.Errorf("%s: schema %s, want %s", tc.text, got, tc.schema)
		}
		if got := string(s.Doc[pl.Start:pl.End]); got != tc.payload {
			t.Errorf("%s: payload %s, want %s", tc.text, got, tc.payload)
		}
	}
}

// TestGetIn: a path below a value, as Get follows one below the top.
func TestGetIn(t *testing.T) {
	var s Scanner
	if _, err := s.Scan([]byte(`{"schema":null,"payload":{"op":"c","after":{"id":[7,8]}}}`)); err != nil {
		t.Fatal(err)
	}
	_, pl, ok := s.Envelope()
	if !ok {
		t.Fatal("not an envelope")
	}
	var g Getter
	g.Reset(&s)
	for path, want := range map[string]string{"op": `"c"`, "after.id.1": "8"} {
		v, ok := g.GetIn(pl, strings.Split(path, "."))
		if !ok || string(s.Doc[v.Start:v.End]) != want {
			t.Errorf("%s: %v %q, want %s", path, ok, s.Doc[v.Start:v.End], want)
		}
	}
	if _, ok := g.GetIn(pl, []string{"after", "name"}); ok {
		t.Error("after.name: found, want missing")
	}
	if _, ok := g.GetIn(pl, nil); ok {
		t.Error("empty path: found")
	}
}
