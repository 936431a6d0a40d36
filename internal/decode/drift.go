package decode

import (
	"sink/internal/chschema"

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
//
// The registry formats whose records are typed by a schema (avro,
// protobuf, debezium-avro) know their unmapped fields when a schema is
// compiled for the Plan's columns: the top-level fields of the writer's
// schema (for debezium-avro, of its row image's record) that no column
// reads (knownUnmapped). Their records are counted without looking at
// the values: every record of such a schema counts, whether it sets the
// field or not (a field without presence always has a value, its default;
// a oneof member or an optional field may be absent, a union may be
// null). The Plan binds the schema's list to its counters once, and each
// record then adds one per field. Their Type is the schema's
// (SchemaType); their Example is the schema's name of the type
// (`schema type ["null","string"]`), not a value: the decoder skips the
// field's bytes without reading them, and rendering them would cost every
// record.

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
	// Example is the first value seen (JSON text, cut to 64 bytes); for
	// a field typed by the record's schema, "schema type " and the type
	// as the schema names it.
	Example string
	// Type is inferred from the first values seen (up to 100), merged;
	// for a field typed by the record's schema, Schema is set instead.
	Type   FieldType
	Schema *SchemaType
	// Default is the default the record's schema declares for the field
	// (nil: none), which a column added for it carries (FieldDefault.Literal).
	Default *FieldDefault
	// Order is when the Plan first saw the field among its unmapped
	// fields (0, 1, …): for a schema's fields, their order in the schema.
	Order   int
	sampled int
	new     bool // first sighting since the Plan was compiled, not yet taken
}

// Column returns the ClickHouse type schema.evolve: add_columns gives the
// field on a server with srv: from the schema when the field has one (see
// SchemaType.Column), else inferred from its values (FieldType.Column).
func (f UnmappedField) Column(srv chschema.ServerTypes, nullable bool) (string, error) {
	if f.Schema != nil {
		return f.Schema.Column(srv, nullable)
	}
	return f.Type.Column(srv, nullable)
}

// TypeName names the field's type for logs: the schema's type, or the
// inferred shape (int, string, array(int), …).
func (f UnmappedField) TypeName() string {
	if f.Schema != nil {
		return f.Schema.String()
	}
	return f.Type.String()
}

// New reports whether this is the first TakeUnmapped that hands the field
// out (its first sighting by this Plan).
func (f UnmappedField) New() bool { return f.new }

// drift is a Plan's record of unmapped fields.
type drift struct {
	// The format's drift hooks, asserted once at Compile (nil: none).
	known    schemaFields
	extra    extraFields
	defaults fieldDefaults
	fields   map[string]*UnmappedField
	overflow uint64
	visit    func(k []byte, v *fastjson.Value) // bound once, so a walk allocates nothing
	mapped   *jsonFields
	parser   fastjson.Parser // a scanned record's unmapped value, while it is sampled
	// last holds the unmapped fields of the last record that had some:
	// a stream whose records carry the same extra fields is counted by
	// looking those up again, without walking every key.
	last []*UnmappedField
	// lastAt guesses, for a scanned record, the member each field of
	// last is at: the one it was at in the record before (a producer
	// writes its keys in the same order), checked by one comparison
	// before the members are searched. Only a guess; may be stale.
	lastAt []int
	// rec is the unmapped fields of the record appended last (a nil entry
	// is a field counted as overflow), recOverflow how many of its fields
	// went to the overflow: LastUnmapped and Unappend.
	rec         []*UnmappedField
	recOverflow uint64
}

// LastUnmapped returns the unmapped fields of the record that the last
// successful Append added (nil when it had none); a nil entry is a field
// beyond MaxUnmappedFields. The slice is the Plan's: valid until the next
// Append, not to be modified.
func (p *Plan) LastUnmapped() []*UnmappedField { return p.drift.rec }

// unnote takes back the counts of the record appended last (Unappend).
func (d *drift) unnote() {
	for _, u := range d.rec {
		if u != nil {
			u.Count--
		}
	}
	d.overflow -= d.recOverflow
	d.rec, d.recOverflow = nil, 0
}

// extraFields is implemented by formats whose records are JSON objects:
// it returns the loaded object's fields when it has keys that no bound
// path reads, else nil.
type extraFields interface {
	extra() *jsonFields
}

// schemaFields is implemented by formats whose records are typed by a
// registry schema: it returns the unmapped fields of the schema the
// record just appended was written with (nil or empty: none).
type schemaFields interface {
	unmappedFields() *knownUnmapped
}

// knownUnmapped is the top-level fields of one compiled schema that no
// column reads, and the Plan's counters for them (bound on first use).
type knownUnmapped struct {
	fields   []schemaField
	counters []*UnmappedField // per field; nil: counted as overflow
	bound    bool
}

type schemaField struct {
	name string
	typ  *SchemaType
	def  *FieldDefault
}

// bind notes which drift hook format f has.
func (d *drift) bind(f rowFormat) {
	d.known, _ = f.(schemaFields)
	d.extra, _ = f.(extraFields)
	d.defaults, _ = f.(fieldDefaults)
}

