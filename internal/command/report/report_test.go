package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestInsertTarget(t *testing.T) {
	f := func(q, wantDB, wantTable string, wantOK bool) {
		t.Helper()
		db, table, ok := InsertTarget(q)
		if db != wantDB || table != wantTable || ok != wantOK {
			t.Fatalf("InsertTarget(%q) = %q, %q, %v; want %q, %q, %v", q, db, table, ok, wantDB, wantTable, wantOK)
		}
	}
	// what the sink writes (clickhouse-go native)
	f("INSERT INTO `default`.`demo_events` (`id`, `ts`) VALUES", "default", "demo_events", true)
	// other tools
	f("INSERT INTO default.demo_events FORMAT JSONEachRow", "default", "demo_events", true)
	f("insert into demo_events values (1)", "", "demo_events", true)
	f("INSERT INTO demo_events(id) VALUES", "", "demo_events", true)
	f("  \n\t-- load\n/* batch 7 */ INSERT /* x */ INTO db . t SELECT 1", "db", "t", true)
	f(`INSERT INTO "my db"."my""table" VALUES`, "my db", `my"table`, true)
	f("INSERT INTO `we\\`ird`.`t` VALUES", "we`ird", "t", true)
	f("INSERT INTO TABLE db.t VALUES", "db", "t", true)
	f("INSERT INTO table VALUES", "", "table", true) // a table named table
	f("INSERT INTO table (a) VALUES", "", "table", true)
	f("INSERT INTO t_2 SETTINGS async_insert=1 VALUES", "", "t_2", true)
	// not an insert into a table
	f("INSERT INTO FUNCTION remote('h', db.t) VALUES", "", "", false)
	f("SELECT * FROM db.t WHERE q = 'INSERT INTO db.t'", "", "", false)
	f("INSERTINTO db.t", "", "", false)
	f("INSERT INTO VALUES", "", "", false)
	f("INSERT INTO `unterminated", "", "", false)
	f("INSERT INTO db.", "", "", false)
	f("", "", "", false)
}

func TestTargetMatches(t *testing.T) {
	tg := Target{Database: "shop", Table: "events", DefaultDatabase: "default"}
	f := func(q string, want bool) {
		t.Helper()
		if got := tg.Matches(q); got != want {
			t.Fatalf("Matches(%q) = %v, want %v", q, got, want)
		}
	}
	f("INSERT INTO `shop`.`events` (`a`) VALUES", true)
	f("INSERT INTO shop.events VALUES", true)
	f("INSERT INTO events VALUES", false) // unqualified: the default database, not shop
	f("INSERT INTO shop.events_v2 VALUES", false)
	f("INSERT INTO other.events VALUES", false)
	f("INSERT INTO SHOP.EVENTS VALUES", false) // identifiers are case-sensitive
	tg.DefaultDatabase = "shop"
	f("INSERT INTO events VALUES", true)
}

// MatchesLogged gets only INSERTs whose query_log tables hold shop.events.
func TestTargetMatchesLogged(t *testing.T) {
	tg := Target{Database: "shop", Table: "events", DefaultDatabase: "default"}
	f := func(n int, currentDB, q string, want bool) {
		t.Helper()
		if got := tg.MatchesLogged(n, currentDB, q); got != want {
			t.Fatalf("MatchesLogged(%d, %q, %q) = %v, want %v", n, currentDB, q, got, want)
		}
	}
	// Only table touched: the target, whatever the text says or hides.
	f(1, "", "", true)
	f(1, "", "INSERT INTO events FORMAT JSONEachRow", true)
	// INSERT … SELECT: the text's target, with the logged current database.
	f(2, "shop", "INSERT INTO events SELECT * FROM staging.events", true)
	f(2, "default", "INSERT INTO shop.events SELECT * FROM default.src", true)
	f(2, "default", "INSERT INTO events SELECT * FROM shop.events", false) // reads shop.events, writes default.events
	f(2, "shop", "INSERT INTO archive SELECT * FROM events", false)        // reads shop.events
	f(3, "x", "/* etl */ insert into `shop`.`events` SELECT a.* FROM a JOIN b USING id", true)
	f(2, "shop", "", false) // no text: cannot tell, not counted
}

func TestPercentile(t *testing.T) {
	f := func(vs []uint64, p float64, want uint64) {
		t.Helper()
		if got := Percentile(append([]uint64(nil), vs...), p); got != want {
			t.Fatalf("Percentile(%v, %v) = %d, want %d", vs, p, got, want)
		}
	}
	f(nil, 50, 0)
	f([]uint64{7}, 50, 7)
	f([]uint64{7}, 99, 7)
	f([]uint64{4, 1, 3, 2}, 50, 2)    // rank ceil(0.5*4) = 2
	f([]uint64{4, 1, 3, 2}, 99, 4)    // rank ceil(3.96) = 4
	f([]uint64{5, 1, 4, 2, 3}, 50, 3) // rank ceil(2.5) = 3
	hundred := make([]uint64, 100)
	for i := range hundred {
		hundred[i] = uint64(100 - i) // 100..1
	}
	f(hundred, 50, 50)
	f(hundred, 99, 99)
	f(hundred, 100, 100)
}

