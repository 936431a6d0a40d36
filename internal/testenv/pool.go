package testenv

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Poison is the byte PoisonPool overwrites every slice put back with.
const Poison = 0xAA

// RecordPool is what a franz-go client is given with kgo.WithPools for its
// fetched records (consumer.Pool is one).
type RecordPool interface {
	kgo.PoolDecompressBytes
	kgo.PoolRecords
}

// PoisonPool wraps a RecordPool for tests of record lifetimes: every slice
// franz-go puts back (a batch whose records were all recycled) is
// overwritten before the inner pool may hand it out again: decompressed
// bytes with Poison, records with a record that names no topic, offset -1
// and a Poison value. Whatever still reads a recycled record's bytes, or
// the record, then reads poison instead of data, at once and not only
// when the memory happens to be reused. It counts what goes through it.
type PoisonPool struct {
	Inner RecordPool

	BytesGot, BytesPut     atomic.Int64
	RecordsGot, RecordsPut atomic.Int64
}

var poisonValue = []byte{Poison, Poison, Poison, Poison}

// GetDecompressBytes is kgo.PoolDecompressBytes's.
func (p *PoisonPool) GetDecompressBytes(compressed []byte, codec kgo.CompressionCodecType) []byte {
	p.BytesGot.Add(1)
	return p.Inner.GetDecompressBytes(compressed, codec)
}

// PutDecompressBytes is kgo.PoolDecompressBytes's.
func (p *PoisonPool) PutDecompressBytes(b []byte) {
	p.BytesPut.Add(1)
	b = b[:cap(b)]
	for i := range b {
		b[i] = Poison
	}
	p.Inner.PutDecompressBytes(b)
}

// GetRecords is kgo.PoolRecords's.
func (p *PoisonPool) GetRecords(n int) []kgo.Record {
	p.RecordsGot.Add(1)
	return p.Inner.GetRecords(n)
}

// PutRecords is kgo.PoolRecords's.
func (p *PoisonPool) PutRecords(rs []kgo.Record) {
	p.RecordsPut.Add(1)
	rs = rs[:cap(rs)]
	for i := range rs {
		rs[i] = kgo.Record{Offset: -1, Value: poisonValue, Key: poisonValue}
	}
	p.Inner.PutRecords(rs)
}
