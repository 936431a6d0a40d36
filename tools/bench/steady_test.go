package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestHistQuantile(t *testing.T) {
	// Rows 1, 2, 3, 4 ms, given out of order and one bucket per value.
	h := []latBucket{{4, 1}, {2, 1}, {1, 1}, {3, 1}}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.25, 1}, {0.5, 2}, {0.51, 3}, {0.75, 3}, {0.99, 4}, {1, 4}} {
		if got := histQuantile(h, c.q); got != c.want {
			t.Errorf("q %g = %g, want %g", c.q, got, c.want)
		}
	}
	// 990 rows at 100 ms and 10 at 5000 ms: p99 is the last of the 100s,
	// p99.1 the first of the slow ones.
	h = []latBucket{{5000, 10}, {100, 990}}
	if got := histQuantile(h, 0.99); got != 100 {
		t.Errorf("p99 = %g, want 100", got)
	}
	if got := histQuantile(h, 0.991); got != 5000 {
		t.Errorf("p99.1 = %g, want 5000", got)
	}
	if got := histQuantile(h, 0.5); got != 100 {
		t.Errorf("p50 = %g, want 100", got)
	}
	if got := histQuantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("empty = %g, want NaN", got)
	}
	// Negative latencies (a clock step) sort first, they are not lost.
	if got := histQuantile([]latBucket{{-5, 1}, {10, 1}}, 0.5); got != -5 {
		t.Errorf("with a negative = %g, want -5", got)
	}
}

func TestSteadySummarize(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	raw := steadyRaw{
		produced:     300_000,
		produceStart: t0,
		produceEnd:   t0.Add(60 * time.Second),  // 5,000 rows/s offered
		landed:       t0.Add(120 * time.Second), // two minutes of window, 60 s drain
		rows:         300_000,
		cpuBefore:    10, cpuAfter: 13, // 3 CPU-s over 300,000 rows: 10 µs/row; 3/120 cores
		rss:        []int64{30 << 20, 40 << 20, 35 << 20},
		insertRows: []int64{100_000, 50_000, 150_000, 0},
		hist:       []latBucket{{1000, 150_000}, {2000, 147_000}, {9000, 3_000}},
		chBefore:   100, chAfter: 106, // 20 µs/row
		sysBefore: 1000, sysAfter: 1021, // 21 busy: 6 ClickHouse + 3 sink + 12 others over 120 s
	}
	var l SteadyLevel
	raw.summarize(&l)
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	check("offered", l.OfferedRowsPerSec, 5000)
	check("produce s", l.ProduceSec, 60)
	check("window s", l.WindowSec, 120)
	check("drain s", l.DrainSec, 60)
	check("client CPU s", l.ClientCPUSec, 3)
	check("µs/row", l.ClientCPUUsPerRow, 10)
	check("cores", l.ClientCores, 0.025)
	check("ClickHouse µs/row", l.CHCPUUsPerRow, 20)
	check("other cores", l.OtherCPUCores, 0.1)
	check("inserts/min", l.InsertsPerMin, 2) // 4 INSERTs in 2 minutes
	check("rows/insert median", l.RowsPerInsertMed, 75_000)
	check("RSS median", l.RSSMedianMiB, 35)
	check("RSS max", l.RSSMaxMiB, 40)
	check("p50", l.LatencyP50Ms, 1000)
	check("p99", l.LatencyP99Ms, 2000)
	check("max", l.LatencyMaxMs, 9000)
	if l.Inserts != 4 || l.RSSSamples != 3 || l.LatencyRows != 300_000 {
		t.Errorf("inserts %d, rss samples %d, latency rows %d", l.Inserts, l.RSSSamples, l.LatencyRows)
	}

	// Nothing landed: no division by zero, no NaN (JSON cannot hold it).
	var empty SteadyLevel
	steadyRaw{produceStart: t0, produceEnd: t0, landed: t0}.summarize(&empty)
	if empty.ClientCPUUsPerRow != 0 || empty.InsertsPerMin != 0 || empty.LatencyP50Ms != 0 || math.IsNaN(empty.LatencyP99Ms) {
		t.Errorf("empty level: %+v", empty)
	}
}

func TestParseHistAndRSS(t *testing.T) {
	h, err := parseHist("1500\t3\n-20\t1\n")
	if err != nil || len(h) != 2 || h[0] != (latBucket{1500, 3}) || h[1] != (latBucket{-20, 1}) {
		t.Errorf("parseHist = %v, %v", h, err)
	}
	if h, err := parseHist(""); err != nil || len(h) != 0 {
		t.Errorf("empty answer = %v, %v", h, err)
	}
	if _, err := parseHist("x\t1"); err == nil {
		t.Error("a bad line parsed")
	}
	n, err := parseVmRSS(strings.NewReader("Name:\tsink\nVmPeak:\t  900 kB\nVmRSS:\t   34816 kB\nThreads:\t9\n"))
	if err != nil || n != 34816<<10 {
		t.Errorf("parseVmRSS = %d, %v", n, err)
	}
	if _, err := parseVmRSS(strings.NewReader("Name:\tsink\n")); err == nil {
		t.Error("no VmRSS parsed")
	}
}

func TestParseLevelsAndBacklogRate(t *testing.T) {
	l, err := parseLevels("0.5, 0.9")
	if err != nil || len(l) != 2 || l[0] != 0.5 || l[1] != 0.9 {
		t.Errorf("parseLevels = %v, %v", l, err)
	}
	for _, bad := range []string{"", "0", "1.5", "half", "0.5,-1"} {
		if _, err := parseLevels(bad); err == nil {
			t.Errorf("parseLevels(%q) passed", bad)
		}
	}
	runs := []Result{
		{Key: "sink", Status: "ok", RowsPerSec: 500_000},
		{Key: "kcat_pipe", Status: "ok", RowsPerSec: 900_000},
		{Key: "sink", Status: "failed: x", RowsPerSec: 1},
		{Key: "sink", Status: "ok", RowsPerSec: 300_000},
		{Key: "sink", Status: "ok", RowsPerSec: 600_000},
	}
	med, all := backlogRate(runs)
	if med != 500_000 || len(all) != 3 {
		t.Errorf("backlogRate = %g %v, want the median of the sink's successful runs", med, all)
	}
	if med, _ := backlogRate(runs[1:3]); med != 0 {
		t.Errorf("no successful sink run: %g", med)
	}
}

func TestParseRatesAndLevelName(t *testing.T) {
	r, err := parseRates("40000, 2.5e5")
	if err != nil || len(r) != 2 || r[0] != 40000 || r[1] != 250000 {
		t.Errorf("parseRates = %v, %v", r, err)
	}
	if r, err := parseRates(""); err != nil || r != nil {
		t.Errorf("parseRates(\"\") = %v, %v, want none", r, err)
	}
	for _, bad := range []string{"0", "0.5", "-10", "fast", "1e400", "NaN", "100,x"} {
		if _, err := parseRates(bad); err == nil {
			t.Errorf("parseRates(%q) passed", bad)
		}
	}
	for frac, want := range map[float64]string{0: "fixed", 0.5: "50%", 0.9: "90%", 1: "100%"} {
		if got := levelName(frac); got != want {
			t.Errorf("levelName(%g) = %q, want %q", frac, got, want)
		}
	}
}
