package decode

import (
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/decode/connect"
	"sink/internal/decode/drift"
	"sink/internal/decode/format"
	"sink/internal/jsonscan"
	"sink/internal/route"
)

// jsonPath is where one column's value sits in a JSON object.
type jsonPath struct {
	slot int      // index of the top-level key in jsonFields.keys
	rest []string // path below the top-level key
	// nested: for an unmapped Array column named "n.a" (a Nested column's
	// part), where the record has no "n.a" key: read "n" instead, and take
	// "a" from each element of an array of objects, or from an object
	// holding the parallel arrays.
	nested *jsonPath
	pos    string // nested, for a part named by a number k: "k-1", to index tuples written as arrays
	sub    int    // for jsonFields.walk: rest[0]'s index among the slot's first steps
}

// jsonFields reads column values out of one JSON object per record (the
// json format's record, the debezium-json format's row image): it collects
// the distinct top-level keys the columns read, looks each up once per
// record (load), and walks the rest of each column's path from there.
type jsonFields struct {
	keys   []string          // distinct top-level keys the paths read
	keyIdx map[string]int    // key -> slot
	slots  []*fastjson.Value // per record: value of each key, nil if absent
	paths  []jsonPath        // per Plan column; zero for columns not bound here
	// per record: the loaded object, and how many of its keys no path
	// reads (its keys minus the keys found: see drift.go)
	obj   *fastjson.Object
	extra int

	// A record read by the scanner (loadScanned) instead of a tree: sc
	// holds its members, member the one each slot found (-1: absent),
	// trees the slots' objects and arrays once a column needed them as a
	// tree (parsed from the value's bytes by the slot's own parser, so
	// that the trees of all slots are valid together). guess is the slot
	// the member at each position had in the record before: a producer
	// writes its keys in the same order every time, so one comparison
	// usually finds a key's slot. For a position whose key had no slot
	// (guess -1), missKey holds that key's bytes, so that the same
	// unmapped key is known again by one comparison (-2: nothing yet).
	sc      *jsonScanner
	member  []int
	trees   []*fastjson.Value
	parsers []fastjson.Parser
	guess   []int
	missKey [][]byte
	// treed and listed: some slot of this record has a tree, some
	// slot's object was listed (subOK), to be forgotten by the next load.
	treed, listed bool
	// Where many columns read paths below one slot (under >= listAt), the
	// slot's object is read once per record (subOK): its members (subs),
	// and for each distinct first step of those paths (steps, stepIdx) the
	// first member of that key (first, -1: absent), found the way member
	// finds the top-level keys (stepGuess: the step each position had in
	// the record before). Every column then starts from its step's member
	// instead of walking the object's bytes from its start.
	under     []int
	subs      [][]jsonscan.Member
	subOK     []bool
	steps     [][]string
	stepIdx   []map[string]int
	first     [][]int
	stepGuess [][]int
}

// add binds column col to path (non-empty) and returns its jsonPath.
func (f *jsonFields) add(col int, path []string) *jsonPath {
	for len(f.paths) <= col {
		f.paths = append(f.paths, jsonPath{})
	}
	f.paths[col] = f.path(path)
	return &f.paths[col]
}

// index is the slot of each top-level key the columns read. The map is
// made once and grows as columns are added, so a caller may keep it.
func (f *jsonFields) index() map[string]int {
	if f.keyIdx == nil {
		f.keyIdx = map[string]int{}
	}
	return f.keyIdx
}

// numKeys is the number of distinct top-level keys the columns read (the
// slots).
func (f *jsonFields) numKeys() int { return len(f.keys) }

// topKey is the top-level key column col reads.
func (f *jsonFields) topKey(col int) string { return f.keys[f.paths[col].slot] }

// topSlot is the slot of column col's key, when the column reads that
// top-level field itself (not a path below it).
func (f *jsonFields) topSlot(col int) (int, bool) {
	p := &f.paths[col]
	return p.slot, len(p.rest) == 0
}

func (f *jsonFields) path(path []string) jsonPath {
	f.index()
	slot, ok := f.keyIdx[path[0]]
	if !ok {
		slot = len(f.keys)
		f.keys = append(f.keys, path[0])
		f.keyIdx[path[0]] = slot
	}
	return jsonPath{slot: slot, rest: path[1:]}
}

// addNested gives an unmapped Array column named "head.rest" its fallback:
// the field head, read as a Nested column's array of objects or object of
// parallel arrays.
func (f *jsonFields) addNested(p *jsonPath, name string) {
	head, rest, ok := strings.Cut(name, ".")
	if !ok || head == "" || rest == "" {
		return
	}
	alt := f.path([]string{head, rest})
	// ClickHouse 18.16 splits Array(Tuple(T, U)) a into a.1, a.2:
	// element k of each tuple, written as a JSON array.
	if k, err := strconv.Atoi(rest); err == nil && k >= 1 && strconv.Itoa(k) == rest {
		alt.pos = strconv.Itoa(k - 1)
	}
	p.nested = &alt
}