var t0 = time.Date(2025, 4, 18, 16, 7, 0, 0, time.UTC) // 19:07 in Moscow

func at(min, sec int) time.Time {
	return t0.Add(time.Duration(min)*time.Minute + time.Duration(sec)*time.Second)
}

// seed004 builds hand-made log rows shaped like a typical before/after: in
// minutes 0..2, many tiny inserts; minute 3 holds the split; minutes 5 and 6
// one big insert each (minute 4 is empty).
func seed004() ([]Insert, []Part, time.Time) {
	var ins []Insert
	var parts []Part
	add := func(min, sec int, rows, ms uint64) {
		ins = append(ins, Insert{At: at(min, sec), Rows: rows, Bytes: rows * 100, DurationMS: ms})
		parts = append(parts, Part{At: at(min, sec), Rows: rows})
	}
	// minute 0: 4 inserts of 4, 10, 21, 5 rows
	add(0, 1, 4, 2)
	add(0, 15, 10, 3)
	add(0, 30, 21, 9)
	add(0, 59, 5, 1)
	// minute 1: 2 inserts
	add(1, 0, 8, 2)
	add(1, 40, 12, 4)
	// minute 2: 3 inserts
	add(2, 5, 6, 1)
	add(2, 6, 6, 1)
	add(2, 7, 6, 5)
	// minute 3: mixed, one small and one big
	add(3, 10, 7, 1)
	add(3, 50, 20_000, 300)
	// minute 5 and 6: one big insert each
	add(5, 20, 20_100, 310)
	add(6, 20, 23_500, 420)
	return ins, parts, at(3, 30)
}

func TestAggregate(t *testing.T) {
	ins, parts, split := seed004()
	r := Aggregate("db.t", at(-10, 0), at(20, 0), ins, parts, true, &split)

	type row struct {
		start           time.Time
		inserts         int
		rows            uint64
		p50, p99, parts uint64
		side            string
	}
	want := []row{
		{at(0, 0), 4, 40, 2, 9, 4, "before"},
		{at(1, 0), 2, 20, 2, 4, 2, "before"},
		{at(2, 0), 3, 18, 1, 5, 3, "before"},
		{at(3, 0), 2, 20_007, 1, 300, 2, "mixed"},
		{at(4, 0), 0, 0, 0, 0, 0, "after"},
		{at(5, 0), 1, 20_100, 310, 310, 1, "after"},
		{at(6, 0), 1, 23_500, 420, 420, 1, "after"},
	}
	if len(r.Minutes) != len(want) {
		t.Fatalf("%d minutes, want %d: %+v", len(r.Minutes), len(want), r.Minutes)
	}
	for i, w := range want {
		m := r.Minutes[i]
		if !m.Start.Equal(w.start) || m.Inserts != w.inserts || m.Rows != w.rows || m.P50MS != w.p50 ||
			m.P99MS != w.p99 || uint64(m.NewParts) != w.parts || m.Side != w.side || m.Bytes != w.rows*100 {
			t.Fatalf("minute %d = %+v, want %+v", i, m, w)
		}
		if w.inserts > 0 && m.RowsPerInsert != float64(w.rows)/float64(w.inserts) {
			t.Fatalf("minute %d rows/insert %v", i, m.RowsPerInsert)
		}
	}

	b, a, c := r.Before, r.After, r.Change
	// before: minutes 0-2: 9 inserts, 78 rows over 3 minutes
	if b.Minutes != 3 || b.Inserts != 9 || b.Rows != 78 || b.NewParts != 9 ||
		b.InsertsPerMin != (Spread{Min: 2, Max: 4, Mean: 3}) ||
		b.RowsPerInsert != (Spread{Min: 6, Max: 10, Mean: 78.0 / 9}) ||
		b.RowsPerMin != (Spread{Min: 18, Max: 40, Mean: 26}) ||
		b.P50MS != 2 || b.P99MS != 9 || !b.From.Equal(at(0, 0)) || !b.To.Equal(at(3, 0)) {
		t.Fatalf("before = %+v", *b)
	}
	// after: minutes 4-6, two of them with inserts
	if a.Minutes != 2 || a.Inserts != 2 || a.Rows != 43_600 || a.NewParts != 2 ||
		a.InsertsPerMin != (Spread{Min: 1, Max: 1, Mean: 1}) ||
		a.RowsPerInsert != (Spread{Min: 20_100, Max: 23_500, Mean: 21_800}) ||
		a.P50MS != 310 || a.P99MS != 420 || !a.From.Equal(at(4, 0)) || !a.To.Equal(at(7, 0)) {
		t.Fatalf("after = %+v", *a)
	}
	// float64 variables, not constants: Go folds constant expressions
	// exactly, the code divides float64s.
	beforeRPI, afterRPI, beforeRPM, afterRPM := float64(78)/9, float64(21_800), float64(26), float64(21_800)
	if c.InsertsPerMin != float64(1)/3 || c.RowsPerInsert != afterRPI/beforeRPI || c.RowsPerMin != afterRPM/beforeRPM || c.PartsPerMin != float64(1)/3 {
		t.Fatalf("change = %+v", *c)
	}
	if r.Total.Inserts != 13 || r.Total.Rows != 78+20_007+43_600 || r.Total.Minutes != 6 {
		t.Fatalf("total = %+v", r.Total)
	}

	// A split on a minute boundary leaves no minute out.
	split = at(4, 0)
	r = Aggregate("db.t", at(-10, 0), at(20, 0), ins, parts, true, &split)
	if r.Before.Minutes != 4 || r.After.Minutes != 2 || r.Minutes[3].Side != "before" || r.Minutes[4].Side != "after" {
		t.Fatalf("split on a boundary: before %+v after %+v", *r.Before, *r.After)
	}
	// No rows: an empty report, not a crash.
	r = Aggregate("db.t", at(0, 0), at(1, 0), nil, nil, true, &split)
	if len(r.Minutes) != 0 || r.Before.Minutes != 0 || r.Change.InsertsPerMin != 0 {
		t.Fatalf("empty report = %+v", r)
	}
}

