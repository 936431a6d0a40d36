//go:build integration

package writer_test

import (
	"context"
	"fmt"
	"testing"

	"sink/internal/adapt"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestParts: the adaptive controller's view of a table on both servers:
// active parts of the fullest partition (merges stopped, so each INSERT is
// one part), and the thresholds from the table's own SETTINGS or, for a
// table without them, the server's defaults.
func TestParts(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		conn := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, conn,
			fmt.Sprintf("CREATE TABLE %s.own (x UInt64) ENGINE = MergeTree PARTITION BY x %% 2 ORDER BY x SETTINGS parts_to_delay_insert = 20, parts_to_throw_insert = 40", db),
			fmt.Sprintf("CREATE TABLE %s.plain (x UInt64) ENGINE = MergeTree ORDER BY x", db),
			fmt.Sprintf("SYSTEM STOP MERGES %s.own", db))
		// Three parts in partition 0, then one more there and one in partition 1.
		for i := 0; i < 3; i++ {
			testenv.InsertSeq(t, conn, db, "own", "x", 1)
		}
		testenv.InsertSeq(t, conn, db, "own", "x", 2)
		w, err := writer.Open(ctx, "w", chConfig(t, s.Addr))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		got, err := w.Parts(ctx, db, "own")
		if err != nil {
			t.Fatal(err)
		}
		if want := (adapt.Parts{Active: 4, DelayAt: 20, ThrowAt: 40}); got != want {
			t.Errorf("own: %+v, want %+v", got, want)
		}
		plain, err := w.Parts(ctx, db, "plain")
		if err != nil {
			t.Fatal(err)
		}
		var delay, throw uint32
		if err := conn.QueryRow(ctx, "SELECT toUInt32(value) FROM system.merge_tree_settings WHERE name = 'parts_to_delay_insert'").Scan(&delay); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT toUInt32(value) FROM system.merge_tree_settings WHERE name = 'parts_to_throw_insert'").Scan(&throw); err != nil {
			t.Fatal(err)
		}
		if plain.Active != 0 || plain.DelayAt != int(delay) || plain.ThrowAt != int(throw) || delay == 0 {
			t.Errorf("plain (empty, server defaults): %+v, want 0 parts, delay %d, throw %d", plain, delay, throw)
		}
	})
}
