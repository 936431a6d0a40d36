package decode

import (
	"errors"
	"strings"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/avrofmt"
	"sink/internal/decode/column"
	"sink/internal/decode/drift"
	"sink/internal/decode/format"
	"sink/internal/route"
)

// dbzAvroFormat is the debezium-avro route format (route.DebeziumAvro):
// Debezium change events written by Kafka Connect's Avro converter, i.e.
// registry-framed Avro records of the envelope {before, after, source, op,
// ts_ms, ...}, keyed by a registry-framed Avro record of the primary key.
// The rows are the debezium-json format's (see debeziumFormat: which image
// an op writes, deletes from the before image or else the key, $version,
// $deleted, $op, $ts_ms, $source.PATH, tombstones, truncates and messages
// skipped), with the image's fields read as the avro format reads fields
// (see avroFormat), including Debezium's semantic types for dates and
// timestamps (io.debezium.time.*) and Kafka Connect's Decimal.
//
// It runs two avro readers: one over the envelope, whose slots are each
// column's field in the after image, the same field in the before image,
// the source block's fields and the op and ts_ms, and one over the key
// record, for deletes without a before image.
type dbzAvroFormat struct {
	st   *column.State
	env  *avrofmt.Reader // the envelope
	key  *avrofmt.Reader // the key record
	cols []dbzAvroCol
	cdcPlan

	// the envelope's own slots
	opSlot, tsSlot, connSlot, lsnSlot, srcTsSlot, afterSlot, beforeSlot int

	// per record
	op      []byte
	del     bool
	fromKey bool // the row image is the key (a delete without before image)
	keyOK   bool // a delete's key is decoded into d.key (placeholder)
	version int64
}

// dbzAvroCol is where one Plan column's value comes from.
type dbzAvroCol struct {
	kind          route.Kind
	after, before int // route.Field: the envelope slots; route.SourceBlock: after
	key           int // route.Field: the key reader's slot
}

func newDbzAvroFormat(env format.Env) *dbzAvroFormat {
	d := &dbzAvroFormat{st: env.State, env: avrofmt.New(env), key: avrofmt.NewKeyFields(env)}
	d.env.SetImage("after") // schema drift: the row image's fields no column reads
	str, long := chtype.Parse("Nullable(String)"), chtype.Parse("Nullable(Int64)")
	slot := func(t *chtype.Type, present bool, path ...string) int {
		return d.env.AddSlot(avrofmt.Slot{Path: path, Name: strings.Join(path, "."), Type: t, Present: present})
	}
	d.opSlot = slot(str, false, "op")
	d.tsSlot = slot(long, false, "ts_ms")
	d.connSlot = slot(str, false, "source", "connector")
	d.lsnSlot = slot(long, false, "source", "lsn")
	d.srcTsSlot = slot(long, false, "source", "ts_ms")
	d.afterSlot = slot(str, true, "after")
	d.beforeSlot = slot(str, true, "before")
	return d
}

func (*dbzAvroFormat) Role(source string) string { return cdcRole(source) }

func (*dbzAvroFormat) Want() string { return cdcWant }

func (d *dbzAvroFormat) Bind(col int, c chschema.ColumnSchema, t *chtype.Type, src route.Source, byName bool) error {
	for len(d.cols) <= col {
		d.cols = append(d.cols, dbzAvroCol{})
	}
	dc := dbzAvroCol{kind: src.Kind}
	add := func(f *avrofmt.Reader, path ...string) int {
		return f.AddSlot(avrofmt.Slot{Path: path, Name: c.Name, Type: t})
	}
	switch src.Kind {
	case route.Field:
		path := src.Path
		if byName {
			path = strings.Split(c.Name, ".") // Avro names have no dots
		}
		dc.after = add(d.env, append([]string{"after"}, path...)...)
		dc.before = add(d.env, append([]string{"before"}, path...)...)
		dc.key = add(d.key, path...)
	case route.SourceBlock:
		dc.after = add(d.env, append([]string{"source"}, src.Path...)...)
	}
	d.note(c, src)
	d.cols[col] = dc
	return nil
}

// bindKey: $key columns read the key as the avro format's $key does.
func (d *dbzAvroFormat) BindKey(col int, c chschema.ColumnSchema, t *chtype.Type) {
	d.env.BindKey(col, c, t)
}

func (d *dbzAvroFormat) Done() error {
	if err := d.check(); err != nil {
		return err
	}
	if err := d.env.Done(); err != nil {
		return err
	}
	return d.key.Done()
}

func (d *dbzAvroFormat) Lenient() bool { return d.del }