// sized allocates the per-record slots; call it after the last add.
func (f *jsonFields) sized() {
	f.slots = make([]*fastjson.Value, len(f.keys))
	f.member = make([]int, len(f.keys))
	f.trees = make([]*fastjson.Value, len(f.keys))
	f.parsers = make([]fastjson.Parser, len(f.keys))
	f.under = make([]int, len(f.keys))
	f.subs = make([][]jsonscan.Member, len(f.keys))
	f.subOK = make([]bool, len(f.keys))
	f.steps = make([][]string, len(f.keys))
	f.stepIdx = make([]map[string]int, len(f.keys))
	f.first = make([][]int, len(f.keys))
	f.stepGuess = make([][]int, len(f.keys))
	for i := range f.paths {
		for p := &f.paths[i]; p != nil; p = p.nested {
			if len(p.rest) > 0 {
				f.under[p.slot]++
			}
		}
	}
	for i := range f.paths {
		for p := &f.paths[i]; p != nil; p = p.nested {
			if len(p.rest) == 0 || f.under[p.slot] < listAt {
				continue
			}
			idx := f.stepIdx[p.slot]
			if idx == nil {
				idx = map[string]int{}
				f.stepIdx[p.slot] = idx
			}
			n, ok := idx[p.rest[0]]
			if !ok {
				n = len(f.steps[p.slot])
				idx[p.rest[0]] = n
				f.steps[p.slot] = append(f.steps[p.slot], p.rest[0])
				f.first[p.slot] = append(f.first[p.slot], -1)
			}
			p.sub = n
		}
	}
}

// load looks up every top-level key in o. One Object.Get per distinct key
// was measured faster than one Object.Visit with a map lookup per field (no
// hashing, and the fast path skips unescaping keys).
//
// It also counts the keys found: when the object has more keys than that,
// some field has no column (schema drift, drift.go), and only then are the
// object's keys walked to name it. A duplicated key also makes the count
// differ; the walk then finds nothing unmapped.
func (f *jsonFields) Load(o *fastjson.Object) {
	found := 0
	for i, k := range f.keys {
		v := o.Get(k)
		f.slots[i] = v
		if v != nil {
			found++
		}
	}
	f.obj, f.extra, f.sc = o, o.Len()-found, nil
}

// loadScanned finds the slots' members in a record the scanner read,
// which has no escaped key: the first member of each key wins (as
// Object.Get finds it), and the members no slot takes count as extra.
func (f *jsonFields) loadScanned(sc *jsonScanner) {
	f.sc, f.obj = sc, nil
	for i := range f.member {
		f.member[i] = -1
	}
	if f.treed {
		// Only a record that needed a tree left one to forget (and
		// writing the pointers costs a write barrier each while the
		// GC runs).
		clear(f.trees)
		f.treed = false
	}
	if f.listed {
		clear(f.subOK)
		f.listed = false
	}
	found := 0
	for m := range sc.Members {
		k := sc.Doc[sc.Members[m].Key.Start:sc.Members[m].Key.End]
		slot, known := -1, false
		if m < len(f.guess) {
			switch g := f.guess[m]; {
			case g >= 0:
				known = string(k) == f.keys[g]
			case g == -1:
				// The key here before was one no column reads (a
				// field of schema drift): the same key is again none.
				known = string(k) == string(f.missKey[m])
			}
			if known {
				slot = f.guess[m]
			}
		} else {
			f.guess = append(f.guess, -2)
			f.missKey = append(f.missKey, nil)
		}
		if !known {
			if i, ok := f.keyIdx[string(k)]; ok {
				slot = i
			} else {
				f.missKey[m] = append(f.missKey[m][:0], k...)
			}
			f.guess[m] = slot
		}
		if slot >= 0 && f.member[slot] < 0 {
			f.member[slot] = m
			found++
		}
	}
	f.extra = len(sc.Members) - found
}

// tree is the value of slot (present in a scanned record) as a tree.
func (f *jsonFields) tree(slot int) *fastjson.Value {
	if f.trees[slot] == nil {
		f.treed = true
		v := f.sc.Members[f.member[slot]].Val
		// The scanner accepted the record, so its value parses.
		f.trees[slot], _ = f.parsers[slot].ParseBytes(f.sc.Doc[v.Start:v.End])
	}
	return f.trees[slot]
}

