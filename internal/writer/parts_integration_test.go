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
		// All at once, with a table of another database of the same name
		// and one that does not exist: each gets its own answer.
		other := s.NewDatabase(t)
		testenv.Exec(t, conn, fmt.Sprintf("CREATE TABLE %s.own (x UInt64) ENGINE = MergeTree ORDER BY x", other))
		testenv.InsertSeq(t, conn, other, "own", "x", 1)
		names := []writer.TableName{{Database: db, Name: "own"}, {Database: db, Name: "plain"}, {Database: other, Name: "own"}, {Database: db, Name: "missing"}}
		all, err := w.PartsOf(ctx, names)
		if err != nil {
			t.Fatal(err)
		}
		want := map[writer.TableName]adapt.Parts{
			names[0]: {Active: 4, DelayAt: 20, ThrowAt: 40},
			names[1]: plain,
			names[2]: {Active: 1, DelayAt: int(delay), ThrowAt: int(throw)},
			names[3]: {DelayAt: int(delay), ThrowAt: int(throw)},
		}
		if len(all) != len(want) {
			t.Errorf("PartsOf: %d tables, want %d: %+v", len(all), len(want), all)
		}
		for n, p := range want {
			if all[n] != p {
				t.Errorf("PartsOf %v: %+v, want %+v", n, all[n], p)
			}
		}
	})
}
