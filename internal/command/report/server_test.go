package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConnectorQueryID(t *testing.T) {
	f := func(connector, qid string, want bool) {
		t.Helper()
		if got := ConnectorQueryID(connector, qid); got != want {
			t.Fatalf("ConnectorQueryID(%q, %q) = %v, want %v", connector, qid, got, want)
		}
	}
	f("events", "sink-events-1733350000000000000-17-1", true)
	f("events", "sink-events-1-2-3", true)
	f("a", "sink-a-b-1-2-3", false) // connector a-b's
	f("a-b", "sink-a-b-1-2-3", true)
	f("events", "sink-events-1-2", false)
	f("events", "sink-events-1-2-3-", false)
	f("events", "sink-events-x-2-3", false)
	f("events", "sink-other-1-2-3", false)
	f("events", "events-1-2-3", false)
	f("events", "", false)
}

// serverRows are a connector's INSERTs into three tables around a split:
// before it (minutes 0–1) every table gets an INSERT every few seconds;
// after it (minutes 3–4) one INSERT a minute goes to each, and table c
// gets one only in minute 4.
func serverRows() ([]TableInsert, []TablePart, time.Time) {
	var ins []TableInsert
	var parts []TablePart
	add := func(table string, min, sec int, rows uint64) {
		ins = append(ins, TableInsert{Insert: Insert{At: at(min, sec), Rows: rows, Bytes: rows * 100, DurationMS: 5}, Table: table})
		parts = append(parts, TablePart{Part: Part{At: at(min, sec), Rows: rows}, Table: table})
	}
	for min := 0; min < 2; min++ {
		for sec := 0; sec < 60; sec += 10 {
			add("db.a", min, sec, 10)
			add("db.b", min, sec+1, 4)
		}
		add("db.c", min, 30, 1)
	}
	add("db.a", 3, 5, 600)
	add("db.b", 3, 6, 240)
	add("db.a", 4, 5, 600)
	add("db.b", 4, 6, 240)
	add("db.c", 4, 7, 120)
	return ins, parts, at(2, 30)
}

func TestAggregateServer(t *testing.T) {
	ins, parts, split := serverRows()
	f := func(split *time.Time, partLog bool) {
		t.Helper()
		p := parts
		if !partLog {
			p = nil
		}
		v := AggregateServer("events", at(-1, 0), at(6, 0), ins, p, partLog, split)
		s := v.Summed
		if s.Total.Inserts != len(ins) {
			t.Fatalf("split %v: summed %d inserts, want %d", split != nil, s.Total.Inserts, len(ins))
		}
		// The tables add up to the server: counts exactly, rates to
		// rounding.
		var inserts, newParts int
		var rows uint64
		var ipm, ppm, before, after float64
		for _, tt := range v.Tables {
			inserts, rows, newParts = inserts+tt.Inserts, rows+tt.Rows, newParts+tt.NewParts
			ipm, ppm, before, after = ipm+tt.InsertsPerMin, ppm+tt.PartsPerMin, before+tt.InsertsPerMinBefore, after+tt.InsertsPerMinAfter
		}
		if inserts != s.Total.Inserts || rows != s.Total.Rows || newParts != s.Total.NewParts {
			t.Fatalf("split %v: tables sum to %d inserts, %d rows, %d parts; server %d, %d, %d", split != nil, inserts, rows, newParts, s.Total.Inserts, s.Total.Rows, s.Total.NewParts)
		}
		near := func(what string, got, want float64) {
			t.Helper()
			if math.Abs(got-want) > 1e-9 {
				t.Fatalf("split %v: tables' %s sum to %g, server %g", split != nil, what, got, want)
			}
		}
		near("inserts/min", ipm, s.Total.InsertsPerMin.Mean)
		if partLog {
			near("new parts/min", ppm, s.Total.PartsPerMin)
		}
		if split != nil {
			near("inserts/min before", before, s.Before.InsertsPerMin.Mean)
			near("inserts/min after", after, s.After.InsertsPerMin.Mean)
			// before: 13 INSERTs a minute, after: 2 then 3
			if s.Before.InsertsPerMin.Mean != 13 || s.After.InsertsPerMin.Mean != 2.5 {
				t.Fatalf("inserts/min before %g after %g, want 13 and 2.5", s.Before.InsertsPerMin.Mean, s.After.InsertsPerMin.Mean)
			}
		}
		// Most INSERTs first; a tie goes by name.
		if got := []string{v.Tables[0].Table, v.Tables[1].Table, v.Tables[2].Table}; strings.Join(got, ",") != "db.a,db.b,db.c" {
			t.Fatalf("tables in order %v", got)
		}
		if a := v.Tables[0]; a.Inserts != 14 || a.Rows != 1320 || a.RowsPerInsert != 1320.0/14 {
			t.Fatalf("db.a: %+v", a)
		}
	}
	f(&split, true)
	f(nil, true)
	f(&split, false)
	f(nil, false)

	empty := AggregateServer("events", at(-1, 0), at(6, 0), nil, nil, true, &split)
	if len(empty.Tables) != 0 || empty.Summed.Total.Inserts != 0 {
		t.Fatalf("no rows gave %+v", empty)
	}
}

// The text and the HTML report carry the per-server view beside the
// table's: the summed total, the summed before/after and a row per table,
// and every name in the HTML escaped.
func TestServerRender(t *testing.T) {
	ins, parts, split := serverRows()
	var tins []Insert
	var tparts []Part
	for i, in := range ins {
		if in.Table == "db.a" {
			tins, tparts = append(tins, in.Insert), append(tparts, parts[i].Part)
		}
	}
	r := Aggregate("db.a", at(-1, 0), at(6, 0), tins, tparts, true, &split)
	const evil = `<script>alert(1)</script>`
	v := AggregateServer(evil, at(-1, 0), at(6, 0), ins, parts, true, &split)
	r.Server = &v
	var b bytes.Buffer
	if err := r.Text(&b, time.UTC); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		"per server: every table connector " + evil + " writes",
		"total: 31 inserts, 1,970 rows, 63.5 rows/insert, 7.8 inserts/min over 4 minutes with inserts, 31 new parts, 3 tables, 7.8 new parts/min",
		"5.2x fewer", "55x more",
		"db.a", "db.b", "db.c",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	page := renderHTML(t, r, time.UTC, "127.0.0.1:9000")
	for _, want := range []string{`id="server-total"`, `id="server-summary"`, `<td>db.c</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") {
		t.Errorf("HTML holds the connector's name unescaped")
	}
}
