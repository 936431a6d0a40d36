package column

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"sink/internal/chschema"
	"sink/internal/chtype"
)

// Layout is the columns of a table's blocks as a Plan fills them: the
// columns an INSERT names, their parsed types, and the capacity hints that
// the blocks of one Plan share. Blocks of equal layout (the same columns
// and types, in the same order) are interchangeable: a block made by one
// Plan may be appended to by another Plan of the same table.
type Layout struct {
	cols  []chschema.ColumnSchema
	types []*chtype.Type
	sig   string // the columns' names and types: equal for interchangeable blocks

	// hints size the buffers of a block's first fill (see capHint): rows,
	// the largest row capacity a column of this layout's blocks has grown
	// to, and per column the largest String byte buffer.
	rowsHint capHint
	sizes    []capHint

	// parts is the layout of sharded blocks' parts (shard.go): the same
	// columns, with hints of their own, since a part holds a shard's
	// share of a batch.
	partsOnce sync.Once
	parts     *Layout
}

// NewLayout returns the layout of blocks with columns cols of types types
// (parsed from cols' types, and supported: see chtype.Type.Unsupported).
func NewLayout(cols []chschema.ColumnSchema, types []*chtype.Type) *Layout {
	var sig strings.Builder
	for _, c := range cols {
		fmt.Fprintf(&sig, "%s\x00%s\x00", c.Name, c.Type)
	}
	return &Layout{cols: cols, types: types, sig: sig.String(), sizes: make([]capHint, len(types))}
}

// Columns returns the layout's columns, in INSERT order (do not modify).
func (l *Layout) Columns() []chschema.ColumnSchema { return l.cols }

// NewBlock returns an empty block with one buffer per column.
func (l *Layout) NewBlock() *Block { return l.newBlock(true) }

// newBlock is NewBlock; useHints says whether the buffers start at the
// layout's hints (not for a sharded block's key scratch, which holds one
// value at a time).
func (l *Layout) newBlock(useHints bool) *Block {
	b := &Block{cols: l.cols, sig: l.sig, bufs: make([]col, len(l.types)), unavail: unavailable{ver: -1, del: -1}}
	for i, t := range l.types {
		b.bufs[i] = newTopCol(t)
		if h, ok := b.bufs[i].(hinted); ok && useHints {
			h.useHints(&l.rowsHint, &l.sizes[i])
		}
	}
	return b
}

// partLayout is the layout of sharded blocks' parts.
func (l *Layout) partLayout() *Layout {
	l.partsOnce.Do(func() {
		l.parts = &Layout{cols: l.cols, types: l.types, sig: l.sig, sizes: make([]capHint, len(l.types))}
	})
	return l.parts
}

// Fits reports whether b has this layout (was made by NewBlock of a layout
// of the same columns).
func (l *Layout) Fits(b *Block) bool { return b.sig == l.sig }

// capHint is the largest capacity a buffer of some kind has grown to in a
// layout's blocks, noted when the buffer grows (a rare event: append
// doubles, then grows by a quarter) and read when a block's buffer is
// first filled. A block created while another is sealed, or after a
// restart of the batch, then allocates its buffers once at the size the
// blocks before it reached, instead of growing them from empty through
// dozens of copies. Blocks are filled and reset on different goroutines:
// atomic; two racing notes may keep the smaller one, which only costs a
// growth later.
//
// Memory: Block.Bytes (what batch.buffer_memory counts) counts the bytes
// rows use, not capacity. A hinted buffer starts, at the block's first
// Append, at the largest capacity seen, which exceeds what a block of the
// same size counts by at most the last growth step (≈25% for large
// buffers: the slack a buffer grown from empty ends with anyway). A block
// sealed early (max_wait, or smaller batches after adaptive sizing
// shrank them) holds that capacity for fewer counted rows. Blocks are
// sealed at max_bytes at the latest, so a block's uncounted capacity stays
// below ≈1.25 × max_bytes, as it already did for a block reused from the
// pipeline's free list (reset keeps row capacity; strCol takes a buffer of
// its last size from the spares, spare.go, or allocates one).
type capHint struct{ n atomic.Int64 }

// note records that a buffer reached capacity n.
func (h *capHint) note(n int) {
	if h != nil && int64(n) > h.n.Load() {
		h.n.Store(int64(n))
	}
}

// get is the capacity to start a buffer at (0: no hint).
func (h *capHint) get() int {
	if h == nil {
		return 0
	}
	return int(h.n.Load())
}

// hinted is a top-level column buffer sized from its layout's hints: rows
// (shared by all columns) and bytes (this column's String bytes).
type hinted interface {
	useHints(rows, bytes *capHint)
}
