package cdc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/backoff"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/route"
)

// latestFake is a target that answers Latest from a map key → row and
// records the queries.
type latestFake struct {
	stored  map[int32][]any // id → the live row's big and note, and whether it is deleted
	queries []chtable.LatestQuery
	err     error
}

func (f *latestFake) Describe(context.Context, string, string) ([]chschema.ColumnSchema, error) {
	return nil, nil
}

func (f *latestFake) Insert(context.Context, *chtable.Table, chschema.Block, uint64, func(chtable.Attempt), chtable.Refresh) error {
	return nil
}

func (f *latestFake) Latest(_ context.Context, _ *chtable.Table, q chtable.LatestQuery) ([][]any, error) {
	f.queries = append(f.queries, q)
	if f.err != nil {
		return nil, f.err
	}
	var out [][]any
	for _, k := range q.Find {
		id := k[0].(int32)
		if s, ok := f.stored[id]; ok && (q.Deleted == "" || s[2] == uint8(0)) {
			row := []any{id}
			for _, c := range q.Cols {
				switch c {
				case "big":
					row = append(row, s[0])
				case "note":
					row = append(row, s[1])
				}
			}
			out = append(out, row)
		}
	}
	return out, nil
}

var fillCols = []chschema.ColumnSchema{
	{Name: "id", Type: "Int32"},
	{Name: "big", Type: "String"},
	{Name: "note", Type: "Nullable(String)"},
	{Name: "_version", Type: "UInt64"},
	{Name: "_deleted", Type: "UInt8"},
}

// fillEvent is a Debezium change of row id: op, and big/note as JSON
// values ("" leaves the field out).
func fillEvent(op string, id int, big, note string, lsn int) *kgo.Record {
	img := fmt.Sprintf(`{"id":%d`, id)
	if big != "" {
		img += `,"big":` + big
	}
	if note != "" {
		img += `,"note":` + note
	}
	img += "}"
	before, after := "null", img
	if op == "d" {
		before, after = img, "null"
	}
	v := fmt.Sprintf(`{"before":%s,"after":%s,"op":%q,"ts_ms":1,"source":{"connector":"postgresql","lsn":%d}}`, before, after, op, lsn)
	return &kgo.Record{Key: []byte(fmt.Sprintf(`{"id":%d}`, id)), Value: []byte(v)}
}

const ph = `"__debezium_unavailable_value"`

// moved gives r the header Debezium gives the create event of a row whose
// primary key changed from old.
func moved(r *kgo.Record, old int) *kgo.Record {
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "__debezium.oldkey", Value: []byte(fmt.Sprintf(`{"id":%d}`, old))})
	return r
}