// listAt is how many paths below one top-level key make it worth listing
// that object's members once per record: the list skips every member's
// value, also the ones a path then enters, so for a few paths walking each
// from the object's start is as cheap.
const listAt = 4

// walk follows rest below v, the value of slot's member in a scanned
// record, as jsonscan's Walk does: where listAt or more columns read below
// the slot, from the slot's list of members.
func (f *jsonFields) walk(p *jsonPath, v scanSpan) (scanSpan, bool) {
	sc := f.sc
	if f.under[p.slot] < listAt || sc.Doc[v.Start] != '{' {
		return sc.Walk(v, p.rest)
	}
	if !f.subOK[p.slot] {
		f.readObject(p.slot, v)
	}
	m := f.first[p.slot][p.sub]
	if m < 0 {
		return v, false
	}
	val := f.subs[p.slot][m].Val
	if len(p.rest) == 1 {
		return val, true
	}
	return sc.Walk(val, p.rest[1:])
}

// readObject lists the members of slot's object v and finds the first
// member of each step (the first of duplicates wins, as Walk finds it).
func (f *jsonFields) readObject(slot int, v scanSpan) {
	sc := f.sc
	list := sc.ObjectMembers(v, f.subs[slot][:0])
	f.subs[slot], f.subOK[slot], f.listed = list, true, true
	first, steps, guess := f.first[slot], f.steps[slot], f.stepGuess[slot]
	for i := range first {
		first[i] = -1
	}
	for m := range list {
		k := sc.Doc[list[m].Key.Start:list[m].Key.End]
		n := -1
		if m < len(guess) {
			if g := guess[m]; g >= 0 && string(k) == steps[g] {
				n = g
			}
		} else {
			guess = append(guess, -1)
		}
		if n < 0 {
			if i, ok := f.stepIdx[slot][string(k)]; ok {
				n = i
			}
			guess[m] = n
		}
		if n >= 0 && first[n] < 0 {
			first[n] = m
		}
	}
	f.stepGuess[slot] = guess
}

// readScanned is read for a record loaded by loadScanned: scalars come
// from the record's bytes, objects and arrays from the slot's tree.
func (f *jsonFields) readScanned(st *column.State, col int, in *column.Value) {
	s := &f.paths[col]
	in.Proj = nil
	m := f.member[s.slot]
	if m < 0 && s.nested != nil {
		if nm := f.member[s.nested.slot]; nm >= 0 && f.sc.Doc[f.sc.Members[nm].Val.Start] == '[' {
			in.Kind, in.Tree, in.Proj, in.ProjPos = column.Array, f.tree(s.nested.slot), s.nested.rest, s.nested.pos
			return
		}
		s = s.nested
		m = f.member[s.slot]
	}
	if m < 0 {
		in.Kind = column.Missing
		return
	}
	mem := &f.sc.Members[m]
	if mem.Plain && len(s.rest) == 0 {
		in.Kind, in.Bytes = column.String, f.sc.Doc[mem.Val.Start+1:mem.Val.End-1]
		return
	}
	v, ok := mem.Val, true
	if len(s.rest) > 0 {
		if v, ok = f.walk(s, v); !ok {
			in.Kind = column.Missing
			return
		}
	}
	if scanScalar(f.sc, v, in) {
		return
	}
	t := f.tree(s.slot)
	if len(s.rest) > 0 {
		t = t.Get(s.rest...)
	}
	st.FromJSON(t, in)
}

// unread describes the loaded object for drift when it has fields no
// path reads (the zero unreadObject when it has none).
func (f *jsonFields) unread() drift.Object {
	if f.extra <= 0 {
		return drift.Object{}
	}
	return drift.Object{Extra: f.extra, Tree: f.obj, Scan: f.sc, Read: f.keyIdx}
}

// read sets in to column col's value in the loaded object.
func (f *jsonFields) read(st *column.State, col int, in *column.Value) {
	if f.sc != nil {
		f.readScanned(st, col, in)
		return
	}
	s := &f.paths[col]
	v := f.slots[s.slot]
	in.Proj = nil
	if v == nil && s.nested != nil {
		if v = f.slots[s.nested.slot]; v != nil && v.Type() == fastjson.TypeArray {
			in.Kind, in.Tree, in.Proj, in.ProjPos = column.Array, v, s.nested.rest, s.nested.pos
			return
		}
		s = s.nested
	}
	if v != nil && len(s.rest) > 0 {
		v = v.Get(s.rest...)
	}
	st.FromJSON(v, in)
}

