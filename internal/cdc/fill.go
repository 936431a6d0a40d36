package cdc

// Values a change event did not carry (decode/unavailable.go): before a
// block with such cells is inserted, each gets the value its row had
// before the change. The source is, in this order, the latest earlier
// live row of the same key in the block itself (the sink still holds it),
// else the live row ClickHouse stores for the key with the largest
// version, read in one query per block once every earlier batch of the
// table is acknowledged (dispatch holds such a block at the head of its
// table's queue until nothing of the table is in flight). A row whose
// change gave it a new primary key takes its values from its old key
// (Debezium's __debezium.oldkey header). A key with no earlier live row
// anywhere fails the batch with an error naming it: a placeholder is never
// written as data, and no default stands in for the value.

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/backoff"
	"sink/internal/chtable"
	"sink/internal/decode"
)

// Store is a target that reads the newest stored values of rows by key
// (writer.Writer.Latest, writer.Cluster.Latest).
type Store interface {
	Latest(ctx context.Context, t *chtable.Table, q chtable.LatestQuery) ([][]any, error)
}

// Filler fills the cells a change event did not carry. It keeps no state
// between calls: Fill may run on any goroutine, several at once (the
// INSERT goroutines, exactly-once recovery on the owner).
type Filler struct {
	store Store // nil: the target cannot read earlier values back
	retry backoff.Policy
	log   zerolog.Logger
}

// NewFiller reads earlier values from target when it is a Store, retrying
// a failed read on retry's schedule.
func NewFiller(target any, retry backoff.Policy, log zerolog.Logger) *Filler {
	s, _ := target.(Store)
	return &Filler{store: s, retry: retry, log: log}
}

// errNoEarlier marks a cell whose earlier value exists nowhere: retrying
// cannot help.
type errNoEarlier struct{ msg string }

func (e *errNoEarlier) Error() string { return e.msg }

