package decode

import (
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/route"
)

// ErrSkip matches (errors.Is) the error Append returns for a record that
// carries no row by design: a Debezium tombstone, truncate or message event.
// Such a record is handled, not bad: count it and mark its offset done.
var ErrSkip = errors.New("record carries no row")

// ErrTruncate matches the error Append returns for a Debezium truncate
// event (op t); it matches ErrSkip too. The pipeline applies it or skips
// it as the route's truncate option says.
var ErrTruncate = fmt.Errorf("%w: truncate event (op t)", ErrSkip)

var (
	errTombstone = fmt.Errorf("%w: tombstone", ErrSkip)
	errMessage   = fmt.Errorf("%w: logical decoding message (op m)", ErrSkip)
)

// debeziumFormat is the debezium-json route format (route.Debezium):
// Debezium change events in Kafka Connect's JSON converter encoding. A
// record value is a Debezium change event as Kafka Connect's JsonConverter
// writes it: the envelope {"before", "after", "source", "op", "ts_ms", ...},
// either bare (schemas.enable=false) or wrapped as {"schema": ..., "payload":
// envelope} (schemas.enable=true). One event is one row:
//
//   - op "c" (insert), "r" (snapshot read) and "u" (update) write the after
//     image with the delete marker 0;
//   - op "d" writes the before image with the delete marker 1. Without a
//     before image (REPLICA IDENTITY NOTHING, or a converter that drops it)
//     the row is built from the record key, which Debezium writes as the
//     primary key fields, bare or wrapped the same way. Under REPLICA
//     IDENTITY DEFAULT the before image has the key's real values and a
//     placeholder of its type in every other NOT NULL column ("" for text,
//     enum and uuid, false, 0, [], the epoch): a column whose field is not
//     in the record key and whose value does not convert gets its type's
//     default instead of making the delete bad (placeholderFormat, cdc.go);
//     a key column that does not convert, or any column when the record key
//     is not an object of fields, is still a bad record;
//   - a tombstone (null or empty value, or a null payload), a truncate ("t")
//     and a logical decoding message ("m") carry no row: Append returns an
//     error that matches ErrSkip (a truncate: ErrTruncate, which the
//     pipeline skips or applies as the route says), and the caller counts
//     the record as handled.
//
// Columns read the image the way the json format reads a record: a column
// without a mapping reads the image field of its own name, a mapping may give
// a path into the image, and the meta sources ($topic, $partition, $offset,
// $timestamp, $key, $header.NAME) work as there. Added here:
//
//	$version      the row version (below); _version defaults to it
//	$deleted      1 for op d, else 0; _deleted defaults to it
//	$op           the op letter: c, r, u or d
//	$ts_ms        the envelope's ts_ms (when Debezium processed the change)
//	$source.PATH  a field of the source block: $source.table, $source.lsn,
//	              $source.ts_ms, $source.snapshot, ...
//
// A plan needs one column filled from $version and one from $deleted: without
// them, updates and deletes cannot collapse in ReplacingMergeTree.
//
// # Version
//
// For the PostgreSQL connector (source.connector "postgresql") the version is
// source.lsn: PostgreSQL serializes the changes of one row with row locks, so
// a later change of a row is written to the WAL after the earlier one
// committed and its LSN is larger; a change replayed (by the sink after a
// crash, or re-sent by Debezium after its own restart) has the same LSN and
// the same data. A PostgreSQL event without source.lsn is a bad record rather
// than a row versioned some other way, because mixing the two scales would
// let any ts_ms-based version beat every LSN.
//
// Every other connector gets ts_ms × 1,000,000 + (Kafka offset mod
// 1,000,000), with the envelope's ts_ms (Debezium's clock when it emitted the
// event, so it follows emission order), or source.ts_ms when the envelope has
// none. Debezium keys events by primary key, so the changes of one row sit in
// one partition in emission order: within a millisecond the offset decides,
// across milliseconds the time does, and the time part keeps versions growing
// when a topic is recreated or repartitioned (offsets restart, time does not).
//
// The limits, stated where they are not obvious:
//   - LSN: snapshot reads (op r) carry the LSN at which the snapshot started.
//     A transaction still open at that point whose commit the snapshot did
//     not see can carry change LSNs below it; if it changed a row the
//     snapshot read, the stale snapshot image wins until that row changes
//     again.
//   - ts_ms + offset: two changes of one row in the same millisecond whose
//     offsets straddle a multiple of 1,000,000 come out in the wrong order,
//     and so do changes on either side of Debezium's clock stepping back.
//     The value fits UInt64 (and Int64) until the year 2262.
//
// # Debezium's encodings
//
// With the schema block, each image field's semantic type decides:
//
//	io.debezium.time.Date, ...connect.data.Date         days since 1970-01-01
//	io.debezium.time.Timestamp, ...connect.data.Timestamp  ms since the epoch
//	io.debezium.time.MicroTimestamp / NanoTimestamp      µs / ns since the epoch
//	io.debezium.time.Time, ...connect.data.Time          ms since midnight
//	io.debezium.time.MicroTime / NanoTime                µs / ns since midnight
//	io.debezium.time.ZonedTimestamp                      RFC 3339 text, UTC
//	io.debezium.time.ZonedTime                           "15:04:05.999999Z"
//	io.debezium.time.MicroDuration                       µs (an interval)
//	org.apache.kafka.connect.data.Decimal                base64 big-endian two's-complement
//	                                                     unscaled value, parameters.scale
//	io.debezium.data.VariableScaleDecimal                {"scale": s, "value": base64}
//	io.debezium.data.Json                                JSON text
//	type "bytes" without a name                          base64 (binary.handling.mode=bytes)
//
// Dates and times, by column type (docs/formats.md has the same table):
//
//	             String                     numeric (and Decimal)   DateTime(64)             Date(32)
//	Date         "2006-01-02"               days                    midnight UTC             the day
//	Timestamp*   "2006-01-02 15:04:05.999"  ms / µs / ns            the instant (UTC)        its day
//	ZonedTs      as Debezium wrote it       µs since the epoch      the instant              its day
//	Time*        "15:04:05.999", "24:00:00" ms / µs / ns            1970-01-01 + the time    bad record
//	ZonedTime    as Debezium wrote it       µs since midnight UTC   1970-01-01 + the time    bad record
//	MicroDuration the number as text        µs                      bad record               bad record
//
// Debezium's Timestamp has no zone, so its text has none; a time of day
// keeps PostgreSQL's 24:00:00 (the end of the day) in text and numbers, and
// is 1970-01-02 00:00:00 as an instant; values before 1970 convert
// wherever the column's range has them, else the record is bad. Decimals
// become exact decimal text, which then converts like a JSON number (so
// Decimal(P, S), Float, integer and String columns all work, and nothing is
// rounded). Json text fills Array, Map and Tuple columns by parsing it
// (String columns keep the text, JSON columns parse it); bytes fill String and FixedString columns with the
// decoded bytes. Uuid, Enum, booleans and decimal.handling.mode=string|double
// need nothing special.
//
// Without the schema block the column type decides, as in the json format,
// plus three rules: Decimal columns read text that is not a number as base64
// Decimal bytes with the column's scale; Decimal, integer and Float columns
// read an object {"scale", "value"} as a VariableScaleDecimal; Array, Map and
// Tuple columns parse text as JSON. Schema-less dates are day numbers only for
// Date columns (a DateTime column reads them as seconds, and a negative day
// number as seconds before 1970), bytes stay base64 text, and base64 text
// that happens to look like a number is read as a number: keep the schema
// (or use decimal.handling.mode=string) when that matters. Elements of
// arrays get no semantic conversion.
type debeziumFormat struct {
	st     *appendState
	fields jsonFields // the row image's fields the columns read
	cols   []dbzCol   // per Plan column; zero for record attributes

	cdcPlan // the version and delete-marker columns (cdc.go)

	parser    fastjson.Parser // the record value
	keyParser fastjson.Parser // the record key, for deletes without a before image
	schema    schemaCache     // debezium_schema.go
	semConv                   // the fields' semantic types (semantic.go)

	names  []string // per Plan column, its name (for the record key's fields)
	verCol int      // the column filled from $version, -1 before bind sees it
	delCol int      // the column filled from $deleted, -1 before bind sees it
	keyCol []int    // fillKeys' last answer: the columns of the record key's fields
	keyFld []string // ... and those fields' names

	// per record
	cur       []fieldSem // the image's semantic types, per slot (jsonFields.keys)
	sem       []fieldSem // cur when described from this record's schema
	hasSchema bool
	env, src  *fastjson.Value
	op        []byte
	version   int64
	key       []byte           // the record key
	fromKey   bool             // the row image is the key (a delete without a before image)
	keyFields *fastjson.Object // the key's fields, once placeholder read them
	keyRead   bool             // keyFields is this record's (nil: the key is not an object of fields)
}

