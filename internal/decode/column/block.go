package column

import (
	"unsafe"

	"sink/internal/chschema"
)

// Block is a batch of rows in typed column buffers. It is filled by one
// goroutine; once handed to the writer it is read-only until Reset.
type Block struct {
	cols  []chschema.ColumnSchema
	sig   string
	bufs  []col
	rows  int
	bytes int
	arena []byte // current string chunk

	unavail unavailable // values the records did not carry (unavailable.go)

	// shard, when set, places the rows on one part per shard (shard.go):
	// bufs then hold no row, only the sharding key's scratch.
	shard *sharded
}

// Rows returns the number of rows.
func (b *Block) Rows() int { return b.rows }

// Bytes returns the approximate heap bytes the row data holds (value widths,
// string contents, null flags, array offsets), maintained per Append, O(1).
func (b *Block) Bytes() int {
	if b.shard != nil {
		return b.shard.bytes()
	}
	return b.bytes
}

// Columns returns the block's columns in INSERT order (do not modify).
func (b *Block) Columns() []chschema.ColumnSchema { return b.cols }

// ColumnData returns column i as the slice clickhouse-go v2's
// batch.Column(i).Append takes:
//
//	Int8..Int64, UInt8..UInt64, Float32/64   []int8 ... []uint64, []float32, []float64
//	Decimal                                  []decimal.Decimal (shopspring)
//	String, FixedString(N)                   []string (FixedString zero-padded to N)
//	Date, Date32, DateTime64                 []time.Time (UTC)
//	DateTime                                 []int64 (unix seconds)
//	UUID                                     []uuid.UUID
//	Enum8, Enum16                            []int8, []int16 (element values)
//	Bool                                     []bool
//	IPv4                                     []uint32 (big-endian address number)
//	IPv6                                     [][16]byte
//	Nullable(T)                              []*T (nil is NULL)
//	LowCardinality(T)                        as T
//	Array(T)                                 [][]T (Array(Nullable(T)): [][]*T)
//	Map(K, V)                                []*chschema.MapRow
//	Int128, Int256, UInt128, UInt256         []big.Int
//	Tuple(...)                               [][]any (one element per tuple element)
//	Dynamic, Variant(...)                    []chcol.Dynamic / []chcol.Variant (typed)
//	JSON                                     []string (one JSON object text per row)
//
// Scalar slices alias the block's buffers: they are valid until the next
// Append or Reset. Nullable, Array, Map, Decimal and top-level String build
// a new slice per call. Block.Native is the copy-free form of the columns
// that have one.
func (b *Block) ColumnData(i int) any {
	if b.shard != nil {
		return b.shard.columnData(i)
	}
	return b.patched(i, b.bufs[i].data())
}

// Reset empties the block, keeping buffer capacity. A top-level String
// column's byte buffer goes to the spares (spare.go) for later blocks, so
// what Native returned before is invalid from here on (ColumnData's
// strings are copies and stay valid); every other string's memory (the
// arena) is released to the GC rather than reused, so strings handed out
// before stay valid.
func (b *Block) Reset() {
	for _, c := range b.bufs {
		c.reset()
	}
	b.rows, b.bytes, b.arena = 0, 0, nil
	b.unavail.reset()
	if b.shard != nil {
		b.shard.reset()
	}
}

// Appending a row: a Plan begins its State on the block (State.Begin),
// adds each column's value in order (Add), and ends the row (EndRow); on
// a failure it takes the row back (Rollback). Unappend takes back the last
// row whole, Restore every row from a point on.

// Add appends v to column col of the row being built; st must have begun
// this block. On error the column may hold part of the value: Rollback
// (or Drop) takes it back.
func (b *Block) Add(st *State, col int, v *Value) error { return b.bufs[col].add(st, v) }

// Drop takes back what column col holds of the row being built.
func (b *Block) Drop(col int) { b.bufs[col].truncate(b.rows) }

// EndRow counts the row being built, whose every column has its value.
func (b *Block) EndRow() { b.rows++ }

// Rollback takes back the row being built, whose columns up to last got a
// value, to bytes (Bytes before the row).
func (b *Block) Rollback(last, bytes int) {
	for j := 0; j <= last; j++ {
		b.bufs[j].truncate(b.rows)
	}
	b.unavail.drop(b.rows)
	b.bytes = bytes
}

// Unappend takes back the last row, to bytes (Bytes before it).
func (b *Block) Unappend(bytes int) {
	if b.shard != nil {
		b.shard.parts[b.shard.last].Unappend(bytes)
		b.rows--
		return
	}
	b.rows--
	b.Restore(b.rows, bytes)
}

// Restore takes back every row from rows on, and any part of a row being
// built, to bytes (Bytes with rows rows). On a sharded block it takes
// back the sharding key's scratch only: rows must be Rows (the parts are
// restored one by one).
func (b *Block) Restore(rows, bytes int) {
	if b.shard != nil {
		if rows != b.rows {
			panic("column: Restore of a sharded block's rows")
		}
		b.bufs[b.shard.key].truncate(0)
		return
	}
	for _, c := range b.bufs {
		c.truncate(rows)
	}
	b.unavail.drop(rows)
	b.rows, b.bytes = rows, bytes
}

const (
	arenaChunk = 64 << 10
	arenaMax   = arenaChunk / 4 // longer strings get their own allocation
)

// str copies p into the block's string arena. Chunks are never written
// again once a string points into them (not after a failed Append, not after
// Reset, which drops them), so the strings stay immutable.
func (b *Block) str(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	b.bytes += len(p)
	if len(p) > arenaMax {
		return string(p)
	}
	if cap(b.arena)-len(b.arena) < len(p) {
		b.arena = make([]byte, 0, arenaChunk)
	}
	n := len(b.arena)
	b.arena = append(b.arena, p...)
	return unsafe.String(&b.arena[n], len(p))
}
