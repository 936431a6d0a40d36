package tables

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

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

// flushUnfilled takes the counts of unfilled columns of ts's plans (the
// rows of the batch being sealed) and, for every column most of those rows
// got no value for, counts the batch in the table's metrics and logs a
// warning, once per column per DriftIdle, naming the field a column looked
// for and a field of similar name the records carry (from the drift).
func (c *Catalog) flushUnfilled(ts *Table) {
	cols := map[string]*decode.Unfilled{}
	var rows uint64
	for _, rs := range c.RoutesInto(ts) {
		rows += rs.plan.TakeUnfilled(func(u decode.Unfilled) {
			if s := cols[u.Column]; s != nil {
				s.Rows += u.Rows
				return
			}
			cols[u.Column] = &u
		})
	}
	for _, u := range cols {
		if u.Rows*2 <= rows {
			continue
		}
		ts.m.MostlyDefaulted(u.Column)
		c.logUnfilled(ts, UnfilledColumn{Unfilled: decode.Unfilled{Column: u.Column, Source: u.Source, Rows: u.Rows, Of: rows}})
	}
}

// logUnfilled warns, at most once per DriftIdle per column, that most rows
// of a batch of ts left column u unfilled.
func (c *Catalog) logUnfilled(ts *Table, u UnfilledColumn) {
	now := c.now()
	if at, ok := ts.unfilledAt[u.Column]; ok && now.Sub(at) < DriftIdle {
		return
	}
	if ts.unfilledAt == nil {
		ts.unfilledAt = map[string]time.Time{}
	}
	ts.unfilledAt[u.Column] = now
	if ts.drift != nil {
		for _, name := range slices.Sorted(maps.Keys(ts.drift.fields)) {
			if SimilarName(u.Source, name) {
				u.Similar = name
				break
			}
		}
	}
	ev := c.log.Warn().Str("table", ts.name).Str("column", u.Column).Str("source", u.Source).
		Uint64("unfilled_rows", u.Rows).Uint64("batch_rows", u.Of)
	if u.Similar != "" {
		ev = ev.Str("similar_field", u.Similar)
	}
	ev.Msg(UnfilledMessage(u))
}

// UnfilledMessage is the warning for a column most rows left unfilled.
func UnfilledMessage(u UnfilledColumn) string {
	s := "most rows of the batch got no value for the column from their records (the type's default or NULL was inserted)"
	if u.Similar != "" {
		s += "; the records have a field " + u.Similar + " (map it: columns: {" + u.Column + ": " + u.Similar + "})"
	}
	return s
}
