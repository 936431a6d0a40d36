package avrofmt

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/hamba/avro/v2"

	"sink/internal/decode/column"
	"sink/internal/decode/format"
)

// The avro format's interpreter: it runs an avroProgram's ops over the
// binary datum with hamba/avro's Reader, setting the columns' inputs and
// skipping what no column reads.

// run executes ops (a record's fields) against the reader.
func (f *Reader) run(prog *avroProgram, ops []avroOp, depth int) error {
	if depth > maxAvroDepth {
		return errors.New("records nest deeper than " + strconv.Itoa(maxAvroDepth))
	}
	rd := f.rd
	for i := range ops {
		if rd.Error != nil {
			return nil
		}
		if err := f.step(prog, &ops[i], depth); err != nil {
			return err
		}
	}
	return nil
}

func (f *Reader) step(prog *avroProgram, op *avroOp, depth int) error {
	switch op.kind {
	case opSkip:
		return f.skip(op.schema, depth)
	case opNull:
		f.setNull(op.cols)
		return f.free.Add(1) // a field of type null (a union's null branch: unionStep)
	case opRecord:
		for _, col := range op.cols {
			f.vals[col].Kind = column.True // the record is there
		}
		if len(op.fields) == 0 {
			return f.free.Add(1)
		}
		return f.run(prog, op.fields, depth+1)
	case opUnion:
		return f.unionStep(prog, op, depth)
	case opLeaf:
		return f.leaf(op)
	case opJSON:
		return f.jsonStep(prog, op, depth)
	}
	return nil
}

// setNull makes the columns cols NULL.
func (f *Reader) setNull(cols []int) {
	for _, col := range cols {
		f.vals[col].Kind = column.Null
	}
}

// unionStep reads a union's branch index and runs the branch's step. A
// null branch took its index's byte: not a free value.
func (f *Reader) unionStep(prog *avroProgram, op *avroOp, depth int) error {
	i := f.rd.ReadLong()
	if f.rd.Error != nil {
		return nil
	}
	if i < 0 || i >= int64(len(op.branches)) {
		return fmt.Errorf("union branch %d of %d", i, len(op.branches))
	}
	if br := &op.branches[i]; br.kind == opNull {
		f.setNull(br.cols)
		return nil
	}
	return f.step(prog, &op.branches[i], depth+1)
}

// jsonStep renders a value as JSON and hands it to the columns that read
// it (whole, or at a path below it).
func (f *Reader) jsonStep(prog *avroProgram, op *avroOp, depth int) error {
	slot := &prog.json[op.slot]
	var err error
	if slot.buf, err = f.render(slot.buf[:0], op.schema, depth+1); err != nil || f.rd.Error != nil {
		return err
	}
	v, perr := slot.parser.ParseBytes(slot.buf)
	if perr != nil {
		return fmt.Errorf("nested value: %v", perr)
	}
	for i, col := range slot.cols {
		if p := slot.paths[i]; len(p) > 0 {
			f.jv[col] = v.Get(p...)
		} else {
			f.jv[col] = v
		}
		f.vals[col].Kind = column.Missing
	}
	return nil
}

// bytesLen reads a string or bytes length and checks it against the
// payload.
func (f *Reader) bytesLen() (int, error) {
	n := f.rd.ReadLong()
	if f.rd.Error != nil {
		return 0, nil
	}
	if n < 0 || n > int64(f.size) {
		return 0, fmt.Errorf("string or bytes length %d in a %d-byte record", n, f.size)
	}
	return int(n), nil
}

// fits checks a fixed size n against the record before n bytes are set
// aside for it: a fixed larger than the whole payload cannot be in it, and
// one of size 0 is a free value.
func (f *Reader) fits(n int) error {
	if n == 0 {
		return f.free.Add(1)
	}
	if n > f.size {
		return fmt.Errorf("fixed of %d bytes in a %d-byte record", n, f.size)
	}
	return nil
}

// readN reads n bytes into the arena and returns them.
func (f *Reader) readN(n int) []byte {
	start := len(f.arena)
	if cap(f.arena)-start < n {
		grown := make([]byte, start, 2*cap(f.arena)+n)
		copy(grown, f.arena)
		f.arena = grown
	}
	f.arena = f.arena[:start+n]
	b := f.arena[start : start+n : start+n]
	f.rd.Read(b)
	return b
}

