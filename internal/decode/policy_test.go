package decode

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/route"
)

// appendWith compiles cols (no mapping) with pol and appends value; it
// returns the error and the plan for inspection.
func appendWith(t *testing.T, pol Policy, cols []chschema.ColumnSchema, value []byte) (*Plan, *column.Block, error) {
	t.Helper()
	p, err := Compile("json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(pol)
	blk := p.NewBlock()
	err = p.Append(blk, &kgo.Record{Topic: "t", Partition: 1, Offset: 9, Value: value})
	return p, blk, err
}

func TestPolicyMissingAndNull(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "s", Type: "String"}, {Name: "ns", Type: "Nullable(String)"},
		{Name: "lc", Type: "LowCardinality(Nullable(String))"}, {Name: "arr", Type: "Array(Int32)"}}
	f := func(pol Policy, value, wantErr string, wantRows int) {
		t.Helper()
		_, blk, err := appendWith(t, pol, cols, []byte(value))
		switch {
		case wantErr == "" && err != nil:
			t.Fatalf("%+v %s: %v", pol, value, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Fatalf("%+v %s: error %v; want one containing %q", pol, value, err, wantErr)
		}
		if blk.Rows() != wantRows {
			t.Fatalf("%+v %s: %d rows; want %d", pol, value, blk.Rows(), wantRows)
		}
	}
	full := `{"id": 1, "s": "x", "ns": "y", "lc": "z", "arr": [1]}`
	for _, pol := range []Policy{{}, {MissingBad: true}, {NullBad: true}, {MissingBad: true, NullBad: true}} {
		f(pol, full, "", 1)
		// Nullable columns take null and missing as NULL under every policy.
		f(pol, `{"id": 1, "s": "x", "ns": null, "arr": []}`, "", 1)
	}
	// Defaults (today's behaviour).
	f(Policy{}, `{"s": null}`, "", 1)
	f(Policy{NullBad: true}, `{"s": "x"}`, "", 1) // missing still defaults
	f(Policy{MissingBad: true}, `{"id": 1, "s": null, "arr": null}`, "", 1)
	// Strict.
	f(Policy{MissingBad: true}, `{"s": "x", "arr": []}`, `column "id": missing value for non-Nullable UInt64 (errors.on_missing is bad_record)`, 0)
	f(Policy{MissingBad: true}, `{"id": 1, "s": "x"}`, `column "arr": missing value for non-Nullable Array(Int32)`, 0)
	f(Policy{NullBad: true}, `{"id": 1, "s": null}`, `column "s": null into non-Nullable String (errors.on_null is bad_record)`, 0)
	f(Policy{NullBad: true}, `{"id": null}`, `column "id": null into non-Nullable UInt64`, 0)
}

func TestDefaultsAreCountedPerColumn(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "s", Type: "String"}, {Name: "ns", Type: "Nullable(String)"}}
	p, err := Compile("json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(Policy{})
	blk := p.NewBlock()
	for _, v := range []string{`{"id": 1, "s": "a"}`, `{"id": null}`, `{"s": null}`, `{}`, `{"id": "bad"}`} {
		_ = p.Append(blk, &kgo.Record{Value: []byte(v)})
	}
	got := map[string]uint64{}
	p.TakeDefaults(func(col, reason string, n uint64) { got[col+"/"+reason] = n })
	// {"id": "bad"} fails and counts nothing; ns is Nullable and never counts.
	want := map[string]uint64{"s/missing": 2, "id/null": 1, "id/missing": 2, "s/null": 1}
	if len(got) != len(want) {
		t.Fatalf("defaults %v; want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("defaults %v; want %v", got, want)
		}
	}
	p.TakeDefaults(func(col, reason string, n uint64) { t.Fatalf("counts not reset: %s %s %d", col, reason, n) })
}

func TestTombstonePolicy(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}
	_, blk, err := appendWith(t, Policy{}, cols, nil)
	if !errors.Is(err, ErrSkip) || blk.Rows() != 0 {
		t.Fatalf("tombstone with the default policy: %v; want ErrSkip and no row", err)
	}
	_, _, err = appendWith(t, Policy{TombstoneBad: true}, cols, nil)
	var re *RecordError
	if !errors.As(err, &re) || errors.Is(err, ErrSkip) || !strings.Contains(re.Reason, "errors.on_tombstone is bad_record") {
		t.Fatalf("tombstone with on_tombstone bad_record: %v; want a bad record", err)
	}
	// An empty (not null) value is not a tombstone: it is not JSON.
	if _, _, err = appendWith(t, Policy{}, cols, []byte{}); err == nil || errors.Is(err, ErrSkip) {
		t.Fatalf("empty value: %v; want a bad record", err)
	}
}

// JSON has no NaN or Infinity; the parser takes bare NaN and Inf but not
// Infinity. All bare forms are refused alike, wherever they are a value;
// the quoted strings go into Float columns.
func TestBareNaNInfRejected(t *testing.T) {
	for _, typ := range []string{"Float64", "Float32", "Int64", "String", "Decimal(10, 2)", "Array(Float64)"} {
		for _, lit := range []string{"NaN", "nan", "-NaN", "Inf", "-inf", "Infinity", "-Infinity"} {
			v := lit
			if strings.HasPrefix(typ, "Array") {
				v = "[1, " + lit + "]"
			}
			if data, err := decodeOne(t, typ, v); err == nil {
				t.Errorf("%s from bare %s = %v; want a bad record", typ, v, data)
			}
		}
	}
	for _, s := range []string{`"NaN"`, `"Infinity"`, `"-inf"`} {
		if _, err := decodeOne(t, "Float64", s); err != nil {
			t.Errorf("Float64 from %s: %v", s, err)
		}
	}
	if _, err := decodeOne(t, "Float64", "1.5e3"); err != nil {
		t.Errorf("Float64 from 1.5e3: %v", err)
	}
}

// A Debezium delete carries the key only (REPLICA IDENTITY DEFAULT, or no
// before image): its other columns are filler, so errors.on_missing
// bad_record does not refuse it and nothing is counted; an insert missing a
// column is refused.
func TestPolicyDebeziumDeletes(t *testing.T) {
	p, err := Compile(route.Debezium, customerCols, map[string]string{"op": "$op", "tbl": "$source.table"})
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(Policy{MissingBad: true, NullBad: true})
	blk := p.NewBlock()
	for _, fx := range []string{"pg_customers_delete_default_identity.json", "pg_customers_insert.json"} {
		r := &kgo.Record{Topic: "PostgreSQL_server.inventory.customers", Offset: 1, Value: fixture(t, fx)}
		if err := p.Append(blk, r); err != nil {
			t.Fatalf("%s: %v", fx, err)
		}
	}
	p.TakeDefaults(func(col, reason string, n uint64) { t.Fatalf("delete counted a default: %s %s %d", col, reason, n) })
	narrow := append(append([]chschema.ColumnSchema(nil), customerCols...), chschema.ColumnSchema{Name: "phone", Type: "String"})
	p, err = Compile(route.Debezium, narrow, map[string]string{"op": "$op", "tbl": "$source.table"})
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(Policy{MissingBad: true})
	err = p.Append(p.NewBlock(), &kgo.Record{Topic: "PostgreSQL_server.inventory.customers", Value: fixture(t, "pg_customers_insert.json")})
	if err == nil || !strings.Contains(err.Error(), `column "phone": missing value`) {
		t.Fatalf("insert without phone: %v; want a bad record naming phone", err)
	}
}
