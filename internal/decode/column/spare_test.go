package column

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"

	"sink/internal/chschema"
	"sink/internal/chtype"
)

// withSpares sets the spares' limit for one test and empties them after.
func withSpares(t testing.TB, limit int) {
	SetSpareLimit(0)
	SetSpareLimit(limit)
	t.Cleanup(func() { SetSpareLimit(0) })
}

func TestSpares(t *testing.T) {
	// f puts buffers of the capacities puts under limit, then asks for n:
	// want is the capacity handed out (0: none), held what stays.
	f := func(limit int, puts []int, n, want, held int) {
		t.Helper()
		withSpares(t, limit)
		for _, c := range puts {
			spares.put(make([]byte, min(3, c), c))
		}
		got := spares.get(n)
		if cap(got) != want || len(got) != 0 {
			t.Fatalf("limit %d, puts %v, get(%d): len %d cap %d, want len 0 cap %d", limit, puts, n, len(got), cap(got), want)
		}
		if spares.held != held {
			t.Fatalf("limit %d, puts %v, get(%d): %d held after, want %d", limit, puts, n, spares.held, held)
		}
	}
	f(0, []int{100}, 50, 0, 0)                   // no limit: nothing kept
	f(1000, []int{100, 300, 200}, 150, 200, 400) // the smallest that fits
	f(1000, []int{100, 400}, 150, 0, 500)        // 400 is more than twice 150: a small column does not take it
	f(1000, []int{100, 300}, 300, 300, 100)      // exactly the size asked
	f(1000, []int{600, 500}, 400, 600, 0)        // 500 no longer fits under the limit once 600 is held
	f(1000, []int{0}, 1, 0, 0)                   // an empty buffer is not kept

	withSpares(t, 1000)
	spares.put(make([]byte, 0, 400))
	spares.put(make([]byte, 0, 500))
	SetSpareLimit(600) // lowering the limit lets go of what no longer fits
	if spares.held > 600 || len(spares.bufs) != 1 {
		t.Fatalf("after lowering the limit to 600: %d held in %d buffers", spares.held, len(spares.bufs))
	}
}

// TestStrColReusesSpare: a String column's buffer, given up by Reset, is
// the one the next block's column fills, and what that block holds is its
// own rows only.
func TestStrColReusesSpare(t *testing.T) {
	withSpares(t, 1<<20)
	cols := []chschema.ColumnSchema{{Name: "s", Type: "String"}}
	l := NewLayout(cols, []*chtype.Type{chtype.Parse("String")})
	fill := func(b *Block, prefix string, n int) {
		t.Helper()
		var st State
		for i := range n {
			st.Begin(b)
			if err := b.Add(&st, 0, &Value{Kind: String, Bytes: fmt.Appendf(nil, "%s-%04d", prefix, i)}); err != nil {
				t.Fatal(err)
			}
			b.EndRow()
			st.End()
		}
	}
	first := l.NewBlock()
	fill(first, "first", 1000)
	buf := first.Native(0).(proto.ColStr).Buf
	first.Reset()

	second := l.NewBlock() // as the pipeline opens a block while another is reused
	fill(second, "second", 10)
	got := second.Native(0).(proto.ColStr)
	if unsafe.SliceData(got.Buf) != unsafe.SliceData(buf) {
		t.Fatal("the second block's String column did not take the buffer the first one gave up")
	}
	if got.Rows() != 10 || got.Row(0) != "second-0000" || got.Row(9) != "second-0009" {
		t.Fatalf("second block holds %d rows, first %q, last %q", got.Rows(), got.Row(0), got.Row(got.Rows()-1))
	}
	// ColumnData's strings are copies: a block refilled from the same
	// buffer does not change them.
	data := second.ColumnData(0).([]string)
	second.Reset()
	fill(l.NewBlock(), "third", 10)
	if data[0] != "second-0000" {
		t.Fatalf("ColumnData's string changed with the buffer's reuse: %q", data[0])
	}
}

// TestStrColWithoutSpares: with no limit a reset block's buffer is not
// reused, as before spares existed.
func TestStrColWithoutSpares(t *testing.T) {
	withSpares(t, 0)
	l := NewLayout([]chschema.ColumnSchema{{Name: "s", Type: "String"}}, []*chtype.Type{chtype.Parse("String")})
	b := l.NewBlock()
	var st State
	st.Begin(b)
	if err := b.Add(&st, 0, &Value{Kind: String, Bytes: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	b.EndRow()
	st.End()
	b.Reset()
	if spares.held != 0 || len(spares.bufs) != 0 {
		t.Fatalf("spares hold %d bytes in %d buffers with no limit", spares.held, len(spares.bufs))
	}
}
