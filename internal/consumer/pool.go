package consumer

import (
	"bytes"
	"sort"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Pool is the memory franz-go reuses for fetched records (kgo.WithPools):
// the buffers a compressed record batch is decompressed into, which every
// record's Key, Value and header values point into, and the []kgo.Record a
// batch's records are decoded into. Without it franz-go allocates both per
// batch, and they are most of what the sink allocates per record.
//
// franz-go takes a batch's two slices from the pool when it parses the
// batch, and puts them back when the last record of the batch is recycled
// (kgo.Record.Recycle: the pipeline calls it once it no longer needs the
// record, see internal/pipeline's package comment and docs/architecture.md
// for who owns a record until when). A record never recycled keeps its
// batch's slices out of the pool; they are then garbage collected like
// without a pool, so forgetting a record costs memory reuse, not memory.
//
// The slices are kept per size class (sync.Pool each: what the pool holds
// idle is freed by the collector within two GC cycles, so it never holds
// memory past batch.buffer_memory's accounting, which counts the fetches
// in use, not the pool). The classes are eight per power of two, so a
// slice handed out is at most 12.5% larger than asked for (FetchLimitsFor's
// fetchCost has room for that). Snappy (franz-go's
// producer default) and zstd batches say their decompressed size, which is
// what is asked for; gzip and lz4 do not, and 4 × the compressed size is
// a guess (a batch that needs more grows its slice as franz-go does
// without a pool, and the grown slice comes back to a larger class).
// Slices larger than the largest class are neither kept nor handed out.
//
// Safe for concurrent use (franz-go puts slices back from whichever
// goroutine recycles a batch's last record).
type Pool struct {
	bytes   classPool[byte]
	records classPool[kgo.Record]
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{
		bytes:   newClassPool[byte](minBytesClass, maxBytesClass),
		records: newClassPool[kgo.Record](minRecordsClass, maxRecordsClass),
	}
}

// The class bounds: decompressed batches from 1 KiB (smaller ones are not
// worth keeping) to 64 MiB (far above a fetch, which the sink limits to
// buffer_memory / 32, see FetchLimitsFor), and from 16 to 1 Mi records
// per batch (160 B each).
const (
	minBytesClass   = 1 << 10
	maxBytesClass   = 64 << 20
	minRecordsClass = 16
	maxRecordsClass = 1 << 20
	// unknownRatio guesses a gzip or lz4 batch's decompressed size from
	// its compressed size.
	unknownRatio = 4
)

// xerialPrefix starts a snappy batch in the xerial framing (old Java
// producers), whose decompressed size is not in a header.
var xerialPrefix = []byte{130, 83, 78, 65, 80, 80, 89, 0}

// GetDecompressBytes is kgo.PoolDecompressBytes's: a slice (length 0) to
// decompress compressed into, with the capacity the batch needs when its
// codec says it.
func (p *Pool) GetDecompressBytes(compressed []byte, codec kgo.CompressionCodecType) []byte {
	return p.bytes.get(decompressedSize(compressed, codec))[:0]
}

// PutDecompressBytes is kgo.PoolDecompressBytes's: franz-go has zeroed b.
func (p *Pool) PutDecompressBytes(b []byte) { p.bytes.put(b) }

// GetRecords is kgo.PoolRecords's: a slice with room for n records.
func (p *Pool) GetRecords(n int) []kgo.Record { return p.records.get(n) }

// PutRecords is kgo.PoolRecords's: every record that was handed out has
// been recycled (zeroed) by then.
func (p *Pool) PutRecords(rs []kgo.Record) { p.records.put(rs) }

// decompressedSize is how many bytes compressed decompresses to: exact for
// snappy and for zstd frames that carry their size, else a guess.
func decompressedSize(compressed []byte, codec kgo.CompressionCodecType) int {
	switch codec {
	case kgo.CodecSnappy:
		if !bytes.HasPrefix(compressed, xerialPrefix) {
			if n, err := s2.DecodedLen(compressed); err == nil {
				return n
			}
		}
	case kgo.CodecZstd:
		var h zstd.Header
		if h.Decode(compressed) == nil && h.HasFCS && h.FrameContentSize <= maxBytesClass {
			return int(h.FrameContentSize)
		}
	}
	return unknownRatio * len(compressed)
}

// classPool keeps slices of T by capacity class. A slice is handed out
// from the smallest class at least as large as asked for, and put back
// into the largest class it fills, so every slice of a class has at least
// the class's capacity.
type classPool[T any] struct {
	sizes []int       // each class's capacity, ascending
	pools []sync.Pool // per class: *[]T
	// boxes are spare *[]T, so that putting a slice back allocates no
	// interface box for its header.
	boxes sync.Pool
}

func newClassPool[T any](lo, hi int) classPool[T] {
	var sizes []int
	for base := lo; base <= hi; base *= 2 {
		for q := 8; q < 16; q++ {
			if s := base * q / 8; s <= hi {
				sizes = append(sizes, s)
			}
		}
	}
	return classPool[T]{sizes: sizes, pools: make([]sync.Pool, len(sizes))}
}

// get returns a slice of length n (its contents are what the last user
// left: zeroed by franz-go).
func (c *classPool[T]) get(n int) []T {
	i := sort.SearchInts(c.sizes, n)
	if i == len(c.sizes) {
		return make([]T, n) // beyond the largest class: not pooled
	}
	if box, _ := c.pools[i].Get().(*[]T); box != nil {
		s := *box
		*box = nil
		c.boxes.Put(box)
		return s[:n]
	}
	return make([]T, n, c.sizes[i])
}

// put keeps s for reuse in the largest class its capacity fills.
func (c *classPool[T]) put(s []T) {
	i := sort.SearchInts(c.sizes, cap(s)+1) - 1 // the last class ≤ cap(s)
	if i < 0 || cap(s) > 2*c.sizes[len(c.sizes)-1] {
		return // too small to be worth keeping, or an oddly large one
	}
	box, _ := c.boxes.Get().(*[]T)
	if box == nil {
		box = new([]T)
	}
	*box = s[:0]
	c.pools[i].Put(box)
}