// dbzCol is what the format knows of one column it reads.
type dbzCol struct {
	kind  route.Kind
	path  []string // route.SourceBlock: the path below the source block
	cls   colClass // route.Field: how Debezium's encodings reach the column type
	scale int      // route.Field: the column's Decimal scale (schema-less decimals)
	// route.Field into a Decimal(P, S) column: P - S, the integer digits
	// it holds, and its type; "" for other columns (decimals.column).
	intDigits int
	decType   string
	day       bool // route.Field: a Date or Date32 column (no time of day)
}

func newDebeziumFormat(st *appendState) *debeziumFormat {
	d := &debeziumFormat{st: st, verCol: -1, delCol: -1, semConv: semConv{st: st}}
	d.fields.keyIdx = map[string]int{}
	d.schema.keyIdx = d.fields.keyIdx
	return d
}

func (*debeziumFormat) role(source string) string { return cdcRole(source) }

func (*debeziumFormat) want() string { return cdcWant }

func (d *debeziumFormat) bind(col int, c chschema.ColumnSchema, t *chType, src route.Source, byName bool) error {
	for len(d.cols) <= col {
		d.cols = append(d.cols, dbzCol{})
		d.names = append(d.names, "")
	}
	d.names[col] = c.Name
	if src.Kind == route.Deleted && d.delCol < 0 {
		d.delCol = col
	}
	if src.Kind == route.Version && d.verCol < 0 {
		d.verCol = col
	}
	dc := dbzCol{kind: src.Kind}
	switch src.Kind {
	case route.Field:
		d.fields.add(col, src.Path)
		dc.cls, dc.scale = classOf(t), columnScale(t)
		if b := t.base(); b.kind == kDecimal {
			dc.intDigits, dc.decType = b.n-b.scale, b.str
		}
		dc.day = t.base().kind == kDate || t.base().kind == kDate32
	case route.SourceBlock:
		dc.path = src.Path
	}
	d.note(c, src)
	d.cols[col] = dc
	return nil
}

