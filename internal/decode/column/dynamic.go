package column

import (
	"bytes"
	"math"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/chcol"
)

// Dynamic columns keep each value with the ClickHouse type chosen for it
// from the JSON value's own shape (see the package documentation).
const (
	dynNull uint8 = iota
	dynBool
	dynInt64
	dynUInt64
	dynFloat64
	dynString
	dynTime
)

// dynTypes names the ClickHouse type of each tag.
var dynTypes = [...]string{dynBool: "Bool", dynInt64: "Int64", dynUInt64: "UInt64", dynFloat64: "Float64", dynString: "String", dynTime: "DateTime64(3)"}

// dynamicCol buffers a Dynamic column: a tag per row and the values in one
// slice per type, so an append is a slice append like any scalar column.
type dynamicCol struct {
	tags   []uint8
	pos    []int32 // index of the row's value in the slice of its tag
	bools  []bool
	ints   []int64
	uints  []uint64
	floats []float64
	strs   []string
	times  []time.Time
}

// add stores null/missing as NULL, true/false as Bool, integral JSON numbers
// written without fraction or exponent as Int64 (or UInt64 above Int64's
// range; beyond UInt64 their text as String, as ClickHouse infers them),
// other numbers as Float64, strings as String, objects and arrays as their
// compact JSON text in a String, $partition/$offset as Int64 and $timestamp
// as DateTime64(3).
func (d *dynamicCol) add(c *State, in *Value) error {
	tag, pos := dynNull, 0
	switch in.Kind {
	case Missing, Null:
	case True, False:
		tag, pos = dynBool, len(d.bools)
		d.bools = append(d.bools, in.Kind == True)
	case Integer:
		tag, pos = dynInt64, len(d.ints)
		d.ints = append(d.ints, in.Int)
	case Instant:
		tag, pos = dynTime, len(d.times)
		d.times = append(d.times, in.Time.UTC())
	case Number:
		s := B2S(in.Bytes)
		if bytes.IndexAny(in.Bytes, ".eE") < 0 {
			if v, err := strconv.ParseInt(s, 10, 64); err == nil {
				tag, pos = dynInt64, len(d.ints)
				d.ints = append(d.ints, v)
				break
			}
			if v, err := strconv.ParseUint(s, 10, 64); err == nil {
				tag, pos = dynUInt64, len(d.uints)
				d.uints = append(d.uints, v)
				break
			}
			tag, pos = dynString, len(d.strs)
			d.strs = append(d.strs, c.b.str(in.Bytes))
			break
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return Reasonf("cannot convert %s to Dynamic: out of Float64's range", Show(in))
		}
		tag, pos = dynFloat64, len(d.floats)
		d.floats = append(d.floats, f)
	case String:
		tag, pos = dynString, len(d.strs)
		d.strs = append(d.strs, c.b.str(in.Bytes))
	case Object, Array:
		c.tmp = in.Tree.MarshalTo(c.tmp[:0])
		tag, pos = dynString, len(d.strs)
		d.strs = append(d.strs, c.b.str(c.tmp))
	}
	d.tags = append(d.tags, tag)
	d.pos = append(d.pos, int32(pos))
	c.b.bytes += 14
	return nil
}

func (d *dynamicCol) rows() int { return len(d.tags) }

func (d *dynamicCol) truncate(n int) {
	for i := len(d.tags) - 1; i >= n; i-- {
		switch d.tags[i] {
		case dynBool:
			d.bools = d.bools[:len(d.bools)-1]
		case dynInt64:
			d.ints = d.ints[:len(d.ints)-1]
		case dynUInt64:
			d.uints = d.uints[:len(d.uints)-1]
		case dynFloat64:
			d.floats = d.floats[:len(d.floats)-1]
		case dynString:
			d.strs[len(d.strs)-1] = ""
			d.strs = d.strs[:len(d.strs)-1]
		case dynTime:
			d.times = d.times[:len(d.times)-1]
		}
	}
	if n < len(d.tags) {
		d.tags, d.pos = d.tags[:n], d.pos[:n]
	}
}

func (d *dynamicCol) reset() { d.truncate(0) }

// data returns []chcol.Dynamic, each value with its ClickHouse type.
func (d *dynamicCol) data() any {
	out := make([]chcol.Dynamic, len(d.tags))
	for i, tag := range d.tags {
		p := d.pos[i]
		var v any
		switch tag {
		case dynNull:
			out[i] = chcol.NewDynamic(nil)
			continue
		case dynBool:
			v = d.bools[p]
		case dynInt64:
			v = d.ints[p]
		case dynUInt64:
			v = d.uints[p]
		case dynFloat64:
			v = d.floats[p]
		case dynString:
			v = d.strs[p]
		case dynTime:
			v = d.times[p]
		}
		out[i] = chcol.NewDynamicWithType(v, dynTypes[tag])
	}
	return out
}

func (d *dynamicCol) split(ends []int) any { return reflectSplit(d.data(), ends) }
