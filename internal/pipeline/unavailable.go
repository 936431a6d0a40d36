package pipeline

// Values a change event did not carry (decode/unavailable.go): before a
// block with such cells is inserted, each gets the value its row had
// before the change. The source is, in this order, the latest earlier row
// live row of the same key in the block itself (the sink still holds it),
// else the live row ClickHouse stores for the key with the largest
// version, read in one query per block once every earlier batch of the
// table is acknowledged (pump holds such a block at the head of its
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

	"sink/internal/backoff"
	"sink/internal/chtable"
	"sink/internal/decode"
)

// errNoEarlier marks a cell whose earlier value exists nowhere: retrying
// cannot help.
type errNoEarlier struct{ msg string }

func (e *errNoEarlier) Error() string { return e.msg }

// fillUnavailable fills blk's unfilled cells, retrying a failed ClickHouse
// read with the INSERT's backoff until it succeeds, fails for good (no
// earlier value, a type that cannot be carried over) or ctx ends.
func (p *Pipeline) fillUnavailable(ctx context.Context, tab *chtable.Table, blk *decode.Block) error {
	bo := backoff.New(backoff.Policy{Initial: p.cfg.ClickHouse.RetryInitial, Max: p.cfg.ClickHouse.RetryMax, Jitter: backoff.EqualJitter})
	for {
		err := fillBlock(ctx, p.w, tab, blk)
		if err == nil {
			return nil
		}
		if _, ok := err.(*errNoEarlier); ok || chtable.Classify(ctx, err) != chtable.Retriable {
			return err
		}
		wait := bo.Next()
		p.log.Warn().Str("table", tab.FullName()).Err(err).Dur("retry_in", wait).
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
// key) in blk, else in sink. A delete is no source: PostgreSQL only sends
// an unchanged TOASTed value's placeholder for a row that exists, so the
// row it continues is the last live one of that key.
func fillBlock(ctx context.Context, sink Sink, tab *chtable.Table, blk *decode.Block) error {
	cells := blk.Unfilled()
	if len(cells) == 0 {
		return nil
	}
	keys, ver, del := blk.FillKeys()
	if len(keys) == 0 || ver < 0 {
		return &errNoEarlier{fmt.Sprintf("table %s: a row lacks a value (Debezium's placeholder for an unchanged TOASTed value) and the plan has no key or version column to find its earlier value by", tab.FullName())}
	}
	v := newCellReader(blk)
	rowKey := func(row int) []any {
		k := make([]any, len(keys))
		for i, c := range keys {
			k[i] = v.get(c, row)
		}
		return k
	}
	// earlier is the key whose rows hold row's earlier values.
	earlier := func(row int) []any {
		if k, ok := blk.OldKey(row); ok {
			return k
		}
		return rowKey(row)
	}
	isDelete := func(row int) bool {
		if del < 0 {
			return false
		}
		x := reflect.ValueOf(v.get(del, row))
		return x.CanUint() && x.Uint() != 0 || x.CanInt() && x.Int() != 0
	}

	// Each cell's source: an earlier row of the block, or fromStore for
	// ClickHouse.
	const fromStore = -1
	src := make([]int, len(cells))
	last := map[string]int{}  // key → its latest live row so far
	need := map[string]bool{} // keys to read from ClickHouse
	var find [][]any          // their values, in block order
	var needCols []int
	for i, row := 0, 0; i < len(cells); row++ {
		for ; i < len(cells) && cells[i].Row == row; i++ {
			ek := earlier(row)
			k := keyString(ek)
			if r, ok := last[k]; ok {
				src[i] = r
				continue
			}
			src[i] = fromStore
			if !need[k] {
				need[k] = true
				find = append(find, ek)
			}
			if !slices.Contains(needCols, cells[i].Col) {
				needCols = append(needCols, cells[i].Col)
			}
		}
		if !isDelete(row) {
			last[keyString(rowKey(row))] = row
		}
	}

	stored := map[string][]any{} // key → the stored values of needCols
	if len(find) > 0 {
		ls, ok := sink.(latestSink)
		if !ok {
			return &errNoEarlier{fmt.Sprintf("table %s: rows lack values (Debezium's placeholder for unchanged TOASTed values) and this target cannot read earlier values back; set REPLICA IDENTITY FULL on the source table", tab.FullName())}
		}
		cols := blk.Columns()
		q := chtable.LatestQuery{Version: cols[ver].Name, Find: find}
		for _, k := range keys {
			q.Keys = append(q.Keys, cols[k].Name)
		}
		if del >= 0 {
			q.Deleted = cols[del].Name
		}
		for _, c := range needCols {
			q.Cols = append(q.Cols, cols[c].Name)
		}
		rows, err := ls.Latest(ctx, tab, q)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if len(r) != len(keys)+len(q.Cols) {
				return fmt.Errorf("table %s: reading earlier values: %d values in a row, want %d", tab.FullName(), len(r), len(keys)+len(q.Cols))
			}
			stored[keyString(r[:len(keys)])] = r[len(keys):]
		}
	}

	for i, c := range cells {
		var x any
		if r := src[i]; r >= 0 {
			x = v.get(c.Col, r)
		} else {
			vals, ok := stored[keyString(earlier(c.Row))]
			if !ok {
				return &errNoEarlier{fmt.Sprintf("table %s: the row with key %s has no value for column %q (an unchanged TOASTed value), and no earlier live row of %s has one (docs/formats.md#change-data-capture)",
					tab.FullName(), describeKey(blk, keys, rowKey(c.Row)), blk.Columns()[c.Col].Name, describeKey(blk, keys, earlier(c.Row)))}
			}
			x = vals[slices.Index(needCols, c.Col)]
		}
		if err := blk.Fill(c, x); err != nil {
			return &errNoEarlier{fmt.Sprintf("table %s: filling the unchanged TOASTed value of the row with key %s: %v", tab.FullName(), describeKey(blk, keys, rowKey(c.Row)), err)}
		}
		v.set(c, x)
	}
	return nil
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

// describeKey writes a key for an error: (name=value, ...).
func describeKey(blk *decode.Block, keys []int, k []any) string {
	parts := make([]string, len(keys))
	for i, c := range keys {
		parts[i] = fmt.Sprintf("%s=%v", blk.Columns()[c].Name, k[i])
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