func (d *debeziumFormat) done() error {
	if err := d.check(); err != nil {
		return err
	}
	n := len(d.fields.keys)
	d.fields.sized()
	d.sem = make([]fieldSem, n)
	d.schema.after = make([]fieldSem, n)
	d.schema.before = make([]fieldSem, n)
	return nil
}

// lenient: a delete's row only marks the key deleted; a delete without a
// before image has nothing but the key, and the other columns' defaults are
// not data anyone loses.
func (d *debeziumFormat) lenient() bool { return string(d.op) == "d" }

// placeholder: see placeholderFormat. The key is parsed only when a
// delete's column fails, which is rare.
func (d *debeziumFormat) placeholder(col int) bool {
	if string(d.op) != "d" || d.fromKey || col >= len(d.cols) || d.cols[col].kind != route.Field {
		return false
	}
	if !d.keyRead {
		d.keyRead = true
		if k, _, err := d.keyImage(d.key); err == nil {
			d.keyFields, _ = k.Object()
		}
	}
	if d.keyFields == nil {
		return false // without the key, no column is known not to be part of it
	}
	return d.keyFields.Get(d.fields.keys[d.fields.paths[col].slot]) == nil
}

// extra: the row image's fields no column reads. A delete without a before
// image (read from the key) has none worth reporting.
func (d *debeziumFormat) extra() *jsonFields { return d.fields.unmapped() }

