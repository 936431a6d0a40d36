package column

import "sync"

// Spare String buffers. A top-level String column keeps its values back to
// back in one byte buffer (strCol), megabytes per batch. When a block is
// reset after its INSERT, that buffer goes to spares, and the next block
// to fill a String column takes one from there instead of allocating (and
// the kernel zeroing) a fresh one: at the default batch of 100,000 rows a
// column of 100-byte strings is a 10 MB buffer per batch.
//
// What spares hold is memory outside every batch, so it is bounded:
// SetSpareLimit sets the most they hold in all (0, the default, keeps
// none: a reset buffer is left to the collector, as a block on the
// pipeline's free list then holds no string memory). A buffer that does not
// fit under the limit is dropped.
//
// Safe for concurrent use: blocks of every pipeline in the process share
// them, one lock taken per buffer and block, not per row.
var spares spareBytes

// SetSpareLimit sets the total capacity of the String buffers kept for
// reuse (see spares); 0 keeps none.
func SetSpareLimit(bytes int) {
	spares.mu.Lock()
	defer spares.mu.Unlock()
	spares.limit = max(bytes, 0)
	for spares.held > spares.limit && len(spares.bufs) > 0 {
		spares.drop(len(spares.bufs) - 1)
	}
}

type spareBytes struct {
	mu    sync.Mutex
	limit int      // most capacity held in all
	held  int      // capacity held now
	bufs  [][]byte // length 0 each
}

// get returns an empty buffer with room for n bytes and at most twice
// that (a small column does not take a large column's buffer), the
// smallest held one that fits, or nil when none does.
func (s *spareBytes) get(n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := -1
	for i, b := range s.bufs {
		if c := cap(b); c >= n && c <= 2*n && (best < 0 || c < cap(s.bufs[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := s.bufs[best]
	s.drop(best)
	return b
}

// put keeps b for reuse when it fits under the limit; b must not be used
// by its owner any more.
func (s *spareBytes) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held+cap(b) > s.limit {
		return
	}
	s.held += cap(b)
	s.bufs = append(s.bufs, b[:0])
}

// drop forgets the held buffer i.
func (s *spareBytes) drop(i int) {
	s.held -= cap(s.bufs[i])
	last := len(s.bufs) - 1
	s.bufs[i] = s.bufs[last]
	s.bufs[last] = nil
	s.bufs = s.bufs[:last]
}
