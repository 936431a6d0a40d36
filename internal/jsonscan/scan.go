// Package jsonscan owns the JSON grammar the sink reads: a scanner that
// checks a JSON text in one pass and notes where the members of its
// top-level object are, without building a tree, and the lookups over those
// bytes that the decoders (internal/decode) and the routes' conditions
// (internal/route) make.
//
// The grammar is exactly the one fastjson's parser accepts, because the
// json formats always accepted it (decode's fuzz targets FuzzJSONScan and
// FuzzJSONScanDifferential hold the two equal), including its leniencies: a
// number is any run of the characters 0-9 . - + e E, or NaN, Inf and ±Inf
// in any case (the conversions then refuse what is not a number, and a bare
// NaN or Inf into a Float column); strings are not checked for control
// characters, escapes or UTF-8 here (a reader that stores text checks it);
// nesting deeper than MaxDepth is refused. Unescape reads a string's escapes
// the way fastjson does.
//
// Concurrency: a Scanner is not safe for concurrent use; each goroutine
// owns its own. What it returns points into the scanned text and into its
// scratch buffer, valid until the next Scan.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"sink/internal/errtext"
)

// Scanner reads one JSON text in a single pass over its bytes, without
// building a tree: Scan checks the whole text against the grammar and notes
// where each member of the top-level object is (its key and value as byte
// ranges, Members). A reader then takes a scalar straight from those bytes,
// follows a path below a member over the bytes (Walk), and parses an
// object or array into a tree only where it needs the value whole.
//
// Keys are compared as written by Find and Walk; Esc says whether some key
// anywhere in the text holds a backslash escape, where a reader that must
// compare unescaped keys (Lookup) or keep fastjson's order of lookups does
// more work.
type Scanner struct {
	Doc     []byte   // the record last scanned
	Members []Member // the top-level object's members, in order
	Esc     bool     // some key in Doc holds a backslash
	str     []byte   // unescaped string scratch, reset per record
}

// Member is one member of the top-level object: its key (without the
// quotes, as written) and its value, as offsets into the record. plain
// says the value is a string without a backslash, whose contents are then
// read as they are, without searching them for escapes a second time.
type Member struct {
	Key, Val Span
	Plain    bool
}

// Span is a value or key in the text: Doc[Start:End].
type Span struct{ Start, End int }

// MaxDepth is the deepest nesting a text may have (fastjson's MaxDepth,
// the limit the formats always had).
const MaxDepth = 300

// Error is a record that is not JSON: what is wrong, and at which byte.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string {
	return e.Msg + " at byte " + strconv.Itoa(e.Pos)
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func (s *Scanner) ws(i int) int {
	// Every JSON space is at most ' ': one comparison passes the
	// common byte that is none.
	for i < len(s.Doc) && s.Doc[i] <= ' ' && isJSONSpace(s.Doc[i]) {
		i++
	}
	return i
}