// fieldDefault is the default the current schema block declares for the
// after image's field name (nil: none, or no schema block).
func (d *debeziumFormat) fieldDefault(name string) *FieldDefault {
	if !d.schema.ok {
		return nil
	}
	return d.schema.defaults[name]
}

// begin reads the envelope, picks the row image by op, describes its
// fields from the schema (cached or inline) and computes the version.
func (d *debeziumFormat) begin(r recordData) error {
	if len(r.value) == 0 {
		return errTombstone
	}
	// The JSON converter's schema block is most of a wrapped message and
	// the same in every message of a table: when the value has the
	// converter's layout, only the payload is parsed and the schema's
	// meaning comes from the cache (see splitWrapped).
	var (
		env, schema *fastjson.Value
		cached      bool
		err         error
	)
	if pl, known, ok := d.schema.splitWrapped(r.value); ok {
		// A payload that does not parse falls through to the whole
		// value's parse, which says what is wrong.
		if env, err = d.parser.ParseBytes(pl); err == nil {
			cached = known
		} else {
			env = nil
		}
	}
	if env == nil {
		v, err := d.parser.ParseBytes(r.value)
		if err != nil {
			return bad("", "invalid JSON: "+err.Error())
		}
		if v.Type() == fastjson.TypeNull {
			return errTombstone
		}
		if v.Type() != fastjson.TypeObject {
			return bad("", "invalid Debezium event: want a JSON object, got "+v.Type().String())
		}
		env, schema = unwrap(v)
	}
	if env.Type() == fastjson.TypeNull {
		return errTombstone
	}
	if env.Type() != fastjson.TypeObject {
		return bad("", "invalid Debezium event: payload is a JSON "+env.Type().String()+", want an object")
	}
	d.env, d.op = env, env.GetStringBytes("op")
	d.key, d.fromKey, d.keyFields, d.keyRead = r.key, false, nil, false
	d.src = env.Get("source")
	if d.src != nil && d.src.Type() != fastjson.TypeObject {
		d.src = nil
	}

	var img *fastjson.Value
	field := "after"
	del, err := cdcOp(d.op, env.Get("op") != nil)
	switch {
	case err != nil:
		return err
	case !del:
		img = env.Get("after")
		if img == nil || img.Type() != fastjson.TypeObject {
			return bad("", "invalid Debezium event: op "+string(d.op)+" without an after image")
		}
	default:
		field = "before"
		img = env.Get("before")
		if img == nil || img.Type() != fastjson.TypeObject {
			if img, schema, err = d.keyImage(r.key); err != nil {
				return err
			}
			field, cached, d.fromKey = "", false, true
		}
	}

	switch {
	case cached && field == "after":
		d.hasSchema, d.cur = true, d.schema.after
	case cached:
		d.hasSchema, d.cur = true, d.schema.before
	case schema != nil:
		d.hasSchema, d.cur = true, d.sem
		d.schema.describe(d.sem, schema, field)
	default:
		d.hasSchema = false
	}
	if reason := d.computeVersion(r); reason != "" {
		return bad(d.versionCol, reason)
	}

	o, _ := img.Object()
	d.fields.load(o)
	return nil
}

// unwrap returns the envelope and, when the JSON converter wrote one, the
// schema of the envelope (nil when absent or null). A bare envelope has an op
// field; a wrapped one has only schema and payload.
func unwrap(v *fastjson.Value) (env, schema *fastjson.Value) {
	o, _ := v.Object()
	if o.Get("op") != nil {
		return v, nil
	}
	pl := o.Get("payload")
	if pl == nil {
		return v, nil
	}
	if s := o.Get("schema"); s != nil && s.Type() == fastjson.TypeObject {
		schema = s
	}
	return pl, schema
}

