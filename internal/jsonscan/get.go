package jsonscan

import (
	"strconv"
	"strings"
)

// Getter follows paths through a scanned text with the rule fastjson's
// Value.Get has for keys, whatever keys the text holds: in each object the
// first member whose key equals the step is taken, the keys compared as
// written until a lookup in that object misses (or its step holds a
// backslash), and unescaped from then on (so after a miss, "\u0061" is a
// key "a"). Which of two spellings of one key a lookup finds thus depends
// on the lookups in that object before it, as it did with a fastjson tree
// parsed once per text; a numeric step indexes an array.
//
// Concurrency: as its Scanner's; Reset it for each text scanned.
type Getter struct {
	s         *Scanner
	unescaped []int // offsets of the objects whose keys compare unescaped
}

// Reset points g at the text s scanned last, which Scan accepted.
func (g *Getter) Reset(s *Scanner) {
	g.s, g.unescaped = s, g.unescaped[:0]
}

// Get returns the value at path below the top-level value; ok is false
// when some step is not there (or the path is empty).
func (g *Getter) Get(path []string) (Span, bool) {
	return g.GetIn(Span{Start: g.s.ws(0)}, path)
}

// GetIn returns the value at path below the value v (of the text scanned
// last, e.g. an Envelope's payload); ok is false when some step is not
// there (or the path is empty).
func (g *Getter) GetIn(v Span, path []string) (Span, bool) {
	s := g.s
	if len(path) == 0 {
		return Span{}, false
	}
	at := v.Start
	for _, step := range path {
		var ok bool
		switch s.Doc[at] {
		case '{':
			at, ok = g.member(at, step)
		case '[':
			at, ok = s.index(at, step)
		}
		if !ok {
			return Span{}, false
		}
	}
	return Span{at, s.Skip(at)}, true
}

// member is the offset of the value of key in the object at o.
func (g *Getter) member(o int, key string) (int, bool) {
	unesc := false
	for _, u := range g.unescaped {
		if u == o {
			unesc = true
			break
		}
	}
	if !unesc && strings.IndexByte(key, '\\') < 0 {
		if v, ok := g.s.find(o, key, false); ok {
			return v, true
		}
	}
	if !unesc {
		g.unescaped = append(g.unescaped, o)
	}
	return g.s.find(o, key, true)
}

// find is the offset of the first value in the object at o whose key
// equals key, as written or, with unesc, unescaped.
func (s *Scanner) find(o int, key string, unesc bool) (int, bool) {
	d := s.Doc
	i := s.ws(o + 1)
	for d[i] != '}' {
		i = s.ws(i)
		kend, esc, _ := s.string(i + 1)
		k := d[i+1 : kend-1]
		v := s.ws(s.ws(kend) + 1)
		match := string(k) == key
		if unesc && esc {
			n := len(s.str)
			match = string(s.Unescape(k)) == key
			s.str = s.str[:n] // the key's text is not needed past the comparison
		}
		if match {
			return v, true
		}
		if i = s.ws(s.Skip(v)); d[i] == ',' {
			i++
		}
	}
	return 0, false
}

// index is the offset of element step (a number) of the array at a.
func (s *Scanner) index(a int, step string) (int, bool) {
	d := s.Doc
	n, err := strconv.Atoi(step)
	if err != nil || n < 0 {
		return 0, false
	}
	i := s.ws(a + 1)
	for k := 0; k < n; k++ {
		if d[i] == ']' {
			return 0, false
		}
		if i = s.ws(s.Skip(i)); d[i] == ',' {
			i = s.ws(i + 1)
		}
	}
	if d[i] == ']' {
		return 0, false
	}
	return i, true
}
