package decode

import (
	"sink/internal/decode/column"
	"sink/internal/decode/format"
)

// Policy says what a Plan does where the data leaves a choice. The zero
// value is the permissive behaviour the package documents (defaults for
// missing and null values, tombstones skipped).
type Policy struct {
	// MissingBad: a source value that is absent (a JSON path not in the
	// record, no key, no such header, no timestamp) for a column that is
	// not Nullable makes the record bad instead of giving the type's
	// default (zero, "", the epoch, [] ...).
	MissingBad bool
	// NullBad: JSON null (or a header with a null value) for a column that
	// is not Nullable makes the record bad instead of giving the default.
	NullBad bool
	// TombstoneBad: in the json format, a record with a null value (a
	// tombstone of a compacted topic) is a bad record instead of being
	// skipped (Append returns an error matching ErrSkip). The debezium-json
	// format always skips tombstones: they are part of its protocol.
	TombstoneBad bool
	// Unmapped, when set, says whether the route would add an unmapped
	// field of that name as a column (its schema.allow / schema.deny); the
	// names it refuses are tracked apart (UnmappedField.Refused, drift.go),
	// so that they never take the slots of the names it accepts.
	Unmapped func(name string) bool
	// MaxRowBytes bounds the bytes one row holds decoded (as Block.Bytes
	// counts them); 0 means DefaultMaxRowBytes.
	MaxRowBytes int
}

// Default reasons, as DefaultsApplied reports them.
const (
	ReasonMissing = "missing"
	ReasonNull    = "null"
)

// SetPolicy sets the plan's policy; call it before the first Append.
func (p *Plan) SetPolicy(pol Policy) {
	p.policy = pol
	p.rpol = format.Policy{TombstoneBad: pol.TombstoneBad, MaxRowBytes: pol.MaxRowBytes}
	p.defaults = make([][2]uint64, len(p.cols))
	p.unfilled.counts = make([]uint64, len(p.cols))
	p.drift.Bind(p.format, pol.Unmapped)
}

// TakeDefaults calls fn for every column that got its type's default
// because its value was missing or null in the rows appended since the last
// call (rows of failed Appends are not counted), then resets the counts.
func (p *Plan) TakeDefaults(fn func(column, reason string, n uint64)) {
	for i, d := range p.defaults {
		if d[0] > 0 {
			fn(p.cols[i].Name, ReasonMissing, d[0])
		}
		if d[1] > 0 {
			fn(p.cols[i].Name, ReasonNull, d[1])
		}
		p.defaults[i] = [2]uint64{}
	}
}

// checkDefault applies the policy to column i's value before conversion:
// it returns the reason a missing or null value makes the record bad, or
// notes the default in the row's marks.
func (p *Plan) checkDefault(i int, in *column.Value) error {
	if in.Kind != column.Missing && in.Kind != column.Null {
		if in.Kind == column.Number && column.BareNaNInf(in.Bytes) {
			return column.Reasonf("bare %s is not JSON (quote it, \"NaN\" or \"Infinity\", for a Float column)", in.Bytes)
		}
		return nil
	}
	if p.format.Lenient() {
		// The format says the record's missing values are not data anyone
		// loses (a Debezium delete, whose row only marks the key deleted).
		return nil
	}
	if p.types[i].TakesNull() {
		if p.defaults != nil {
			p.marks = append(p.marks, mark{col: i, nullable: true})
		}
		return nil
	}
	null := in.Kind == column.Null
	switch {
	case null && p.policy.NullBad:
		return column.Reasonf("null into non-Nullable %s (errors.on_null is bad_record)", p.types[i].Text)
	case !null && p.policy.MissingBad:
		return column.Reasonf("missing value for non-Nullable %s (errors.on_missing is bad_record)", p.types[i].Text)
	}
	if p.defaults != nil {
		p.marks = append(p.marks, mark{col: i, null: null})
	}
	return nil
}

// mark is a column the row being appended got no value for from its
// record: the type's default (for a missing value, or for null) or, in a
// Nullable column, NULL.
type mark struct {
	col      int
	null     bool
	nullable bool
}

// countDefaults adds the finished row's marks to the counts.
func (p *Plan) countDefaults() { p.addMarks(1) }

// uncountDefaults takes the last row's marks back out of the counts.
func (p *Plan) uncountDefaults() { p.addMarks(^uint64(0)) }

// addMarks adds d (1, or -1 as ^0) per mark of the row to the counts of
// defaults given and of columns left unfilled. The marks stay until the
// next row starts, for Unappend.
func (p *Plan) addMarks(d uint64) {
	if p.defaults == nil {
		return
	}
	p.unfilled.rows += d
	for _, m := range p.marks {
		p.unfilled.counts[m.col] += d
		switch {
		case m.nullable:
		case m.null:
			p.defaults[m.col][1] += d
		default:
			p.defaults[m.col][0] += d
		}
	}
}