// keyImage returns the row of a delete without a before image: the record
// key's fields, and the key schema's fields when the key is wrapped.
func (d *debeziumFormat) keyImage(key []byte) (img, schema *fastjson.Value, err error) {
	if len(key) == 0 {
		return nil, nil, bad("", "invalid Debezium event: delete without a before image and without a record key")
	}
	k, perr := d.keyParser.ParseBytes(key)
	if perr != nil {
		return nil, nil, bad("", "delete without a before image: record key is not JSON: "+perr.Error())
	}
	if k.Type() == fastjson.TypeObject {
		o, _ := k.Object()
		if pl := o.Get("payload"); pl != nil && o.Len() == 2 {
			if s := o.Get("schema"); s != nil {
				k = pl
				if s.Type() == fastjson.TypeObject {
					schema = s
				}
			}
		}
	}
	if k.Type() != fastjson.TypeObject {
		return nil, nil, bad("", "delete without a before image: record key is a JSON "+k.Type().String()+", want an object of key fields")
	}
	return k, schema, nil
}

// computeVersion sets d.version, or returns why it cannot (see cdcVersion).
func (d *debeziumFormat) computeVersion(r recordData) string {
	if d.src != nil && string(d.src.GetStringBytes("connector")) == "postgresql" {
		lsn := d.src.Get("lsn")
		if lsn == nil || lsn.Type() == fastjson.TypeNull {
			return msgNoLSN
		}
		n, err := lsn.Int64()
		if err != nil {
			return "source.lsn " + cut(lsn.MarshalTo(d.text[:0])) + " is not an LSN"
		}
		var reason string
		d.version, reason = cdcVersion(true, n, 0, 0)
		return reason
	}
	ts := d.env.Get("ts_ms")
	if (ts == nil || ts.Type() == fastjson.TypeNull) && d.src != nil {
		ts = d.src.Get("ts_ms")
	}
	if ts == nil || ts.Type() == fastjson.TypeNull {
		return msgNoTs
	}
	ms, err := ts.Int64()
	if err != nil {
		ms = -1
	}
	var reason string
	if d.version, reason = cdcVersion(false, 0, ms, r.offset); reason != "" {
		return "ts_ms " + cut(ts.MarshalTo(d.text[:0])) + reason
	}
	return ""
}

// colClass groups column types by how Debezium encodings reach them.
type colClass uint8

const (
	clsOther     colClass = iota
	clsTime               // Date, Date32, DateTime, DateTime64
	clsString             // String, FixedString
	clsNumber             // integers and floats
	clsDecimal            // Decimal
	clsComposite          // Array, Map, Tuple
)

func classOf(t *chType) colClass {
	switch t.base().kind {
	case kDate, kDate32, kDateTime, kDateTime64:
		return clsTime
	case kString, kFixedString:
		return clsString
	case kInt8, kInt16, kInt32, kInt64, kUInt8, kUInt16, kUInt32, kUInt64, kFloat32, kFloat64,
		kInt128, kInt256, kUInt128, kUInt256:
		return clsNumber
	case kDecimal:
		return clsDecimal
	case kArray, kMap, kTuple:
		return clsComposite
	}
	return clsOther
}

// columnScale is the Decimal scale of t (after Nullable/LowCardinality).
func columnScale(t *chType) int {
	return t.base().scale
}

// read reads column i's source into in and applies Debezium's encodings to
// image fields.
func (d *debeziumFormat) read(i int, in *input) error {
	c := &d.cols[i]
	if cdcMeta(c.kind, d.version, string(d.op) == "d", d.op, in) {
		return nil
	}
	switch c.kind {
	case route.TsMs:
		d.st.fromJSON(d.env.Get("ts_ms"), in)
	case route.SourceBlock:
		var v *fastjson.Value
		if d.src != nil {
			v = d.src.Get(c.path...)
		}
		d.st.fromJSON(v, in)
	case route.Field:
		d.fields.read(d.st, i, in)
		if isPlaceholder(in) {
			// A delete's image only marks its key deleted: the value
			// becomes the column's zero like any other it lacks.
			in.kind = inMissing
			d.st.unavailable = string(d.op) != "d"
			return nil
		}
		if s := &d.fields.paths[i]; len(s.rest) == 0 && (in.kind == inStr || in.kind == inNum || in.kind == inObject) {
			d.dec.column(c.intDigits, c.decType)
			if d.hasSchema {
				return d.convert(c, d.cur[s.slot], in)
			}
			return d.convertBare(c, in)
		}
	}
	return nil
}

