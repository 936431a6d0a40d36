package decode

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// jsonScanner reads one JSON record in a single pass over its bytes,
// without building a tree: it checks the whole text against the grammar
// the format accepts and notes where each member of the top-level object
// is (its key and value as byte ranges). Columns then read their values
// from those ranges: a scalar straight from the record's bytes, a path
// below a top-level key by walking the value's bytes, and only an object
// or array that a column stores whole (an Array, Map, Tuple, JSON or
// String column) is parsed into a tree, that one value alone.
//
// The grammar is exactly the one fastjson's parser accepts, because the
// json format always accepted it (and the differential fuzz target
// FuzzJSONScanDifferential holds the two equal), including its leniencies:
// a number is any run of the characters 0-9 . - + e E, or NaN, Inf and
// ±Inf in any case (the conversions then refuse what is not a number, and
// a bare NaN or Inf into a Float column); strings are not checked for
// control characters, escapes or UTF-8 here (a column that stores text
// checks it); nesting deeper than maxJSONDepth is refused.
//
// Keys are compared as written. A record in which some key anywhere holds
// a backslash escape is read through the tree instead (jsonFields.load),
// because there the rule of which duplicate wins depends on the order in
// which keys are looked up (see jsonFormat.begin); such records are rare.
type jsonScanner struct {
	doc     []byte
	members []scanMember // the top-level object's members, in order
	esc     bool         // some key in doc holds a backslash
	str     []byte       // unescaped string scratch, reset per record
}

// scanMember is one member of the top-level object: its key (without the
// quotes, as written) and its value, as offsets into the record.
type scanMember struct {
	key, val scanSpan
}

type scanSpan struct{ start, end int }

// maxJSONDepth is the deepest nesting a record may have (fastjson's
// MaxDepth, the limit the format always had).
const maxJSONDepth = fastjson.MaxDepth

// scanError is a record that is not JSON: what is wrong, and at which byte.
type scanError struct {
	pos int
	msg string
}

func (e *scanError) Error() string {
	return e.msg + " at byte " + strconv.Itoa(e.pos)
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func (s *jsonScanner) ws(i int) int {
	for i < len(s.doc) && isJSONSpace(s.doc[i]) {
		i++
	}
	return i
}

// scan reads doc. On success the top-level value is an object (ok) or
// another value (top names its type, for the caller's message).
func (s *jsonScanner) scan(doc []byte) (top string, err error) {
	s.doc, s.members, s.esc, s.str = doc, s.members[:0], false, s.str[:0]
	i := s.ws(0)
	end, err := s.value(i, 0)
	if err != nil {
		return "", err
	}
	if j := s.ws(end); j < len(doc) {
		return "", &scanError{pos: j, msg: "unexpected text after the value"}
	}
	return valueType(doc[i:end]), nil
}

// valueType names the JSON type of a value's text (as fastjson does).
func valueType(v []byte) string {
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't':
		return "true"
	case 'f':
		return "false"
	case 'n':
		if string(v) == "null" {
			return "null"
		}
	}
	return "number"
}

// value checks the value starting at i (not at a space) at nesting depth
// (the enclosing values) and returns the offset after it.
func (s *jsonScanner) value(i, depth int) (int, error) {
	d := s.doc
	if i >= len(d) {
		return i, &scanError{pos: i, msg: "missing value"}
	}
	depth++
	if depth > maxJSONDepth {
		return i, &scanError{pos: i, msg: "nested deeper than " + strconv.Itoa(maxJSONDepth) + " levels"}
	}
	switch c := d[i]; c {
	case '{':
		return s.object(i+1, depth)
	case '[':
		return s.array(i+1, depth)
	case '"':
		end, _, err := s.string(i + 1)
		return end, err
	case 't':
		return s.literal(i, "true")
	case 'f':
		return s.literal(i, "false")
	case 'n':
		if len(d)-i >= 4 && string(d[i:i+4]) == "null" {
			return i + 4, nil
		}
		if len(d)-i >= 3 && strings.EqualFold(b2s(d[i:i+3]), "nan") {
			return i + 3, nil
		}
		return i, &scanError{pos: i, msg: "unexpected value"}
	}
	return s.number(i)
}

func (s *jsonScanner) literal(i int, lit string) (int, error) {
	if len(s.doc)-i < len(lit) || string(s.doc[i:i+len(lit)]) != lit {
		return i, &scanError{pos: i, msg: "unexpected value"}
	}
	return i + len(lit), nil
}

