package jsonscan

import (
	"strings"
	"testing"

	"github.com/valyala/fastjson"
)

func TestMaxDepthIsFastjsons(t *testing.T) {
	if MaxDepth != fastjson.MaxDepth {
		t.Fatalf("MaxDepth %d, fastjson's %d: the grammars differ", MaxDepth, fastjson.MaxDepth)
	}
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	var s Scanner
	if _, err := s.Scan([]byte(deep)); err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
	if _, err := s.Scan([]byte("[" + deep + "]")); err == nil || !strings.Contains(err.Error(), "nested deeper than 300 levels") {
		t.Fatalf("%d levels: error %v", MaxDepth+1, err)
	}
}

func TestScanErrors(t *testing.T) {
	for doc, want := range map[string]string{
		``:                  "missing value at byte 0",
		`{"a":1,}`:          "want a quoted key at byte 7",
		`{"a" 1}`:           `want ':' after key "a" at byte 5`,
		`{"price":1 "b":2}`: `want ',' or '}' after the value of "price" at byte 11`,
		`[1 2]`:             "want ',' or ']' after an array element at byte 3",
		`"abc`:              "string without its closing quote at byte 0",
		`{} x`:              "unexpected text after the value at byte 3",
		`tru`:               "unexpected value at byte 0",
		`{"a":-x}`:          "unexpected character '-' at byte 5",
	} {
		var s Scanner
		_, err := s.Scan([]byte(doc))
		if err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
}

func TestScanMembers(t *testing.T) {
	var s Scanner
	top, err := s.Scan([]byte(` {"a" : "x\ny", "b\u0062":{"c":[1]}, "d":"p"} `))
	if err != nil || top != "object" {
		t.Fatalf("top %q err %v", top, err)
	}
	if len(s.Members) != 3 || !s.Esc {
		t.Fatalf("members %d esc %v", len(s.Members), s.Esc)
	}
	if s.Key(1) != `b\u0062` || s.Find("d") != 2 || s.Find("bb") != -1 {
		t.Fatalf("keys: %q, find d %d, find bb %d", s.Key(1), s.Find("d"), s.Find("bb"))
	}
	if m := s.Members[2]; !m.Plain || string(s.Doc[m.Val.Start:m.Val.End]) != `"p"` {
		t.Fatalf("member d: %+v", m)
	}
	v, ok := s.Walk(s.Members[1].Val, []string{"c", "0"})
	if !ok || string(s.Doc[v.Start:v.End]) != "1" {
		t.Fatalf("walk b.c.0: %v %q", ok, s.Doc[v.Start:v.End])
	}
	for _, top := range []string{`[]`, `"s"`, `1e5`, `true`, `false`, `null`, `NaN`, `-inf`} {
		got, err := s.Scan([]byte(top))
		var ref fastjson.Parser
		v, _ := ref.Parse(top)
		if err != nil || got != v.Type().String() {
			t.Errorf("%s: %q %v, fastjson %s", top, got, err, v.Type())
		}
	}
}

// TestGetter: paths follow fastjson's Value.Get, including its rule for
// escaped keys (compared as written until a lookup in that object misses).
func TestGetter(t *testing.T) {
	type look struct{ path, want string } // want "" : not there
	for _, c := range []struct {
		doc   string
		looks []look
	}{
		{`{"a":{"b":[10,{"c":"x"}]},"n":1.50}`, []look{
			{"a.b.1.c", `"x"`}, {"a.b.0", "10"}, {"a.b.2", ""}, {"a.b.-1", ""}, {"a.b.x", ""},
			{"n", "1.50"}, {"n.x", ""}, {"z", ""}, {"a.b", `[10,{"c":"x"}]`},
		}},
		// as written first: "a" is the second member ...
		{`{"\u0061":1,"a":2}`, []look{{"a", "2"}, {"b", ""}, {"a", "1"}}},
		// ... and after a miss in that object, the first unescaped one
		{`{"\u0061":1,"a":2}`, []look{{"b", ""}, {"a", "1"}}},
		// the rule is per object: a miss in the top object leaves "o" as written
		{`{"o":{"\u006b":1,"k":2}}`, []look{{"z", ""}, {"o.k", "2"}, {"o.z", ""}, {"o.k", "1"}}},
		// a step holding a backslash compares unescaped at once
		{`{"k\\":1,"k\\\\":2}`, []look{{`k\`, "1"}}},
		{`{"a": [ 1 , [ 2 , 3 ] ] }`, []look{{"a.1.1", "3"}, {"a.01", "[ 2 , 3 ]"}}},
	} {
		var s Scanner
		if _, err := s.Scan([]byte(c.doc)); err != nil {
			t.Fatal(err)
		}
		var g Getter
		g.Reset(&s)
		for _, l := range c.looks {
			v, ok := g.Get(strings.Split(l.path, "."))
			got := ""
			if ok {
				got = string(s.Doc[v.Start:v.End])
			}
			if got != l.want {
				t.Errorf("%s: %s = %q, want %q", c.doc, l.path, got, l.want)
			}
		}
	}
}
