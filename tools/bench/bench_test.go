package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sink/config"
)

func TestParseStatCPU(t *testing.T) {
	f := func(stat string, want float64, wantErr bool) {
		t.Helper()
		got, err := parseStatCPU(stat)
		if (err != nil) != wantErr || (!wantErr && math.Abs(got-want) > 1e-9) {
			t.Fatalf("parseStatCPU(%q) = %v, %v; want %v (error %v)", stat, got, err, want, wantErr)
		}
	}
	// utime 250 ticks, stime 50 ticks: 3 s
	f("1234 (clickhouse-serv) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 40 0 123 456 789", 3.0, false)
	// a command name with spaces and parentheses does not shift the fields
	f("77 (a) b (c)) R 1 77 77 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 2 3", 0.1, false)
	f("no parenthesis here", 0, true)
	f("1 (x) S 1 2 3", 0, true)
	f("1 (x) S 1 1 1 0 -1 0 0 0 0 0 abc 1 0", 0, true)
}

func TestParseSystemCPU(t *testing.T) {
	f := func(stat string, busy, total float64, wantErr bool) {
		t.Helper()
		b, tot, err := parseSystemCPU(stat)
		if (err != nil) != wantErr || (!wantErr && (math.Abs(b-busy) > 1e-9 || math.Abs(tot-total) > 1e-9)) {
			t.Fatalf("parseSystemCPU(%q) = %v, %v, %v; want %v, %v (error %v)", stat, b, tot, err, busy, total, wantErr)
		}
	}
	// user nice system idle iowait irq softirq steal guest guest_nice
	f("cpu  100 0 50 800 50 0 0 0 30 0\ncpu0 1 2 3 4", 1.5, 10, false)
	f("cpu  100 0 50 800", 1.5, 9.5, false)
	f("cpu0 1 2 3 4 5", 0, 0, true)
	f("cpu 1 x 3 4 5", 0, 0, true)
}

func TestListeningInodes(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2328 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:2328 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5555 1 0000000000000000 100 0 0 10 0
`
	f := func(port int, want string) {
		t.Helper()
		if got := strings.Join(listeningInodes(table, port), ","); got != want {
			t.Fatalf("port %d: inodes %q, want %q", port, got, want)
		}
	}
	f(9000, "4242") // the established connection on 9000 (st 01) is not a listener
	f(9092, "5555")
	f(8123, "")
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
pkg: sink/internal/decode
BenchmarkAppend-2       	 1337800	      1033 ns/op	 185.83 MB/s	    967891 records/s	      55 B/op	       0 allocs/op
BenchmarkColumnData-2   	    1309	    844387 ns/op	  564049 B/op	   20009 allocs/op
PASS
pkg: sink/internal/batch
BenchmarkAdd/partitions=8/run=500-2       	185267078	         6.021 ns/op	29896.64 MB/s	 166093022 records/s	       0 B/op	       0 allocs/op
--- FAIL: BenchmarkBroken
ok  	sink/internal/batch	5.834s
`
	got := parseGoBench(out)
	f := func(i int, pkg, name string, ns, mbs, bytes, allocs, recs float64) {
		t.Helper()
		if i >= len(got) {
			t.Fatalf("only %d benchmarks parsed", len(got))
		}
		g := got[i]
		if g.Package != pkg || g.Name != name || g.NsPerOp != ns || g.MBPerSec != mbs || g.BytesPerOp != bytes || g.AllocsPerOp != allocs || g.Extra["records/s"] != recs {
			t.Fatalf("benchmark %d = %+v", i, g)
		}
	}
	f(0, "sink/internal/decode", "BenchmarkAppend", 1033, 185.83, 55, 0, 967891)
	f(1, "sink/internal/decode", "BenchmarkColumnData", 844387, 0, 564049, 20009, 0)
	f(2, "sink/internal/batch", "BenchmarkAdd/partitions=8/run=500", 6.021, 29896.64, 0, 0, 166093022)
	if len(got) != 3 {
		t.Fatalf("parsed %d benchmarks, want 3", len(got))
	}
}

