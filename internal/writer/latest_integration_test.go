//go:build integration

package writer_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"sink/internal/chtable"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestLatest reads the newest stored live values of rows by composite key
// on both servers: the largest version of the rows not marked deleted wins
// whether or not the versions were merged, a NULL included; keys without
// a live row are absent, and each value comes back as the element type
// decode.Block.ColumnData uses for its column.
func TestLatest(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		conn := s.Conn(t)
		db := s.NewDatabase(t)
		ddl := fmt.Sprintf("CREATE TABLE %s.t (id Int32, name String, u UUID, big String, note Nullable(String), "+
			"arr Array(Nullable(Int32)), tags Array(String), _version UInt64, _deleted UInt8) "+
			"ENGINE = ReplacingMergeTree(_version) ORDER BY (id, name)", db)
		if err := conn.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
		row := func(id int, name, u, big, note, arr, tags string, ver, del int) string {
			return fmt.Sprintf("SELECT toInt32(%d), %s, toUUID('%s'), %s, CAST(%s AS Nullable(String)), CAST(%s AS Array(Nullable(Int32))), CAST(%s AS Array(String)), toUInt64(%d), toUInt8(%d)",
				id, name, u, big, note, arr, tags, ver, del)
		}
		u1, u2 := "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
		// Two INSERTs: two parts, so the versions are not merged. INSERT
		// ... SELECT, since 18.16 takes no VALUES through the driver's Exec.
		for _, rows := range [][]string{
			{row(1, `'a\'b'`, u1, `'old'`, `NULL`, `[1]`, `['x']`, 5, 0), row(2, `'z'`, u2, `'two'`, `'n'`, `[]`, `[]`, 3, 0)},
			{row(1, `'a\'b'`, u1, `'new'`, `'set'`, `[NULL, 7]`, `['y', 'z']`, 9, 0), row(2, `'z'`, u2, `''`, `NULL`, `[]`, `[]`, 4, 1)},
		} {
			q := fmt.Sprintf("INSERT INTO %s.t (id, name, u, big, note, arr, tags, _version, _deleted) %s", db, strings.Join(rows, " UNION ALL "))
			if err := conn.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		w, err := writer.Open(ctx, "w", chConfig(t, s.Addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		tab := chtable.NewTable(db, "t", nil, nil)
		got, err := w.Latest(ctx, tab, writer.LatestQuery{
			Keys:    []string{"id", "name"},
			Version: "_version",
			Deleted: "_deleted",
			Cols:    []string{"big", "note", "arr", "tags", "u"},
			Find:    [][]any{{int32(1), "a'b"}, {int32(2), "z"}, {int32(3), "q"}, {int32(4), "absent"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Key 2's newest row is a delete: its newest live row counts. Key
		// 3 has only a deleted row, key 4 none: both absent.
		seven, set, n := int32(7), "set", "n"
		want := map[int32][]any{
			1: {int32(1), "a'b", "new", &set, []*int32{nil, &seven}, []string{"y", "z"}, uuid.MustParse(u1)},
			2: {int32(2), "z", "two", &n, []*int32{}, []string{}, uuid.MustParse(u2)},
		}
		if len(got) != len(want) {
			t.Fatalf("%d rows, want %d: %v", len(got), len(want), got)
		}
		for _, row := range got {
			w := want[row[0].(int32)]
			if !reflect.DeepEqual(row, w) {
				t.Errorf("row %v:\n got  %#v\n want %#v", row[0], row, w)
			}
		}

		// A UUID key binds as its text, which the server compares as a UUID.
		got, err = w.Latest(ctx, tab, writer.LatestQuery{Keys: []string{"u"}, Version: "_version", Cols: []string{"big"},
			Find: [][]any{{uuid.MustParse(u1)}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0][1] != "new" {
			t.Errorf("by UUID key: %v", got)
		}
	})
}
