package decode

// unfilled counts, per column, the rows appended since the last
// TakeUnfilled that got no value from their record (the value was missing
// or null: the column got its type's default, or NULL), and the rows
// appended. A column the table fills from a DEFAULT expression is not
// counted: that is what the table asks for. Nor is a row whose format
// says its missing values hold no data (a Debezium delete).
type unfilled struct {
	counts []uint64
	rows   uint64
}

// Unfilled is a column that some rows got no value for from their
// records.
type Unfilled struct {
	// Column is the column's name; Source what the route reads it from
	// (a field path such as "user_id" or "a.b", or $header.NAME, $key…).
	Column, Source string
	// Rows of Of rows appended got no value for it.
	Rows, Of uint64
}

// TakeUnfilled calls fn for every column that rows appended since the last
// call (Of in all) got no value for from their records, then resets the
// counts; it returns the rows appended since the last call. It counts
// only after SetPolicy.
func (p *Plan) TakeUnfilled(fn func(Unfilled)) (rows uint64) {
	u := &p.unfilled
	for i, n := range u.counts {
		if n > 0 {
			fn(Unfilled{Column: p.cols[i].Name, Source: p.srcs[i].spec, Rows: n, Of: u.rows})
		}
		u.counts[i] = 0
	}
	rows, u.rows = u.rows, 0
	return rows
}