// number reads a run of number characters, or NaN / Inf with an optional
// sign (any case).
func (s *jsonScanner) number(i int) (int, error) {
	d := s.doc
	for j := i; j < len(d); j++ {
		c := d[j]
		if (c >= '0' && c <= '9') || c == '.' || c == '-' || c == 'e' || c == 'E' || c == '+' {
			continue
		}
		if j == i || j == i+1 && (d[i] == '-' || d[i] == '+') {
			if len(d)-j >= 3 {
				if x := b2s(d[j : j+3]); strings.EqualFold(x, "inf") || strings.EqualFold(x, "nan") {
					return j + 3, nil
				}
			}
			return i, &scanError{pos: i, msg: "unexpected character " + strconv.QuoteRune(rune(d[i]))}
		}
		return j, nil
	}
	return len(d), nil
}

// string reads a string whose opening quote is before i and returns the
// offset after its closing quote, and whether it holds a backslash.
func (s *jsonScanner) string(i int) (end int, esc bool, err error) {
	d := s.doc
	// The common string has no backslash. Short ones (keys, most values)
	// are fastest byte by byte; past 16 bytes two vectorized searches win.
	j := i
	for n := min(len(d), i+16); j < n; j++ {
		if c := d[j]; c == '"' {
			return j + 1, false, nil
		} else if c == '\\' {
			break
		}
	}
	if j == i+16 {
		if q := bytes.IndexByte(d[j:], '"'); q >= 0 && bytes.IndexByte(d[j:j+q], '\\') < 0 {
			return j + q + 1, false, nil
		}
	}
	for j := i; j < len(d); j++ {
		switch d[j] {
		case '"':
			return j + 1, esc, nil
		case '\\':
			esc = true
			j++ // the escaped byte, whatever it is
		}
	}
	return len(d), esc, &scanError{pos: i - 1, msg: "string without its closing quote"}
}

// object reads the members of an object whose '{' is before i; the
// top-level object's members are noted.
func (s *jsonScanner) object(i, depth int) (int, error) {
	d := s.doc
	i = s.ws(i)
	if i >= len(d) {
		return i, &scanError{pos: i, msg: "object without its closing '}'"}
	}
	if d[i] == '}' {
		return i + 1, nil
	}
	for {
		i = s.ws(i)
		if i >= len(d) || d[i] != '"' {
			return i, &scanError{pos: i, msg: "want a quoted key"}
		}
		k := i + 1
		kend, esc, err := s.string(k)
		if err != nil {
			return kend, err
		}
		s.esc = s.esc || esc
		i = s.ws(kend)
		if i >= len(d) || d[i] != ':' {
			return i, &scanError{pos: i, msg: "want ':' after key " + strconv.Quote(cut(d[k:kend-1]))}
		}
		v := s.ws(i + 1)
		if i, err = s.value(v, depth); err != nil {
			return i, err
		}
		if depth == 1 {
			s.members = append(s.members, scanMember{key: scanSpan{k, kend - 1}, val: scanSpan{v, i}})
		}
		i = s.ws(i)
		if i >= len(d) {
			return i, &scanError{pos: i, msg: "object without its closing '}'"}
		}
		switch d[i] {
		case ',':
			i++
		case '}':
			return i + 1, nil
		default:
			return i, &scanError{pos: i, msg: "want ',' or '}' after the value of " + strconv.Quote(cut(d[k:kend-1]))}
		}
	}
}

// array reads the elements of an array whose '[' is before i.
func (s *jsonScanner) array(i, depth int) (int, error) {
	d := s.doc
	i = s.ws(i)
	if i >= len(d) {
		return i, &scanError{pos: i, msg: "array without its closing ']'"}
	}
	if d[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = s.value(s.ws(i), depth); err != nil {
			return i, err
		}
		i = s.ws(i)
		if i >= len(d) {
			return i, &scanError{pos: i, msg: "array without its closing ']'"}
		}
		switch d[i] {
		case ',':
			i++
		case ']':
			return i + 1, nil
		default:
			return i, &scanError{pos: i, msg: "want ',' or ']' after an array element"}
		}
	}
}

