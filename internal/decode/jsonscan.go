package decode

import (
	"sink/internal/decode/column"
	"sink/internal/jsonscan"
)

// jsonScanner reads a JSON record in one pass without a tree (the grammar
// and the scanner are internal/jsonscan's): the json and json-schema
// formats read every record with one. Columns take their values from the
// members it noted: a scalar straight from the record's bytes, a path
// below a top-level key by walking the value's bytes, and only an object or
// array that a column stores whole (an Array, Map, Tuple, JSON or String
// column) is parsed into a tree, that one value alone.
//
// A record in which some key anywhere holds a backslash escape is read
// through the tree instead (jsonFields.load), because there the rule of
// which duplicate wins depends on the order in which keys are looked up
// (see jsonFormat.begin); such records are rare.
type jsonScanner = jsonscan.Scanner

type scanSpan = jsonscan.Span

// scanScalar sets in to the scalar value v of s's record; ok is false for
// an object or an array, which the caller reads through a tree.
func scanScalar(s *jsonScanner, v scanSpan, in *column.Value) bool {
	b := s.Doc[v.Start:v.End]
	switch b[0] {
	case '{', '[':
		return false
	case '"':
		in.Kind, in.Bytes = column.String, s.Unescape(b[1:len(b)-1])
	case 't':
		in.Kind = column.True
	case 'f':
		in.Kind = column.False
	case 'n':
		if len(b) == 4 {
			in.Kind = column.Null
			break
		}
		in.Kind, in.Bytes = column.Number, b
	default:
		in.Kind, in.Bytes = column.Number, b
	}
	return true
}
