package eos

import (
	"reflect"

	"sink/internal/chschema"
)

// Canonical returns the permutation that puts rows in the canonical order
// (docs/exactly-once.md): rowPart[i] is the rank of row i's partition in
// the canonical partition order, rows of one partition being in offset order
// already. It is a stable counting sort; nil means the rows are in order.
func Canonical(rowPart []int32, parts int) []int {
	sorted := true
	for i := 1; i < len(rowPart); i++ {
		if rowPart[i] < rowPart[i-1] {
			sorted = false
			break
		}
	}
	if sorted {
		return nil
	}
	start := make([]int, parts+1)
	for _, p := range rowPart {
		start[p+1]++
	}
	for i := 1; i <= parts; i++ {
		start[i] += start[i-1]
	}
	perm := make([]int, len(rowPart))
	for i, p := range rowPart {
		perm[start[p]] = i
		start[p]++
	}
	return perm
}

// Ordered presents b's rows in the order perm gives (row i of the view is
// row perm[i] of b); a nil perm is b itself.
func Ordered(b chschema.Block, perm []int) chschema.Block {
	if perm == nil {
		return b
	}
	return ordered{b, perm}
}

type ordered struct {
	chschema.Block
	perm []int
}

// ColumnData permutes every column slice the block hands out (all columns
// are slices; see decode.Block.ColumnData).
func (o ordered) ColumnData(i int) any {
	d := o.Block.ColumnData(i)
	switch s := d.(type) {
	case []string:
		return permute(s, o.perm)
	case []int64:
		return permute(s, o.perm)
	case []int32:
		return permute(s, o.perm)
	case []uint64:
		return permute(s, o.perm)
	case []float64:
		return permute(s, o.perm)
	}
	v := reflect.ValueOf(d)
	if v.Kind() != reflect.Slice || v.Len() != len(o.perm) {
		return d // not a row slice: a programming error the INSERT reports
	}
	out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
	for i, src := range o.perm {
		out.Index(i).Set(v.Index(src))
	}
	return out.Interface()
}

func permute[T any](s []T, perm []int) []T {
	if len(s) != len(perm) {
		return s
	}
	out := make([]T, len(s))
	for i, src := range perm {
		out[i] = s[src]
	}
	return out
}
