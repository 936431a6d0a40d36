package decode

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/route"
)

// parity places an integer key on shard key % 2 (a string key on 0).
type parity struct{}

func (parity) ShardCount() int         { return 2 }
func (parity) PlaceBits(b uint64) int  { return int(b % 2) }
func (parity) PlaceBytes(_ []byte) int { return 0 }

var _ chschema.Placer = parity{}

// TestShardedBlockFillsAcrossParts: change events whose TOASTed values
// were not carried, appended to a sharded block, list their cells with
// the rows counted across the parts (shard 0's rows, then shard 1's), and
// Fill, Value and ColumnData of the whole block reach the right part's
// row.
func TestShardedBlockFillsAcrossParts(t *testing.T) {
	p, err := Compile(route.Debezium, toastCols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewShardedBlock("id", parity{})
	if !blk.Sharded() {
		t.Fatal("the block is not sharded")
	}
	const n = 6
	for id := 1; id <= n; id++ {
		for _, r := range toastRecords(t)[:1] {
			key := strings.ReplaceAll(string(r.Key), `"id":1}`, fmt.Sprintf(`"id":%d}`, id))
			val := strings.ReplaceAll(string(r.Value), `"id":1,`, fmt.Sprintf(`"id":%d,`, id))
			if err := p.Append(blk, &kgo.Record{Topic: r.Topic, Key: []byte(key), Value: []byte(val), Offset: int64(id)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if blk.Rows() != n {
		t.Fatalf("%d rows, want %d", blk.Rows(), n)
	}
	// Shard 0 holds ids 2, 4, 6; shard 1 ids 1, 3, 5.
	wantIDs := []int32{2, 4, 6, 1, 3, 5}
	if got := blk.ColumnData(0); !reflect.DeepEqual(got, wantIDs) {
		t.Fatalf("ids %v, want %v", got, wantIDs)
	}
	cells := blk.Unfilled()
	if len(cells) != 4*n {
		t.Fatalf("%d cells to fill, want %d", len(cells), 4*n)
	}
	if keys, ver, del := blk.FillKeys(); !reflect.DeepEqual(keys, []int{0}) || ver != 6 || del != 7 {
		t.Fatalf("FillKeys = %v, %d, %d; want [0], 6, 7", keys, ver, del)
	}
	for _, c := range cells {
		if c.Col != 2 {
			continue
		}
		id := blk.Value(0, c.Row).(int32)
		if id != wantIDs[c.Row] {
			t.Fatalf("row %d: Value of id %d, want %d", c.Row, id, wantIDs[c.Row])
		}
		if err := blk.Fill(c, fmt.Sprintf("text of %d", id)); err != nil {
			t.Fatal(err)
		}
	}
	texts := blk.ColumnData(2).([]string)
	for row, id := range wantIDs {
		if want := fmt.Sprintf("text of %d", id); texts[row] != want {
			t.Errorf("row %d (id %d): big_text %q, want %q", row, id, texts[row], want)
		}
	}
	if left := blk.Unfilled(); len(left) != 3*n {
		t.Errorf("%d cells left, want %d", len(left), 3*n)
	}
	if err := blk.Fill(column.Cell{Row: n, Col: 2}, "x"); err == nil {
		t.Error("Fill of a row beyond the block succeeded")
	}
	parts, _ := blk.ShardParts()
	if parts[1].ColumnData(2).([]string)[0] != "text of 1" {
		t.Errorf("shard 1's first row: %q, want the value filled for id 1", parts[1].ColumnData(2).([]string)[0])
	}
}

// FuzzShardedAppend: any record is taken or refused alike by a plain block
// and by a block that places rows on shards by a key of each key type, and
// both end with the same row, key and bytes.
func FuzzShardedAppend(f *testing.F) {
	for _, s := range []string{`{"i":1,"k":5}`, `{"i":2,"k":"x"}`, `{"i":3}`, `{"i":4,"k":null}`, `{"i":5,"k":{"a":1}}`, `{"i":6,"k":-1}`, `{"i":7,"k":"2026-01-02"}`, `not json`, `{"i":8,"k":1e30}`} {
		f.Add([]byte(s))
	}
	types := []string{"Int8", "UInt64", "Int64", "String", "FixedString(4)", "LowCardinality(String)", "Date", "DateTime"}
	f.Fuzz(func(t *testing.T, value []byte) {
		for _, typ := range types {
			cols := []chschema.ColumnSchema{{Name: "i", Type: "UInt32"}, {Name: "k", Type: typ}}
			p, err := Compile(route.JSON, cols, nil)
			if err != nil {
				t.Fatal(err)
			}
			plain, sharded := p.NewBlock(), p.NewShardedBlock("k", parity{})
			rec := &kgo.Record{Value: value}
			errPlain, errSharded := p.Append(plain, rec), p.Append(sharded, rec)
			if (errPlain == nil) != (errSharded == nil) {
				t.Fatalf("%s: %s: plain %v, sharded %v", typ, value, errPlain, errSharded)
			}
			if plain.Rows() != sharded.Rows() || plain.Bytes() != sharded.Bytes() {
				t.Fatalf("%s: %s: plain %d rows %d bytes, sharded %d rows %d bytes", typ, value, plain.Rows(), plain.Bytes(), sharded.Rows(), sharded.Bytes())
			}
			if plain.Rows() > 0 && !reflect.DeepEqual(plain.ColumnData(1), sharded.ColumnData(1)) {
				t.Fatalf("%s: %s: key %v, sharded %v", typ, value, plain.ColumnData(1), sharded.ColumnData(1))
			}
		}
	})
}

// TestShardedBlockLargest: a sharded block's Largest is its largest
// part's rows and bytes (what max_rows and max_bytes bound: each part is
// one INSERT), a plain block's the whole; the bytes of the parts add up
// to the block's.
func TestShardedBlockLargest(t *testing.T) {
	p, err := Compile(route.JSON, []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "s", Type: "String"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sharded, plain := p.NewShardedBlock("id", parity{}), p.NewBlock()
	// ids 1..7 go 3 to shard 0 (even), 4 to shard 1 (odd); the odd ones
	// carry longer strings.
	for id := 1; id <= 7; id++ {
		v := fmt.Appendf(nil, `{"id":%d,"s":%q}`, id, strings.Repeat("x", 1+10*(id%2)))
		for _, b := range []*Block{sharded, plain} {
			if err := p.Append(b, &kgo.Record{Value: v, Offset: int64(id)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ps, _ := sharded.ShardParts()
	parts := []*Block{ps[0].(*Block), ps[1].(*Block)}
	rows, bytes := sharded.Largest()
	if rows != 4 || rows != parts[1].Rows() || bytes != parts[1].Bytes() {
		t.Fatalf("Largest = %d rows %d bytes, want shard 1's %d rows %d bytes", rows, bytes, parts[1].Rows(), parts[1].Bytes())
	}
	if parts[0].Bytes()+parts[1].Bytes() != sharded.Bytes() || sharded.Bytes() != plain.Bytes() {
		t.Fatalf("bytes: parts %d + %d, block %d, plain block %d", parts[0].Bytes(), parts[1].Bytes(), sharded.Bytes(), plain.Bytes())
	}
	if rows, bytes := plain.Largest(); rows != 7 || bytes != plain.Bytes() {
		t.Fatalf("plain block: Largest = %d rows %d bytes, want 7 rows %d bytes", rows, bytes, plain.Bytes())
	}
}
