package route

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"
)

// treeEvaluator is the field conditions' reference: the record parsed into
// a fastjson tree once per record and each path looked up with Value.Get,
// as the Evaluator read fields before it scanned them (FuzzWhenDifferential
// holds the two equal).
type treeEvaluator struct {
	parser fastjson.Parser
	obj    *fastjson.Value
	parsed bool
	buf    []byte
}

func (e *treeEvaluator) reset() { e.obj, e.parsed = nil, false }

func (e *treeEvaluator) holds(value []byte, c *Condition) bool {
	if !e.parsed {
		e.parsed = true
		v, err := e.parser.ParseBytes(value)
		if err == nil && v.Type() == fastjson.TypeObject {
			e.obj = v
		}
	}
	if e.obj == nil {
		return false
	}
	v := e.obj.Get(c.Path...)
	if v == nil {
		return false
	}
	switch v.Type() {
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return oneOf(s, c.Values)
	case fastjson.TypeNumber, fastjson.TypeTrue, fastjson.TypeFalse:
		e.buf = v.MarshalTo(e.buf[:0])
		return oneOf(e.buf, c.Values)
	}
	return false
}

// FuzzWhenDifferential: the scanning Evaluator and the tree reference give
// the same answer for every field condition, in the same order on the same
// record (the order matters where keys are escaped: see jsonscan.Getter).
// The input is the record value, then conditions, separated by a NUL byte:
// each condition a dotted path, '=', and values separated by '|'.
func FuzzWhenDifferential(f *testing.F) {
	for _, s := range []string{
		"{\"kind\":\"click\",\"n\":1.50}\x00kind=click|view\x00n=1.50\x00n=1.5",
		"{\"a\":{\"b\":[1,{\"c\":\"x\"}]}}\x00a.b.1.c=x\x00a.b.0=1\x00a.b.2=1\x00a.b=x",
		"{\"\\u0061\":1,\"a\":2}\x00a=2\x00a=1\x00b=1\x00a=1",
		"{\"a\":1,\"\\u0061\":2}\x00b=x\x00a=1|2",
		"{\"o\":{\"\\u006b\":\"v\",\"k\":\"w\"}}\x00o.k=w\x00o.z=1\x00o.k=v",
		"{\"e\":\"a\\\"b\\u00e9\",\"t\":true,\"f\":false,\"z\":null,\"x\":NaN,\"i\":-Inf}\x00e=a\"bé\x00t=true\x00f=false\x00z=null\x00x=NaN\x00i=-Inf",
		"{\"a\":\"b\"} x\x00a=b",
		"[1]\x000=1",
		"{\"k\\\\\":1}\x00k\\=1\x00k=1",
		"{\"a\":[[1,2],[3]]}\x00a.1.0=3\x00a.-1=1\x00a.01=3",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parts := bytes.Split(data, []byte{0})
		value := parts[0]
		var conds []Condition
		for _, p := range parts[1:] {
			path, vals, _ := strings.Cut(string(p), "=")
			conds = append(conds, Condition{Subject: OnField, Name: path, Path: strings.Split(path, "."), Values: strings.Split(vals, "|")})
			if len(conds) == 8 {
				break
			}
		}
		var e Evaluator
		var ref treeEvaluator
		rec := &kgo.Record{Value: value}
		e.Reset(rec)
		ref.reset()
		for i := range conds {
			got, want := e.Match(When{conds[i]}), ref.holds(value, &conds[i])
			if got != want {
				t.Fatalf("%q: condition %d %s=%q: scanner %v, tree %v", value, i, conds[i].Name, conds[i].Values, got, want)
			}
		}
	})
}
