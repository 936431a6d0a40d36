package decode

import (
	"fmt"

	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/decode/connect"
	"sink/internal/decode/drift"
	"sink/internal/decode/format"
	"sink/internal/route"
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
	st     *column.State
	fields jsonFields    // the row image's fields the columns read
	cols   []connect.Col // per Plan column; zero for record attributes

	cdcPlan // the version and delete-marker columns (cdc.go)

	parser       fastjson.Parser // the record value
	keyParser    fastjson.Parser // the record key, for deletes without a before image
	schema       schemaCache     // debezium_schema.go
	connect.Conv                 // the fields' semantic types (semantic.go)

	names  []string // per Plan column, its name (for the record key's fields)
	num    []byte   // formatting scratch for error messages
	verCol int      // the column filled from $version, -1 before bind sees it
	delCol int      // the column filled from $deleted, -1 before bind sees it
	keyCol []int    // fillKeys' last answer: the columns of the record key's fields
	keyFld []string // ... and those fields' names

	// per record
	cur       []connect.Sem // the image's semantic types, per slot (jsonFields.keys)
	sem       []connect.Sem // cur when described from this record's schema
	hasSchema bool
	env, src  *fastjson.Value
	op        []byte
	version   int64
	key       []byte           // the record key
	fromKey   bool             // the row image is the key (a delete without a before image)
	keyFields *fastjson.Object // the key's fields, once placeholder read them
	keyRead   bool             // keyFields is this record's (nil: the key is not an object of fields)
}

func newDebeziumFormat(st *column.State) *debeziumFormat {
	d := &debeziumFormat{st: st, verCol: -1, delCol: -1, Conv: connect.NewConv(st)}
	d.schema.keyIdx = d.fields.index()
	return d
}

func (*debeziumFormat) Role(source string) string { return cdcRole(source) }

func (*debeziumFormat) Want() string { return cdcWant }

func (d *debeziumFormat) Bind(col int, c chschema.ColumnSchema, t *chtype.Type, src route.Source, byName bool) error {
	for len(d.cols) <= col {
		d.cols = append(d.cols, connect.Col{})
		d.names = append(d.names, "")
	}
	d.names[col] = c.Name
	if src.Kind == route.Deleted && d.delCol < 0 {
		d.delCol = col
	}
	if src.Kind == route.Version && d.verCol < 0 {
		d.verCol = col
	}
	dc := connect.Col{Kind: src.Kind}
	switch src.Kind {
	case route.Field:
		d.fields.add(col, src.Path)
		dc = connect.ColOf(t)
	case route.SourceBlock:
		dc.Path = src.Path
	}
	d.note(c, src)
	d.cols[col] = dc
	return nil
}

func (d *debeziumFormat) Done() error {
	if err := d.check(); err != nil {
		return err
	}
	n := d.fields.numKeys()
	d.fields.sized()
	d.sem = make([]connect.Sem, n)
	d.schema.after = make([]connect.Sem, n)
	d.schema.before = make([]connect.Sem, n)
	return nil
}

// lenient: a delete's row only marks the key deleted; a delete without a
// before image has nothing but the key, and the other columns' defaults are
// not data anyone loses.
func (d *debeziumFormat) Lenient() bool { return string(d.op) == "d" }

