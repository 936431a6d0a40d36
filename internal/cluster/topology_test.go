package cluster

import (
	"slices"
	"testing"
)

func TestSlotsFollowWeights(t *testing.T) {
	top := &Topology{Shards: []Shard{{Num: 1, Weight: 1}, {Num: 2, Weight: 0}, {Num: 3, Weight: 3}}}
	if got, want := top.Slots(), []int{0, 2, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("slots %v, want %v", got, want)
	}
	// identity of 0..7 over weights 1,0,3: value % 4 → slot → shard index.
	h, err := NewKeyHash(HashIdentity, "UInt8")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlacement(top, h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Shards([]uint8{0, 1, 2, 3, 4, 5, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 2, 2, 2, 0, 2, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("shards %v, want %v", got, want)
	}
	// A signed key is read as the unsigned integer of its width: -1 is 255.
	h, _ = NewKeyHash(HashIdentity, "Int8")
	p, _ = NewPlacement(top, h)
	if got, _ := p.Shards([]int8{-1, -4}); !slices.Equal(got, []int{2, 0}) {
		t.Fatalf("Int8 -1, -4: shards %v, want [2 0]", got)
	}
	counts := make([]int, 3)
	for range 4000 {
		counts[top.RandomShard()]++
	}
	if counts[1] != 0 || counts[0] < 800 || counts[0] > 1200 || counts[2] < 2800 || counts[2] > 3200 {
		t.Fatalf("random shards of 4000 by weights 1,0,3: %v", counts)
	}
	if _, err := NewPlacement(&Topology{Shards: []Shard{{Weight: 0}}}, h); err == nil {
		t.Fatal("a topology of weight 0 was accepted")
	}
}

func TestKeyHashRefuses(t *testing.T) {
	for _, c := range []struct{ fn, typ string }{
		{HashIdentity, "String"}, {HashInt, "FixedString(4)"}, {HashCity, "Nullable(Int32)"},
		{HashCity, "Float64"}, {"sipHash64", "UInt64"}, {HashCity, "Array(String)"},
	} {
		if _, err := NewKeyHash(c.fn, c.typ); err == nil {
			t.Errorf("%s(%s) accepted", c.fn, c.typ)
		}
	}
	for _, typ := range []string{"LowCardinality(String)", "DateTime('UTC')", "Date", "Int64", "UInt16"} {
		if _, err := NewKeyHash(HashCity, typ); err != nil {
			t.Errorf("cityHash64(%s): %v", typ, err)
		}
	}
}

func TestFromShards(t *testing.T) {
	top, err := FromShards([][]string{{"a:1", "b:1"}, {"c:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if top.String() != "2 shards (weights 1,1) × 2,1 replicas" || !slices.Equal(top.Addrs(), []string{"a:1", "b:1", "c:1"}) {
		t.Fatalf("%s %v", top, top.Addrs())
	}
	if _, err := FromShards([][]string{{"a:1"}, {}}); err == nil {
		t.Fatal("an empty shard was accepted")
	}
}