// convertBare applies the schema-less rules: Decimal columns read
// non-numeric text as base64 Decimal bytes with the column's scale, Decimal
// and numeric columns read {"scale", "value"} objects as VariableScaleDecimal,
// and Array, Map and Tuple columns parse text as JSON (io.debezium.data.Json).
func (d *debeziumFormat) convertBare(c *dbzCol, in *input) error {
	cls := c.cls
	if cls == clsComposite && in.kind == inStr {
		return d.convert(c, fieldSem{kind: semJSON}, in)
	}
	if cls != clsDecimal && cls != clsNumber {
		return nil
	}
	switch in.kind {
	case inStr:
		if cls != clsDecimal {
			return nil
		}
		if _, ok := d.st.parseNumber(in.b); ok {
			return nil
		}
		return d.dec.decimalFromBase64(in, in.b, c.scale)
	case inObject:
		o, _ := in.v.Object()
		if o.Len() == 2 && o.Get("scale") != nil && o.Get("value") != nil {
			return d.dec.varDecimal(in)
		}
	}
	return nil
}

func semLabel(k semKind) string {
	switch k {
	case semDate:
		return "Date"
	case semTsMillis:
		return "Timestamp"
	case semTsMicros:
		return "MicroTimestamp"
	case semTsNanos:
		return "NanoTimestamp"
	case semTimeMillis:
		return "Time"
	case semTimeMicros:
		return "MicroTime"
	case semTimeNanos:
		return "NanoTime"
	}
	return "value"
}

// timeOfDay is a Debezium Time, MicroTime or NanoTime value in nanoseconds
// since midnight: 0 to 24:00:00 (PostgreSQL's time and timetz take
// '24:00:00', the end of the day).
// tod is false when k is not a time of day.
func timeOfDay(k semKind, n int64) (ns int64, ok, tod bool) {
	var unit int64
	switch k {
	case semTimeMillis:
		unit = int64(time.Millisecond)
	case semTimeMicros:
		unit = int64(time.Microsecond)
	case semTimeNanos:
		unit = 1
	default:
		return 0, false, false
	}
	if n < 0 || n > int64(24*time.Hour)/unit {
		return 0, false, true
	}
	return n * unit, true, true
}

// zonedTimeOfDay reads a ZonedTime, "15:04:05[.fraction](Z|±hh[:mm])", as
// nanoseconds since midnight UTC. Debezium writes it in UTC ("Z"); another
// offset is moved to UTC within the day. "24:00:00Z" is the end of the day.
func zonedTimeOfDay(b []byte) (int64, bool) {
	if len(b) < 9 || b[2] != ':' || b[5] != ':' {
		return 0, false
	}
	h, ok1 := twoDigits(b[0:2])
	m, ok2 := twoDigits(b[3:5])
	sec, ok3 := twoDigits(b[6:8])
	if !ok1 || !ok2 || !ok3 || h > 24 || m > 59 || sec > 59 || (h == 24 && (m != 0 || sec != 0)) {
		return 0, false
	}
	ns := (h*3600 + m*60 + sec) * int64(time.Second)
	i := 8
	if b[i] == '.' {
		i++
		scale := int64(time.Second)
		start := i
		for ; i < len(b) && isDigit(b[i]); i++ {
			if scale /= 10; scale == 0 {
				return 0, false // beyond nanoseconds
			}
			ns += int64(b[i]-'0') * scale
		}
		if i == start || (h == 24 && ns != int64(24*time.Hour)) {
			return 0, false
		}
	}
	zone := b[i:]
	if len(zone) == 1 && zone[0] == 'Z' {
		return ns, true
	}
	if len(zone) != 3 && len(zone) != 6 || (zone[0] != '+' && zone[0] != '-') {
		return 0, false
	}
	oh, ok1 := twoDigits(zone[1:3])
	var om int64
	ok2 = true
	if len(zone) == 6 {
		if zone[3] != ':' {
			return 0, false
		}
		om, ok2 = twoDigits(zone[4:6])
	}
	if !ok1 || !ok2 || oh > 15 || om > 59 {
		return 0, false
	}
	off := (oh*3600 + om*60) * int64(time.Second)
	if zone[0] == '+' {
		off = -off
	}
	day := int64(24 * time.Hour)
	if ns == day && off == 0 {
		return ns, true
	}
	return ((ns+off)%day + day) % day, true
}

