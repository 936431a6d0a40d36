package decode

// Values a change event does not carry. PostgreSQL writes an UPDATE's new
// row to the WAL without the large (TOASTed) values the UPDATE did not
// change, and Debezium, which reads the WAL, cannot send them: under
// REPLICA IDENTITY DEFAULT it puts a placeholder in their place (the
// connector's unavailable.value.placeholder, "__debezium_unavailable_value"
// unless set otherwise). Writing the placeholder would overwrite the real
// value in ClickHouse, so the debezium formats never append it as data:
// the row gets the column's zero for now and the cell is listed in the
// block (Block.Unfilled), with the columns that identify the row (the
// record key's fields, Block.FillKeys). Before the block is inserted, the
// pipeline gives each such cell the value the row had before: from an
// earlier row of the same key in the block, else from ClickHouse
// (Block.Fill). A block with cells left unfilled must not be inserted.

import (
	"encoding/base64"
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"
)

// Placeholder is the value Debezium sends in place of a TOASTed value it
// cannot read (its unavailable.value.placeholder by default).
const Placeholder = "__debezium_unavailable_value"

// placeholderB64 is Placeholder as a bytea column carries it (JSON
// converter: base64 of the bytes).
var placeholderB64 = base64.StdEncoding.EncodeToString([]byte(Placeholder))