// placeholder: see placeholderFormat. The key is parsed only when a
// delete's column fails, which is rare.
func (d *debeziumFormat) Placeholder(col int) bool {
	if string(d.op) != "d" || d.fromKey || col >= len(d.cols) || d.cols[col].Kind != route.Field {
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
	return d.keyFields.Get(d.fields.topKey(col)) == nil
}

// extra: the row image's fields no column reads. A delete without a before
// image (read from the key) has none worth reporting.
func (d *debeziumFormat) UnreadFields() drift.Object { return d.fields.unread() }

// fieldDefault is the default the current schema block declares for the
// after image's field name (nil: none, or no schema block).
func (d *debeziumFormat) FieldDefault(name string) *column.FieldDefault {
	if !d.schema.ok {
		return nil
	}
	return d.schema.defaults[name]
}

// begin reads the envelope, picks the row image by op, describes its
// fields from the schema (cached or inline) and computes the version.
func (d *debeziumFormat) Begin(r format.Record) error {
	if len(r.Value) == 0 {
		return format.ErrTombstone
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
	if pl, known, ok := d.schema.splitWrapped(r.Value); ok {
		// A payload that does not parse falls through to the whole
		// value's parse, which says what is wrong.
		if env, err = d.parser.ParseBytes(pl); err == nil {
			cached = known
		} else {
			env = nil
		}
	}
	if env == nil {
		v, err := d.parser.ParseBytes(r.Value)
		if err != nil {
			return format.Bad("", "invalid JSON: "+err.Error())
		}
		if v.Type() == fastjson.TypeNull {
			return format.ErrTombstone
		}
		if v.Type() != fastjson.TypeObject {
			return format.Bad("", "invalid Debezium event: want a JSON object, got "+v.Type().String())
		}
		env, schema = unwrap(v)
	}
	if env.Type() == fastjson.TypeNull {
		return format.ErrTombstone
	}
	if env.Type() != fastjson.TypeObject {
		return format.Bad("", "invalid Debezium event: payload is a JSON "+env.Type().String()+", want an object")
	}
	d.env, d.op = env, env.GetStringBytes("op")
	d.key, d.fromKey, d.keyFields, d.keyRead = r.Key, false, nil, false
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
			return format.Bad("", "invalid Debezium event: op "+string(d.op)+" without an after image")
		}
	default:
		field = "before"
		img = env.Get("before")
		if img == nil || img.Type() != fastjson.TypeObject {
			if img, schema, err = d.keyImage(r.Key); err != nil {
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
		return format.Bad(d.versionCol, reason)
	}

	o, _ := img.Object()
	d.fields.Load(o)
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
		return nil, nil, format.Bad("", "invalid Debezium event: delete without a before image and without a record key")
	}
	k, perr := d.keyParser.ParseBytes(key)
	if perr != nil {
		return nil, nil, format.Bad("", "delete without a before image: record key is not JSON: "+perr.Error())
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
		return nil, nil, format.Bad("", "delete without a before image: record key is a JSON "+k.Type().String()+", want an object of key fields")
	}
	return k, schema, nil
}

// computeVersion sets d.version, or returns why it cannot (see cdcVersion).
func (d *debeziumFormat) computeVersion(r format.Record) string {
	if d.src != nil && string(d.src.GetStringBytes("connector")) == "postgresql" {
		lsn := d.src.Get("lsn")
		if lsn == nil || lsn.Type() == fastjson.TypeNull {
			return msgNoLSN
		}
		n, err := lsn.Int64()
		if err != nil {
			return "source.lsn " + column.Cut(lsn.MarshalTo(d.num[:0])) + " is not an LSN"
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
	if d.version, reason = cdcVersion(false, 0, ms, r.Offset); reason != "" {
		return "ts_ms " + column.Cut(ts.MarshalTo(d.num[:0])) + reason
	}
	return ""
}

// read reads column i's source into in and applies Debezium's encodings to
// image fields.
func (d *debeziumFormat) Read(i int, in *column.Value) error {
	c := &d.cols[i]
	if cdcMeta(c.Kind, d.version, string(d.op) == "d", d.op, in) {
		return nil
	}
	switch c.Kind {
	case route.TsMs:
		d.st.FromJSON(d.env.Get("ts_ms"), in)
	case route.SourceBlock:
		var v *fastjson.Value
		if d.src != nil {
			v = d.src.Get(c.Path...)
		}
		d.st.FromJSON(v, in)
	case route.Field:
		d.fields.read(d.st, i, in)
		if isPlaceholder(in) {
			// A delete's image only marks its key deleted: the value
			// becomes the column's zero like any other it lacks.
			in.Kind = column.Missing
			if string(d.op) != "d" {
				return format.ErrNotCarried
			}
			return nil
		}
		if slot, top := d.fields.topSlot(i); top && (in.Kind == column.String || in.Kind == column.Number || in.Kind == column.Object) {
			d.Dec.ForColumn(c.IntDigits, c.DecType)
			if d.hasSchema {
				return d.Convert(c, d.cur[slot], in)
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
func (d *debeziumFormat) convertBare(c *connect.Col, in *column.Value) error {
	cls := c.Class
	if cls == chtype.ClassComposite && in.Kind == column.String {
		return d.Convert(c, connect.Sem{Kind: connect.SemJSON}, in)
	}
	if cls != chtype.ClassDecimal && cls != chtype.ClassNumber {
		return nil
	}
	switch in.Kind {
	case column.String:
		if cls != chtype.ClassDecimal {
			return nil
		}
		if d.st.IsNumber(in.Bytes) {
			return nil
		}
		return d.Dec.FromBase64(in, in.Bytes, c.Scale)
	case column.Object:
		o, _ := in.Tree.Object()
		if o.Len() == 2 && o.Get("scale") != nil && o.Get("value") != nil {
			return d.Dec.VarDecimal(in)
		}
	}
	return nil
}

// metaCols returns the columns filled from $version and $deleted (filler).
func (d *debeziumFormat) MetaCols() (version, deleted int) { return d.verCol, d.delCol }

// fillKeys returns the columns of the record key's fields, which identify
// the row whose value the record does not carry (filler). Debezium writes
// a table's primary key as the record key, bare or wrapped by the JSON
// converter; each of its fields must be a column.
func (d *debeziumFormat) FillKeys() ([]int, error) {
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
			if n == string(name) && d.cols[c].Kind == route.Field {
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