// parseTimeCases are ParseTime's table, read at parseTimeNow in
// parseTimeLoc; badTimes are refused. FuzzParseTime starts from both.
var (
	parseTimeLoc   = time.FixedZone("MSK", 3*3600)
	parseTimeNow   = time.Date(2025, 4, 18, 16, 30, 0, 0, time.UTC) // 19:30 MSK
	parseTimeCases = []struct {
		in   string
		want time.Time
	}{
		{"now", parseTimeNow},
		{"2h", parseTimeNow.Add(-2 * time.Hour)},
		{"90m", parseTimeNow.Add(-90 * time.Minute)},
		{"1745000000", time.Unix(1745000000, 0)},
		{"2025-04-18T19:11:00+03:00", time.Date(2025, 4, 18, 16, 11, 0, 0, time.UTC)},
		{"2025-04-18 19:11", time.Date(2025, 4, 18, 16, 11, 0, 0, time.UTC)},
		{"2025-04-18 19:11:30", time.Date(2025, 4, 18, 16, 11, 30, 0, time.UTC)},
		{"19:11", time.Date(2025, 4, 18, 16, 11, 0, 0, time.UTC)},
		{"19:11:05", time.Date(2025, 4, 18, 16, 11, 5, 0, time.UTC)},
	}
	badTimes = []string{"", "0", "yesterday", "-2h", "25:00", "2025-13-01"}
)

func TestParseTime(t *testing.T) {
	for _, c := range parseTimeCases {
		got, err := ParseTime(c.in, parseTimeNow, parseTimeLoc)
		if err != nil || !got.Equal(c.want) {
			t.Fatalf("ParseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range badTimes {
		if _, err := ParseTime(bad, parseTimeNow, parseTimeLoc); err == nil {
			t.Fatalf("ParseTime(%q) accepted", bad)
		}
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/command/report -run Golden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the output (go test ./internal/command/report -run Golden -update rewrites it); got:\n%s", path, got)
	}
}

func TestGolden(t *testing.T) {
	ins, parts, split := seed004()
	loc := time.FixedZone("MSK", 3*3600)
	r := Aggregate("shop.events", at(-1, 0), at(8, 0), ins, parts, true, &split)
	render := func(fn func(*bytes.Buffer) error) []byte {
		t.Helper()
		var b bytes.Buffer
		if err := fn(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	golden(t, "split.txt", render(func(b *bytes.Buffer) error { return r.Text(b, loc) }))
	golden(t, "split.svg", render(func(b *bytes.Buffer) error { return r.SVG(b, loc) }))
	golden(t, "split.csv", render(func(b *bytes.Buffer) error { return r.CSV(b, loc) }))

	// Without a split and without part_log: no side column, "-" for parts,
	// and the note from the reader.
	r2 := Aggregate("shop.events", at(-1, 0), at(8, 0), ins, nil, false, nil)
	r2.Notes = append(r2.Notes, "system.part_log does not exist on this server")
	golden(t, "nosplit.txt", render(func(b *bytes.Buffer) error { return r2.Text(b, loc) }))

	// JSON round-trips.
	var back Report
	if err := json.Unmarshal(render(func(b *bytes.Buffer) error { return r.JSON(b) }), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Minutes) != len(r.Minutes) || back.After.Rows != r.After.Rows || !back.Split.Equal(*r.Split) {
		t.Fatalf("JSON round trip lost data: %+v", back)
	}
	svg := string(render(func(b *bytes.Buffer) error { return r.SVG(b, loc) }))
	if !strings.Contains(svg, "split 19:10:30") || strings.Count(svg, "<rect x=") != 2+6 {
		// 2 panel frames + one bar per minute with inserts
		t.Fatalf("SVG lacks the split or has the wrong number of bars")
	}
}
