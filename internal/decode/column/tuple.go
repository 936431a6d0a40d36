package column

import (
	"reflect"
	"strconv"

	"sink/internal/chtype"
)

// tupleCol buffers Tuple(...) (and each element of Nested, which is an
// Array of a named Tuple): one buffer per element.
type tupleCol struct {
	t     *chtype.Type
	elems []col
	n     int   // rows
	in    Value // element scratch
}

func newTupleCol(t *chtype.Type) *tupleCol {
	tc := &tupleCol{t: t}
	for _, e := range t.Elems {
		tc.elems = append(tc.elems, newCol(e))
	}
	return tc
}

func (tc *tupleCol) named() bool { return tc.t.Names[0] != "" }

// add fills every element: a named tuple from a JSON object (by element
// name; missing names get their default) or from an array (by position),
// an unnamed tuple from an array of exactly its length; null or missing
// gives every element its default.
func (tc *tupleCol) add(c *State, in *Value) error {
	ein := &tc.in
	switch in.Kind {
	case Missing, Null:
		ein.Kind = Missing
		for i, e := range tc.elems {
			if err := e.add(c, ein); err != nil {
				return tc.elemErr(i, err)
			}
		}
	case Object:
		if !tc.named() {
			return cannotConvert(in, tc.t, "an unnamed tuple wants a JSON array")
		}
		for i, e := range tc.elems {
			c.FromJSON(in.Tree.Get(tc.t.Names[i]), ein)
			if err := e.add(c, ein); err != nil {
				return tc.elemErr(i, err)
			}
		}
	case Array:
		items, _ := in.Tree.Array()
		if len(items) != len(tc.elems) {
			return cannotConvert(in, tc.t, "want "+strconv.Itoa(len(tc.elems))+" elements, got "+strconv.Itoa(len(items)))
		}
		for i, e := range tc.elems {
			c.FromJSON(items[i], ein)
			if err := e.add(c, ein); err != nil {
				return tc.elemErr(i, err)
			}
		}
	default:
		return cannotConvert(in, tc.t, "want a JSON object or array")
	}
	tc.n++
	return nil
}

func (tc *tupleCol) elemErr(i int, err error) error {
	name := tc.t.Names[i]
	if name == "" {
		name = strconv.Itoa(i + 1)
	}
	return &reason{msg: "element " + name + ": " + err.Error()}
}

func (tc *tupleCol) rows() int { return tc.n }

func (tc *tupleCol) truncate(n int) {
	if n > tc.n {
		// a failed add may have filled some elements only
		n = tc.n
	}
	for _, e := range tc.elems {
		e.truncate(n)
	}
	tc.n = n
}

func (tc *tupleCol) reset() { tc.truncate(0) }

// data returns one []any per row, the elements in order: clickhouse-go's
// Tuple column appends a slice row by position (named tuples too).
func (tc *tupleCol) data() any {
	cols := make([]reflect.Value, len(tc.elems))
	for j, e := range tc.elems {
		cols[j] = reflect.ValueOf(e.data())
	}
	k := len(tc.elems)
	flat := make([]any, tc.n*k)
	out := make([][]any, tc.n)
	for i := range out {
		row := flat[i*k : (i+1)*k : (i+1)*k]
		for j := range cols {
			row[j] = cols[j].Index(i).Interface()
		}
		out[i] = row
	}
	return out
}

func (tc *tupleCol) split(ends []int) any { return reflectSplit(tc.data(), ends) }
