package decode

// The avro format's JSON renderer: a nested Avro value (record, array, map,
// union branch, duration) as JSON text, for columns that read a value whole.

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hamba/avro/v2"
)

// render appends the JSON text of a value of schema s (see avroFormat for
// how each type is written).
func (f *avroFormat) render(dst []byte, s avro.Schema, depth int) ([]byte, error) {
	if depth > maxAvroDepth {
		return dst, errors.New("values nest deeper than " + strconv.Itoa(maxAvroDepth))
	}
	rd := f.rd
	s = resolveRef(s)
	var err error
	switch t := s.(type) {
	case *avro.RecordSchema:
		dst = append(dst, '{')
		for i, fld := range t.Fields() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, s2b(fld.Name()))
			dst = append(dst, ':')
			if dst, err = f.render(dst, fld.Type(), depth+1); err != nil || rd.Error != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case *avro.UnionSchema:
		i := rd.ReadLong()
		if rd.Error != nil {
			return dst, nil
		}
		if i < 0 || i >= int64(len(t.Types())) {
			return dst, fmt.Errorf("union branch %d of %d", i, len(t.Types()))
		}
		return f.render(dst, t.Types()[i], depth+1)
	case *avro.ArraySchema:
		dst = append(dst, '[')
		err = f.blocks(func(i int) error {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			dst, err = f.render(dst, t.Items(), depth+1)
			return err
		})
		return append(dst, ']'), err
	case *avro.MapSchema:
		dst = append(dst, '{')
		err = f.blocks(func(i int) error {
			if i > 0 {
				dst = append(dst, ',')
			}
			n, err := f.bytesLen()
			if err != nil {
				return err
			}
			dst = appendJSONString(dst, f.readN(n))
			dst = append(dst, ':')
			dst, err = f.render(dst, t.Values(), depth+1)
			return err
		})
		return append(dst, '}'), err
	case *avro.EnumSchema:
		i := rd.ReadInt()
		if rd.Error != nil {
			return dst, nil
		}
		if i < 0 || int(i) >= len(t.Symbols()) {
			return dst, fmt.Errorf("enum index %d of %d symbols", i, len(t.Symbols()))
		}
		return appendJSONString(dst, s2b(t.Symbols()[i])), nil
	}
	if isDuration(s) {
		raw := f.readN(12)
		le := func(b []byte) uint64 { return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 }
		dst = append(dst, `{"months":`...)
		dst = strconv.AppendUint(dst, le(raw[0:4]), 10)
		dst = append(dst, `,"days":`...)
		dst = strconv.AppendUint(dst, le(raw[4:8]), 10)
		dst = append(dst, `,"milliseconds":`...)
		dst = strconv.AppendUint(dst, le(raw[8:12]), 10)
		return append(dst, '}'), nil
	}
	if s.Type() == avro.Null {
		return append(dst, "null"...), nil
	}
	op, err := scalarOp(s)
	if err != nil {
		return dst, err
	}
	return f.renderLeaf(dst, &op)
}

// renderLeaf reads a scalar and writes it as JSON.
func (f *avroFormat) renderLeaf(dst []byte, op *avroOp) ([]byte, error) {
	rd := f.rd
	var in input
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
		if in.kind == inStr {
			dst = appendJSONString(dst, in.b)
		} else {
			dst = append(dst, in.b...)
		}
	case leafDate:
		days := int64(rd.ReadInt())
		dst = append(dst, '"')
		dst = time.Unix(days*secondsPerDay, 0).UTC().AppendFormat(dst, "2006-01-02")
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
		if in.kind == inNum {
			dst = append(dst, in.b...)
		} else {
			dst = appendJSONString(dst, in.b)
		}
	}
	f.arena = f.arena[:mark]
	return dst, nil
}