// skip returns the end of the value at i in a record the scanner accepted:
// it only matches brackets (outside strings), without checking anything.
func (s *jsonScanner) skip(i int) int {
	d := s.doc
	switch d[i] {
	case '"':
		end, _, _ := s.string(i + 1)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				end, _, _ := s.string(j + 1)
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(d)
	}
	// A number or a literal ends where the next space, ',', ']' or '}' is.
	for j := i; j < len(d); j++ {
		switch d[j] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(d)
}

// walk follows path below the value v of a record that was scanned without
// error and has no escaped key: an object step takes the first member of
// that key, a numeric step indexes an array (as fastjson's Value.Get does).
// ok is false when some step is not there. Only the values passed over
// are skipped; the one a step enters is not.
func (s *jsonScanner) walk(v scanSpan, path []string) (scanSpan, bool) {
	d := s.doc
	at := v.start
	for _, step := range path {
		switch d[at] {
		case '{':
			found := false
			i := s.ws(at + 1)
			for !found && d[i] != '}' {
				i = s.ws(i)
				kend, _, _ := s.string(i + 1)
				key := d[i+1 : kend-1]
				i = s.ws(s.ws(kend) + 1)
				if string(key) == step {
					at, found = i, true
					break
				}
				if i = s.ws(s.skip(i)); d[i] == ',' {
					i++
				}
			}
			if !found {
				return v, false
			}
		case '[':
			n, err := strconv.Atoi(step)
			if err != nil || n < 0 {
				return v, false
			}
			i := s.ws(at + 1)
			for k := 0; k < n; k++ {
				if d[i] == ']' {
					return v, false
				}
				if i = s.ws(s.skip(i)); d[i] == ',' {
					i = s.ws(i + 1)
				}
			}
			if d[i] == ']' {
				return v, false
			}
			at = i
		default:
			return v, false
		}
	}
	return scanSpan{at, s.skip(at)}, true
}

// find is the first top-level member whose key is name (as written), or -1.
func (s *jsonScanner) find(name string) int {
	for m := range s.members {
		if string(s.doc[s.members[m].key.start:s.members[m].key.end]) == name {
			return m
		}
	}
	return -1
}

// scalar sets in to the scalar value v; ok is false for an object or an
// array, which the caller reads through a tree.
func (s *jsonScanner) scalar(v scanSpan, in *input) bool {
	b := s.doc[v.start:v.end]
	switch b[0] {
	case '{', '[':
		return false
	case '"':
		in.kind, in.b = inStr, s.unescape(b[1:len(b)-1])
	case 't':
		in.kind = inTrue
	case 'f':
		in.kind = inFalse
	case 'n':
		if len(b) == 4 {
			in.kind = inNull
			break
		}
		in.kind, in.b = inNum, b
	default:
		in.kind, in.b = inNum, b
	}
	return true
}

// unescape returns the text of a string's contents the way fastjson reads
// it: the JSON escapes decoded, and anything that is not a valid escape
// (an unknown letter, a short or non-hex \u, an unpaired surrogate's \u)
// kept as written. Without a backslash the record's own bytes are returned.
func (s *jsonScanner) unescape(b []byte) []byte {
	n := indexByte(b, '\\')
	if n < 0 {
		return b
	}
	start := len(s.str)
	out := append(s.str, b[:n]...)
	b = b[n+1:]
	for len(b) > 0 {
		ch := b[0]
		b = b[1:]
		switch ch {
		case '"', '\\', '/':
			out = append(out, ch)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			x, ok := hex4(b)
			if !ok {
				out = append(out, '\\', 'u')
				break
			}
			xs := b[:4]
			b = b[4:]
			if !utf16.IsSurrogate(rune(x)) {
				out = appendRune(out, rune(x))
				break
			}
			x1, ok := uint64(0), false
			if len(b) >= 6 && b[0] == '\\' && b[1] == 'u' {
				x1, ok = hex4(b[2:])
			}
			if !ok {
				out = append(append(out, '\\', 'u'), xs...)
				break
			}
			out = appendRune(out, utf16.DecodeRune(rune(x), rune(x1)))
			b = b[6:]
		default:
			out = append(out, '\\', ch)
		}
		n = indexByte(b, '\\')
		if n < 0 {
			out = append(out, b...)
			break
		}
		out = append(out, b[:n]...)
		b = b[n+1:]
	}
	s.str = out
	return out[start:]
}

// hex4 parses four hex digits at the start of b (strconv.ParseUint(_, 16,
// 16)'s rules: no sign, no prefix, no underscores).
func hex4(b []byte) (uint64, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var x uint64
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		x = x<<4 | uint64(c)
	}
	return x, true
}

func appendRune(b []byte, r rune) []byte { return utf8.AppendRune(b, r) }

func indexByte(b []byte, c byte) int { return bytes.IndexByte(b, c) }