// placeholder: see placeholderFormat. A column is part of the key when the
// key record has its field.
func (d *dbzAvroFormat) Placeholder(col int) bool {
	if !d.keyOK || col >= len(d.cols) || d.cols[col].kind != route.Field {
		return false
	}
	var in column.Value
	if err := d.key.ReadSlot(d.cols[col].key, &in); err != nil {
		return false
	}
	return in.Kind == column.Missing
}

// unmappedFields returns the fields of the row image's schema that no
// column reads (drift.go): the envelope's after record, which is the
// before record's schema too. A delete read from its key is not counted.
func (d *dbzAvroFormat) UnmappedFields() *drift.Known {
	if d.fromKey {
		return nil
	}
	return d.env.UnmappedFields()
}

func (d *dbzAvroFormat) Begin(r format.Record) error {
	if len(r.Value) == 0 {
		return format.ErrTombstone
	}
	// The envelope, and the key of its $key columns.
	if err := d.env.Begin(r); err != nil {
		return err
	}
	op := d.env.Value(d.opSlot)
	d.op = nil
	if op.Kind == column.String {
		d.op = op.Bytes
	}
	var err error
	if d.del, err = cdcOp(d.op, op.Kind != column.Missing); err != nil {
		return err
	}
	d.fromKey, d.keyOK = false, false
	switch {
	case !d.del && d.env.Value(d.afterSlot).Kind != column.True:
		return format.Bad("", "invalid Debezium event: op "+string(d.op)+" without an after image")
	case d.del && d.env.Value(d.beforeSlot).Kind != column.True:
		if len(r.Key) < 5 || r.Key[0] != 0 {
			return format.Bad("", "invalid Debezium event: delete without a before image and without a registry-framed record key")
		}
		if err := d.key.DecodeKey(r.Key, r.Topic); err != nil {
			return err
		}
		d.fromKey = true
	case d.del && len(r.Key) >= 5 && r.Key[0] == 0:
		// The key says which columns of the before image are the row's
		// (placeholder); a key that does not decode leaves every column
		// strict, and one whose schema cannot be fetched now holds the
		// record like any other.
		err := d.key.DecodeKey(r.Key, r.Topic)
		if errors.Is(err, format.ErrUnavailable) {
			return err
		}
		d.keyOK = err == nil
	}
	if reason := d.computeVersion(r.Offset); reason != "" {
		return format.Bad(d.versionCol, reason)
	}
	return nil
}

// computeVersion sets d.version, or returns why it cannot (see cdcVersion).
func (d *dbzAvroFormat) computeVersion(offset int64) string {
	if c := d.env.Value(d.connSlot); c.Kind == column.String && string(c.Bytes) == "postgresql" {
		lsn := d.env.Value(d.lsnSlot)
		if lsn.Kind != column.Integer {
			return msgNoLSN
		}
		var reason string
		d.version, reason = cdcVersion(true, lsn.Int, 0, 0)
		return reason
	}
	ts := d.env.Value(d.tsSlot)
	if ts.Kind != column.Integer {
		ts = d.env.Value(d.srcTsSlot)
	}
	if ts.Kind != column.Integer {
		return msgNoTs
	}
	var reason string
	if d.version, reason = cdcVersion(false, 0, ts.Int, offset); reason != "" {
		return "ts_ms " + column.Show(ts) + reason
	}
	return ""
}

func (d *dbzAvroFormat) Read(i int, in *column.Value) error {
	if d.env.IsKey(i) {
		return d.env.Read(i, in) // the record key, as the avro format's $key reads it
	}
	c := &d.cols[i]
	if cdcMeta(c.kind, d.version, d.del, d.op, in) {
		return nil
	}
	switch c.kind {
	case route.TsMs:
		return d.env.ReadSlot(d.tsSlot, in)
	case route.SourceBlock:
		return d.env.ReadSlot(c.after, in)
	case route.Field:
		switch {
		case d.fromKey:
			return d.key.ReadSlot(c.key, in)
		case d.del:
			err := d.env.ReadSlot(c.before, in)
			if err == nil && in.Kind == column.String && string(in.Bytes) == Placeholder {
				in.Kind = column.Missing // a delete only marks its key deleted
			}
			return err
		}
		err := d.env.ReadSlot(c.after, in)
		if err == nil && in.Kind == column.String && string(in.Bytes) == Placeholder {
			// Filling an unchanged TOASTed value needs the record key's
			// fields, which the debezium-json format reads; never write
			// the placeholder as data.
			return column.Reasonf("the value is Debezium's placeholder for an unchanged TOASTed value (%s), which format %s does not fill from the row's earlier value; use %s, or REPLICA IDENTITY FULL on the source table", Placeholder, route.DebeziumAvro, route.Debezium)
		}
		return err
	}
	return nil
}
