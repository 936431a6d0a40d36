package connect

import (
	"time"

	"github.com/valyala/fastjson"

	"sink/internal/decode/column"
	"sink/internal/decode/format"
)

// connRewriter rewrites a struct, array or map of a Kafka Connect payload
// that a column reads whole, so that the values inside it that JSON does
// not carry as themselves read as what they are (Envelope's comment):
// decimals become numbers, dates, timestamps and times of day text, a map
// keyed by other than strings an object. The rewritten text is parsed
// again into a tree the column builders read like any JSON value. It
// belongs to one Envelope; the tree it makes is valid until the next
// rewrite.
type connRewriter struct {
	st     *column.State
	sem    *Conv // decimals (its Dec scratch)
	out    []byte
	key    []byte       // map keys being rewritten (pairs)
	in     column.Value // a VariableScaleDecimal being read
	err    error
	parser fastjson.Parser
}

// rewrite replaces in (an object or array of schema n) by its rewritten
// form.
func (r *connRewriter) rewrite(n *connNode, in *column.Value) error {
	r.err = nil
	r.sem.Dec.ForColumn(0, "") // no Decimal column bounds the decimals inside
	r.out = r.value(r.out[:0], n, in.Tree)
	if r.err != nil {
		return r.err
	}
	v, err := r.parser.ParseBytes(r.out)
	if err != nil {
		return column.Reasonf("rewriting a Kafka Connect value: %v", err) // not expected: the text is made here
	}
	r.st.FromJSON(v, in)
	return nil
}

// value appends v (of schema n; nil: not described) rewritten.
func (r *connRewriter) value(dst []byte, n *connNode, v *fastjson.Value) []byte {
	if n == nil || !n.rewrite || v.Type() == fastjson.TypeNull || r.err != nil {
		return v.MarshalTo(dst)
	}
	switch {
	case rewritten(n.sem.Kind):
		return r.scalar(dst, n, v)
	case n.typ == ctStruct && v.Type() == fastjson.TypeObject:
		return r.object(dst, v, n.field)
	case n.typ == ctMap && n.keys.typ == ctString && v.Type() == fastjson.TypeObject:
		return r.object(dst, v, func(string) *connNode { return n.vals })
	case n.typ == ctMap && v.Type() == fastjson.TypeArray:
		return r.pairs(dst, n, v)
	case n.typ == ctArray && v.Type() == fastjson.TypeArray:
		return r.array(dst, n.items, v)
	}
	return v.MarshalTo(dst)
}

// array appends the array v with each element rewritten by items.
func (r *connRewriter) array(dst []byte, items *connNode, v *fastjson.Value) []byte {
	dst = append(dst, '[')
	els, _ := v.Array()
	for i, e := range els {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = r.value(dst, items, e)
	}
	return append(dst, ']')
}

// object appends the object v with each member's value rewritten by the
// schema of that member.
func (r *connRewriter) object(dst []byte, v *fastjson.Value, of func(string) *connNode) []byte {
	dst = append(dst, '{')
	o, _ := v.Object()
	first := true
	o.Visit(func(k []byte, e *fastjson.Value) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = column.AppendJSONString(dst, k)
		dst = append(dst, ':')
		dst = r.value(dst, of(string(k)), e)
	})
	return append(dst, '}')
}

// pairs appends a map written as [key, value] pairs as an object keyed by
// each key's text (a string's contents, any other value's JSON).
func (r *connRewriter) pairs(dst []byte, n *connNode, v *fastjson.Value) []byte {
	dst = append(dst, '{')
	els, _ := v.Array()
	for i, e := range els {
		kv, _ := e.Array() // checked: two elements
		if i > 0 {
			dst = append(dst, ',')
		}
		// r.key is a stack: a key holding such a map rewrites its own
		// keys above this one's start.
		start := len(r.key)
		r.key = r.value(r.key, n.keys, kv[0])
		if k := r.key[start:]; len(k) > 0 && k[0] == '"' {
			dst = append(dst, k...)
		} else {
			dst = column.AppendJSONString(dst, k)
		}
		r.key = r.key[:start]
		dst = append(dst, ':')
		dst = r.value(dst, n.vals, kv[1])
	}
	return append(dst, '}')
}

// scalar appends a value of a semantic type as what it is: a decimal's
// number, a date's "2006-01-02", an instant in RFC 3339 (UTC), a time of
// day's "15:04:05.999".
func (r *connRewriter) scalar(dst []byte, n *connNode, v *fastjson.Value) []byte {
	switch n.sem.Kind {
	case SemDecimal:
		return r.decimal(dst, n, v)
	case SemVarDecimal:
		r.in.Kind, r.in.Tree = column.Object, v
		if err := r.sem.Dec.VarDecimal(&r.in); err != nil {
			r.err = err
			return dst
		}
		return append(dst, r.in.Bytes...)
	}
	x, err := v.Int64()
	if err != nil {
		r.err = column.Reasonf("cannot read %s as a %s value", column.Cut(v.MarshalTo(nil)), semLabel(n.sem.Kind))
		return dst
	}
	if ns, ok, tod := timeOfDay(n.sem.Kind, x); tod {
		if !ok {
			r.err = column.Reasonf("%s value %d is not a time of day", semLabel(n.sem.Kind), x)
			return dst
		}
		return append(appendTimeOfDay(append(dst, '"'), ns), '"')
	}
	t, ok := semTime(n.sem.Kind, x)
	if !ok {
		r.err = column.Reasonf("%s value %d is out of range", semLabel(n.sem.Kind), x)
		return dst
	}
	layout := time.RFC3339Nano
	if n.sem.Kind == SemDate {
		layout = "2006-01-02"
	}
	return append(t.AppendFormat(append(dst, '"'), layout), '"')
}

// decimal appends a Decimal (base64 bytes, or already a number) as its
// exact number.
func (r *connRewriter) decimal(dst []byte, n *connNode, v *fastjson.Value) []byte {
	if v.Type() == fastjson.TypeNumber {
		return v.MarshalTo(dst)
	}
	d := &r.sem.Dec
	raw, err := d.base64(v.GetStringBytes())
	if err == nil {
		err = format.CheckDecimal(raw, 0, "")
	}
	if err != nil {
		r.err = column.Reasonf("cannot read %s as Decimal bytes: %v", column.Cut(v.MarshalTo(nil)), err)
		return dst
	}
	return d.Text(dst, raw, int(n.sem.Scale))
}
