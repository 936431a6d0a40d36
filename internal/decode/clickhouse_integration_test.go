//go:build integration

package decode

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/testenv"
)

// TestClickHouseInsert inserts, on each server, one block covering every type
// of the 18.16 server through clickhouse-go v2's native batch, exactly as the
// writer does, and reads the rows back.
func TestClickHouseInsert(t *testing.T) {
	testenv.EachServer(t, testClickHouseInsert)
}

func testClickHouseInsert(t *testing.T, s testenv.Server) {
	conn := s.Conn(t)
	db := s.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := conn.Exec(ctx, fmt.Sprintf(chTable, db)); err != nil {
		t.Fatalf("create table: %v", err)
	}

	// The schema as the writer sees it: system.columns.
	rows, err := conn.Query(ctx, "SELECT name, type, default_kind FROM system.columns WHERE database = ? AND table = 't'", db)
	if err != nil {
		t.Fatal(err)
	}
	var table []chschema.ColumnSchema
	for rows.Next() {
		var c chschema.ColumnSchema
		if err := rows.Scan(&c.Name, &c.Type, &c.DefaultKind); err != nil {
			t.Fatal(err)
		}
		table = append(table, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()

	mapping := map[string]string{"def": "def"}
	cols := InsertColumns(table, mapping)
	p, err := Compile("json", cols, mapping)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	ts := time.Date(2024, 5, 17, 12, 0, 0, 0, time.UTC)
	for i, v := range chRecords {
		rec := &kgo.Record{Topic: "events", Partition: int32(i), Offset: int64(1000 + i), Timestamp: ts.Add(time.Duration(i) * time.Second), Value: []byte(v)}
		if i == 0 {
			rec.Key = []byte("key-1")
		}
		if err := p.Append(blk, rec); err != nil {
			t.Fatal(err)
		}
	}

	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = "`" + c.Name + "`"
	}
	batch, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.t (%s)", db, strings.Join(names, ", ")))
	if err != nil {
		t.Fatalf("prepare batch: %v", err)
	}
	defer batch.Close()
	for i, c := range cols {
		if err := batch.Column(i).Append(blk.ColumnData(i)); err != nil {
			t.Fatalf("column %s (%s): append %T: %v", c.Name, c.Type, blk.ColumnData(i), err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("send: %v", err)
	}

	// Read every inserted column back and compare with what the block held.
	rows, err = conn.Query(ctx, fmt.Sprintf("SELECT %s FROM %s.t ORDER BY id", strings.Join(names, ", "), db))
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	types := rows.ColumnTypes()
	n := 0
	for ; rows.Next(); n++ {
		dest := make([]any, len(types))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatalf("scan: %v", err)
		}
		for i, c := range cols {
			ct := chtype.Parse(c.Type)
			want := normSorted(ct, reflect.ValueOf(blk.ColumnData(i)).Index(n).Interface())
			got := normRead(ct, reflect.ValueOf(dest[i]).Elem().Interface())
			if fw, ok := want.(float64); ok && fw != fw { // NaN
				if fg, ok := got.(float64); ok && fg != fg {
					continue
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("row %d column %s (%s): read %#v, inserted %#v", n, c.Name, c.Type, got, want)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if n != len(chRecords) {
		t.Fatalf("read %d rows, want %d", n, len(chRecords))
	}

	// Spot checks against the server's own text rendering, independent of
	// both this package and clickhouse-go's decoding.
	spot := func(expr string, want ...string) {
		t.Helper()
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT toString(%s) FROM %s.t ORDER BY id", expr, db))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %q, want %q", expr, got, want)
		}
	}
	// The servers render some values differently: 18.16 keeps a Decimal's
	// trailing zeros and prints the epoch as zeros, 26.9 does neither.
	zeroD18, oneAndHalfD18, epochMoscow, epochDate := "0.0000", "1.5000", "0000-00-00 00:00:00", "0000-00-00"
	if s.AtLeast(19, 0) {
		zeroD18, oneAndHalfD18, epochMoscow, epochDate = "0", "1.5", "1970-01-01 03:00:00", "1970-01-01"
	}
	spot("d18", "99999999999999.9999", zeroD18, zeroD18)
	// (18.16's toString garbles wide Decimal128 values, so compare on the server side.)
	spot("d38 = toDecimal128('-1234567890123456789012345678.0123456789', 10)", "1", "0", "0")
	spot("dtz", "2024-05-17 15:34:56", epochMoscow, "2024-05-17 15:34:56")
	spot("toUnixTimestamp(dt)", "1715949296", "0", "1715949296")
	spot("d", "2024-05-17", epochDate, "2024-05-17")
	spot("hex(fs)", "61620000", "00000000", "00000000")
	spot("e8", "c, d = e", "c, d = e", "b") // the default of an Enum is its smallest value
	spot("u64", "18446744073709551615", "0", "0")
	spot("ifNull(lcn, 'NULL')", "ios", "NULL", "NULL")
	spot("ifNull(toString(n_d), 'NULL')", oneAndHalfD18, "NULL", "NULL")
	spot("ifNull(toString(n_dt), 'NULL')", "2024-05-17 12:34:56", "NULL", "NULL")
	spot("_topic", "events", "events", "events")
	spot("_offset", "1000", "1001", "1002")
	spot("_partition", "0", "1", "2")
	spot("toUnixTimestamp(_timestamp)", "1715947200", "1715947201", "1715947202")
	spot("_key", "key-1", "", "")
	spot("def", "given", "", "")
	spot("mat", "HéLLO \"WORLD\"\n", "", "") // upper() is ASCII-only
}