func TestUnitFillBlock(t *testing.T) {
	tab := chtable.NewTable("db", "t", fillCols, fillCols)
	f := func(name string, stored map[int32][]any, recs []*kgo.Record, wantBig []string, wantNote []string, wantQueried []int32, wantErr string) {
		t.Helper()
		p, err := decode.Compile(route.Debezium, fillCols, nil)
		if err != nil {
			t.Fatal(err)
		}
		blk := p.NewBlock()
		for _, r := range recs {
			if err := p.Append(blk, r); err != nil {
				t.Fatalf("%s: Append: %v", name, err)
			}
		}
		sink := &latestFake{stored: stored}
		err = fillBlock(context.Background(), sink, tab, blk)
		var queried []int32
		for _, q := range sink.queries {
			for _, k := range q.Find {
				queried = append(queried, k[0].(int32))
			}
		}
		if fmt.Sprint(queried) != fmt.Sprint(wantQueried) {
			t.Errorf("%s: asked ClickHouse for %v, want %v", name, queried, wantQueried)
		}
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%s: err %v, want one saying %q", name, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := len(blk.Unfilled()); n != 0 {
			t.Errorf("%s: %d cells left unfilled", name, n)
		}
		if got := fmt.Sprint(blk.ColumnData(1)); got != fmt.Sprint(wantBig) {
			t.Errorf("%s: big = %s, want %s", name, got, fmt.Sprint(wantBig))
		}
		var notes []string
		for _, n := range blk.ColumnData(2).([]*string) {
			if n == nil {
				notes = append(notes, "NULL")
			} else {
				notes = append(notes, *n)
			}
		}
		if fmt.Sprint(notes) != fmt.Sprint(wantNote) {
			t.Errorf("%s: note = %v, want %v", name, notes, wantNote)
		}
	}
	s := func(v string) *string { return &v }

	f("nothing to fill", nil,
		[]*kgo.Record{fillEvent("c", 1, `"a"`, `"n"`, 10)},
		[]string{"a"}, []string{"n"}, nil, "")
	f("from an earlier row of the block, not ClickHouse", nil,
		[]*kgo.Record{fillEvent("c", 1, `"a"`, `"n"`, 10), fillEvent("u", 1, ph, `"m"`, 11), fillEvent("u", 1, ph, ph, 12)},
		[]string{"a", "a", "a"}, []string{"n", "m", "m"}, nil, "")
	f("from ClickHouse, one query for every key", map[int32][]any{1: {"one", s("n1"), uint8(0)}, 2: {"two", (*string)(nil), uint8(0)}},
		[]*kgo.Record{fillEvent("u", 1, ph, `"x"`, 10), fillEvent("u", 2, ph, ph, 11), fillEvent("u", 1, ph, ph, 12), fillEvent("c", 3, `"c"`, `null`, 13)},
		[]string{"one", "two", "one", "c"}, []string{"x", "NULL", "x", "NULL"}, []int32{1, 2}, "")
	f("a delete is no source: the earlier live row is", map[int32][]any{1: {"old", s("o"), uint8(0)}},
		[]*kgo.Record{fillEvent("c", 1, `"a"`, `"n"`, 10), fillEvent("d", 1, `""`, "", 11), fillEvent("u", 1, ph, `"x"`, 12)},
		[]string{"a", "", "a"}, []string{"n", "NULL", "x"}, nil, "")
	f("a key whose stored rows are all deleted", map[int32][]any{1: {"", s(""), uint8(1)}},
		[]*kgo.Record{fillEvent("u", 1, ph, `"x"`, 12)},
		nil, nil, []int32{1}, `no value for column "big"`)
	f("a row moved to a new key takes its old key's values, from the block", nil,
		[]*kgo.Record{fillEvent("c", 4, `"four"`, `"n"`, 10), fillEvent("d", 4, `""`, "", 11), moved(fillEvent("c", 40, ph, `"m"`, 11), 4)},
		[]string{"four", "", "four"}, []string{"n", "NULL", "m"}, nil, "")
	f("... and from ClickHouse", map[int32][]any{4: {"four", s("o"), uint8(0)}, 40: {"wrong", s("w"), uint8(0)}},
		[]*kgo.Record{fillEvent("d", 4, `""`, "", 11), moved(fillEvent("c", 40, ph, ph, 11), 4)},
		[]string{"", "four"}, []string{"NULL", "o"}, []int32{4}, "")
	f("no earlier value anywhere", nil,
		[]*kgo.Record{fillEvent("u", 7, ph, `"x"`, 10)},
		nil, nil, []int32{7}, "(id=7)")
	f("a value that changed in the block is carried on", map[int32][]any{1: {"old", s("o"), uint8(0)}},
		[]*kgo.Record{fillEvent("u", 1, ph, `"x"`, 10), fillEvent("u", 1, `"new"`, `"y"`, 11), fillEvent("u", 1, ph, ph, 12)},
		[]string{"old", "new", "new"}, []string{"x", "y", "y"}, []int32{1}, "")
}

// TestUnitFillBlockErrors: what the read-back returns that cannot be
// used fails the fill, and the error of the read itself is passed on for
// the retry classifier.
func TestUnitFillBlockErrors(t *testing.T) {
	tab := chtable.NewTable("db", "t", fillCols, fillCols)
	p, err := decode.Compile(route.Debezium, fillCols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	if err := p.Append(blk, fillEvent("u", 1, ph, `"x"`, 10)); err != nil {
		t.Fatal(err)
	}
	down := fmt.Errorf("dial tcp: connection refused")
	if err := fillBlock(context.Background(), &latestFake{err: down}, tab, blk); err != down {
		t.Fatalf("read error: got %v", err)
	}
	wrong := &latestFake{stored: map[int32][]any{1: {int64(5), nil, uint8(0)}}}
	if err := fillBlock(context.Background(), wrong, tab, blk); err == nil || !strings.Contains(err.Error(), "takes string, not int64") {
		t.Fatalf("a value of the wrong type: got %v", err)
	}
	if n := len(blk.Unfilled()); n != 1 {
		t.Fatalf("a failed fill filled %d cells", 1-n)
	}
	if err := fillBlock(context.Background(), NewFiller(plainSink{}, backoff.Policy{}, zerolog.Nop()).store, tab, blk); err == nil || !strings.Contains(err.Error(), "cannot read earlier values") {
		t.Fatalf("a sink without Latest: got %v", err)
	}
}

type plainSink struct{}

func (plainSink) Describe(context.Context, string, string) ([]chschema.ColumnSchema, error) {
	return nil, nil
}

func (plainSink) Insert(context.Context, *chtable.Table, chschema.Block, uint64, func(chtable.Attempt), chtable.Refresh) error {
	return nil
}
