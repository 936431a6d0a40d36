package decode

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"
)

// FormatDebezium is the route format of Debezium change events in Kafka
// Connect's JSON converter encoding. A record value is a Debezium change event as Kafka Connect's JsonConverter
// writes it: the envelope {"before", "after", "source", "op", "ts_ms", ...},
// either bare (schemas.enable=false) or wrapped as {"schema": ..., "payload":
// envelope} (schemas.enable=true). One event is one row:
//
//   - op "c" (insert), "r" (snapshot read) and "u" (update) write the after
//     image with the delete marker 0;
//   - op "d" writes the before image with the delete marker 1. Without a
//     before image (REPLICA IDENTITY NOTHING, or a converter that drops it)
//     the row is built from the record key, which Debezium writes as the
//     primary key fields, bare or wrapped the same way;
//   - a tombstone (null or empty value, or a null payload), a truncate ("t")
//     and a logical decoding message ("m") carry no row: Append returns an
//     error that matches ErrSkip, and the caller counts the record as
//     handled.
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
//	org.apache.kafka.connect.data.Decimal                base64 big-endian two's-complement
//	                                                     unscaled value, parameters.scale
//	io.debezium.data.VariableScaleDecimal                {"scale": s, "value": base64}
//	io.debezium.data.Json                                JSON text
//	type "bytes" without a name                          base64 (binary.handling.mode=bytes)
//
// Dates and times become instants for Date, Date32, DateTime and DateTime64
// columns (no guessing of units), text for String columns ("2006-01-02",
// "2006-01-02 15:04:05.999999999" — Debezium's Timestamp has no zone —,
// "15:04:05.999999999") and stay raw numbers for numeric columns. Decimals
// become exact decimal text, which then converts like a JSON number (so
// Decimal(P, S), Float, integer and String columns all work, and nothing is
// rounded). Json text fills Array, Map and Tuple columns by parsing it
// (String columns keep the text, JSON columns parse it); bytes fill String and FixedString columns with the
// decoded bytes. ZonedTimestamp (RFC 3339 text), Uuid, Enum, booleans and
// decimal.handling.mode=string|double need nothing special.
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
const FormatDebezium = "debezium-json"

// ErrSkip matches (errors.Is) the error Append returns for a record that
// carries no row by design: a Debezium tombstone, truncate or message event.
// Such a record is handled, not bad: count it and mark its offset done.
var ErrSkip = errors.New("record carries no row")

var (
	errTombstone = fmt.Errorf("%w: tombstone", ErrSkip)
	errTruncate  = fmt.Errorf("%w: truncate event (op t)", ErrSkip)
	errMessage   = fmt.Errorf("%w: logical decoding message (op m)", ErrSkip)
)

// Sources only the debezium-json format has.
const (
	srcVersion srcKind = 64 + iota
	srcDeleted
	srcOp
	srcTsMs
	srcSource // rest is the path below the source block
)

var dbzMetaSources = map[string]srcKind{
	"$topic": srcTopic, "$partition": srcPartition, "$offset": srcOffset,
	"$timestamp": srcTimestamp, "$key": srcKey,
	"$version": srcVersion, "$deleted": srcDeleted, "$op": srcOp, "$ts_ms": srcTsMs,
}

// dbzMetaColumns are the column names that, unmapped, read a $ source.
var dbzMetaColumns = map[string]string{
	"_topic": "$topic", "_partition": "$partition", "_offset": "$offset",
	"_timestamp": "$timestamp", "_key": "$key",
	"_version": "$version", "_deleted": "$deleted",
}

// semKind is a field's Debezium semantic type, from the schema block.
type semKind uint8

const (
	semPlain semKind = iota // nothing special (or not described)
	semDate
	semTsMillis
	semTsMicros
	semTsNanos
	semTimeMillis
	semTimeMicros
	semTimeNanos
	semDecimal
	semVarDecimal
	semJSON
	semBytes
)

