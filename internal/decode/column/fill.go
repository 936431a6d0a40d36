package column

import (
	"fmt"
	"reflect"

	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/chtype"
)

// DefaultFill is the value a record without c's field inserts into c: its
// Default, parsed and checked once to convert to c's type (nil without
// one, or with an error saying why it cannot be used).
func DefaultFill(c chschema.ColumnSchema) (*fastjson.Value, error) {
	if c.DefaultKind != "DEFAULT" || c.Default == "" {
		return nil, nil
	}
	t := chtype.Parse(c.Type)
	if t.Unsupported() {
		return nil, fmt.Errorf("the sink cannot fill type %s", c.Type)
	}
	if err := CheckDriver(c.Type, t); err != nil {
		return nil, err
	}
	v, err := fastjson.Parse(c.Default)
	if err != nil {
		return nil, fmt.Errorf("its value %s is not JSON: %v", Cut([]byte(c.Default)), err)
	}
	if _, err := ConvertJSON(t, v); err != nil {
		return nil, fmt.Errorf("its value %s does not convert to %s: %v", Cut([]byte(c.Default)), c.Type, err)
	}
	return v, nil
}

// ConvertJSON is the value a column of type t holds for the JSON value v,
// as ColumnData holds it, or the reason v does not convert.
func ConvertJSON(t *chtype.Type, v *fastjson.Value) (any, error) {
	b := &Block{bufs: []col{newTopCol(t)}}
	var st State
	st.Begin(b)
	var in Value
	st.FromJSON(v, &in)
	if err := b.bufs[0].add(&st, &in); err != nil {
		return nil, err
	}
	return reflect.ValueOf(b.bufs[0].data()).Index(0).Interface(), nil
}
