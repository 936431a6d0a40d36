package pipeline

// Values a change event did not carry (decode/unavailable.go): before a
// block with such cells is inserted, each gets the value its row had
// before the change. The source is, in this order, the latest earlier row
// of the same key in the block itself (the sink still holds it), else the
// row ClickHouse stores for the key with the largest version, read in one
// query per block once every earlier batch of the table is acknowledged
// (pump holds such a block at the head of its table's queue until nothing
// of the table is in flight). A key with no earlier value anywhere, or
// whose latest stored row is a delete, fails the batch with an error
// naming it: a placeholder is never written as data, and no default
// stands in for the value.

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"sink/internal/backoff"
	"sink/internal/decode"
	"sink/internal/writer"
)

// latestSink is a Sink that reads the newest stored values of rows by key
// (writer.Writer.Latest). Called from insert goroutines.
type latestSink interface {
	Latest(ctx context.Context, t *writer.Table, q writer.LatestQuery) ([][]any, error)
}

// errNoEarlier marks a cell whose earlier value exists nowhere: retrying
// cannot help.
type errNoEarlier struct{ msg string }

func (e *errNoEarlier) Error() string { return e.msg }

// fillUnavailable fills blk's unfilled cells, retrying a failed ClickHouse
// read with the INSERT's backoff until it succeeds, fails for good (no
// earlier value, a type that cannot be carried over) or ctx ends.
func (p *Pipeline) fillUnavailable(ctx context.Context, tab *writer.Table, blk *decode.Block) error {
	bo := backoff.New(backoff.Policy{Initial: p.cfg.ClickHouse.RetryInitial, Max: p.cfg.ClickHouse.RetryMax, Jitter: backoff.EqualJitter})
	for {
		err := fillBlock(ctx, p.w, tab, blk)
		if err == nil {
			return nil
		}
		if _, ok := err.(*errNoEarlier); ok || writer.Classify(ctx, err) != writer.Retriable {
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

// fillBlock gives every unfilled cell of blk its row's earlier value: from
// the latest earlier row of the same key in blk, else from sink; none when
// that row is a delete.
func fillBlock(ctx context.Context, sink Sink, tab *writer.Table, blk *decode.Block) error {
	cells := blk.Unfilled()
	if len(cells) == 0 {
		return nil
	}
	keys, ver, del := blk.FillKeys()
	if len(keys) == 0 || ver < 0 {
		return &errNoEarlier{fmt.Sprintf("table %s: a row lacks a value (Debezium's placeholder for an unchanged TOASTed value) and the plan has no key or version column to find its earlier value by", tab.FullName())}
	}
	v := newCellReader(blk)
	keyOf := func(row int) string {
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%v\x00", v.get(k, row))
		}
		return b.String()
	}
	isDelete := func(row int) bool {
		if del < 0 {
			return false
		}
		x := reflect.ValueOf(v.get(del, row))
		return x.CanUint() && x.Uint() != 0 || x.CanInt() && x.Int() != 0
	}

	// Each cell's source: an earlier row of the block, fromStore for
	// ClickHouse, or none when the key was deleted earlier in the block
	// (what ClickHouse holds of it predates the delete).
	const fromStore, none = -1, -2
	src := make([]int, len(cells))
	last := map[string]int{} // key → its latest row so far, none after a delete
	need := map[string]bool{} // keys to read from ClickHouse
	var needRows []int        // a row of each, in block order
	var needCols []int
	for i, row := 0, 0; i < len(cells); row++ {
		k := keyOf(row)
		for ; i < len(cells) && cells[i].Row == row; i++ {
			if r, ok := last[k]; ok {
				src[i] = r
				continue
			}
			src[i] = fromStore
			if !need[k] {
				need[k] = true
				needRows = append(needRows, row)
			}
			if !slices.Contains(needCols, cells[i].Col) {
				needCols = append(needCols, cells[i].Col)
			}
		}
		if isDelete(row) {
			last[k] = none
		} else {
			last[k] = row
		}
	}

	stored := map[string][]any{} // key → the stored values of needCols, then the delete marker
	if len(need) > 0 {
		ls, ok := sink.(latestSink)
		if !ok {
			return &errNoEarlier{fmt.Sprintf("table %s: rows lack values (Debezium's placeholder for unchanged TOASTed values) and this target cannot read earlier values back; set REPLICA IDENTITY FULL on the source table", tab.FullName())}
		}
		cols := blk.Columns()
		q := writer.LatestQuery{Version: cols[ver].Name}
		for _, k := range keys {
			q.Keys = append(q.Keys, cols[k].Name)
		}
		for _, c := range needCols {
			q.Cols = append(q.Cols, cols[c].Name)
		}
		if del >= 0 {
			q.Cols = append(q.Cols, cols[del].Name)
		}
		for _, row := range needRows {
			find := make([]any, len(keys))
			for j, k := range keys {
				find[j] = v.get(k, row)
			}
			q.Find = append(q.Find, find)
		}
		rows, err := ls.Latest(ctx, tab, q)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if len(r) != len(keys)+len(q.Cols) {
				return fmt.Errorf("table %s: reading earlier values: %d values in a row, want %d", tab.FullName(), len(r), len(keys)+len(q.Cols))
			}
			var b strings.Builder
			for _, x := range r[:len(keys)] {
				fmt.Fprintf(&b, "%v\x00", x)
			}
			stored[b.String()] = r[len(keys):]
		}
	}

	for i, c := range cells {
		var x any
		if r := src[i]; r >= 0 {
			x = v.get(c.Col, r)
		} else {
			vals, ok := stored[keyOf(c.Row)]
			if r == none {
				ok = false
			} else if ok && del >= 0 {
				d := reflect.ValueOf(vals[len(vals)-1])
				ok = !(d.CanUint() && d.Uint() != 0 || d.CanInt() && d.Int() != 0)
			}
			if !ok {
				return &errNoEarlier{fmt.Sprintf("table %s: the row with key %s has no value for column %q in its change event (Debezium's placeholder for an unchanged TOASTed value), and neither the batch nor ClickHouse holds an earlier live row of that key to take it from; set REPLICA IDENTITY FULL on the source table, or load the table's rows first (a snapshot)",
					tab.FullName(), describeKey(blk, keys, v, c.Row), blk.Columns()[c.Col].Name)}
			}
			x = vals[slices.Index(needCols, c.Col)]
		}
		if err := blk.Fill(c, x); err != nil {
			return &errNoEarlier{fmt.Sprintf("table %s: filling the unchanged TOASTed value of the row with key %s: %v", tab.FullName(), describeKey(blk, keys, v, c.Row), err)}
		}
		v.set(c, x)
	}
	return nil
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

// describeKey writes a row's key for an error: (name=value, ...).
func describeKey(blk *decode.Block, keys []int, v *cellReader, row int) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", blk.Columns()[k].Name, v.get(k, row))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