// Fill fills blk's unfilled cells, retrying a failed ClickHouse read with
// the filler's backoff until it succeeds, fails for good (no earlier
// value, a type that cannot be carried over) or ctx ends.
func (f *Filler) Fill(ctx context.Context, tab *chtable.Table, blk *decode.Block) error {
	bo := backoff.New(f.retry)
	for {
		err := fillBlock(ctx, f.store, tab, blk)
		if err == nil {
			return nil
		}
		if _, ok := err.(*errNoEarlier); ok || chtable.Classify(ctx, err) != chtable.Retriable {
			return err
		}
		wait := bo.Next()
		f.log.Warn().Str("table", tab.FullName()).Err(err).Dur("retry_in", wait).
			Msg("reading the earlier values of a batch's unchanged TOASTed columns failed, retrying")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// fillBlock gives every unfilled cell of blk its row's earlier value: the
// value in the latest earlier live row of the key the row had before the
// change (its own key, or the old one when the change moved it to a new
// key) in blk, else in store. A delete is no source: PostgreSQL only sends
// an unchanged TOASTed value's placeholder for a row that exists, so the
// row it continues is the last live one of that key.
func fillBlock(ctx context.Context, store Store, tab *chtable.Table, blk *decode.Block) error {
	cells := blk.Unfilled()
	if len(cells) == 0 {
		return nil
	}
	keys, ver, del := blk.FillKeys()
	if len(keys) == 0 || ver < 0 {
		return &errNoEarlier{fmt.Sprintf("table %s: a row lacks a value (Debezium's placeholder for an unchanged TOASTed value) and the plan has no key or version column to find its earlier value by", tab.FullName())}
	}
	f := &fill{tab: tab, blk: blk, cells: cells, keys: keys, ver: ver, del: del, v: newCellReader(blk)}
	f.sources()
	stored, err := f.read(ctx, store)
	if err != nil {
		return err
	}
	return f.apply(stored)
}

// fromStore is a cell's source when no earlier row of the block has its
// value: ClickHouse.
const fromStore = -1

// fill is one fillBlock: the block's unfilled cells, its key, version and
// deleted columns (del -1: none), and where each cell's value comes from.
type fill struct {
	tab        *chtable.Table
	blk        *decode.Block
	cells      []decode.Cell
	keys       []int
	ver, del   int
	v          *cellReader
	src        []int   // each cell's source: a row of the block, or fromStore
	find       [][]any // the keys to read from ClickHouse, in block order
	needCols   []int   // the columns to read for them
	needKeySet map[string]bool
}

// rowKey is row's key.
func (f *fill) rowKey(row int) []any {
	k := make([]any, len(f.keys))
	for i, c := range f.keys {
		k[i] = f.v.get(c, row)
	}
	return k
}

// earlier is the key whose rows hold row's earlier values.
func (f *fill) earlier(row int) []any {
	if k, ok := f.blk.OldKey(row); ok {
		return k
	}
	return f.rowKey(row)
}

func (f *fill) isDelete(row int) bool {
	if f.del < 0 {
		return false
	}
	x := reflect.ValueOf(f.v.get(f.del, row))
	return x.CanUint() && x.Uint() != 0 || x.CanInt() && x.Int() != 0
}

// sources finds each cell's source: the latest earlier live row of its
// earlier key in the block, else ClickHouse (the key and column are then
// added to what read asks for).
func (f *fill) sources() {
	f.src = make([]int, len(f.cells))
	f.needKeySet = map[string]bool{}
	last := map[string]int{} // key → its latest live row so far
	for i, row := 0, 0; i < len(f.cells); row++ {
		for ; i < len(f.cells) && f.cells[i].Row == row; i++ {
			f.src[i] = f.source(last, f.cells[i])
		}
		if !f.isDelete(row) {
			last[keyString(f.rowKey(row))] = row
		}
	}
}

// source is cell c's source, given the latest live row of each key before
// c's row.
func (f *fill) source(last map[string]int, c decode.Cell) int {
	ek := f.earlier(c.Row)
	k := keyString(ek)
	if r, ok := last[k]; ok {
		return r
	}
	if !f.needKeySet[k] {
		f.needKeySet[k] = true
		f.find = append(f.find, ek)
	}
	if !slices.Contains(f.needCols, c.Col) {
		f.needCols = append(f.needCols, c.Col)
	}
	return fromStore
}

// read asks store for the stored values of needCols of the keys in find:
// key → values.
func (f *fill) read(ctx context.Context, store Store) (map[string][]any, error) {
	stored := map[string][]any{}
	if len(f.find) == 0 {
		return stored, nil
	}
	if store == nil {
		return nil, &errNoEarlier{fmt.Sprintf("table %s: rows lack values (Debezium's placeholder for unchanged TOASTed values) and this target cannot read earlier values back; set REPLICA IDENTITY FULL on the source table", f.tab.FullName())}
	}
	cols := f.blk.Columns()
	q := chtable.LatestQuery{Version: cols[f.ver].Name, Find: f.find}
	for _, k := range f.keys {
		q.Keys = append(q.Keys, cols[k].Name)
	}
	if f.del >= 0 {
		q.Deleted = cols[f.del].Name
	}
	for _, c := range f.needCols {
		q.Cols = append(q.Cols, cols[c].Name)
	}
	rows, err := store.Latest(ctx, f.tab, q)
	if err != nil {
		return nil, err
	}
	n := len(f.keys)
	for _, r := range rows {
		if len(r) != n+len(q.Cols) {
			return nil, fmt.Errorf("table %s: reading earlier values: %d values in a row, want %d", f.tab.FullName(), len(r), n+len(q.Cols))
		}
		stored[keyString(r[:n])] = r[n:]
	}
	return stored, nil
}

// apply fills every cell from its source.
func (f *fill) apply(stored map[string][]any) error {
	for i, c := range f.cells {
		var x any
		if r := f.src[i]; r >= 0 {
			x = f.v.get(c.Col, r)
		} else {
			vals, ok := stored[keyString(f.earlier(c.Row))]
			if !ok {
				return &errNoEarlier{fmt.Sprintf("table %s: the row with key %s has no value for column %q (an unchanged TOASTed value), and no earlier live row of %s has one (docs/formats.md#change-data-capture)",
					f.tab.FullName(), f.describeKey(f.rowKey(c.Row)), f.blk.Columns()[c.Col].Name, f.describeKey(f.earlier(c.Row)))}
			}
			x = vals[slices.Index(f.needCols, c.Col)]
		}
		if err := f.blk.Fill(c, x); err != nil {
			return &errNoEarlier{fmt.Sprintf("table %s: filling the unchanged TOASTed value of the row with key %s: %v", f.tab.FullName(), f.describeKey(f.rowKey(c.Row)), err)}
		}
		f.v.set(c, x)
	}
	return nil
}

// describeKey writes a key for an error: (name=value, ...).
func (f *fill) describeKey(k []any) string {
	parts := make([]string, len(f.keys))
	for i, c := range f.keys {
		parts[i] = fmt.Sprintf("%s=%v", f.blk.Columns()[c].Name, k[i])
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// keyString is a key's values as one comparable string.
func keyString(k []any) string {
	var b strings.Builder
	for _, x := range k {
		fmt.Fprintf(&b, "%v\x00", x)
	}
	return b.String()
}

// cellReader reads a block's values column by column, each column's data
// taken once, with the values filled so far on top.
type cellReader struct {
	blk    *decode.Block
	data   map[int]reflect.Value
	filled map[decode.Cell]any
}

func newCellReader(blk *decode.Block) *cellReader {
	return &cellReader{blk: blk, data: map[int]reflect.Value{}, filled: map[decode.Cell]any{}}
}

func (r *cellReader) get(col, row int) any {
	if x, ok := r.filled[decode.Cell{Row: row, Col: col}]; ok {
		return x
	}
	d, ok := r.data[col]
	if !ok {
		d = reflect.ValueOf(r.blk.ColumnData(col))
		r.data[col] = d
	}
	return d.Index(row).Interface()
}

func (r *cellReader) set(c decode.Cell, x any) { r.filled[c] = x }