func twoDigits(b []byte) (int64, bool) {
	if !isDigit(b[0]) || !isDigit(b[1]) {
		return 0, false
	}
	return int64(b[0]-'0')*10 + int64(b[1]-'0'), true
}

// unixMicro is t in microseconds since the epoch, when int64 holds it.
func unixMicro(t time.Time) (int64, bool) {
	if t.Year() < -290000 || t.Year() > 290000 {
		return 0, false
	}
	return t.UnixMicro(), true
}

// appendTimeOfDay formats ns since midnight as "15:04:05" with the
// fraction's trailing zeros cut, and the hour 24 for the end of the day.
func appendTimeOfDay(b []byte, ns int64) []byte {
	sec := ns / int64(time.Second)
	frac := ns % int64(time.Second)
	two := func(b []byte, n int64) []byte { return append(b, byte('0'+n/10), byte('0'+n%10)) }
	b = two(b, sec/3600)
	b = append(b, ':')
	b = two(b, sec/60%60)
	b = append(b, ':')
	b = two(b, sec%60)
	if frac == 0 {
		return b
	}
	digits := 9
	for frac%10 == 0 {
		frac /= 10
		digits--
	}
	b = append(b, '.')
	for p := digits - 1; p >= 0; p-- {
		div := int64(1)
		for range p {
			div *= 10
		}
		b = append(b, byte('0'+frac/div%10))
	}
	return b
}

// Days beyond ±2^31 or times beyond what int64 nanoseconds hold do not
// occur in Debezium output; refusing them keeps the arithmetic exact.
const maxDays = 1 << 31

// semTime turns a Debezium date or timestamp number into an instant.
func semTime(k semKind, n int64) (time.Time, bool) {
	switch k {
	case semDate:
		if n >= maxDays || n < -maxDays {
			return time.Time{}, false
		}
		return time.Unix(n*secondsPerDay, 0).UTC(), true
	case semTsMillis:
		return time.UnixMilli(n).UTC(), true
	case semTsMicros:
		return time.UnixMicro(n).UTC(), true
	case semTsNanos:
		return time.Unix(0, n).UTC(), true
	}
	return time.Time{}, false
}

// metaCols returns the columns filled from $version and $deleted (filler).
func (d *debeziumFormat) metaCols() (version, deleted int) { return d.verCol, d.delCol }

// fillKeys returns the columns of the record key's fields, which identify
// the row whose value the record does not carry (filler). Debezium writes
// a table's primary key as the record key, bare or wrapped by the JSON
// converter; each of its fields must be a column.
func (d *debeziumFormat) fillKeys() ([]int, error) {
	if len(d.key) == 0 {
		return nil, fmt.Errorf("the record has no key to find the row's earlier value by")
	}
	k, err := d.keyParser.ParseBytes(d.key)
	if err != nil {
		return nil, fmt.Errorf("the record key is not JSON (%v): cannot find the row's earlier value", err)
	}
	if pl := k.Get("payload"); pl != nil && k.Get("schema") != nil {
		k = pl
	}
	o, err := k.Object()
	if err != nil || o.Len() == 0 {
		return nil, fmt.Errorf("the record key is not an object of key fields: cannot find the row's earlier value")
	}
	same := o.Len() == len(d.keyFld)
	i := 0
	o.Visit(func(name []byte, _ *fastjson.Value) {
		if same && (i >= len(d.keyFld) || d.keyFld[i] != string(name)) {
			same = false
		}
		i++
	})
	if same {
		return d.keyCol, nil
	}
	var cols []int
	var names []string
	var missing string
	o.Visit(func(name []byte, _ *fastjson.Value) {
		for c, n := range d.names {
			if n == string(name) && d.cols[c].kind == route.Field {
				cols = append(cols, c)
				names = append(names, n)
				return
			}
		}
		if missing == "" {
			missing = string(name)
		}
	})
	if missing != "" {
		return nil, fmt.Errorf("the record key's field %q is no column of the table: cannot find the row's earlier value", missing)
	}
	d.keyCol, d.keyFld = cols, names
	return cols, nil
}