// leaf reads a scalar into its columns.
func (f *Reader) leaf(op *avroOp) error {
	if len(op.cols) == 1 && op.locs[0] == nil {
		// The common case: read straight into the slot.
		in := &f.vals[op.cols[0]]
		*in = column.Value{}
		return f.readLeaf(op, in)
	}
	var in column.Value
	if err := f.readLeaf(op, &in); err != nil || f.rd.Error != nil {
		return err
	}
	for i, col := range op.cols {
		f.vals[col] = in
		if loc := op.locs[i]; loc != nil && op.leaf >= leafLocalMillis {
			// A local timestamp is a wall time: read it in the column's zone.
			t := in.Time
			f.vals[col].Time = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc)
		}
	}
	return nil
}

// readLeaf reads a scalar into in; strings and number texts go to the
// arena.
func (f *Reader) readLeaf(op *avroOp, in *column.Value) error {
	rd := f.rd
	switch op.leaf {
	case leafBool:
		in.Kind = column.False
		if rd.ReadBool() {
			in.Kind = column.True
		}
	case leafInt:
		in.Kind, in.Int = column.Integer, int64(rd.ReadInt())
	case leafLong:
		in.Kind, in.Int = column.Integer, rd.ReadLong()
	case leafFloat:
		f.floatText(in, float64(rd.ReadFloat()), 32)
	case leafDouble:
		f.floatText(in, rd.ReadDouble(), 64)
	case leafString, leafBytes, leafFixed, leafUUIDFixed, leafDecimalBytes, leafDecimalFixed:
		return f.readBytesLeaf(op, in)
	case leafEnum:
		i := rd.ReadInt()
		if rd.Error != nil {
			return nil
		}
		if i < 0 || int(i) >= len(op.symbols) {
			return fmt.Errorf("enum index %d of %d symbols", i, len(op.symbols))
		}
		in.Kind, in.Bytes = column.String, column.S2B(op.symbols[i])
	case leafDate:
		days := int64(rd.ReadInt())
		in.Kind, in.Int, in.Time = column.Instant, days, time.Unix(days*column.SecondsPerDay, 0).UTC()
	default: // timestamps
		v := rd.ReadLong()
		in.Kind, in.Int, in.Time = column.Instant, v, avroInstant(op.leaf, v)
	}
	return nil
}

// readBytesLeaf reads a scalar stored as bytes (string, bytes, fixed, a
// uuid or decimal on either) into in, its length checked against the
// record first.
func (f *Reader) readBytesLeaf(op *avroOp, in *column.Value) error {
	n := op.size
	var err error
	switch op.leaf {
	case leafString, leafBytes, leafDecimalBytes:
		n, err = f.bytesLen()
	default:
		err = f.fits(n)
	}
	if err != nil || f.rd.Error != nil {
		return err
	}
	raw := f.readN(n)
	switch op.leaf {
	case leafUUIDFixed:
		in.Kind, in.Bytes = column.String, f.appendUUID(raw)
	case leafDecimalBytes, leafDecimalFixed:
		if err := format.CheckDecimal(raw, op.prec, ""); err != nil {
			return err
		}
		start := len(f.arena)
		f.arena = f.dec.Text(f.arena, raw, op.scale)
		in.Kind, in.Bytes = column.Number, f.arena[start:len(f.arena):len(f.arena)]
	default:
		in.Kind, in.Bytes = column.String, raw
	}
	return nil
}

// avroInstant is the instant of a timestamp leaf's value (local ones as
// the UTC instant of the same wall time).
func avroInstant(k leafKind, v int64) time.Time {
	switch k {
	case leafTsMillis, leafLocalMillis:
		return time.UnixMilli(v).UTC()
	case leafTsMicros, leafLocalMicros:
		return time.UnixMicro(v).UTC()
	}
	return time.Unix(0, v).UTC()
}

// floatText makes in the number v (NaN and infinities as their strings,
// which Float columns read).
func (f *Reader) floatText(in *column.Value, v float64, bits int) {
	start := len(f.arena)
	switch {
	case math.IsNaN(v):
		f.arena = append(f.arena, "NaN"...)
		in.Kind = column.String
	case math.IsInf(v, 1):
		f.arena = append(f.arena, "+Inf"...)
		in.Kind = column.String
	case math.IsInf(v, -1):
		f.arena = append(f.arena, "-Inf"...)
		in.Kind = column.String
	default:
		f.arena = strconv.AppendFloat(f.arena, v, 'g', -1, bits)
		in.Kind = column.Number
	}
	in.Bytes = f.arena[start:len(f.arena):len(f.arena)]
}