// semNames are the semantic types that need a conversion; every other name
// (ZonedTimestamp, Uuid, Enum, EnumSet, Year, MicroDuration, Bits, Xml,
// geometry structs, ...) arrives in a form the column converters read as is.
var semNames = map[string]semKind{
	"io.debezium.time.Date":                   semDate,
	"org.apache.kafka.connect.data.Date":      semDate,
	"io.debezium.time.Timestamp":              semTsMillis,
	"org.apache.kafka.connect.data.Timestamp": semTsMillis,
	"io.debezium.time.MicroTimestamp":         semTsMicros,
	"io.debezium.time.NanoTimestamp":          semTsNanos,
	"io.debezium.time.Time":                   semTimeMillis,
	"org.apache.kafka.connect.data.Time":      semTimeMillis,
	"io.debezium.time.MicroTime":              semTimeMicros,
	"io.debezium.time.NanoTime":               semTimeNanos,
	"org.apache.kafka.connect.data.Decimal":   semDecimal,
	"io.debezium.data.VariableScaleDecimal":   semVarDecimal,
	"io.debezium.data.Json":                   semJSON,
}

// fieldSem is one image field's semantic type, valid for the current record.
type fieldSem struct {
	kind  semKind
	scale int32 // semDecimal
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
	for t.kind == kNullable || t.kind == kLowCardinality {
		t = t.elem
	}
	switch t.kind {
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
	for t.kind == kNullable || t.kind == kLowCardinality {
		t = t.elem
	}
	return t.scale
}

// dbzPlan is what a debezium-json Plan adds to the json machinery: the
// per-column classes and the per-record state and scratch space.
type dbzPlan struct {
	cls        []colClass     // per column
	scale      []int          // per column: Decimal scale (schema-less decimals)
	versionCol string         // a column filled from $version, for error messages
	keyIdx     map[string]int // the Plan's: image field -> slot

	// per record
	cur       []fieldSem // the image's semantic types, per slot (Plan.keys)
	sem       []fieldSem // cur when described from this record's schema
	hasSchema bool
	env, src  *fastjson.Value
	op        []byte
	version   int64

	// The schema block of the last wrapped message, and what it says
	// about the after and before images.
	cacheKey                []byte
	cacheAfter, cacheBefore []fieldSem
	cachedOK                bool
	schemaParser            fastjson.Parser

	keyParser  fastjson.Parser // the record key, for deletes without a before image
	jsonParser fastjson.Parser // io.debezium.data.Json text into Array/Map columns

	raw, mag, digits, dec, text []byte
	bi                          big.Int
}

// compileDebezium is Compile for the debezium-json format: the image takes
// the place of the JSON record, and the sources and rules above are added.
func compileDebezium(cols []ColumnSchema, mapping map[string]string) (*Plan, error) {
	err := checkMapping(cols, mapping, func(source string) string {
		switch source {
		case "$version":
			return " (the version column; add it as UInt64)"
		case "$deleted":
			return " (the delete marker column; add it as UInt8)"
		}
		return ""
	})
	if err != nil {
		return nil, err
	}

	d := &dbzPlan{keyIdx: map[string]int{}}
	p := &Plan{keyIdx: d.keyIdx, dbz: d}
	var sig strings.Builder
	hasDeleted := false
	for _, c := range cols {
		if !insertable(c) {
			continue
		}
		t := parseType(c.Type)
		if t.unsupported() {
			return nil, fmt.Errorf("column %q has type %s which the %s format cannot fill", c.Name, c.Type, FormatDebezium)
		}
		if err := driverCanCarry(c.Type, t); err != nil {
			return nil, fmt.Errorf("column %q has type %s: %v", c.Name, c.Type, err)
		}
		spec, explicit := mapping[c.Name]
		if !explicit {
			spec = dbzMetaColumns[c.Name]
		}
		var src source
		switch {
		case spec == "" && !explicit:
			src = p.jsonSource([]string{c.Name})
		case strings.HasPrefix(spec, "$source."):
			path, err := splitPath(c.Name, "source", spec, strings.TrimPrefix(spec, "$source."))
			if err != nil {
				return nil, err
			}
			src = source{kind: srcSource, rest: path}
		case strings.HasPrefix(spec, "$"):
			if name, ok := strings.CutPrefix(spec, "$header."); ok && name != "" {
				src = source{kind: srcHeader, header: name}
			} else if k, ok := dbzMetaSources[spec]; ok {
				src = source{kind: k}
			} else {
				return nil, fmt.Errorf("column %q: unknown source %q (want a path into the row image or $topic, $partition, $offset, $timestamp, $key, $header.NAME, $version, $deleted, $op, $ts_ms, $source.PATH)", c.Name, spec)
			}
			if !t.scalar() {
				return nil, fmt.Errorf("column %q: source %s cannot fill type %s", c.Name, spec, c.Type)
			}
			switch src.kind {
			case srcVersion:
				if d.versionCol == "" {
					d.versionCol = c.Name
				}
			case srcDeleted:
				hasDeleted = true
			}
		default:
			path, err := splitPath(c.Name, "JSON path", spec, spec)
			if err != nil {
				return nil, err
			}
			src = p.jsonSource(path)
		}
		p.cols = append(p.cols, c)
		p.types = append(p.types, t)
		p.srcs = append(p.srcs, src)
		d.cls = append(d.cls, classOf(t))
		d.scale = append(d.scale, columnScale(t))
		fmt.Fprintf(&sig, "%s\x00%s\x00", c.Name, c.Type)
	}
	if len(p.cols) == 0 {
		return nil, fmt.Errorf("no insertable columns")
	}
	if d.versionCol == "" {
		return nil, fmt.Errorf("no column receives the row version: add a column \"_version UInt64\" (or map one to $version) so that ReplacingMergeTree keeps the latest change")
	}
	if !hasDeleted {
		return nil, fmt.Errorf("no column receives the delete marker: add a column \"_deleted UInt8\" (or map one to $deleted) so that deletes are not read as live rows")
	}
	p.sig = sig.String()
	p.slots = make([]*fastjson.Value, len(p.keys))
	d.sem = make([]fieldSem, len(p.keys))
	d.cacheAfter = make([]fieldSem, len(p.keys))
	d.cacheBefore = make([]fieldSem, len(p.keys))
	return p, nil
}

// appendDebezium is Append for the debezium-json format.
func (p *Plan) appendDebezium(b *Block, r *kgo.Record) error {
	d := p.dbz
	if len(r.Value) == 0 {
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
	if pl, known, ok := d.splitWrapped(r.Value); ok {
		// A payload that does not parse falls through to the whole
		// value's parse, which says what is wrong.
		if env, err = p.parser.ParseBytes(pl); err == nil {
			cached = known
		} else {
			env = nil
		}
	}
	if env == nil {
		v, err := p.parser.ParseBytes(r.Value)
		if err != nil {
			return p.recordError(r, "", "invalid JSON: "+err.Error())
		}
		if v.Type() == fastjson.TypeNull {
			return errTombstone
		}
		if v.Type() != fastjson.TypeObject {
			return p.recordError(r, "", "invalid Debezium event: want a JSON object, got "+v.Type().String())
		}
		env, schema = unwrap(v)
	}
	if env.Type() == fastjson.TypeNull {
		return errTombstone
	}
	if env.Type() != fastjson.TypeObject {
		return p.recordError(r, "", "invalid Debezium event: payload is a JSON "+env.Type().String()+", want an object")
	}
	d.env, d.op = env, env.GetStringBytes("op")
	d.src = env.Get("source")
	if d.src != nil && d.src.Type() != fastjson.TypeObject {
		d.src = nil
	}

	var img *fastjson.Value
	field := "after"
	switch string(d.op) {
	case "c", "r", "u":
		img = env.Get("after")
		if img == nil || img.Type() != fastjson.TypeObject {
			return p.recordError(r, "", "invalid Debezium event: op "+string(d.op)+" without an after image")
		}
	case "d":
		field = "before"
		img = env.Get("before")
		if img == nil || img.Type() != fastjson.TypeObject {
			if img, schema, err = p.keyImage(r); err != nil {
				return err
			}
			field, cached = "", false
		}
	case "t":
		return errTruncate
	case "m":
		return errMessage
	default:
		if env.Get("op") == nil {
			return p.recordError(r, "", "invalid Debezium event: no op field (is this topic a Debezium change topic?)")
		}
		return p.recordError(r, "", "invalid Debezium event: unknown op "+strconv.Quote(cut(d.op)))
	}

	switch {
	case cached && field == "after":
		d.hasSchema, d.cur = true, d.cacheAfter
	case cached:
		d.hasSchema, d.cur = true, d.cacheBefore
	case schema != nil:
		d.hasSchema, d.cur = true, d.sem
		d.describe(d.sem, schema, field)
	default:
		d.hasSchema = false
	}
	if reason := d.computeVersion(r); reason != "" {
		return p.recordError(r, d.versionCol, reason)
	}

	o, _ := img.Object()
	for i, k := range p.keys {
		p.slots[i] = o.Get(k)
	}
	return p.appendRow(b, r)
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
func (p *Plan) keyImage(r *kgo.Record) (img, schema *fastjson.Value, err error) {
	if len(r.Key) == 0 {
		return nil, nil, p.recordError(r, "", "invalid Debezium event: delete without a before image and without a record key")
	}
	k, perr := p.dbz.keyParser.ParseBytes(r.Key)
	if perr != nil {
		return nil, nil, p.recordError(r, "", "delete without a before image: record key is not JSON: "+perr.Error())
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
		return nil, nil, p.recordError(r, "", "delete without a before image: record key is a JSON "+k.Type().String()+", want an object of key fields")
	}
	return k, schema, nil
}

// describe fills dst (one entry per image slot) with the semantic type of
// each image field the plan reads: from the envelope schema's field named
// field ("after" or "before"), or, when field is "", from the schema itself
// (a key schema).
func (d *dbzPlan) describe(dst []fieldSem, schema *fastjson.Value, field string) {
	clear(dst)
	fields := schema.GetArray("fields")
	if field != "" {
		st := fields
		fields = nil
		for _, f := range st {
			if string(f.GetStringBytes("field")) == field {
				fields = f.GetArray("fields")
				break
			}
		}
	}
	for _, f := range fields {
		name := f.GetStringBytes("name")
		var k semKind
		if len(name) > 0 {
			k = semNames[string(name)]
		} else if string(f.GetStringBytes("type")) == "bytes" {
			k = semBytes
		}
		if k == semPlain {
			continue
		}
		// Only now look the field up: most fields have no semantic type.
		slot, ok := d.slotOf(f.GetStringBytes("field"))
		if !ok {
			continue
		}
		fs := fieldSem{kind: k}
		if k == semDecimal {
			s, ok := atoi32(f.GetStringBytes("parameters", "scale"))
			if !ok {
				continue // a Decimal without a scale is not one we can read; the column decides
			}
			fs.scale = s
		}
		dst[slot] = fs
	}
}

// schemaSems makes the cache describe the schema block sch (its exact
// bytes): it parses sch and describes the after and before images. It
// returns false when sch is not a JSON object.
func (d *dbzPlan) schemaSems(sch []byte) bool {
	d.cachedOK = false
	v, err := d.schemaParser.ParseBytes(sch)
	if err != nil || v.Type() != fastjson.TypeObject {
		return false
	}
	d.describe(d.cacheAfter, v, "after")
	d.describe(d.cacheBefore, v, "before")
	d.cacheKey = append(d.cacheKey[:0], sch...)
	d.cachedOK = true
	return true
}

// splitWrapped returns the payload of a value in the JSON converter's
// layout, {"schema":S,"payload":P} (whitespace allowed), without parsing
// it, and whether the cache describes S (false when S is null). When S is
// the cached schema, a byte comparison is all it costs: a complete JSON
// object that prefixes the value is the value. Any other layout, or a
// schema that does not parse, gives ok false; the caller then parses the
// whole value. P is not checked here: parsing it does that.
func (d *dbzPlan) splitWrapped(b []byte) (payload []byte, known, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false, false
	}
	i, ok = member(b, i+1, `"schema"`)
	if !ok {
		return nil, false, false
	}
	switch rest := b[i:]; {
	case d.cachedOK && len(rest) >= len(d.cacheKey) && string(rest[:len(d.cacheKey)]) == string(d.cacheKey):
		i, known = i+len(d.cacheKey), true
	case len(rest) >= 4 && string(rest[:4]) == "null":
		i += 4
	default:
		end, ok := valueEnd(b, i)
		if !ok || !d.schemaSems(b[i:end]) {
			return nil, false, false
		}
		i, known = end, true
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ',' {
		return nil, false, false
	}
	if i, ok = member(b, i+1, `"payload"`); !ok {
		return nil, false, false
	}
	end := len(b)
	for end > i && (b[end-1] == ' ' || b[end-1] == '\n' || b[end-1] == '\t' || b[end-1] == '\r') {
		end--
	}
	if end <= i || b[end-1] != '}' {
		return nil, false, false
	}
	return b[i : end-1], known, true
}

// member skips `ws name ws : ws` from b[i] and returns where the value starts.
func member(b []byte, i int, name string) (int, bool) {
	i = skipSpace(b, i)
	if len(b)-i < len(name) || string(b[i:i+len(name)]) != name {
		return 0, false
	}
	if i = skipSpace(b, i+len(name)); i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return skipSpace(b, i+1), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the end of the object, array or null starting at b[i]
// (brackets matched outside strings; the content is not validated — the
// payload is parsed afterwards and the schema on a cache miss).
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	if b[i] == 'n' {
		if len(b)-i >= 4 && string(b[i:i+4]) == "null" {
			return i + 4, true
		}
		return 0, false
	}
	if b[i] != '{' && b[i] != '[' {
		return 0, false
	}
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		}
	}
	return 0, false
}

// slotOf returns the image slot (index in Plan.keys) of a field name.
func (d *dbzPlan) slotOf(name []byte) (int, bool) {
	i, ok := d.keyIdx[string(name)]
	return i, ok
}

func atoi32(b []byte) (int32, bool) {
	if len(b) == 0 || len(b) > 6 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n int32
	for _, ch := range b {
		if !isDigit(ch) {
			return 0, false
		}
		n = n*10 + int32(ch-'0')
	}
	if neg {
		n = -n
	}
	return n, len(b) > 0
}

// Bounds of the ts_ms-based version: ts_ms × 1e6 + offset mod 1e6 must fit
// in int64 (the year 2262).
const (
	versionOffsets = 1_000_000
	maxVersionTs   = (math.MaxInt64 - versionOffsets + 1) / versionOffsets
)

// computeVersion sets d.version, or returns why it cannot.
func (d *dbzPlan) computeVersion(r *kgo.Record) string {
	if d.src != nil && string(d.src.GetStringBytes("connector")) == "postgresql" {
		lsn := d.src.Get("lsn")
		if lsn == nil || lsn.Type() == fastjson.TypeNull {
			return "PostgreSQL event without source.lsn, which is its version"
		}
		n, err := lsn.Uint64()
		if err != nil || n > math.MaxInt64 {
			return "source.lsn " + cut(lsn.MarshalTo(d.text[:0])) + " is not an LSN"
		}
		d.version = int64(n)
		return ""
	}
	ts := d.env.Get("ts_ms")
	if (ts == nil || ts.Type() == fastjson.TypeNull) && d.src != nil {
		ts = d.src.Get("ts_ms")
	}
	if ts == nil || ts.Type() == fastjson.TypeNull {
		return "event has neither ts_ms nor source.ts_ms to version it by"
	}
	ms, err := ts.Int64()
	if err != nil || ms < 0 || ms > maxVersionTs {
		return "ts_ms " + cut(ts.MarshalTo(d.text[:0])) + " is not a usable time in milliseconds"
	}
	d.version = ms*versionOffsets + r.Offset%versionOffsets
	return ""
}

// readDebezium reads column i's source into in and applies Debezium's
// encodings to image fields.
func (p *Plan) readDebezium(i int, s *source, r *kgo.Record, in *input) error {
	d := p.dbz
	switch s.kind {
	case srcVersion:
		in.kind, in.n = inInt, d.version
	case srcDeleted:
		in.kind, in.n = inInt, 0
		if string(d.op) == "d" {
			in.n = 1
		}
	case srcOp:
		in.kind, in.b = inStr, d.op
	case srcTsMs:
		p.ctx.fromJSON(d.env.Get("ts_ms"), in)
	case srcSource:
		var v *fastjson.Value
		if d.src != nil {
			v = d.src.Get(s.rest...)
		}
		p.ctx.fromJSON(v, in)
	case srcJSON:
		p.read(s, r, in)
		if len(s.rest) == 0 && (in.kind == inStr || in.kind == inNum || in.kind == inObject) {
			if d.hasSchema {
				return p.convertSem(i, d.cur[s.slot], in)
			}
			return p.convertBare(i, in)
		}
	default:
		p.read(s, r, in)
	}
	return nil
}

// convertSem applies a field's semantic type (from the schema) for column i.
func (p *Plan) convertSem(i int, fs fieldSem, in *input) error {
	d := p.dbz
	cls := d.cls[i]
	switch fs.kind {
	case semPlain:
		return nil
	case semDate, semTsMillis, semTsMicros, semTsNanos, semTimeMillis, semTimeMicros, semTimeNanos:
		if in.kind != inNum || (cls != clsTime && cls != clsString) {
			return nil // numeric columns keep Debezium's number; others reject it themselves
		}
		n, err := strconv.ParseInt(b2s(in.b), 10, 64)
		if err != nil {
			return reasonf("cannot read %s as a Debezium %s value", show(in), semLabel(fs.kind))
		}
		t, ok := semTime(fs.kind, n)
		if !ok {
			return reasonf("Debezium %s value %s is out of range", semLabel(fs.kind), show(in))
		}
		if cls == clsTime {
			in.kind, in.t, in.n = inTime, t, t.UnixMilli()
			return nil
		}
		layout := "2006-01-02 15:04:05.999999999"
		switch fs.kind {
		case semDate:
			layout = "2006-01-02"
		case semTimeMillis, semTimeMicros, semTimeNanos:
			layout = "15:04:05.999999999"
		}
		d.text = t.AppendFormat(d.text[:0], layout)
		in.kind, in.b = inStr, d.text
		return nil
	case semDecimal:
		if in.kind != inStr {
			return nil
		}
		return d.decimalFromBase64(in, in.b, int(fs.scale))
	case semVarDecimal:
		if in.kind != inObject {
			return nil
		}
		return d.varDecimal(in)
	case semJSON:
		if in.kind != inStr || cls != clsComposite {
			return nil
		}
		v, err := d.jsonParser.ParseBytes(in.b)
		if err != nil {
			return reasonf("io.debezium.data.Json value is not JSON: %v", err)
		}
		p.ctx.fromJSON(v, in)
		return nil
	case semBytes:
		if in.kind != inStr || cls != clsString {
			return nil
		}
		raw, err := d.base64(in.b)
		if err != nil {
			return reasonf("cannot decode %s as base64 bytes", show(in))
		}
		in.b = raw
		return nil
	}
	return nil
}

// convertBare applies the schema-less rules: Decimal columns read
// non-numeric text as base64 Decimal bytes with the column's scale, Decimal
// and numeric columns read {"scale", "value"} objects as VariableScaleDecimal,
// and Array, Map and Tuple columns parse text as JSON (io.debezium.data.Json).
func (p *Plan) convertBare(i int, in *input) error {
	d := p.dbz
	cls := d.cls[i]
	if cls == clsComposite && in.kind == inStr {
		return p.convertSem(i, fieldSem{kind: semJSON}, in)
	}
	if cls != clsDecimal && cls != clsNumber {
		return nil
	}
	switch in.kind {
	case inStr:
		if cls != clsDecimal {
			return nil
		}
		if _, ok := p.ctx.parseNumber(in.b); ok {
			return nil
		}
		return d.decimalFromBase64(in, in.b, d.scale[i])
	case inObject:
		o, _ := in.v.Object()
		if o.Len() == 2 && o.Get("scale") != nil && o.Get("value") != nil {
			return d.varDecimal(in)
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

// Days beyond ±2^31 or times beyond what int64 nanoseconds hold do not
// occur in Debezium output; refusing them keeps the arithmetic exact.
const maxDays = 1 << 31

// semTime turns a Debezium date/time number into an instant (times of day
// are that long after 1970-01-01 00:00 UTC).
func semTime(k semKind, n int64) (time.Time, bool) {
	switch k {
	case semDate:
		if n >= maxDays || n < -maxDays {
			return time.Time{}, false
		}
		return time.Unix(n*secondsPerDay, 0).UTC(), true
	case semTsMillis, semTimeMillis:
		return time.UnixMilli(n).UTC(), true
	case semTsMicros, semTimeMicros:
		return time.UnixMicro(n).UTC(), true
	case semTsNanos, semTimeNanos:
		return time.Unix(0, n).UTC(), true
	}
	return time.Time{}, false
}

func (d *dbzPlan) base64(s []byte) ([]byte, error) {
	need := base64.StdEncoding.DecodedLen(len(s))
	if cap(d.raw) < need {
		d.raw = make([]byte, need)
	}
	n, err := base64.StdEncoding.Decode(d.raw[:need], s)
	return d.raw[:n], err
}

// varDecimal reads a VariableScaleDecimal {"scale": s, "value": base64}.
func (d *dbzPlan) varDecimal(in *input) error {
	sv, vv := in.v.Get("scale"), in.v.Get("value")
	if sv == nil || vv == nil {
		return reasonf("cannot read %s as a Debezium VariableScaleDecimal (want scale and value)", show(in))
	}
	scale, err := sv.Int()
	val, err2 := vv.StringBytes()
	if err != nil || err2 != nil {
		return reasonf("cannot read %s as a Debezium VariableScaleDecimal (want an integer scale and base64 value)", show(in))
	}
	return d.decimalFromBase64(in, val, scale)
}

// maxScale bounds a decimal scale read from a record (Debezium's come from
// column definitions, PostgreSQL allows up to 1000 for numeric).
const maxScale = 1000

// decimalFromBase64 turns base64 unscaled two's-complement bytes and a scale
// into decimal text, and makes in that number.
func (d *dbzPlan) decimalFromBase64(in *input, b64 []byte, scale int) error {
	if scale > maxScale || scale < -maxScale {
		return reasonf("Debezium decimal scale %d is out of range", scale)
	}
	raw, err := d.base64(b64)
	if err != nil {
		return reasonf("cannot decode %s as Debezium Decimal bytes (base64 of the unscaled value)", show(in))
	}
	d.dec = d.decimalText(d.dec[:0], raw, scale)
	in.kind, in.b = inNum, d.dec
	return nil
}

// decimalText appends the decimal text of the big-endian two's-complement
// integer raw scaled by 10^-scale. Up to 16 bytes (38 digits) it does not
// allocate.
func (d *dbzPlan) decimalText(dst, raw []byte, scale int) []byte {
	neg := len(raw) > 0 && raw[0]&0x80 != 0
	mag := raw
	if neg {
		d.mag = append(d.mag[:0], raw...)
		for i := range d.mag {
			d.mag[i] = ^d.mag[i]
		}
		for i := len(d.mag) - 1; i >= 0; i-- {
			d.mag[i]++
			if d.mag[i] != 0 {
				break
			}
		}
		mag = d.mag
	}
	for len(mag) > 0 && mag[0] == 0 {
		mag = mag[1:]
	}
	digits := d.digits[:0]
	switch {
	case len(mag) <= 8:
		var u uint64
		for _, x := range mag {
			u = u<<8 | uint64(x)
		}
		digits = strconv.AppendUint(digits, u, 10)
	case len(mag) <= 16:
		var hi, lo uint64
		for _, x := range mag[:len(mag)-8] {
			hi = hi<<8 | uint64(x)
		}
		for _, x := range mag[len(mag)-8:] {
			lo = lo<<8 | uint64(x)
		}
		digits = append128(digits, hi, lo)
	default:
		d.bi.SetBytes(mag)
		digits = d.bi.Append(digits, 10)
	}
	d.digits = digits
	zero := len(digits) == 1 && digits[0] == '0'
	if neg && !zero {
		dst = append(dst, '-')
	}
	switch {
	case scale <= 0:
		dst = append(dst, digits...)
		for i := 0; i < -scale && !zero; i++ {
			dst = append(dst, '0')
		}
	case len(digits) > scale:
		dst = append(dst, digits[:len(digits)-scale]...)
		dst = append(dst, '.')
		dst = append(dst, digits[len(digits)-scale:]...)
	default:
		dst = append(dst, '0', '.')
		for i := len(digits); i < scale; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	}
	return dst
}

// append128 appends the decimal digits of hi×2^64 + lo.
func append128(dst []byte, hi, lo uint64) []byte {
	const chunk = 1e19 // the largest power of ten below 2^64
	var chunks [2]uint64
	n := 0
	for hi != 0 {
		var r uint64
		hi, r = hi/chunk, hi%chunk
		lo, r = bits.Div64(r, lo, chunk)
		chunks[n] = r
		n++
	}
	dst = strconv.AppendUint(dst, lo, 10)
	for n > 0 {
		n--
		var buf [19]byte
		c := chunks[n]
		for j := 18; j >= 0; j-- {
			buf[j] = byte('0' + c%10)
			c /= 10
		}
		dst = append(dst, buf[:]...)
	}
	return dst
}
