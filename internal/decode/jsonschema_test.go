package decode

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/registry"
	"sink/internal/route"
)

func jsonSchemaPlan(t testing.TB, reg Registry) *Plan {
	t.Helper()
	p, err := Compile(route.JSONSchema, InsertColumns(benchCols), nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func jsonSchemaRegistry() *fakeRegistry {
	reg := newFakeRegistry()
	reg.add(5, sr.TypeJSON, `{"type":"object"}`)
	reg.add(6, sr.TypeAvro, `"string"`)
	return reg
}

// TestJSONSchemaReadsLikeJSON: the framed payload fills the same row the
// json format fills from the bare JSON.
func TestJSONSchemaReadsLikeJSON(t *testing.T) {
	pj, err := Compile(route.JSON, InsertColumns(benchCols), nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := jsonSchemaPlan(t, jsonSchemaRegistry())
	bj, bs := pj.NewBlock(), ps.NewBlock()
	for _, e := range benchEvents(20) {
		if err := pj.Append(bj, &kgo.Record{Topic: "e", Value: e}); err != nil {
			t.Fatal(err)
		}
		if err := ps.Append(bs, &kgo.Record{Topic: "e", Value: append(registry.AppendFrame(nil, 5, false), e...)}); err != nil {
			t.Fatal(err)
		}
	}
	for c := range bj.Columns() {
		if a, b := fmt.Sprint(bj.ColumnData(c)), fmt.Sprint(bs.ColumnData(c)); a != b {
			t.Fatalf("column %d: json-schema %s, json %s", c, b, a)
		}
	}
}

func TestJSONSchemaBadRecords(t *testing.T) {
	event := benchEvents(1)[0]
	for _, c := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"bare JSON", event, "magic byte"},
		{"short frame", []byte{0, 0, 1}, "shorter than"},
		{"unknown id", append(registry.AppendFrame(nil, 77, false), event...), "does not exist"},
		{"avro id", append(registry.AppendFrame(nil, 6, false), event...), "not JSON Schema"},
		{"empty payload", registry.AppendFrame(nil, 5, false), "invalid JSON"},
		{"not JSON", append(registry.AppendFrame(nil, 5, false), "{nope"...), "invalid JSON"},
	} {
		p := jsonSchemaPlan(t, jsonSchemaRegistry())
		blk := p.NewBlock()
		err := p.Append(blk, &kgo.Record{Topic: "e", Value: c.value})
		var re *RecordError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, c.want) || blk.Rows() != 0 {
			t.Errorf("%s: got %v, want a RecordError containing %q", c.name, err, c.want)
		}
	}
	p := jsonSchemaPlan(t, jsonSchemaRegistry())
	if err := p.Append(p.NewBlock(), &kgo.Record{Topic: "e"}); !errors.Is(err, ErrSkip) {
		t.Errorf("tombstone: got %v, want ErrSkip", err)
	}
	reg := jsonSchemaRegistry()
	reg.down = true
	p = jsonSchemaPlan(t, reg)
	if err := p.Append(p.NewBlock(), &kgo.Record{Topic: "e", Value: append(registry.AppendFrame(nil, 5, false), event...)}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("registry down: got %v, want ErrUnavailable", err)
	}
}

func TestJSONSchemaZeroAllocsPerRecord(t *testing.T) {
	var recs [][]byte
	for _, e := range benchEvents(64) {
		recs = append(recs, append(registry.AppendFrame(nil, 5, false), e...))
	}
	requireZeroAllocs(t, jsonSchemaPlan(t, jsonSchemaRegistry()), recs)
}
