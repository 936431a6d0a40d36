package eos

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/internal/offsets"
)

// Span is a run of consecutive offsets First..Last.
type Span struct{ First, Last int64 }

// Present returns the offsets of tp at or after from (and before to, unless
// to is -1) that table (already quoted as `db`.`t`) holds in its _offset
// column, folded into runs of consecutive offsets, in order.
func Present(ctx context.Context, conn driver.Conn, table string, tp offsets.TP, from, to int64) ([]Span, error) {
	q := "SELECT DISTINCT toInt64(_offset) AS o FROM " + table +
		" WHERE _topic = ? AND _partition = ? AND _offset >= ?"
	args := []any{tp.Topic, tp.Partition, from}
	if to >= 0 {
		q += " AND _offset < ?"
		args = append(args, to)
	}
	q += " ORDER BY o"
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: checking which offsets of %s[%d] %s holds: %w", tp.Topic, tp.Partition, table, err)
	}
	defer rows.Close()
	var out []Span
	for rows.Next() {
		var o int64
		if err := rows.Scan(&o); err != nil {
			return nil, fmt.Errorf("clickhouse: checking offsets in %s: %w", table, err)
		}
		if n := len(out); n > 0 && out[n-1].Last+1 == o {
			out[n-1].Last = o
			continue
		}
		out = append(out, Span{o, o})
	}
	return out, rows.Err()
}

// Union folds the span lists of several servers (each in order, as
// Present returns them) into one list in order, overlapping and adjacent
// runs joined: the offsets that at least one of them holds.
func Union(lists ...[]Span) []Span {
	var all []Span
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.SortFunc(all, func(a, b Span) int { return cmp.Compare(a.First, b.First) })
	var out []Span
	for _, s := range all {
		if n := len(out); n > 0 && s.First <= out[n-1].Last+1 {
			out[n-1].Last = max(out[n-1].Last, s.Last)
			continue
		}
		out = append(out, s)
	}
	return out
}

// Covers is a set of offset spans of one partition that are already handled
// (present in the table or inserted by a replay); records there are not
// inserted again. Spans are kept sorted and are dropped once passed.
type Covers []Span

// Add inserts s, keeping the set sorted (spans may overlap).
func (c Covers) Add(s Span) Covers {
	i := 0
	for i < len(c) && c[i].First < s.First {
		i++
	}
	c = append(c, Span{})
	copy(c[i+1:], c[i:])
	c[i] = s
	return c
}

// Contains reports whether offset is covered, keeping every span: a
// partition sought back reads the same offsets again.
func (c Covers) Contains(offset int64) bool {
	for _, sp := range c {
		if sp.First > offset {
			return false
		}
		if offset <= sp.Last {
			return true
		}
	}
	return false
}

// From drops the spans entirely before offset (the partition's committed
// offset passed them: they are never read again).
func (c Covers) From(offset int64) Covers {
	for len(c) > 0 && c[0].Last < offset {
		c = c[1:]
	}
	return c
}
