// Package drift keeps a Plan's record of schema drift: the top-level
// fields of a record (the json format's value, the debezium-json format's
// row image) that no column of the Plan reads. A Plan's Counter counts them
// per field while the Plan appends rows, keeps an example value and
// infers a type from the first values (FieldType, infer.go), and hands
// the counts out (Take: the Plan's TakeUnmapped), the way TakeDefaults
// hands out the defaults. It also gives such a field the column type
// schema evolution adds for it: inferred from its values, or the type its
// registry schema declares (SchemaType), or the type the record's own
// schema declares (a Kafka Connect envelope: TypesReader), or a JSON
// Schema's (JSONSchemaFields).
//
// Concurrency: a Counter belongs to its Plan and is used from the Plan's
// goroutine. The types and functions are free of shared state.
//
// The check is cheap: loading a record looks up each key the columns read
// and counts the hits; only when the object has more keys than that is it
// looked at again: when the extra keys are as many as the previous
// record's unmapped fields and include them all, those are counted (the
// steady state of a producer with a field the table lacks); otherwise its
// keys are walked to find the others. Fields already seen are counted
// through a map lookup by the key's bytes (no allocation); a new field
// allocates once.
//
// A record's producer chooses the names, so what a Counter keeps of them is
// bounded, and junk cannot take the room a real new field needs:
//
//   - A name is stored only when it is 1 to MaxFieldName bytes of UTF-8
//     without control characters; any other is counted under
//     OverflowField and never stored, logged or used as a metric label.
//   - Policy.Unmapped (the route's schema.allow / schema.deny) splits the
//     names in two: those it would add as columns and those it refuses
//     (UnmappedField.Refused). Each kind has MaxUnmappedFields slots of its
//     own, so refused names never take the slot of a name evolution may
//     add.
//   - A field counted in neither the current period nor the one before
//     (a period ends at each Take, i.e. each sealed batch of the Plan's
//     table) is idle: a new name of its kind takes its slot when
//     the kind is full. No count is lost (an idle field has none), and the
//     field is made again at its next sighting.
//
// Beyond that, the fields are counted together under OverflowField.
//
// The registry formats whose records are typed by a schema (avro,
// protobuf, debezium-avro) know their unmapped fields when a schema is
// compiled for the Plan's columns: the top-level fields of the writer's
// schema (for debezium-avro, of its row image's record) that no column
// reads (Known, which their readers build: KnownReader). Their records are counted without looking at
// the values: every record of such a schema counts, whether it sets the
// field or not (a field without presence always has a value, its default;
// a oneof member or an optional field may be absent, a union may be
// null). The Counter binds the schema's list to its counters once, and each
// record then adds one per field. Their Type is the schema's
// (SchemaType); their Example is the schema's name of the type
// (`schema type ["null","string"]`), not a value: the decoder skips the
// field's bytes without reading them, and rendering them would cost every
// record.
package drift

import (
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/jsonscan"
)

// MaxUnmappedFields bounds the distinct unmapped fields a Plan (and the
// pipeline, per table) tracks by name: as many again for the names the
// route's policy refuses (UnmappedField.Refused).
const MaxUnmappedFields = 64

// MaxFieldName is the longest unmapped field name, in bytes, a Plan
// stores: longer than any PostgreSQL (63) or MySQL (64) column name, and
// short enough that a column of that name keeps its data files' names
// within a file system's 255 bytes. A longer name is only counted, under
// OverflowField: it never becomes a column, a log field or a metric label.
const MaxFieldName = 128

// OverflowField names the fields beyond MaxUnmappedFields in counts and
// metrics.
const OverflowField = "(other)"

// InferSamples is how many values of an unmapped field the Plan infers the
// type from (merging them), so that an integer field whose later values
// have fractions is seen as Float, without inferring every record.
const InferSamples = 100

