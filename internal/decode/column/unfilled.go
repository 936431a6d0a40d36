package column

import (
	"fmt"
	"reflect"
)

// Values a record did not carry (a reader's placeholder: see
// format.ErrNotCarried), listed beside the block's buffers for the
// pipeline to fill before the block is inserted (Unfilled, FillKeys,
// OldKey, Fill). The row gets the column's zero meanwhile; a block with
// cells left unfilled must not be inserted.

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
	if b.shard != nil {
		return b.shard.unfilled()
	}
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
// delete-marker column (-1 when the reader has none): a delete's row is no
// source of earlier values, and of a key's stored rows the one with the
// largest version is its latest.
func (b *Block) FillKeys() (keys []int, version, deleted int) {
	if b.shard != nil {
		return b.shard.fillKeys()
	}
	return b.unavail.keys, b.unavail.ver, b.unavail.del
}

// OldKey returns, for a row whose change gave it a new primary key, the
// values (of the FillKeys columns) of the key it had before: its earlier
// values are that key's. ok is false for every other row.
func (b *Block) OldKey(row int) (key []any, ok bool) {
	if b.shard != nil {
		if p, r := b.shard.locate(row); p != nil {
			return p.OldKey(r)
		}
		return nil, false
	}
	key, ok = b.unavail.old[row]
	return key, ok
}

// Value returns the value of column col in row row, as ColumnData holds it
// (after Fill).
func (b *Block) Value(col, row int) any {
	if b.shard != nil {
		if p, r := b.shard.locate(row); p != nil {
			return p.Value(col, r)
		}
	}
	return reflect.ValueOf(b.ColumnData(col)).Index(row).Interface()
}

// Fill gives cell c the value v, of the element type of the column's
// ColumnData (string for String, *string for Nullable(String), []int32 for
// Array(Int32), ...; nil for NULL). ColumnData and the INSERT carry it from
// then on. It refuses a value of another type.
func (b *Block) Fill(c Cell, v any) error {
	if b.shard != nil {
		p, r := b.shard.locate(c.Row)
		if p == nil {
			return fmt.Errorf("cell (row %d, column %d) is outside the block", c.Row, c.Col)
		}
		return p.Fill(Cell{Row: r, Col: c.Col}, v)
	}
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

// NoteUnfilled lists column col of the row being built as a value its
// record did not carry, in a row identified by columns keys, with the
// row-version and delete-marker columns ver and del (-1: none).
func (b *Block) NoteUnfilled(col int, keys []int, ver, del int) {
	b.unavail.note(Cell{Row: b.rows, Col: col}, keys, ver, del)
}

// HasOldKey reports whether the row being built has its old key (SetOldKey).
func (b *Block) HasOldKey() bool {
	_, ok := b.unavail.old[b.rows]
	return ok
}

// SetOldKey keeps, for the row being built, the key (the values of the
// FillKeys columns) the row had before its change moved it to a new key.
func (b *Block) SetOldKey(key []any) {
	if b.unavail.old == nil {
		b.unavail.old = map[int][]any{}
	}
	b.unavail.old[b.rows] = key
}