// noteUnmapped counts the unmapped fields of the record just appended.
func (p *Plan) noteUnmapped() {
	d := &p.drift
	d.rec, d.recOverflow = nil, 0
	if d.known != nil {
		if k := d.known.unmappedFields(); k != nil && len(k.fields) > 0 {
			over := d.overflow
			d.countKnown(k)
			d.rec, d.recOverflow = k.counters, d.overflow-over
		}
		return
	}
	if d.extra == nil {
		return
	}
	f := d.extra.extra()
	if f == nil {
		return
	}
	if d.visit == nil {
		d.visit = func(k []byte, v *fastjson.Value) {
			if _, ok := d.mapped.keyIdx[string(k)]; ok {
				return
			}
			if u := d.field(k); u != nil {
				d.count(u, v)
				d.last = append(d.last, u)
			}
		}
	}
	if f.sc != nil {
		d.noteScanned(f)
		return
	}
	// The common case: the same extra fields as the record before.
	if len(d.last) == f.extra && d.again(f.obj) {
		d.rec = d.last
		return
	}
	over := d.overflow
	d.mapped = f
	d.last = d.last[:0]
	f.obj.Visit(d.visit)
	d.rec, d.recOverflow = d.last, d.overflow-over
}

// field is the counter of unmapped field k, created on its first
// sighting; nil when MaxUnmappedFields are tracked already (counted as
// overflow).
func (d *drift) field(k []byte) *UnmappedField {
	u := d.fields[string(k)]
	if u == nil {
		if d.fields == nil {
			d.fields = map[string]*UnmappedField{}
		}
		if len(d.fields) >= MaxUnmappedFields {
			d.overflow++
			return nil
		}
		u = &UnmappedField{Name: string(k), new: true, Order: len(d.fields)}
		if d.defaults != nil {
			u.Default = d.defaults.fieldDefault(u.Name)
		}
		d.fields[u.Name] = u
	}
	return u
}

// noteScanned is noteUnmapped for a record the scanner read (no key of
// which is escaped): the same counts as for its tree, walking the members'
// keys instead of an object's.
func (d *drift) noteScanned(f *jsonFields) {
	sc := f.sc
	if len(d.last) == f.extra && d.againScanned(f) {
		d.rec = d.last
		return
	}
	over := d.overflow
	d.last, d.lastAt = d.last[:0], d.lastAt[:0]
	for m := range sc.Members {
		k := sc.Doc[sc.Members[m].Key.Start:sc.Members[m].Key.End]
		if _, ok := f.keyIdx[string(k)]; ok {
			continue
		}
		if u := d.field(k); u != nil {
			d.countScanned(u, sc, m)
			d.last = append(d.last, u)
			d.lastAt = append(d.lastAt, m)
		}
	}
	d.rec, d.recOverflow = d.last, d.overflow-over
}

// againScanned is again for a scanned record. Whether each field of last
// is there is checked at its guessed member first; the member a field's
// value is sampled from is the first of its key (find), as for a tree.
func (d *drift) againScanned(f *jsonFields) bool {
	sc := f.sc
	for len(d.lastAt) < len(d.last) {
		d.lastAt = append(d.lastAt, -1) // last was filled from a tree
	}
	for i, u := range d.last {
		if m := d.lastAt[i]; m >= 0 && m < len(sc.Members) && sc.Key(m) == u.Name {
			continue
		}
		m := sc.Find(u.Name)
		if m < 0 {
			return false
		}
		d.lastAt[i] = m
	}
	for _, u := range d.last {
		if u.sampled >= inferSamples {
			u.Count++
			continue
		}
		d.countScanned(u, sc, sc.Find(u.Name))
	}
	return true
}

// countScanned is count for member m of a scanned record: its value is
// parsed (alone) only while the field is still sampled.
func (d *drift) countScanned(u *UnmappedField, sc *jsonScanner, m int) {
	if u.sampled >= inferSamples {
		u.Count++
		return
	}
	v := sc.Members[m].Val
	t, _ := d.parser.ParseBytes(sc.Doc[v.Start:v.End]) // the scanner accepted it
	d.count(u, t)
}

// countKnown counts one record of a schema whose unmapped fields are k.
func (d *drift) countKnown(k *knownUnmapped) {
	if !k.bound {
		k.bound = true
		if d.fields == nil {
			d.fields = map[string]*UnmappedField{}
		}
		k.counters = make([]*UnmappedField, len(k.fields))
		for i, f := range k.fields {
			u := d.fields[f.name]
			if u == nil && len(d.fields) < MaxUnmappedFields {
				u = &UnmappedField{Name: f.name, new: true, Schema: f.typ, Default: f.def, Example: "schema type " + f.typ.String(), Order: len(d.fields)}
				d.fields[u.Name] = u
			}
			k.counters[i] = u
		}
	}
	for _, u := range k.counters {
		if u == nil {
			d.overflow++
			continue
		}
		u.Count++
	}
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
