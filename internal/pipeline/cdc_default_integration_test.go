//go:build integration

package pipeline_test

import (
	"os"
	"path/filepath"
	"testing"

	"sink/internal/testenv"
)

// Real Debezium 3.6.1 events from PostgreSQL 15 into a table whose tier
// column mirrors the source's DEFAULT 7: the insert of row 3 from before
// ALTER TABLE … ADD COLUMN tier integer NOT NULL DEFAULT 7 has no tier and
// reads 7; the events after it carry tier (7 for rows 3 and 4, 9 for row
// 5) and their values are inserted, 9 included.
func TestDebeziumIntoDefaultColumn(t *testing.T) {
	var values [][]byte
	for _, f := range []string{"insert_row3", "add_column_update_row3", "add_column_insert_row4", "add_column_insert_row5"} {
		b, err := os.ReadFile(filepath.Join("..", "decode", "testdata", "debezium", "pg15_dbz361_"+f+".json"))
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, b)
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id Int32, tier Int32 DEFAULT 7, c_int4 Int32, _version UInt64, _deleted UInt8")
		cfg := evolveConfigFormat(t, s, topic, db, "debezium-json", "")
		done, stop := startPipeline(t, cfg)
		sendBytes(t, done, cfg, topic, int64(len(values)), values...)
		expectCount(t, ch, "SELECT count() FROM "+db+".t", 4, "%d rows; want 4")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE (id, tier) IN ((3, 7), (4, 7), (5, 9))", 4,
			"%d of the 4 rows read tier 7, 7, 7 and 9; want 4")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id = 5 AND tier = 9", 1, "%d rows of id 5 read the tier sent, 9; want 1")
		stopClean(t, done, stop)
	})
}
