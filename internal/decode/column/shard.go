package column

import (
	"reflect"
	"time"
	"unsafe"

	"sink/internal/chschema"
)

// A sharded block is the batch of a table written to a cluster's local
// tables by a sharding key (writer.Cluster, target: local): it holds one
// part per shard, each an ordinary Block of the same layout, and every row
// goes into its shard's part as it is appended. The Plan converts the
// row's key column first into the sharded block's own buffers (which never
// hold a row: they are the key's scratch), asks the Placer for the shard
// (PartFor), appends the whole row to that part, and counts it (Landed).
// So no row is copied a second time and the writer sends each part as it
// is (ShardParts), natively.
//
// The rows of a sharded block, as Rows, ColumnData, Unfilled, Value and
// Fill see them, are the parts' one after the other: shard 1's rows in
// the order they came, then shard 2's, … Rows of one key keep their order,
// since they share a shard.

// sharded is the part of a Block that places rows on shards.
type sharded struct {
	parts  []*Block
	placer chschema.Placer
	key    int                          // the sharding key's column
	read   func(c col) (uint64, []byte) // the key in row 0 of a buffer of its type
	last   int                          // the part the last row went to (Unappend)
}

// NewShardedBlock returns an empty block whose rows go to the parts placer
// names by column key's value. It returns a plain block (NewBlock) when
// the key's type is not one a sharding key may have (a String,
// FixedString or LowCardinality(String), an integer up to 64 bits, Date,
// DateTime; not Nullable) or placer is nil.
func (l *Layout) NewShardedBlock(key int, placer chschema.Placer) *Block {
	if placer == nil || key < 0 || key >= len(l.types) || placer.ShardCount() < 1 {
		return l.NewBlock()
	}
	b := l.newBlock(false)
	read := keyReader(b.bufs[key])
	if read == nil {
		return l.NewBlock()
	}
	s := &sharded{placer: placer, key: key, read: read, parts: make([]*Block, placer.ShardCount())}
	pl := l.partLayout()
	for i := range s.parts {
		s.parts[i] = pl.NewBlock()
	}
	b.shard = s
	return b
}

// Sharded reports whether b places its rows on shards (NewShardedBlock).
func (b *Block) Sharded() bool { return b.shard != nil }

// KeyColumn is the sharding key's column of a sharded block.
func (b *Block) KeyColumn() int { return b.shard.key }

// PartFor converts in as the sharding key's value of the row about to be
// appended to b, a sharded block, and returns the part the row goes to
// (with st, which it begins on b and ends). A value that does not convert
// places the row on the first part, where appending it fails the same way.
func (b *Block) PartFor(st *State, in *Value) *Block {
	s := b.shard
	kc := b.bufs[s.key]
	part := s.parts[0]
	st.Begin(b)
	if err := kc.add(st, in); err == nil {
		bits, str := s.read(kc)
		if str != nil {
			part = s.parts[s.placer.PlaceBytes(str)]
		} else {
			part = s.parts[s.placer.PlaceBits(bits)]
		}
	}
	kc.truncate(0)
	b.bytes = 0
	st.End()
	return part
}

// Landed counts the row just appended to part (PartFor's answer) as one
// of b's rows. On a plain block (part == b) it does nothing.
func (b *Block) Landed(part *Block) {
	if part == b {
		return
	}
	for i, p := range b.shard.parts {
		if p == part {
			b.shard.last = i
		}
	}
	b.rows++
}

// Largest is the rows and bytes of b's largest INSERT: the whole block,
// or a sharded block's largest part (batch.Parted).
func (b *Block) Largest() (rows, bytes int) {
	if b.shard == nil {
		return b.rows, b.bytes
	}
	for _, p := range b.shard.parts {
		rows, bytes = max(rows, p.rows), max(bytes, p.bytes)
	}
	return rows, bytes
}

// ShardParts is a sharded block's rows by shard: parts[i] holds the rows
// placed on shard index i, nil when it has none; by placed them. It
// implements chschema.ShardedBlock.
func (b *Block) ShardParts() (parts []chschema.Block, by chschema.Placer) {
	if b.shard == nil {
		return nil, nil
	}
	parts = make([]chschema.Block, len(b.shard.parts))
	for i, p := range b.shard.parts {
		if p.rows > 0 {
			parts[i] = p
		}
	}
	return parts, b.shard.placer
}

func (l *leaf[T]) isNullable() bool { return l.nullable }
func (s *strCol) isNullable() bool  { return s.nullable }

// bytes is the bytes of every part.
func (s *sharded) bytes() int {
	n := 0
	for _, p := range s.parts {
		n += p.bytes
	}
	return n
}

