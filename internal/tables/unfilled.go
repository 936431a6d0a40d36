package tables

import (
	"sort"
	"strings"

	"sink/internal/decode"
)

// UnfilledColumn is a column of a route's table that sampled (or batched)
// records gave no value: the column got its type's default, or NULL.
type UnfilledColumn struct {
	decode.Unfilled
	// Similar is a field of the records whose name is close to the one
	// the column reads (userId for user_id), "" when none is.
	Similar string
}

// Empty reports whether no record of the sample filled the column.
func (u UnfilledColumn) Empty() bool { return u.Rows == u.Of && u.Of > 0 }

// unfilledColumns takes plan's unfilled columns, each with the field of
// fields (the records' fields no column takes) closest to what it reads.
func unfilledColumns(plan *decode.Plan, fields []FieldReport) []UnfilledColumn {
	var out []UnfilledColumn
	plan.TakeUnfilled(func(u decode.Unfilled) {
		c := UnfilledColumn{Unfilled: u}
		for _, f := range fields {
			if SimilarName(u.Source, f.Name) {
				c.Similar = f.Name
				break
			}
		}
		out = append(out, c)
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Column < out[j].Column })
	return out
}

// SimilarName reports whether field is likely the one a column reading
// source meant: the same name in another case or spelling (user_id,
// userId, user-id, UserID), or one or two letters apart in a name of five
// or more. Only the last element of a path source is compared.
func SimilarName(source, field string) bool {
	if i := strings.LastIndexByte(source, '.'); i >= 0 {
		source = source[i+1:]
	}
	a, b := foldName(source), foldName(field)
	if a == "" || source == field {
		return false
	}
	if a == b {
		return true
	}
	return len(a) >= 5 && editDistance(a, b) <= 2
}

// foldName lower-cases name and drops the separators that spellings of
// one name differ by.
func foldName(name string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', ' ':
			return -1
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, name)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
