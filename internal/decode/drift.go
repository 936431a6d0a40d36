package decode

import (
	"github.com/valyala/fastjson"
)

// Schema drift: the top-level fields of a record (the json format's value,
// the debezium-json format's row image) that no column of the Plan reads.
// The Plan counts them per field while it appends rows, keeps an example
// value and infers a type from the first values, and hands the counts out
// with TakeUnmapped, the way TakeDefaults hands out the defaults.
//
// The check is cheap: loading a record looks up each key the columns read
// and counts the hits; only when the object has more keys than that is it
// looked at again: when the extra keys are as many as the previous
// record's unmapped fields and include them all, those are counted (the
// steady state of a producer with a field the table lacks); otherwise its
// keys are walked to find the others. Fields already seen are counted
// through a map lookup by the key's bytes (no allocation); a new field
// allocates once. At most MaxUnmappedFields distinct fields are kept per
// Plan; the rest are counted together under OverflowField.

// MaxUnmappedFields bounds the distinct unmapped fields a Plan (and the
// pipeline, per table) tracks by name.
const MaxUnmappedFields = 64

// OverflowField names the fields beyond MaxUnmappedFields in counts and
// metrics.
const OverflowField = "(other)"

// inferSamples is how many values of an unmapped field the Plan infers the
// type from (merging them), so that an integer field whose later values
// have fractions is seen as Float, without inferring every record.
const inferSamples = 100

// UnmappedField is one record field that no column reads.
type UnmappedField struct {
	Name string
	// Count is the records that carried the field since the last
	// TakeUnmapped.
	Count uint64
	// Example is the first value seen (JSON text, cut to 64 bytes).
	Example string
	// Type is inferred from the first values seen (up to 100), merged.
	Type    FieldType
	sampled int
	new     bool // first sighting since the Plan was compiled, not yet taken
}

// New reports whether this is the first TakeUnmapped that hands the field
// out (its first sighting by this Plan).
func (f UnmappedField) New() bool { return f.new }

// drift is a Plan's record of unmapped fields.
type drift struct {
	fields   map[string]*UnmappedField
	overflow uint64
	visit    func(k []byte, v *fastjson.Value) // bound once, so a walk allocates nothing
	mapped   *jsonFields
	// last holds the unmapped fields of the last record that had some:
	// a stream whose records carry the same extra fields is counted by
	// looking those up again, without walking every key.
	last []*UnmappedField
}

// extraFields is implemented by formats whose records are JSON objects:
// it returns the loaded object's fields when it has keys that no bound
// path reads, else nil.
type extraFields interface {
	extra() *jsonFields
}

// noteUnmapped counts the unmapped fields of the record just appended.
func (p *Plan) noteUnmapped() {
	ef, ok := p.format.(extraFields)
	if !ok {
		return
	}
	f := ef.extra()
	if f == nil {
		return
	}
	d := &p.drift
	if d.visit == nil {
		d.fields = map[string]*UnmappedField{}
		d.visit = func(k []byte, v *fastjson.Value) {
			if _, ok := d.mapped.keyIdx[string(k)]; ok {
				return
			}
			u := d.fields[string(k)]
			if u == nil {
				if len(d.fields) >= MaxUnmappedFields {
					d.overflow++
					return
				}
				u = &UnmappedField{Name: string(k), new: true}
				d.fields[u.Name] = u
			}
			d.count(u, v)
			d.last = append(d.last, u)
		}
	}
	// The common case: the same extra fields as the record before.
	if len(d.last) == f.extra && d.again(f.obj) {
		return
	}
	d.mapped = f
	d.last = d.last[:0]
	f.obj.Visit(d.visit)
}

// again counts the fields of d.last in o when o has every one of them.
func (d *drift) again(o *fastjson.Object) bool {
	for _, u := range d.last {
		if o.Get(u.Name) == nil {
			return false
		}
	}
	for _, u := range d.last {
		d.count(u, o.Get(u.Name))
	}
	return true
}

// count counts one record carrying u with value v, and infers from v while
// the field has had fewer than inferSamples values.
func (d *drift) count(u *UnmappedField, v *fastjson.Value) {
	u.Count++
	if u.sampled < inferSamples {
		u.sampled++
		u.Type = mergeType(u.Type, inferValue(v, 0))
		if u.Example == "" && v.Type() != fastjson.TypeNull {
			u.Example = cut(v.MarshalTo(nil))
		}
	}
}

// TakeUnmapped calls fn for every unmapped field seen since the last call
// (records that failed to decode are not counted) and resets the counts;
// overflow is the records' fields beyond MaxUnmappedFields. fn must not
// keep the pointer.
func (p *Plan) TakeUnmapped(fn func(f *UnmappedField), overflow func(n uint64)) {
	d := &p.drift
	for _, u := range d.fields {
		if u.Count > 0 {
			fn(u)
			u.Count, u.new = 0, false
		}
	}
	if d.overflow > 0 && overflow != nil {
		overflow(d.overflow)
		d.overflow = 0
	}
}