// jsonFormat is the json format: each record value is one JSON object, and
// a column reads a path into it. A record in Kafka Connect's JSON envelope
// is read by its schema (env, connect.go); the connect-json format is this
// one with env.strict, which refuses every other record.
type jsonFormat struct {
	scanner jsonScanner     // jsonscan.go: reads every record
	parser  fastjson.Parser // the tree of a record with escaped keys
	fields  jsonFields
	st      *column.State
	policy  *format.Policy
	env     *connect.Envelope // Kafka Connect's envelopes
	// wrapped: the record being read is an envelope, whose columns
	// env converts (so the Plan reads them through read).
	wrapped bool
	// treeOnly reads every record through fastjson's tree, as the
	// format did before the scanner: the tests' reference for the
	// scanner (FuzzJSONScanDifferential).
	treeOnly bool
}

func newJSONFormat(st *column.State, pol *format.Policy) *jsonFormat {
	f := &jsonFormat{st: st, policy: pol}
	f.env = connect.NewEnvelope(st, &f.fields, false)
	return f
}

// plain reports that the record Begin read is a plain JSON object (not an
// envelope), whose columns readField reads: the Plan reads them without
// an interface call, and they never fail.
func (f *jsonFormat) plain() bool { return !f.wrapped }

// readField sets in to column col's value in a plain record.
func (f *jsonFormat) readField(col int, in *column.Value) { f.fields.read(f.st, col, in) }

func (*jsonFormat) Role(string) string { return "" }

func (*jsonFormat) Want() string {
	return "a JSON path or " + strings.Join(route.RecordSources(), ", ") + ", " + route.HeaderPrefix + "NAME"
}

func (f *jsonFormat) Bind(col int, c chschema.ColumnSchema, t *chtype.Type, src route.Source, byName bool) error {
	p := f.fields.add(col, src.Path)
	if byName && t.Kind == chtype.Array {
		f.fields.addNested(p, c.Name)
	}
	f.env.Bind(col, t, src.Path)
	return nil
}

func (f *jsonFormat) Done() error {
	f.fields.sized()
	return nil
}

// tombstone is the answer for a record without a value (or an envelope
// with a null payload): skipped, or bad as errors.on_tombstone says.
func (f *jsonFormat) tombstone() error { return f.policy.Tombstone() }

func (f *jsonFormat) Begin(r format.Record) error {
	f.wrapped = false
	if r.Value == nil {
		return f.tombstone()
	}
	if ok, err := f.env.Quick(r.Value, f.tombstone); ok {
		f.wrapped = true
		return err
	}
	top, err := f.scanner.Scan(r.Value)
	if err != nil {
		return format.Bad("", "invalid JSON: "+err.Error())
	}
	if top != "object" {
		return format.Bad("", "invalid JSON: want an object, got "+top)
	}
	if schema, payload, ok := f.env.Spans(&f.scanner); ok {
		f.wrapped = true
		return f.env.Begin(r.Value, schema, payload, f.tombstone)
	}
	if f.env.Strict {
		return format.Bad("", connect.NotEnvelope)
	}
	if !f.treeOnly && !f.scanner.Esc {
		f.fields.loadScanned(&f.scanner)
		return nil
	}
	// A key with an escape: fastjson's Object.Get compares keys as
	// written until a lookup misses, and unescaped from then on, so
	// which of two duplicates ({"a":1,"\u0061":2}) a column reads
	// depends on the lookups before it. The tree keeps that rule.
	v, err := f.parser.ParseBytes(r.Value)
	if err != nil {
		return format.Bad("", "invalid JSON: "+err.Error())
	}
	o, _ := v.Object()
	f.fields.Load(o)
	return nil
}

func (f *jsonFormat) Read(col int, in *column.Value) error {
	f.fields.read(f.st, col, in)
	if f.wrapped {
		return f.env.Read(col, in)
	}
	return nil
}

// fieldDefault is the default an envelope's schema declares for the
// payload's top-level field name (fieldDefaults; nil for a plain record).
func (f *jsonFormat) FieldDefault(name string) *column.FieldDefault {
	if !f.wrapped {
		return nil
	}
	return f.env.FieldDefault(name)
}

// FieldSchema is the column type an envelope's schema gives the payload's
// top-level field name (drift.TypesReader; nil for a plain record).
func (f *jsonFormat) FieldSchema(name string) *drift.SchemaType {
	if !f.wrapped {
		return nil
	}
	return f.env.FieldType(name)
}

func (*jsonFormat) Lenient() bool { return false }

func (f *jsonFormat) UnreadFields() drift.Object { return f.fields.unread() }

// newConnectFormat is the connect-json format: the json format that
// requires every record to be an envelope.
func newConnectFormat(st *column.State, pol *format.Policy) *jsonFormat {
	f := newJSONFormat(st, pol)
	f.env.Strict = true
	return f
}
