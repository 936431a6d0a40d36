package tables

import (
	"testing"

	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/route"
)

// halves places an integer key on shard key % 2.
type halves struct{}

func (halves) ShardCount() int         { return 2 }
func (halves) PlaceBits(b uint64) int  { return int(b % 2) }
func (halves) PlaceBytes(_ []byte) int { return 0 }

// sharder is a Sink's Sharder that places db.t's rows by column k once
// ready is set.
type sharder struct{ ready bool }

func (s *sharder) Placer(db, table string, cols []chschema.ColumnSchema) (string, chschema.Placer) {
	if !s.ready || db+"."+table != "db.t" {
		return "", nil
	}
	return "k", halves{}
}

// TestNewBlockShardsWhenTheSinkPlaces: a table whose Sink places its rows
// gets blocks that place each row on its shard; before the Sink can
// place them, and without a Sharder, plain blocks.
func TestNewBlockShardsWhenTheSinkPlaces(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "i", Type: "UInt32"}, {Name: "k", Type: "UInt64"}}
	plan, err := decode.Compile(route.JSON, cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	sh := &sharder{}
	ts := &Table{name: "db.t", t: chtable.NewTable("db", "t", cols, cols), plan: plan, sharder: sh}
	if ts.NewBlock().Sharded() {
		t.Error("a sharded block before the Sink could place rows")
	}
	sh.ready = true
	if !ts.NewBlock().Sharded() {
		t.Error("a plain block once the Sink places rows")
	}
	plain := &Table{name: "db.t", t: ts.t, plan: plan}
	if plain.NewBlock().Sharded() {
		t.Error("a sharded block without a Sharder")
	}
}