// reset empties every part.
func (s *sharded) reset() {
	for _, p := range s.parts {
		p.Reset()
	}
	s.last = 0
}

// locate is the part holding row (of the parts one after the other) and
// the row's index in it; nil when row is out of range.
func (s *sharded) locate(row int) (*Block, int) {
	for _, p := range s.parts {
		if row < p.rows {
			return p, row
		}
		row -= p.rows
	}
	return nil, 0
}

// offset is the index, among the parts one after the other, of part i's
// first row.
func (s *sharded) offset(i int) int {
	n := 0
	for _, p := range s.parts[:i] {
		n += p.rows
	}
	return n
}

// columnData is column i of every part, one after the other, as
// ColumnData gives it.
func (s *sharded) columnData(i int) any {
	var out reflect.Value
	for _, p := range s.parts {
		v := reflect.ValueOf(p.ColumnData(i))
		if !out.IsValid() {
			out = reflect.MakeSlice(v.Type(), 0, 0)
		}
		out = reflect.AppendSlice(out, v)
	}
	return out.Interface()
}

// unfilled is every part's Unfilled, their rows counted across the parts.
func (s *sharded) unfilled() []Cell {
	var out []Cell
	for i, p := range s.parts {
		off := s.offset(i)
		for _, c := range p.Unfilled() {
			out = append(out, Cell{Row: c.Row + off, Col: c.Col})
		}
	}
	return out
}

// fillKeys is FillKeys of the first part that has cells to fill.
func (s *sharded) fillKeys() (keys []int, version, deleted int) {
	for _, p := range s.parts {
		if len(p.unavail.cells) > 0 {
			return p.FillKeys()
		}
	}
	return nil, -1, -1
}

// keyReader returns how to read row 0 of a sharding key's buffer c: its
// bits zero-extended from the type's width (the integers; Date as days
// since the epoch, DateTime as seconds), or its bytes (the strings). Nil
// for a buffer of a type that cannot be a sharding key, or Nullable.
func keyReader(c col) func(c col) (uint64, []byte) {
	if n, ok := c.(interface{ isNullable() bool }); ok && n.isNullable() {
		return nil
	}
	if r := intKeyReader(c); r != nil {
		return r
	}
	switch c.(type) {
	case *strCol:
		return func(c col) (uint64, []byte) {
			s := c.(*strCol)
			return 0, nonNil(s.col.Buf[s.col.Pos[0].Start:s.col.Pos[0].End])
		}
	case *lcStrCol:
		return func(c col) (uint64, []byte) {
			l := c.(*lcStrCol)
			p := l.dict.Pos[l.keys[0]]
			return 0, nonNil(l.dict.Buf[p.Start:p.End])
		}
	case *leaf[string]: // FixedString, zero-padded
		return func(c col) (uint64, []byte) {
			v := c.(*leaf[string]).vals[0]
			return 0, nonNil(unsafe.Slice(unsafe.StringData(v), len(v)))
		}
	case *leaf[time.Time]: // Date: days, a UInt16
		return func(c col) (uint64, []byte) {
			return uint64(uint16(c.(*leaf[time.Time]).vals[0].Unix() / 86400)), nil
		}
	}
	return nil
}

// intKeyReader is keyReader for the integer buffers (Int64 and DateTime
// share int64).
func intKeyReader(c col) func(c col) (uint64, []byte) {
	switch c.(type) {
	case *leaf[int8]:
		return bitsOf(func(x int8) uint64 { return uint64(uint8(x)) })
	case *leaf[int16]:
		return bitsOf(func(x int16) uint64 { return uint64(uint16(x)) })
	case *leaf[int32]:
		return bitsOf(func(x int32) uint64 { return uint64(uint32(x)) })
	case *leaf[int64]:
		return bitsOf(func(x int64) uint64 { return uint64(x) })
	case *leaf[uint8]:
		return bitsOf(func(x uint8) uint64 { return uint64(x) })
	case *leaf[uint16]:
		return bitsOf(func(x uint16) uint64 { return uint64(x) })
	case *leaf[uint32]:
		return bitsOf(func(x uint32) uint64 { return uint64(x) })
	case *leaf[uint64]:
		return bitsOf(func(x uint64) uint64 { return x })
	}
	return nil
}

// bitsOf reads row 0 of a leaf of T as bits (nil for a Nullable leaf).
func bitsOf[T any](bits func(T) uint64) func(c col) (uint64, []byte) {
	return func(c col) (uint64, []byte) {
		return bits(c.(*leaf[T]).vals[0]), nil
	}
}

// nonNil is b, or an empty non-nil slice: a string key's bytes are never
// nil, which tells them from an integer key's bits.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
