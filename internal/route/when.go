package route

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/jsonscan"
)

// A route's `when:` selects which records of its topics it takes. It is a
// map from a subject to the values the subject may have:
//
//	when:
//	  header.type: order          # the record's header "type" is "order"
//	  key: [eu-1, eu-2]           # and its key is "eu-1" or "eu-2"
//	  field.kind: [click, view]   # and its JSON value's top-level field kind is one of these
//
// The subjects are key (the record key as text), header.NAME (the first
// header called NAME) and field.PATH (a dotted path into the JSON record
// value, formats json and connect-json; in a record that is Kafka Connect's
// JSON envelope the path goes into its payload, unless it names the
// envelope itself: EnvelopePath). A value is a string, number or boolean, or a
// list of them (any one matches); the entries of the map must all hold.
// `field: NAME` with `in: [values]` (and `header: NAME` with `in:`) is the
// same condition written long-hand: {field: kind, in: [a, b]} is
// {field.kind: [a, b]}.
//
// Comparison is on text: a string field compares its unescaped content, a
// number or boolean field its JSON literal as written (1.0 is not 1); a
// missing subject, a null, an object or an array matches nothing.

// Subject is what one condition reads.
type Subject uint8

// The subjects of a condition.
const (
	OnKey    Subject = iota + 1 // the record key
	OnHeader                    // a header; Condition.Name holds its name
	OnField                     // a field of the JSON value; Condition.Path holds its path
)

// The words of a `when:` entry.
const (
	whenKey          = "key"
	whenHeaderPrefix = "header."
	whenFieldPrefix  = "field."
	whenIn           = "in"
)

// Condition is one parsed entry of a route's `when:`.
type Condition struct {
	Subject Subject
	Name    string   // OnHeader: the header name; OnField: the path as written
	Path    []string // OnField: the path's elements
	Values  []string // the record matches when the subject equals one of these
}

// When is a route's parsed `when:`: every condition must hold. The empty
// When matches every record.
type When []Condition

// ParseWhen parses a route's `when:` map for a route of format f. The error
// is one line naming the offending entry ("header.: needs a header name"),
// for the caller to prefix with the option's key.
func ParseWhen(f Format, spec map[string]any) (When, error) {
	if len(spec) == 0 {
		return nil, nil
	}
	if long, ok := spec[whenIn]; ok {
		return parseLongWhen(f, spec, long)
	}
	keys := make([]string, 0, len(spec))
	for k := range spec {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic order: errors and evaluation
	out := make(When, 0, len(keys))
	for _, k := range keys {
		c, err := ParseCondition(f, k)
		if err != nil {
			return nil, err
		}
		if c.Values, err = whenValues(spec[k]); err != nil {
			return nil, fmt.Errorf("%s: %w", shown(k), err)
		}
		out = append(out, c)
	}
	return out, nil
}

// parseLongWhen parses {field: NAME, in: [...]} or {header: NAME, in: [...]}.
func parseLongWhen(f Format, spec map[string]any, in any) (When, error) {
	if len(spec) != 2 {
		return nil, fmt.Errorf("%q goes with exactly one of field: NAME or header: NAME (or write field.NAME: [values])", whenIn)
	}
	for _, kind := range []string{"field", "header"} {
		name, ok := spec[kind]
		if !ok {
			continue
		}
		s, ok := name.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want a name, got %s", kind, shown(fmt.Sprint(name)))
		}
		c, err := ParseCondition(f, kind+"."+s)
		if err != nil {
			return nil, err
		}
		if c.Values, err = whenValues(in); err != nil {
			return nil, fmt.Errorf("%s: %w", whenIn, err)
		}
		return When{c}, nil
	}
	return nil, fmt.Errorf("%q goes with field: NAME or header: NAME (or write field.NAME: [values])", whenIn)
}

// ParseCondition parses the subject of one `when:` entry: key, header.NAME
// or field.PATH (PATH dotted, no empty element; json format only). Values is
// left empty.
func ParseCondition(f Format, subject string) (Condition, error) {
	switch {
	case subject == whenKey:
		return Condition{Subject: OnKey}, nil
	case strings.HasPrefix(subject, whenHeaderPrefix):
		name := subject[len(whenHeaderPrefix):]
		if name == "" {
			return Condition{}, fmt.Errorf("%s: needs a header name, e.g. header.type", shown(subject))
		}
		return Condition{Subject: OnHeader, Name: name}, nil
	case strings.HasPrefix(subject, whenFieldPrefix):
		name := subject[len(whenFieldPrefix):]
		path, ok := splitPath(name)
		if !ok {
			return Condition{}, fmt.Errorf("%s: needs a field path without empty elements, e.g. field.kind", shown(subject))
		}
		if f != JSON && f != ConnectJSON {
			return Condition{}, fmt.Errorf("%s: field conditions need format %s or %s (this route is %s; use key or header.NAME)", shown(subject), JSON, ConnectJSON, f)
		}
		if f == ConnectJSON && EnvelopePath(path) {
			return Condition{}, fmt.Errorf("%s: %s", shown(subject), envelopePathProblem)
		}
		return Condition{Subject: OnField, Name: name, Path: path}, nil
	}
	return Condition{}, fmt.Errorf("unknown condition %q (want key, header.NAME or field.PATH)", subject)
}