// UnmappedField is one record field that no column reads.
type UnmappedField struct {
	Name string
	// Count is the records that carried the field since the last
	// Take.
	Count uint64
	// Example is the first value seen (JSON text, cut to 64 bytes); for
	// a field typed by a registry schema (Known), "schema type " and the
	// type as the schema names it.
	Example string
	// Type is inferred from the first values seen (up to 100), merged;
	// for a field typed by the record's schema (a registry schema's, or
	// a Kafka Connect envelope's: TypesReader), Schema is set instead,
	// and Column and TypeName answer by it.
	Type   FieldType
	Schema *SchemaType
	// Default is the default the record's schema declares for the field
	// (nil: none), which a column added for it carries (FieldDefault.Literal).
	Default *column.FieldDefault
	// Order is when the Plan first saw the field among its unmapped
	// fields (0, 1, …): for a schema's fields, their order in the schema.
	Order int
	// Refused: the Plan's Policy.Unmapped refuses the name (the route
	// would never add it as a column); such fields have slots of their own.
	Refused bool
	sampled int
	new     bool   // first sighting since the Plan was compiled, not yet taken
	seen    uint64 // the drift's takes when the field was last counted (or made)
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

// New reports whether this is the first Take that hands the field out
// (its first sighting by this Plan).
func (f UnmappedField) New() bool { return f.new }

// Counter is a Plan's record of unmapped fields (the package comment says
// how it counts them).
type Counter struct {
	// The reader's drift hooks, asserted once at Bind (nil: none).
	known    KnownReader
	objects  ObjectReader
	defaults DefaultsReader
	types    TypesReader
	fields   map[string]*UnmappedField
	overflow uint64
	visit    func(k []byte, v *fastjson.Value) // bound once, so a walk allocates nothing
	mapped   map[string]int                    // the keys the columns read, while visit walks
	parser   fastjson.Parser                   // a scanned record's unmapped value, while it is sampled
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
	// went to the overflow: Record and Unnote.
	rec         []*UnmappedField
	recOverflow uint64

	// accept is Policy.Unmapped (nil: every storable name is accepted).
	accept func(name string) bool
	// tracked counts the fields kept per kind (accepted, refused);
	// idleAt[kind] is the takes before which none of a full kind can be
	// idle (a scan found none).
	tracked, idleAt [2]uint64
	order           int    // the next field's Order
	takes           uint64 // Take calls so far
	// evicted counts the fields forgotten to free a slot; last (lastGen)
	// and a schema's counters (Known.gen) taken before it changed
	// may hold a forgotten field and are built again.
	evicted, lastGen uint64
}

// slotKind indexes Counter.tracked by whether a field's name is refused.
func slotKind(refused bool) int {
	if refused {
		return 1
	}
	return 0
}

// storableName reports whether an unmapped field's name may be stored,
// logged and used as a metric label: 1 to MaxFieldName bytes of UTF-8
// without control characters.
func storableName(k []byte) bool {
	if len(k) == 0 || len(k) > MaxFieldName || !utf8.Valid(k) {
		return false
	}
	for _, c := range k {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// newField makes and keeps the counter of a field seen for the first
// time: nil when its name is not storable, or when its kind is full and
// none of its fields is idle (it is then counted as overflow). mk fills
// in what the format knows of it.
func (d *Counter) newField(k []byte, mk func(u *UnmappedField)) *UnmappedField {
	if !storableName(k) {
		return nil
	}
	if d.tracked[0] >= MaxUnmappedFields && d.tracked[1] >= MaxUnmappedFields &&
		d.takes < d.idleAt[0] && d.takes < d.idleAt[1] {
		return nil // the steady state of a flood of names: no allocation
	}
	name := string(k)
	refused := d.accept != nil && !d.accept(name)
	c := slotKind(refused)
	if d.tracked[c] >= MaxUnmappedFields && !d.evictIdle(c) {
		return nil
	}
	if d.fields == nil {
		d.fields = map[string]*UnmappedField{}
	}
	u := &UnmappedField{Name: name, Refused: refused, new: true, Order: d.order, seen: d.takes}
	mk(u)
	d.order++
	d.tracked[c]++
	d.fields[name] = u
	return u
}

// evictIdle forgets one idle field of kind c (not counted since the take
// before the last one), reporting whether it found one.
func (d *Counter) evictIdle(c int) bool {
	if d.takes < d.idleAt[c] {
		return false
	}
	for name, u := range d.fields {
		if slotKind(u.Refused) == c && u.Count == 0 && u.seen < d.takes {
			delete(d.fields, name)
			d.tracked[c]--
			d.evicted++
			return true
		}
	}
	// Every field of the kind was counted in the last period or this one:
	// none is idle before the next take.
	d.idleAt[c] = d.takes + 1
	return false
}

// Record returns the unmapped fields of the record noted last (nil when it
// had none); a nil entry is a field beyond MaxUnmappedFields. The slice is
// the Counter's: valid until the next Note, not to be modified.
func (d *Counter) Record() []*UnmappedField { return d.rec }

// Unnote takes back the counts of the record appended last (Unappend).
func (d *Counter) Unnote() {
	for _, u := range d.rec {
		if u != nil {
			u.Count--
		}
	}
	d.overflow -= d.recOverflow
	d.rec, d.recOverflow = nil, 0
}

// ObjectReader is implemented by readers whose records are JSON objects:
// UnreadFields describes the object of the record just appended when it
// has keys that no column reads (Extra > 0), else it is the zero Object.
type ObjectReader interface {
	UnreadFields() Object
}

// Object is the JSON object of a record with fields no column reads.
type Object struct {
	Extra int               // keys minus the keys found (a duplicated key counts too)
	Tree  *fastjson.Object  // the object as a tree, or nil
	Scan  *jsonscan.Scanner // the object as the scanner read it, or nil
	Read  map[string]int    // the keys the columns read
}

// KnownReader is implemented by readers whose records are typed by a
// registry schema: UnmappedFields returns the unmapped fields of the
// schema the record just appended was written with (nil or empty: none).
type KnownReader interface {
	UnmappedFields() *Known
}

// Known is the top-level fields of one compiled schema that no column
// reads (Fields, which the reader sets), and the Counter's counters for
// them (bound on first use).
type Known struct {
	Fields   []Field
	counters []*UnmappedField // per field; nil: counted as overflow
	bound    bool
	// gen is the Counter's evicted when the counters were bound, and
	// takes its takes: they are bound again after a field was forgotten,
	// and, when one is nil, once per period (a slot may be idle).
	gen, takes uint64
	missing    bool
}

// Field is a field of a schema: its name, its column type and the default
// the schema declares for it (nil: none).
type Field struct {
	Name    string
	Type    *SchemaType
	Default *column.FieldDefault
}

// Bind notes which drift hooks the reader f has, and the policy's
// accept (Policy.Unmapped; nil: every storable name).
func (d *Counter) Bind(f any, accept func(name string) bool) {
	d.accept = accept
	d.known, _ = f.(KnownReader)
	d.objects, _ = f.(ObjectReader)
	d.defaults, _ = f.(DefaultsReader)
	d.types, _ = f.(TypesReader)
}

// Note counts the unmapped fields of the record just appended.
func (d *Counter) Note() {
	d.rec, d.recOverflow = nil, 0
	if d.known != nil {
		if k := d.known.UnmappedFields(); k != nil && len(k.Fields) > 0 {
			over := d.overflow
			d.countKnown(k)
			d.rec, d.recOverflow = k.counters, d.overflow-over
		}
		return
	}
	if d.objects == nil {
		return
	}
	f := d.objects.UnreadFields()
	if f.Extra <= 0 {
		return
	}
	if d.visit == nil {
		d.visit = func(k []byte, v *fastjson.Value) {
			if _, ok := d.mapped[string(k)]; ok {
				return
			}
			if u := d.field(k); u != nil {
				d.count(u, v)
				d.last = append(d.last, u)
			}
		}
	}
	if f.Scan != nil {
		d.noteScanned(f)
		return
	}
	// The common case: the same extra fields as the record before.
	if len(d.last) == f.Extra && d.lastGen == d.evicted && d.again(f.Tree) {
		d.rec = d.last
		return
	}
	over := d.overflow
	d.mapped = f.Read
	d.last = d.last[:0]
	f.Tree.Visit(d.visit)
	d.rec, d.recOverflow, d.lastGen = d.last, d.overflow-over, d.evicted
}

// field is the counter of unmapped field k, created on its first
// sighting; nil when it is counted as overflow (newField).
func (d *Counter) field(k []byte) *UnmappedField {
	if u := d.fields[string(k)]; u != nil {
		return u
	}
	u := d.newField(k, d.fromSchema)
	if u == nil {
		d.overflow++
	}
	return u
}

// fromSchema sets the default the record's schema declares for u, and the
// type it gives u when the record has a schema (TypesReader).
func (d *Counter) fromSchema(u *UnmappedField) {
	if d.defaults != nil {
		u.Default = d.defaults.FieldDefault(u.Name)
	}
	if d.types != nil {
		u.Schema = d.types.FieldSchema(u.Name)
	}
}

// noteScanned is Note for a record the scanner read (no key of
// which is escaped): the same counts as for its tree, walking the members'
// keys instead of an object's.
func (d *Counter) noteScanned(f Object) {
	sc := f.Scan
	if len(d.last) == f.Extra && d.lastGen == d.evicted && d.againScanned(f) {
		d.rec = d.last
		return
	}
	over := d.overflow
	d.last, d.lastAt = d.last[:0], d.lastAt[:0]
	for m := range sc.Members {
		k := sc.Doc[sc.Members[m].Key.Start:sc.Members[m].Key.End]
		if _, ok := f.Read[string(k)]; ok {
			continue
		}
		if u := d.field(k); u != nil {
			d.countScanned(u, sc, m)
			d.last = append(d.last, u)
			d.lastAt = append(d.lastAt, m)
		}
	}
	d.rec, d.recOverflow, d.lastGen = d.last, d.overflow-over, d.evicted
}

// againScanned is again for a scanned record. Whether each field of last
// is there is checked at its guessed member first; the member a field's
// value is sampled from is the first of its key (find), as for a tree.
func (d *Counter) againScanned(f Object) bool {
	sc := f.Scan
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
		if u.sampled >= InferSamples {
			u.Count++
			continue
		}
		d.countScanned(u, sc, sc.Find(u.Name))
	}
	return true
}

// countScanned is count for member m of a scanned record: its value is
// parsed (alone) only while the field is still sampled.
func (d *Counter) countScanned(u *UnmappedField, sc *jsonscan.Scanner, m int) {
	if u.sampled >= InferSamples {
		u.Count++
		return
	}
	v := sc.Members[m].Val
	t, _ := d.parser.ParseBytes(sc.Doc[v.Start:v.End]) // the scanner accepted it
	d.count(u, t)
}

// countKnown counts one record of a schema whose unmapped fields are k.
func (d *Counter) countKnown(k *Known) {
	if !k.bound || k.gen != d.evicted || (k.missing && k.takes != d.takes) {
		d.bindKnown(k)
	}
	for _, u := range k.counters {
		if u == nil {
			d.overflow++
			continue
		}
		u.Count++
	}
}

// bindKnown binds k's fields to the Counter's counters, making those not kept
// yet. A field bound here counts as seen now (the record that binds it
// counts it next), so binding one cannot forget another bound before it.
func (d *Counter) bindKnown(k *Known) {
	k.bound, k.missing = true, false
	if len(k.counters) != len(k.Fields) {
		k.counters = make([]*UnmappedField, len(k.Fields))
	}
	for i, f := range k.Fields {
		u := d.fields[f.Name]
		if u == nil {
			u = d.newField([]byte(f.Name), func(u *UnmappedField) {
				u.Schema, u.Default, u.Example = f.Type, f.Default, "schema type "+f.Type.String()
			})
		}
		if u != nil {
			u.seen = max(u.seen, d.takes)
		}
		k.counters[i] = u
		k.missing = k.missing || u == nil
	}
	k.gen, k.takes = d.evicted, d.takes
}

// again counts the fields of d.last in o when o has every one of them.
func (d *Counter) again(o *fastjson.Object) bool {
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
func (d *Counter) count(u *UnmappedField, v *fastjson.Value) {
	u.Count++
	if u.sampled < InferSamples {
		u.sampled++
		u.Type = mergeType(u.Type, inferValue(v, 0))
		if u.Example == "" && v.Type() != fastjson.TypeNull {
			u.Example = column.Cut(v.MarshalTo(nil))
		}
	}
}

// Take calls fn for every unmapped field seen since the last take
// (records that failed to decode are not counted) and resets the counts;
// overflow is the records' fields beyond MaxUnmappedFields. fn must not
// keep the pointer.
func (d *Counter) Take(fn func(f *UnmappedField), overflow func(n uint64)) {
	d.takes++
	for _, u := range d.fields {
		if u.Count > 0 {
			fn(u)
			u.Count, u.new, u.seen = 0, false, d.takes
		}
	}
	if d.overflow > 0 && overflow != nil {
		overflow(d.overflow)
		d.overflow = 0
	}
}

// TypesReader is a reader of JSON objects whose records may carry their
// schema (the json format's Kafka Connect envelope): FieldSchema is the
// column type the schema of the record just appended gives its field name
// (nil: the record has no schema, or its schema does not describe the
// field, which is then typed by its values). A field takes the type of the
// record it was first seen in, as a registry schema's field does.
type TypesReader interface {
	FieldSchema(name string) *SchemaType
}

// DefaultsReader is a reader that knows the declared defaults of the fields
// of the current record's schema (the debezium-json format).
type DefaultsReader interface {
	FieldDefault(name string) *column.FieldDefault
}