// Scan reads doc. On success top names the top-level value's type as
// fastjson does ("object", "array", "string", "number", "true",
// "false", "null"); Members lists an object's members.
func (s *Scanner) Scan(doc []byte) (top string, err error) {
	s.Doc, s.Members, s.Esc, s.str = doc, s.Members[:0], false, s.str[:0]
	i := s.ws(0)
	end, err := s.value(i, 0)
	if err != nil {
		return "", err
	}
	if j := s.ws(end); j < len(doc) {
		return "", &Error{Pos: j, Msg: "unexpected text after the value"}
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
func (s *Scanner) value(i, depth int) (int, error) {
	d := s.Doc
	if i >= len(d) {
		return i, &Error{Pos: i, Msg: "missing value"}
	}
	depth++
	if depth > MaxDepth {
		return i, &Error{Pos: i, Msg: "nested deeper than " + strconv.Itoa(MaxDepth) + " levels"}
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
		if len(d)-i >= 3 && bytes.EqualFold(d[i:i+3], []byte("nan")) {
			return i + 3, nil
		}
		return i, &Error{Pos: i, Msg: "unexpected value"}
	}
	return s.number(i)
}

func (s *Scanner) literal(i int, lit string) (int, error) {
	if len(s.Doc)-i < len(lit) || string(s.Doc[i:i+len(lit)]) != lit {
		return i, &Error{Pos: i, Msg: "unexpected value"}
	}
	return i + len(lit), nil
}

// number reads a run of number characters, or NaN / Inf with an optional
// sign (any case).
func (s *Scanner) number(i int) (int, error) {
	d := s.Doc
	for j := i; j < len(d); j++ {
		if numberByte[d[j]] {
			continue
		}
		if j == i || j == i+1 && (d[i] == '-' || d[i] == '+') {
			if len(d)-j >= 3 {
				if x := d[j : j+3]; bytes.EqualFold(x, []byte("inf")) || bytes.EqualFold(x, []byte("nan")) {
					return j + 3, nil
				}
			}
			return i, &Error{Pos: i, Msg: "unexpected character " + strconv.QuoteRune(rune(d[i]))}
		}
		return j, nil
	}
	return len(d), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// numberByte marks the bytes a number's run is made of: 0-9 . - + e E.
var numberByte = [256]bool{
	'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true,
	'.': true, '-': true, '+': true, 'e': true, 'E': true,
}

// string reads a string whose opening quote is before i and returns the
// offset after its closing quote, and whether it holds a backslash.
//
// It looks at eight bytes at a time (quoteOrBackslash) for the next '"'
// or '\\'; only a backslash stops it short of the closing quote, and the
// search goes on past the byte it escapes.
func (s *Scanner) string(i int) (end int, esc bool, err error) {
	d := s.Doc
	j := i
	for {
		// j moves to the next '"' or '\\' (the search is written out
		// here rather than called: most strings end in their first word).
		for {
			if j+8 > len(d) {
				for j < len(d) && d[j] != '"' && d[j] != '\\' {
					j++
				}
				break
			}
			if m := quoteOrBackslash(binary.LittleEndian.Uint64(d[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		if j >= len(d) {
			return len(d), esc, &Error{Pos: i - 1, Msg: "string without its closing quote"}
		}
		if d[j] == '"' {
			return j + 1, esc, nil
		}
		esc = true
		j += 2 // the backslash and the byte it escapes, whatever that is
	}
}

// Word-at-a-time search ("SWAR": SIMD within a register). A word of eight
// text bytes is loaded little-endian, so its lowest byte is the first
// byte in the text. For a byte value c, x := w ^ (c * ones) has a zero
// byte exactly where w holds c, and (x - ones) &^ x & highs sets the high
// bit of the lowest zero byte of x (and maybe of bytes above it, where the
// subtraction borrowed: those may be false, so only the lowest set bit
// is used). Its trailing zeros divided by 8 are the byte's index.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// zeroBytes marks the zero bytes of x: the lowest mark is exact.
func zeroBytes(x uint64) uint64 { return (x - ones) &^ x & highs }

// quoteOrBackslash marks the bytes of w that are '"' or '\\'.
func quoteOrBackslash(w uint64) uint64 {
	return zeroBytes(w^(ones*'"')) | zeroBytes(w^(ones*'\\'))
}

// indexBackslash is the offset of the first '\\' in b, or -1.
func indexBackslash(b []byte) int {
	j := 0
	for ; j+8 <= len(b); j += 8 {
		if m := zeroBytes(binary.LittleEndian.Uint64(b[j:]) ^ (ones * '\\')); m != 0 {
			return j + bits.TrailingZeros64(m)>>3
		}
	}
	for ; j < len(b); j++ {
		if b[j] == '\\' {
			return j
		}
	}
	return -1
}

// object reads the members of an object whose '{' is before i; the
// top-level object's members are noted.
//
// It is the scanner's hottest loop: the helpers it calls for a member
// (at, memberStart, closeObject) are small enough for the compiler to
// inline, and only a malformed text reaches a call that is not.
func (s *Scanner) object(i, depth int) (int, error) {
	d := s.Doc
	i = s.ws(i)
	if i >= len(d) {
		return i, &Error{Pos: i, Msg: "object without its closing '}'"}
	}
	if d[i] == '}' {
		return i + 1, nil
	}
	top := depth == 1
	members := s.topMembers(top)
	escKey := false
	for {
		i = s.ws(i)
		if s.at(i) != '"' {
			return i, &Error{Pos: i, Msg: "want a quoted key"}
		}
		k := i + 1
		kend, esc, err := s.string(k)
		if err != nil {
			return kend, err
		}
		escKey = escKey || esc
		i = s.ws(kend)
		if s.at(i) != ':' {
			return i, &Error{Pos: i, Msg: "want ':' after key " + strconv.Quote(cut(d[k:kend-1]))}
		}
		v := s.ws(i + 1)
		plain := false
		switch c := s.at(v); {
		case !top:
			i, err = s.value(v, depth)
		case c == '"':
			// A top-level string value, read here to keep whether it
			// holds a backslash (value would drop that).
			var vesc bool
			i, vesc, err = s.string(v + 1)
			plain = !vesc
		case numberStart[c]:
			// A top-level number (value's depth check cannot fail at
			// depth 2).
			i, err = s.number(v)
		default:
			i, err = s.value(v, depth)
		}
		if err != nil {
			return i, err
		}
		if top {
			members = append(members, Member{Key: Span{k, kend - 1}, Val: Span{v, i}, Plain: plain})
		}
		i = s.ws(i)
		switch s.at(i) {
		case ',':
			i++
		case '}':
			s.closeObject(top, members, escKey)
			return i + 1, nil
		default:
			return i, s.badMemberEnd(i, d[k:kend-1])
		}
	}
}

// at is the byte at i, 0 past the end of the text.
func (s *Scanner) at(i int) byte {
	if i < len(s.Doc) {
		return s.Doc[i]
	}
	return 0
}

// numberStart marks the bytes a number that object reads itself starts
// with: 0-9 and '-'.
var numberStart = [256]bool{
	'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true,
	'-': true,
}

// topMembers is where object gathers the members of the top-level object
// (top): s.Members, emptied by Scan; nil for any other object. The
// members go to this local slice and into s.Members once, at the end
// (closeObject): a write of the slice to s per member costs a store and a
// write-barrier check each (the same for Esc).
func (s *Scanner) topMembers(top bool) []Member {
	if top {
		return s.Members
	}
	return nil
}

// closeObject notes what object found once its '}' is read: the
// top-level object's members, and whether some key held a backslash.
func (s *Scanner) closeObject(top bool, members []Member, escKey bool) {
	if top {
		s.Members = members
	}
	if escKey {
		s.Esc = true
	}
}

// badMemberEnd is the error for what follows a member's value at i when
// it is neither ',' nor '}' (key names the member).
func (s *Scanner) badMemberEnd(i int, key []byte) error {
	if i >= len(s.Doc) {
		return &Error{Pos: i, Msg: "object without its closing '}'"}
	}
	return &Error{Pos: i, Msg: "want ',' or '}' after the value of " + strconv.Quote(cut(key))}
}

// array reads the elements of an array whose '[' is before i.
func (s *Scanner) array(i, depth int) (int, error) {
	d := s.Doc
	i = s.ws(i)
	if i >= len(d) {
		return i, &Error{Pos: i, Msg: "array without its closing ']'"}
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
			return i, &Error{Pos: i, Msg: "array without its closing ']'"}
		}
		switch d[i] {
		case ',':
			i++
		case ']':
			return i + 1, nil
		default:
			return i, &Error{Pos: i, Msg: "want ',' or ']' after an array element"}
		}
	}
}

// Skip returns the end of the value at i in a record the scanner accepted:
// it only matches brackets (outside strings), without checking anything.
func (s *Scanner) Skip(i int) int {
	d := s.Doc
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

// Walk follows path below the value v of a record that was scanned without
// error and has no escaped key: an object step takes the first member of
// that key, a numeric step indexes an array (as fastjson's Value.Get does).
// ok is false when some step is not there. Only the values passed over
// are skipped; the one a step enters is not.
func (s *Scanner) Walk(v Span, path []string) (Span, bool) {
	at := v.Start
	for _, step := range path {
		var ok bool
		switch s.Doc[at] {
		case '{':
			at, ok = s.find(at, step, false)
		case '[':
			at, ok = s.index(at, step)
		}
		if !ok {
			return v, false
		}
	}
	return Span{at, s.Skip(at)}, true
}

// ObjectMembers appends the members of the object v (of a text Scan
// accepted) to dst, in order, as Members lists the top-level object's.
func (s *Scanner) ObjectMembers(v Span, dst []Member) []Member {
	d := s.Doc
	i := s.ws(v.Start + 1)
	for d[i] != '}' {
		i = s.ws(i)
		kend, _, _ := s.string(i + 1)
		m := Member{Key: Span{i + 1, kend - 1}}
		at := s.ws(s.ws(kend) + 1)
		end := 0
		if d[at] == '"' {
			var esc bool
			end, esc, _ = s.string(at + 1)
			m.Plain = !esc
		} else {
			end = s.Skip(at)
		}
		m.Val = Span{at, end}
		dst = append(dst, m)
		if i = s.ws(end); d[i] == ',' {
			i++
		}
	}
	return dst
}

// Find is the first top-level member whose key is name (as written), or -1.
func (s *Scanner) Find(name string) int {
	for m := range s.Members {
		if s.Key(m) == name {
			return m
		}
	}
	return -1
}

// Key is member m's key as written, without copying it (valid while the
// record's bytes are).
func (s *Scanner) Key(m int) string {
	k := s.Members[m].Key
	if k.Start == k.End {
		return ""
	}
	return unsafe.String(&s.Doc[k.Start], k.End-k.Start)
}

// Unescape returns the text of a string's contents the way fastjson reads
// it: the JSON escapes decoded, and anything that is not a valid escape
// (an unknown letter, a short or non-hex \u, an unpaired surrogate's \u)
// kept as written. Without a backslash the record's own bytes are returned.
func (s *Scanner) Unescape(b []byte) []byte {
	n := indexBackslash(b)
	if n < 0 {
		return b
	}
	// No escape stands for more bytes than it is written with (\uXXXX
	// is at most 3 bytes of UTF-8, a surrogate pair's 12 bytes 4, what is
	// kept as written keeps its length), so the text fits in len(b)
	// bytes: the scratch grows once and is written by index.
	start := len(s.str)
	s.str = slices.Grow(s.str, len(b))
	out := s.str[start : start+len(b)]
	w := copy(out, b[:n])
	i := n + 1 // just past a backslash
	for i < len(b) {
		ch := b[i]
		i++
		if c := unescaped[ch]; c != 0 {
			out[w] = c
			w++
		} else if ch == 'u' {
			i, w = unescapeU(b, i, out, w)
		} else {
			out[w], out[w+1] = '\\', ch
			w += 2
		}
		// The text up to the next backslash, as it is. When that is
		// beyond the next word, it is found a word at a time and the
		// text copied; escapes close together (JSON held in a string)
		// are copied byte by byte.
		if i+8 <= len(b) && zeroBytes(binary.LittleEndian.Uint64(b[i:])^(ones*'\\')) == 0 {
			n := indexBackslash(b[i:])
			if n < 0 {
				w += copy(out[w:], b[i:])
				break
			}
			w += copy(out[w:], b[i:i+n])
			i += n + 1
			continue
		}
		for i < len(b) && b[i] != '\\' {
			out[w] = b[i]
			w++
			i++
		}
		i++ // past the backslash (or the end)
	}
	s.str = s.str[:start+w]
	return out[:w]
}

// unescaped is the byte each one-letter escape stands for (after the
// backslash), 0 for the others.
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescapeU writes the \u escape whose hex digits start at b[i] into
// out[w:] and returns the offsets after it in b and out: the character,
// a surrogate pair's one character, or the escape as written when it is
// not valid (a short or non-hex \u, an unpaired surrogate).
func unescapeU(b []byte, i int, out []byte, w int) (int, int) {
	x, ok := hex4(b[i:])
	if !ok {
		return i, w + copy(out[w:], `\u`)
	}
	xs := b[i : i+4]
	i += 4
	if !utf16.IsSurrogate(rune(x)) {
		return i, w + utf8.EncodeRune(out[w:], rune(x))
	}
	x1, ok := uint64(0), false
	if len(b)-i >= 6 && b[i] == '\\' && b[i+1] == 'u' {
		x1, ok = hex4(b[i+2:])
	}
	if !ok {
		w += copy(out[w:], `\u`)
		return i, w + copy(out[w:], xs)
	}
	return i + 6, w + utf8.EncodeRune(out[w:], utf16.DecodeRune(rune(x), rune(x1)))
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

// cut is a key for an error message: at most 64 bytes of it (as the
// decoders quote input).
func cut(b []byte) string { return errtext.Head(b, 64) }
