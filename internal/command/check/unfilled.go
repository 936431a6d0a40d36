package check

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"sink/internal/tables"
)

// Options are check's flags.
type Options struct {
	// AllowUnfilled names the columns (COLUMN, TABLE.COLUMN or
	// DB.TABLE.COLUMN) that no sampled record may fill without failing
	// the check: a column left to its default on purpose.
	AllowUnfilled []string
}

// allows reports whether the check accepts column of table (db.table)
// left unfilled.
func (o Options) allows(table, column string) bool {
	_, short, _ := strings.Cut(table, ".")
	return slices.ContainsFunc(o.AllowUnfilled, func(a string) bool {
		return a == column || a == short+"."+column || a == table+"."+column
	})
}

// unfilled prints, for one topic's sample, the columns that most of its
// records leave to their default, and returns the error for the first
// column none of them fills that o does not allow.
func unfilled(stdout io.Writer, r tables.DriftReport, o Options) error {
	var first error
	for _, u := range r.Unfilled {
		if u.Rows*2 <= u.Of {
			continue
		}
		line := unfilledLine(r, u)
		allowed := o.allows(r.Table, u.Column)
		switch {
		case !u.Empty():
			fmt.Fprintf(stdout, "unfilled: %s\n", line)
		case allowed:
			fmt.Fprintf(stdout, "unfilled: %s (allowed by --allow-unfilled)\n", line)
		default:
			fmt.Fprintf(stdout, "unfilled: %s\n", line)
			if first == nil {
				first = fmt.Errorf("%s (--allow-unfilled %s accepts it)", line, u.Column)
			}
		}
	}
	return first
}

// unfilledLine says which column of r's table how many sampled records
// left without a value, the field it looked for, and a field of a similar
// name the records have.
func unfilledLine(r tables.DriftReport, u tables.UnfilledColumn) string {
	what := fmt.Sprintf("%d of %d sampled records have no value for %s", u.Rows, u.Of, u.Source)
	if u.Empty() {
		what = fmt.Sprintf("no sampled record (of %d) has a value for %s", u.Of, u.Source)
	}
	s := fmt.Sprintf("topic %s -> %s: column %s: %s", r.Topic, r.Table, u.Column, what)
	if u.Similar != "" {
		s += fmt.Sprintf("; the records have a field %s (map it: columns: {%s: %s})", u.Similar, u.Column, u.Similar)
	}
	return s
}