// isPlaceholder reports whether in is Debezium's placeholder in one of the
// forms it takes by column type: the text itself (text, varchar, json,
// jsonb, xml, ...), its bytes in base64 (bytea), a one-element array of
// the text (text[] and other arrays of text), or the text's bytes as an
// array of numbers (arrays of numbers).
func isPlaceholder(in *input) bool {
	switch in.kind {
	case inStr:
		return string(in.b) == Placeholder || string(in.b) == placeholderB64
	case inArray:
		a, err := in.v.Array()
		if err != nil {
			return false
		}
		if len(a) == 1 && a[0].Type() == fastjson.TypeString {
			return string(a[0].GetStringBytes()) == Placeholder
		}
		if len(a) != len(Placeholder) {
			return false
		}
		for i, e := range a {
			if e.Type() != fastjson.TypeNumber {
				return false
			}
			if n, err := e.Int(); err != nil || n != int(Placeholder[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// Cell names one value of a block: its row and its column (in Columns
// order).
type Cell struct{ Row, Col int }

// unavailable is the part of a block about values the records did not
// carry.
type unavailable struct {
	cells []Cell // in row order
	keys  []int  // the columns that identify a row (the record key's fields)
	ver   int    // the row-version column, -1 when none
	del   int    // the delete-marker column, -1 when none
	// patch holds the values Fill gave: column → row → value.
	patch map[int]map[int]any
	// old holds, for a row whose change moved it to a new key, the key
	// it had before (the values of keys), where its earlier values are.
	old map[int][]any
}

// note lists cell c, of a row identified by columns keys.
func (u *unavailable) note(c Cell, keys []int, ver, del int) {
	u.cells = append(u.cells, c)
	u.keys, u.ver, u.del = keys, ver, del
}

// drop forgets the cells of rows n and after (a row taken back).
func (u *unavailable) drop(n int) {
	i := len(u.cells)
	for i > 0 && u.cells[i-1].Row >= n {
		i--
	}
	u.cells = u.cells[:i]
	for r := range u.old {
		if r >= n {
			delete(u.old, r)
		}
	}
	for _, rows := range u.patch {
		for r := range rows {
			if r >= n {
				delete(rows, r)
			}
		}
	}
}

func (u *unavailable) reset() {
	u.cells = u.cells[:0]
	u.keys, u.ver, u.del, u.patch, u.old = nil, -1, -1, nil, nil
}

// Unfilled returns the cells whose values the records did not carry and
// Fill has not given yet, in row order (do not modify).
func (b *Block) Unfilled() []Cell {
	if len(b.unavail.patch) == 0 {
		return b.unavail.cells
	}
	var out []Cell
	for _, c := range b.unavail.cells {
		if _, ok := b.unavail.patch[c.Col][c.Row]; !ok {
			out = append(out, c)
		}
	}
	return out
}

// FillKeys returns the columns that identify a row whose cells Unfilled
// lists (the record key's fields), the row-version column and the
// delete-marker column (-1 when the plan has none): a delete's row is no
// source of earlier values, and of a key's stored rows the one with the
// largest version is its latest.
func (b *Block) FillKeys() (keys []int, version, deleted int) {
	return b.unavail.keys, b.unavail.ver, b.unavail.del
}

// OldKey returns, for a row whose change gave it a new primary key, the
// values (of the FillKeys columns) of the key it had before: its earlier
// values are that key's. ok is false for every other row.
func (b *Block) OldKey(row int) (key []any, ok bool) {
	key, ok = b.unavail.old[row]
	return key, ok
}

// oldKeyHeader is the header Debezium gives the create event of a row
// whose primary key an UPDATE changed: the old key's fields, as JSON.
const oldKeyHeader = "__debezium.oldkey"

// noteOldKey keeps, for the row being appended, the key r's oldKeyHeader
// names, converted as the key columns convert (once per row).
func (p *Plan) noteOldKey(b *Block, r *kgo.Record, keys []int) error {
	if _, done := b.unavail.old[b.rows]; done {
		return nil
	}
	var hdr []byte
	for _, h := range r.Headers {
		if h.Key == oldKeyHeader {
			hdr = h.Value
		}
	}
	if hdr == nil {
		return nil
	}
	v, err := p.oldKeys.ParseBytes(hdr)
	if err != nil {
		return fmt.Errorf("header %s is not JSON (%v): cannot find the row's earlier value", oldKeyHeader, err)
	}
	if pl := v.Get("payload"); pl != nil && v.Get("schema") != nil {
		v = pl
	}
	key := make([]any, len(keys))
	c := &p.st
	for j, k := range keys {
		f := v.Get(p.cols[k].Name)
		if f == nil {
			return fmt.Errorf("header %s lacks the key field %q: cannot find the row's earlier value", oldKeyHeader, p.cols[k].Name)
		}
		col := newTopCol(p.types[k])
		var in input
		c.fromJSON(f, &in)
		if err := col.add(c, &in); err != nil {
			return fmt.Errorf("header %s, key field %q: %v", oldKeyHeader, p.cols[k].Name, err)
		}
		key[j] = reflect.ValueOf(col.data()).Index(0).Interface()
	}
	if b.unavail.old == nil {
		b.unavail.old = map[int][]any{}
	}
	b.unavail.old[b.rows] = key
	return nil
}

// Value returns the value of column col in row row, as ColumnData holds it
// (after Fill).
func (b *Block) Value(col, row int) any {
	return reflect.ValueOf(b.ColumnData(col)).Index(row).Interface()
}

// Fill gives cell c the value v, of the element type of the column's
// ColumnData (string for String, *string for Nullable(String), []int32 for
// Array(Int32), ...; nil for NULL). ColumnData and the INSERT carry it from
// then on. It refuses a value of another type.
func (b *Block) Fill(c Cell, v any) error {
	if c.Row < 0 || c.Row >= b.rows || c.Col < 0 || c.Col >= len(b.bufs) {
		return fmt.Errorf("cell (row %d, column %d) is outside the block", c.Row, c.Col)
	}
	et := reflect.TypeOf(b.bufs[c.Col].data()).Elem()
	if v == nil {
		switch et.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		default:
			return fmt.Errorf("column %q (%s) takes no NULL", b.cols[c.Col].Name, b.cols[c.Col].Type)
		}
	} else if !reflect.TypeOf(v).AssignableTo(et) {
		return fmt.Errorf("column %q (%s) takes %s, not %T", b.cols[c.Col].Name, b.cols[c.Col].Type, et, v)
	}
	if b.unavail.patch == nil {
		b.unavail.patch = map[int]map[int]any{}
	}
	rows := b.unavail.patch[c.Col]
	if rows == nil {
		rows = map[int]any{}
		b.unavail.patch[c.Col] = rows
	}
	rows[c.Row] = v
	return nil
}

// patched returns data, column col's values, with the values Fill gave in
// place: a copy, so the block's own buffers stay as appended.
func (b *Block) patched(col int, data any) any {
	rows := b.unavail.patch[col]
	if len(rows) == 0 {
		return data
	}
	v := reflect.ValueOf(data)
	out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
	reflect.Copy(out, v)
	for r, x := range rows {
		if x == nil {
			out.Index(r).Set(reflect.Zero(v.Type().Elem()))
		} else {
			out.Index(r).Set(reflect.ValueOf(x))
		}
	}
	return out.Interface()
}