// appendUUID formats 16 bytes as UUID text in the arena.
func (f *Reader) appendUUID(raw []byte) []byte {
	const hex = "0123456789abcdef"
	start := len(f.arena)
	for i, x := range raw {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			f.arena = append(f.arena, '-')
		}
		f.arena = append(f.arena, hex[x>>4], hex[x&15])
	}
	return f.arena[start:len(f.arena):len(f.arena)]
}

// moreItems counts n more array or map items against maxAvroItems.
func (f *Reader) moreItems(n int64) error {
	if n < 0 || n > maxAvroItems-int64(f.items) {
		return fmt.Errorf("block of %d items (at most %d per record)", n, maxAvroItems)
	}
	f.items += int(n)
	return nil
}

// blocks walks an array's or map's blocks, calling item for each item (a
// map's item reads its key first).
func (f *Reader) blocks(item func(i int) error) error {
	rd := f.rd
	i := 0
	for rd.Error == nil {
		n := rd.ReadLong()
		if n == 0 || rd.Error != nil {
			return nil
		}
		if n < 0 {
			if n == math.MinInt64 {
				return fmt.Errorf("invalid block count")
			}
			n = -n
			rd.ReadLong() // the block's byte size
		}
		if n > int64(max(f.size, format.MaxFreeValues)) {
			// Each item takes a byte of the record, or is a free value.
			return fmt.Errorf("block of %d items in a %d-byte record", n, f.size)
		}
		if err := f.moreItems(n); err != nil {
			return err
		}
		for range n {
			if rd.Error != nil {
				return nil
			}
			if err := item(i); err != nil {
				return err
			}
			i++
		}
	}
	return nil
}

// skip reads past a value of schema s.
func (f *Reader) skip(s avro.Schema, depth int) error {
	if depth > maxAvroDepth {
		return errors.New("values nest deeper than " + strconv.Itoa(maxAvroDepth))
	}
	rd := f.rd
	switch t := resolveRef(s).(type) {
	case *avro.RecordSchema:
		if len(t.Fields()) == 0 {
			return f.free.Add(1)
		}
		for _, fld := range t.Fields() {
			if err := f.skip(fld.Type(), depth+1); err != nil || rd.Error != nil {
				return err
			}
		}
		return nil
	case *avro.UnionSchema:
		b, err := f.branch(t)
		if err != nil || b == nil || b.Type() == avro.Null {
			return err // a null branch took its index's byte
		}
		return f.skip(b, depth+1)
	case *avro.ArraySchema:
		return f.blocks(func(int) error { return f.skip(t.Items(), depth+1) })
	case *avro.MapSchema:
		return f.blocks(func(int) error { return f.skipEntry(t.Values(), depth+1) })
	case *avro.FixedSchema:
		if err := f.fits(t.Size()); err != nil {
			return err
		}
		rd.SkipNBytes(t.Size())
		return nil
	}
	return f.skipPrimitive(s)
}

// skipEntry reads past a map entry: its key, and a value of schema s.
func (f *Reader) skipEntry(s avro.Schema, depth int) error {
	n, err := f.bytesLen()
	if err != nil {
		return err
	}
	f.rd.SkipNBytes(n)
	return f.skip(s, depth)
}

// branch reads a union's branch index and returns the branch's schema
// (nil with a nil error when the read failed: rd.Error says why).
func (f *Reader) branch(u *avro.UnionSchema) (avro.Schema, error) {
	i := f.rd.ReadLong()
	if f.rd.Error != nil {
		return nil, nil
	}
	if i < 0 || i >= int64(len(u.Types())) {
		return nil, fmt.Errorf("union branch %d of %d", i, len(u.Types()))
	}
	return u.Types()[i], nil
}

// skipPrimitive reads past a value of a primitive schema s (or an enum:
// its index).
func (f *Reader) skipPrimitive(s avro.Schema) error {
	rd := f.rd
	switch s.Type() {
	case avro.Null:
		return f.free.Add(1)
	case avro.Boolean:
		rd.SkipBool()
	case avro.Int, avro.Enum:
		rd.SkipInt()
	case avro.Long:
		rd.SkipLong()
	case avro.Float:
		rd.SkipFloat()
	case avro.Double:
		rd.SkipDouble()
	case avro.String, avro.Bytes:
		n, err := f.bytesLen()
		if err != nil {
			return err
		}
		rd.SkipNBytes(n)
	default:
		return fmt.Errorf("unsupported Avro type %s", s.Type())
	}
	return nil
}
