package column

import (
	"reflect"

	"github.com/ClickHouse/clickhouse-go/v2/lib/chcol"

	"sink/internal/chtype"
)

const variantNull = 0xff

// variantCol buffers Variant(T1, ..., Tn): a buffer per alternative and,
// per row, which alternative holds it.
type variantCol struct {
	t     *chtype.Type
	alts  []col
	order [Instant + 1][]int // per value kind: the alternatives to try, in order
	tags  []uint8
	pos   []int32
}

// family says which JSON value kinds an alternative naturally takes: a
// value tries those alternatives first, then every other one, each group
// in the order the server lists the alternatives.
func family(t *chtype.Type, k Kind) bool {
	for t.Kind == chtype.LowCardinality || t.Kind == chtype.Nullable {
		t = t.Elem
	}
	switch k {
	case String:
		return t.Kind == chtype.String || t.Kind == chtype.FixedString
	case Number, Integer:
		switch t.Kind {
		case chtype.Int8, chtype.Int16, chtype.Int32, chtype.Int64, chtype.UInt8, chtype.UInt16, chtype.UInt32, chtype.UInt64,
			chtype.Int128, chtype.Int256, chtype.UInt128, chtype.UInt256, chtype.Float32, chtype.Float64, chtype.Decimal:
			return true
		}
	case True, False:
		return t.Kind == chtype.Bool
	case Array:
		return t.Kind == chtype.Array || t.Kind == chtype.Tuple
	case Object:
		return t.Kind == chtype.Map || t.Kind == chtype.Tuple
	case Instant:
		return t.Kind == chtype.DateTime || t.Kind == chtype.DateTime64
	}
	return false
}

func newVariantCol(t *chtype.Type) *variantCol {
	v := &variantCol{t: t}
	for _, e := range t.Elems {
		v.alts = append(v.alts, newCol(e))
	}
	for k := String; k <= Instant; k++ {
		for i, e := range t.Elems {
			if family(e, k) {
				v.order[k] = append(v.order[k], i)
			}
		}
		for i, e := range t.Elems {
			if !family(e, k) {
				v.order[k] = append(v.order[k], i)
			}
		}
	}
	return v
}

// add stores null or missing as NULL; any other value goes to the first
// alternative that converts it (see family for the order).
func (v *variantCol) add(c *State, in *Value) error {
	tag, pos := uint8(variantNull), 0
	if in.Kind > Null {
		var err error
		for _, i := range v.order[in.Kind] {
			a := v.alts[i]
			n := a.rows()
			if err = a.add(c, in); err == nil {
				tag, pos = uint8(i), n
				break
			}
			a.truncate(n)
		}
		if tag == variantNull {
			return cannotConvert(in, v.t, "no alternative accepts it")
		}
	}
	v.tags = append(v.tags, tag)
	v.pos = append(v.pos, int32(pos))
	c.b.bytes += 5
	return nil
}

func (v *variantCol) rows() int { return len(v.tags) }

func (v *variantCol) truncate(n int) {
	if n >= len(v.tags) {
		return
	}
	// Each alternative keeps the rows that point into it below n.
	for i, a := range v.alts {
		keep := a.rows()
		for r := len(v.tags) - 1; r >= n; r-- {
			if int(v.tags[r]) == i {
				keep = int(v.pos[r])
			}
		}
		a.truncate(keep)
	}
	v.tags, v.pos = v.tags[:n], v.pos[:n]
}

func (v *variantCol) reset() {
	for _, a := range v.alts {
		a.reset()
	}
	v.tags, v.pos = v.tags[:0], v.pos[:0]
}

// data returns []chcol.Variant, each value with its alternative's type.
func (v *variantCol) data() any {
	vals := make([]reflect.Value, len(v.alts))
	for i, a := range v.alts {
		vals[i] = reflect.ValueOf(a.data())
	}
	out := make([]chcol.Variant, len(v.tags))
	for r, tag := range v.tags {
		if tag == variantNull {
			out[r] = chcol.NewVariant(nil)
			continue
		}
		out[r] = chcol.NewVariantWithType(vals[tag].Index(int(v.pos[r])).Interface(), v.t.Elems[tag].Text)
	}
	return out
}

func (v *variantCol) split(ends []int) any { return reflectSplit(v.data(), ends) }