func TestMedianGoBench(t *testing.T) {
	got := medianGoBench([]GoBench{
		{Package: "p", Name: "BenchmarkA", NsPerOp: 30}, {Package: "p", Name: "BenchmarkB", NsPerOp: 5},
		{Package: "p", Name: "BenchmarkA", NsPerOp: 10, Extra: map[string]float64{"ns/row": 1}},
		{Package: "p", Name: "BenchmarkA", NsPerOp: 20, Extra: map[string]float64{"ns/row": 2}},
	})
	if len(got) != 2 || got[0].Name != "BenchmarkA" || got[0].NsPerOp != 20 || got[0].Extra["ns/row"] != 2 ||
		got[0].Extra["ns/op min"] != 10 || got[0].Extra["ns/op max"] != 30 || got[1].NsPerOp != 5 {
		t.Fatalf("got %+v", got)
	}
}

func TestNum(t *testing.T) {
	f := func(v float64, want string) {
		t.Helper()
		if got := num(v); got != want {
			t.Fatalf("num(%v) = %q, want %q", v, got, want)
		}
	}
	f(0, "0")
	f(999, "999")
	f(1000, "1,000")
	f(1234567.4, "1,234,567")
	f(-20000, "-20,000")
	f(2.345, "2.35")
	f(math.NaN(), "—")
}

func TestPickMedians(t *testing.T) {
	r := func(key string, rps float64, status string) Result {
		return Result{Key: key, RowsPerSec: rps, Status: status}
	}
	got := pickMedians([]Result{
		r("sink", 300, "ok"), r("sink", 100, "ok"), r("sink", 200, "ok"),
		r("pipe", 50, "ok"), r("pipe", 70, "ok"),
		r("engine", 0, "could not run: x"), r("engine", 0, "could not run: y"),
		r("naive", 5, "failed: z"), r("naive", 9, "ok"),
	})
	f := func(i int, key string, rps float64, status string) {
		t.Helper()
		if got[i].Key != key || got[i].RowsPerSec != rps || got[i].Status != status {
			t.Fatalf("median %d = %+v, want %s %v %s", i, got[i], key, rps, status)
		}
	}
	f(0, "sink", 200, "ok")
	f(1, "pipe", 50, "ok") // even count: the lower middle
	f(2, "engine", 0, "could not run: x")
	f(3, "naive", 9, "ok") // failed runs are not candidates
}

func TestEvaluate(t *testing.T) {
	run := func(key string, rps, cpu, rss float64) Result {
		return Result{Key: key, Status: "ok", RowsPerSec: rps, ClientCPUUsPerRow: cpu, ClientMaxRSSMB: rss, BufferMemory: 256 << 20}
	}
	stats := summarizeRuns([]Result{
		run("sink", 500_000, 1.5, 300), run("kcat_pipe", 200_000, 2.0, 300), {Key: "kafka_engine", Status: "could not run: broker refused"},
		run("sink", 380_000, 1.9, 390), run("kcat_pipe", 210_000, 1.6, 300),
		run("sink", 450_000, 1.7, 350), run("kcat_pipe", 190_000, 1.8, 300),
	})
	ts := evaluate(stats)
	f := func(id string, met *bool, measured, why string) {
		t.Helper()
		for _, tg := range ts {
			if tg.ID == id {
				if (met == nil) != (tg.Met == nil) || (met != nil && *met != *tg.Met) || !strings.Contains(tg.Measured, measured) || !strings.Contains(tg.Explanation, why) {
					t.Fatalf("%s: met %v measured %q explanation %q; want %v, %q, %q", tg.Name, tg.Met, tg.Measured, tg.Explanation, met, measured, why)
				}
				return
			}
		}
		t.Fatalf("no target %q", id)
	}
	// CPU: medians 1.7 vs 1.8; the runs range 1.5/2.0 = 0.75 to 1.9/1.6 = 1.19.
	f("cpu", boolp(true), "0.94× (µs/row: sink 1.70 [1.50–1.90] vs kcat_pipe 1.80 [1.60–2.00]; ratio over the runs 0.75–1.19×)", "")
	// rows/s: medians 450,000 vs 200,000 = 2.25×.
	f("rows_pipe", boolp(true), "2.25×", "")
	f("rows_engine", nil, "—", "could not run: broker refused")
	// RSS: the highest run, 390 MiB, against 256 + 128.
	f("rss", boolp(false), "390 MiB, the highest of 3 runs (median 350; limit 384 MiB", "")

	// A miss whose runs straddle the threshold says so; --explain adds to it.
	stats = summarizeRuns([]Result{run("sink", 390_000, 1, 1), run("kcat_pipe", 200_000, 1, 1), run("sink", 410_000, 1, 1), run("kcat_pipe", 210_000, 1, 1)})
	ts = evaluate(stats)
	explain(ts, "26", map[string]string{"rows_pipe@26": "the server shares the core", "rows_pipe": "generic", "cpu": "not used: met"})
	f("rows_pipe", boolp(false), "1.95×", "within the noise: the runs' ratios span 1.86–2.05×, across the 2.0× threshold; the server shares the core")
	f("cpu", boolp(true), "1.00×", "")
}

