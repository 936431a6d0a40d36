package avrofmt

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hamba/avro/v2"

	"sink/internal/decode/column"
	"sink/internal/decode/format"
)

// The avro format's JSON renderer: a nested Avro value (record, array, map,
// union branch, duration) as JSON text, for columns that read a value whole.

// render appends the JSON text of a value of schema s (see the package comment for
// how each type is written). The text stops at the row's bound (an
// error): a small record must not write a huge value.
func (f *Reader) render(dst []byte, s avro.Schema, depth int) ([]byte, error) {
	if depth > maxAvroDepth {
		return dst, errors.New("values nest deeper than " + strconv.Itoa(maxAvroDepth))
	}
	s = resolveRef(s)
	switch t := s.(type) {
	case *avro.RecordSchema:
		return f.renderRecord(dst, t, depth)
	case *avro.UnionSchema:
		b, err := f.branch(t)
		switch {
		case err != nil || b == nil:
			return dst, err
		case b.Type() == avro.Null:
			return append(dst, "null"...), nil // its index took a byte
		}
		return f.render(dst, b, depth+1)
	case *avro.ArraySchema:
		return f.renderItems(dst, '[', t.Items(), false, depth)
	case *avro.MapSchema:
		return f.renderItems(dst, '{', t.Values(), true, depth)
	case *avro.EnumSchema:
		return f.renderEnum(dst, t)
	}
	if isDuration(s) {
		return f.renderDuration(dst), nil
	}
	if s.Type() == avro.Null {
		return append(dst, "null"...), f.free.Add(1)
	}
	op, err := scalarOp(s)
	if err != nil {
		return dst, err
	}
	return f.renderLeaf(dst, &op)
}

// renderEnum writes an enum's symbol as a JSON string.
func (f *Reader) renderEnum(dst []byte, t *avro.EnumSchema) ([]byte, error) {
	i := f.rd.ReadInt()
	if f.rd.Error != nil {
		return dst, nil
	}
	if i < 0 || int(i) >= len(t.Symbols()) {
		return dst, fmt.Errorf("enum index %d of %d symbols", i, len(t.Symbols()))
	}
	return column.AppendJSONString(dst, column.S2B(t.Symbols()[i])), nil
}

// textFits checks the JSON text being written against the row's bound.
func (f *Reader) textFits(dst []byte) error {
	if max := f.policy.RowBytes(); len(dst) > max {
		return format.TextTooLong(max)
	}
	return nil
}

// renderRecord writes a record as a JSON object.
func (f *Reader) renderRecord(dst []byte, t *avro.RecordSchema, depth int) ([]byte, error) {
	if len(t.Fields()) == 0 {
		return append(dst, "{}"...), f.free.Add(1)
	}
	dst = append(dst, '{')
	for i, fld := range t.Fields() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = column.AppendJSONString(dst, column.S2B(fld.Name()))
		dst = append(dst, ':')
		var err error
		if dst, err = f.render(dst, fld.Type(), depth+1); err != nil || f.rd.Error != nil {
			return dst, err
		}
		if err := f.textFits(dst); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// renderItems writes an array's items as a JSON array (open '[') or a
// map's entries as a JSON object (open '{', keyed).
func (f *Reader) renderItems(dst []byte, open byte, items avro.Schema, keyed bool, depth int) ([]byte, error) {
	dst = append(dst, open)
	err := f.blocks(func(i int) error {
		if i > 0 {
			dst = append(dst, ',')
		}
		if keyed {
			n, err := f.bytesLen()
			if err != nil {
				return err
			}
			dst = column.AppendJSONString(dst, f.readN(n))
			dst = append(dst, ':')
		}
		var err error
		if dst, err = f.render(dst, items, depth+1); err != nil {
			return err
		}
		return f.textFits(dst)
	})
	return append(dst, open+2), err // ']' and '}' are two past '[' and '{'
}

// renderDuration writes a duration (fixed 12: months, days, milliseconds,
// little-endian) as a JSON object.
func (f *Reader) renderDuration(dst []byte) []byte {
	raw := f.readN(12)
	le := func(b []byte) uint64 { return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 }
	dst = append(dst, `{"months":`...)
	dst = strconv.AppendUint(dst, le(raw[0:4]), 10)
	dst = append(dst, `,"days":`...)
	dst = strconv.AppendUint(dst, le(raw[4:8]), 10)
	dst = append(dst, `,"milliseconds":`...)
	dst = strconv.AppendUint(dst, le(raw[8:12]), 10)
	return append(dst, '}')
}

// renderLeaf reads a scalar and writes it as JSON.
func (f *Reader) renderLeaf(dst []byte, op *avroOp) ([]byte, error) {
	rd := f.rd
	var in column.Value
	mark := len(f.arena)
	switch op.leaf {
	case leafBool:
		if rd.ReadBool() {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case leafInt:
		return strconv.AppendInt(dst, int64(rd.ReadInt()), 10), nil
	case leafLong:
		return strconv.AppendInt(dst, rd.ReadLong(), 10), nil
	case leafFloat, leafDouble:
		if op.leaf == leafFloat {
			f.floatText(&in, float64(rd.ReadFloat()), 32)
		} else {
			f.floatText(&in, rd.ReadDouble(), 64)
		}
		if in.Kind == column.String {
			dst = column.AppendJSONString(dst, in.Bytes)
		} else {
			dst = append(dst, in.Bytes...)
		}
	case leafDate:
		days := int64(rd.ReadInt())
		dst = append(dst, '"')
		dst = time.Unix(days*column.SecondsPerDay, 0).UTC().AppendFormat(dst, "2006-01-02")
		dst = append(dst, '"')
	case leafTsMillis, leafTsMicros, leafTsNanos:
		dst = append(dst, '"')
		dst = avroInstant(op.leaf, rd.ReadLong()).AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	case leafLocalMillis, leafLocalMicros, leafLocalNanos:
		dst = append(dst, '"')
		dst = avroInstant(op.leaf, rd.ReadLong()).AppendFormat(dst, "2006-01-02 15:04:05.999999999")
		dst = append(dst, '"')
	default:
		// Strings, bytes, fixed, enums, decimals, uuids.
		if err := f.readLeaf(op, &in); err != nil {
			return dst, err
		}
		if in.Kind == column.Number {
			dst = append(dst, in.Bytes...)
		} else {
			dst = column.AppendJSONString(dst, in.Bytes)
		}
	}
	f.arena = f.arena[:mark]
	return dst, nil
}