// shown is a subject as error messages print it: as written, or quoted
// when it holds anything but printable characters (so that every message
// stays one line).
func shown(s string) string {
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// whenValues turns a YAML scalar or list of scalars into the texts they
// compare as.
func whenValues(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("empty list: no record could match")
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, err := whenScalar(e)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

func whenScalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return "", fmt.Errorf("value %v is not a JSON number", x)
		}
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case nil:
		return "", fmt.Errorf("null: a missing or null subject never matches; want a string, number or boolean")
	}
	return "", fmt.Errorf("want a string, number or boolean, or a list of them, got %s", shown(fmt.Sprint(v)))
}

// ReadsField reports whether some condition reads the record value.
func (w When) ReadsField() bool {
	return slices.ContainsFunc(w, func(c Condition) bool { return c.Subject == OnField })
}

// String writes w back in the short form, for messages.
func (w When) String() string {
	parts := make([]string, len(w))
	for i, c := range w {
		var subject string
		switch c.Subject {
		case OnKey:
			subject = whenKey
		case OnHeader:
			subject = whenHeaderPrefix + c.Name
		case OnField:
			subject = whenFieldPrefix + c.Name
		}
		parts[i] = subject + ": [" + strings.Join(c.Values, ", ") + "]"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Evaluator evaluates routes' conditions against one record at a time. It
// scans the record value at most once per record (internal/jsonscan, the
// grammar the json formats read), however many conditions of however many
// routes read fields, and follows each condition's path over the value's
// bytes, without a tree, so matching allocates nothing once warm. A field
// matches when it is a string whose unescaped text, or a number, true or
// false whose literal as written, equals one of the values; keys compare
// as fastjson's Value.Get compares them (jsonscan.Getter).
//
// Concurrency: an Evaluator is not safe for concurrent use; the pipeline's
// owner goroutine owns one.
type Evaluator struct {
	rec    *kgo.Record
	sc     jsonscan.Scanner
	get    jsonscan.Getter
	obj    bool // the value of rec was scanned and is a JSON object
	parsed bool // the value of rec was scanned
	// payload is the value's payload when it is Kafka Connect's JSON
	// envelope (jsonscan's Envelope), else empty (End 0).
	payload jsonscan.Span
}

// Reset points e at a new record; nothing is parsed until a condition needs it.
func (e *Evaluator) Reset(r *kgo.Record) {
	e.rec, e.obj, e.parsed = r, false, false
}

// Match reports whether the current record satisfies every condition of w.
func (e *Evaluator) Match(w When) bool {
	for i := range w {
		if !e.holds(&w[i]) {
			return false
		}
	}
	return true
}

func (e *Evaluator) holds(c *Condition) bool {
	r := e.rec
	switch c.Subject {
	case OnKey:
		return r.Key != nil && oneOf(r.Key, c.Values)
	case OnHeader:
		for i := range r.Headers {
			if r.Headers[i].Key == c.Name {
				return r.Headers[i].Value != nil && oneOf(r.Headers[i].Value, c.Values)
			}
		}
		return false
	case OnField:
		return e.fieldHolds(c)
	}
	return false
}

// fieldHolds is holds for a condition on a field of the record's value,
// which it scans on the first such condition of the record.
func (e *Evaluator) fieldHolds(c *Condition) bool {
	if !e.parsed {
		e.parsed = true
		top, err := e.sc.Scan(e.rec.Value)
		e.obj = err == nil && top == "object"
		e.get.Reset(&e.sc)
		e.payload = jsonscan.Span{}
		if _, pl, ok := e.sc.Envelope(); e.obj && ok {
			e.payload = pl
		}
	}
	if !e.obj {
		return false // not a JSON object: the decode reports it, if a route takes it
	}
	var v jsonscan.Span
	var ok bool
	if e.payload.End > 0 && !EnvelopePath(c.Path) {
		v, ok = e.get.GetIn(e.payload, c.Path)
	} else {
		v, ok = e.get.Get(c.Path)
	}
	if !ok {
		return false
	}
	b := e.sc.Doc[v.Start:v.End]
	switch b[0] {
	case '"':
		return oneOf(e.sc.Unescape(b[1:len(b)-1]), c.Values)
	case '{', '[':
		return false
	case 'n':
		if string(b) == "null" {
			return false
		}
	}
	// a number (as written), true or false
	return oneOf(b, c.Values)
}

// oneOf compares b with each value without converting b to a string.
func oneOf(b []byte, values []string) bool {
	for _, v := range values {
		if string(b) == v { // the compiler compares without allocating
			return true
		}
	}
	return false
}