func TestSpreadOf(t *testing.T) {
	f := func(xs []float64, want Spread) {
		t.Helper()
		if got := spreadOf(xs); got != want {
			t.Fatalf("spreadOf(%v) = %+v, want %+v", xs, got, want)
		}
	}
	f(nil, Spread{})
	f([]float64{3}, Spread{N: 1, Median: 3, Min: 3, Max: 3})
	f([]float64{5, 1, 3}, Spread{N: 3, Median: 3, Min: 1, Max: 5})
	f([]float64{4, 1, 2, 8}, Spread{N: 4, Median: 3, Min: 1, Max: 8})
}

// Runs interleave: every variant's run 1, then run 2, ...; the naive
// variant and a variant that does not run on the server once.
func TestRunOrder(t *testing.T) {
	var got []string
	for _, r := range runOrder([]string{"sink", "naive", "sink_http", "kcat_pipe"}, chServer{key: "18"}, 3) {
		got = append(got, fmt.Sprintf("%s%d", r.key, r.run))
	}
	want := "sink1 naive1 sink_http1 kcat_pipe1 sink2 kcat_pipe2 sink3 kcat_pipe3"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

func TestReadExplanations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "explain.txt")
	if err := os.WriteFile(path, []byte("# comment\n\ncpu@18: the Debian client is 18.16's\nrss: fetch buffers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readExplanations(path, false)
	if err != nil || got["cpu@18"] != "the Debian client is 18.16's" || got["rss"] != "fetch buffers" || len(got) != 2 {
		t.Fatalf("got %v, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("cpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readExplanations(path, false); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a line without a colon: err %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none.txt")
	if got, err := readExplanations(missing, true); err != nil || len(got) != 0 {
		t.Fatalf("a missing optional file: %v, %v", got, err)
	}
	if _, err := readExplanations(missing, false); err == nil {
		t.Fatal("a missing --explain file given by name was accepted")
	}
}

func TestSummarize(t *testing.T) {
	r := StageResult{ReplayedMinutes: 2, CHCPUSec: 0.5}
	r.summarize([]int64{30, 10, 20, 40})
	if r.Inserts != 4 || r.InsertsPerMin != 2 || r.RowsPerMin != 50 || r.RowsPerInsertMin != 10 ||
		r.RowsPerInsertMax != 40 || r.RowsPerInsertMedian != 25 || r.RowsPerInsertMean != 25 || r.CHCPUUsPerRow != 5000 {
		t.Fatalf("summarize = %+v", r)
	}
	empty := StageResult{ReplayedMinutes: 2}
	empty.summarize(nil)
	if empty.Inserts != 0 || empty.InsertsPerMin != 0 {
		t.Fatalf("summarize(nil) = %+v", empty)
	}
}

// The stage configs must be valid sink configs with the seed's arithmetic
// and time scaling applied.
func TestStageDefs(t *testing.T) {
	o := seed004Options{rate: 20_000, partitions: 12, minutes: 6, scale: 12}
	defs := o.stageDefs(200)
	f := func(key, fetchMin string, fetchWait, maxWait time.Duration, ignore bool) {
		t.Helper()
		for _, d := range defs {
			if d.key != key {
				continue
			}
			sc := sinkConf{name: "x", group: "g", topic: "t", table: "tbl", brokers: []string{"127.0.0.1:9092"},
				chAddrs: []string{"127.0.0.1:9000"}, kafka: d.kafka, batch: d.batch}
			cfg, err := sc.parse()
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			want, _ := config.ParseByteSize(fetchMin)
			if cfg.Kafka.FetchMinBytes != want || cfg.Kafka.FetchMaxWait != fetchWait || cfg.Batch.MaxWait != maxWait || cfg.Batch.IgnorePartitions != ignore {
				t.Fatalf("%s: fetch_min_bytes %v fetch_max_wait %v max_wait %v ignore_partitions %v", key,
					cfg.Kafka.FetchMinBytes, cfg.Kafka.FetchMaxWait, cfg.Batch.MaxWait, cfg.Batch.IgnorePartitions)
			}
			return
		}
		t.Fatalf("no stage %s", key)
	}
	// 1.2 × 200 B × 20,000/min = 4.8 MB; 72 s / 12 = 6 s; 500 ms / 12 ≈ 42 ms
	f("before", "1", 42*time.Millisecond, 42*time.Millisecond, false)
	f("fetch_tuned", "4800000", 6*time.Second, 42*time.Millisecond, false)
	f("cross_partition", "4800000", 6*time.Second, 42*time.Millisecond, true)
	f("sink_defaults", "1MiB", 42*time.Millisecond, 417*time.Millisecond, true)
}

func TestPerfCategories(t *testing.T) {
	report := `# Samples: 1K of event 'cpu-clock:ppp'
#
# Overhead  Shared Object      Symbol
    10.00%  sink               [.] runtime.memmove                 -      -
     8.00%  [kernel.kallsyms]  [k] exc_page_fault
     7.00%  sink               [.] runtime.scanObject
     6.00%  sink               [.] sink/internal/decode.(*Plan).Append
     3.00%  sink               [.] github.com/valyala/fastjson.(*cache).parseObject
     2.00%  sink               [.] sink/internal/jsonscan.(*Scanner).object
     4.00%  sink               [.] github.com/pierrec/lz4/v4/internal/lz4block.(*Compressor).CompressBlock
     3.00%  sink               [.] github.com/twmb/franz-go/pkg/kgo.readRawRecordsDirect
     2.00%  sink               [.] sink/internal/pipeline.(*Pipeline).handleRecord
     1.50%  sink               [.] runtime.findRunnable
     1.00%  sink               [.] gcWriteBarrier
     0.50%  libc.so.6          [.] memcpy
`
	got := strings.Join(perfCategories(report), "\n")
	want := strings.Join([]string{
		" 11.0%  decode: JSON → column buffers (internal/decode, internal/jsonscan, fastjson)",
		" 10.0%  copying bytes (runtime.memmove, memequal; callers not attributed)",
		"  8.0%  kernel (page faults of a growing heap, syscalls, scheduling)",
		"  8.0%  Go GC and allocation",
		"  4.0%  insert: clickhouse-go/ch-go column encoding, LZ4, CityHash",
		"  3.0%  fetch: franz-go, snappy (s2), CRC",
		"  2.0%  pipeline, batch, offsets, map lookups and hashing",
		"  1.5%  Go runtime: scheduler, channels, timers, syscalls",
		"  0.5%  other",
	}, "\n")
	if got != want {
		t.Fatalf("categories:\n%s\nwant:\n%s", got, want)
	}
	top := perfTop(report, 2)
	if len(top) != 2 || top[0] != "10.00% sink [.] runtime.memmove" || top[1] != "8.00% [kernel.kallsyms] [k] exc_page_fault" {
		t.Fatalf("perfTop = %q", top)
	}
}

func TestPprofTop(t *testing.T) {
	out := `File: bench
Type: inuse_space
Showing nodes accounting for 217.20MB, 98.66% of 220.15MB total
Dropped 35 nodes (cum <= 1.10MB)
      flat  flat%   sum%        cum   cum%
   86.75MB 39.40% 39.40%    86.75MB 39.40%  github.com/klauspost/compress/s2.Decode
   73.32MB 33.30% 72.71%    73.32MB 33.30%  github.com/twmb/franz-go/pkg/kgo.ensureLen
   50.01MB 22.71% 95.42%    50.01MB 22.71%  github.com/twmb/franz-go/pkg/kgo.(*brokerCxn).readSizeAndBody
`
	got := pprofTop(out, 2)
	if len(got) != 3 || !strings.HasPrefix(got[0], "Showing nodes accounting for 217.20MB") ||
		!strings.HasSuffix(got[1], "s2.Decode") || !strings.HasSuffix(got[2], "kgo.ensureLen") {
		t.Fatalf("pprofTop = %q", got)
	}
}

// The HTTP variant runs on 26.9 only; elsewhere its row says why.
func TestNotRunOn(t *testing.T) {
	f := func(key, server string, skipped bool) {
		t.Helper()
		if got := notRunOn(key, chServer{key: server}); (got != "") != skipped {
			t.Fatalf("notRunOn(%s, %s) = %q, want skipped %v", key, server, got, skipped)
		}
	}
	f("sink_http", "26", false)
	f("sink_http", "18", true)
	f("sink", "18", false)
	f("kafka_engine", "26", false)
}

// The results file has a section per server, and rows that did not run
// say so with their reason, on the right server.
func TestMarkdownPerServer(t *testing.T) {
	ok := Result{Key: "sink", Name: "sink (default config)", Status: "ok", Expected: 10, Rows: 10, WallSec: 1, RowsPerSec: 10, Inserts: 1}
	res := &Results{Date: "2026-01-01", Servers: []ServerResults{
		{Key: "18", Name: "ClickHouse 18.16.1", Native: "127.0.0.1:9000", HTTP: "http://127.0.0.1:8123/",
			Variants: []Result{ok, {Key: "sink_http", Name: "sink over HTTP", Status: "not run: no HTTP on 18.16"}},
			Stats:    summarizeRuns([]Result{ok, ok}),
			Targets:  []Target{{ID: "rss", Name: "sink peak RSS", Measured: "400 MiB", Met: boolp(false), Explanation: "fetch buffers"}}},
		{Key: "26", Name: "ClickHouse 26.9.2.1", Native: "127.0.0.1:19000", HTTP: "http://127.0.0.1:18123/",
			Variants: []Result{ok, {Key: "kafka_engine", Name: "Kafka engine", Status: "could not run: Code: 49. Shutdown was called"}}},
		{Key: "27", Name: "ClickHouse 27", Error: "not reachable"},
	}}
	md := res.markdown()
	i18, i26 := strings.Index(md, "### ClickHouse 18.16.1"), strings.Index(md, "### ClickHouse 26.9.2.1")
	if i18 < 0 || i26 < i18 {
		t.Fatalf("want a section for 18.16.1, then 26.9.2.1:\n%s", md)
	}
	for _, want := range []string{
		"| sink over HTTP | not run: no HTTP on 18.16 |",
		"| Kafka engine | could not run: Code: 49. Shutdown was called |",
		"Not measured: not reachable",
		"native 127.0.0.1:19000, HTTP http://127.0.0.1:18123",
		"| sink (default config) | 2 of 2 | 10 [10–10] | 0.00 [0.00–0.00] |",
		"| target | measured | PASS/MISS | explanation of a miss |",
		"| sink peak RSS | 400 MiB | **MISS** | fetch buffers |",
	} {
		if !strings.Contains(md, want) {
			t.Fatalf("missing %q in:\n%s", want, md)
		}
	}
	if strings.Index(md, "not run: no HTTP") > i26 || strings.Index(md, "Shutdown was called") < i26 {
		t.Fatalf("a row is under the wrong server:\n%s", md)
	}
}
