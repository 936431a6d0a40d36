package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// profileSink runs the sink's default variant once more, untimed, with
// perf sampling the process, and returns its hottest functions. perf sees
// the real binary as it runs (Go keeps frame pointers and symbols), the
// franz-go and clickhouse-go goroutines and the kernel time included.
func (b *bench) profileSink(ctx context.Context) *Profile {
	data := filepath.Join(b.opt.work, "sink.perf.data")
	p := &Profile{}
	if _, err := exec.LookPath("perf"); err != nil {
		p.Error = "perf is not installed (apt-get install linux-perf)"
		return p
	}
	var rec *child
	var recErr error
	attach := func(pid int) func() {
		rec, recErr = start("perf", []string{"record", "-F", "999", "-p", fmt.Sprint(pid), "-o", data},
			filepath.Join(b.opt.work, "perf-record.log"), nil)
		return func() {
			if rec != nil {
				_ = rec.cmd.Process.Signal(syscall.SIGINT)
				_ = rec.wait(30 * time.Second)
			}
		}
	}
	r := Result{Key: "sink", Name: "sink (profiled, not timed)", Run: 0, Expected: int64(b.opt.count), Inserts: -1, Status: "ok"}
	table := "sink_profiled"
	r.Table = benchDB + "." + table
	if err := b.createTable(ctx, table); err != nil {
		p.Error = err.Error()
		return p
	}
	b.quiesce()
	logf("profiling one more sink run with perf")
	r = b.runSink(ctx, r, table, nil, attach)
	if recErr != nil {
		p.Error = "perf record: " + recErr.Error()
		return p
	}
	if !r.ok() {
		p.Error = r.Status
		return p
	}
	args := []string{"report", "-i", data, "--stdio", "--no-children", "--sort", "dso,symbol"}
	p.Command = fmt.Sprintf("perf record -F 999 -p <sink pid> during a %s-record run of the default config (%.2f s, %.2f CPU-s); perf %s",
		num(float64(r.Expected)), r.WallSec, r.ClientCPUSec, strings.Join(args, " "))
	out, err := exec.CommandContext(ctx, "perf", args...).Output()
	if err != nil {
		p.Error = "perf report: " + err.Error()
		return p
	}
	p.Categories = perfCategories(string(out))
	p.Top = perfTop(string(out), 25)
	return p
}

// perfCategory groups symbols by the part of the sink they belong to; the
// first matching rule wins.
var perfCategories = func() func(string) []string {
	type rule struct {
		name  string
		match func(dso, sym string) bool
	}
	has := func(sym string, parts ...string) bool {
		for _, p := range parts {
			if strings.Contains(sym, p) {
				return true
			}
		}
		return false
	}
	rules := []rule{
		{"kernel (page faults of a growing heap, syscalls, scheduling)", func(dso, _ string) bool { return strings.HasPrefix(dso, "[kernel") }},
		{"Go GC and allocation", func(_, s string) bool {
			return s == "gcWriteBarrier" || strings.HasPrefix(s, "runtime.") && has(s, "scanObject", "findObject", "greyobject", "tryDeferToSpanScan",
				"typePointers", "gcDrain", "gcmark", "markBits", "mallocgc", "memclrNoHeapPointers", "heapBits", "spanOf", "wbBuf", "bulkBarrier",
				"gcBgMarkWorker", "sweep", "spanSet", "mspan", "mheap", "mcentral", "mcache", "nextFreeFast", "scavenge", "markroot", "gcFlush", "gcWork")
		}},
		{"copying bytes (runtime.memmove, memequal; callers not attributed)", func(_, s string) bool {
			return has(s, "runtime.memmove", "memeqbody", "runtime.memequal", "indexbytebody", "bytealg.")
		}},
		{"decode: JSON → column buffers (internal/decode, internal/jsonscan, fastjson)", func(_, s string) bool {
			return has(s, "sink/internal/decode", "sink/internal/jsonscan", "valyala/fastjson", "strconv.")
		}},
		{"insert: clickhouse-go/ch-go column encoding, LZ4, CityHash", func(_, s string) bool {
			return has(s, "ClickHouse/clickhouse-go", "ClickHouse/ch-go", "pierrec/lz4", "go-faster/city")
		}},
		{"fetch: franz-go, snappy (s2), CRC", func(_, s string) bool {
			return has(s, "twmb/franz-go", "klauspost/compress", "hash/crc32")
		}},
		{"pipeline, batch, offsets, map lookups and hashing", func(_, s string) bool {
			return has(s, "sink/internal/pipeline", "sink/internal/tables", "sink/internal/cdc", "sink/internal/batch", "sink/internal/offsets", "internal/runtime/maps", "aeshash", "type:.eq", "type:.hash", "memhash", "strhash")
		}},
		{"Go runtime: scheduler, channels, timers, syscalls", func(_, s string) bool {
			return strings.HasPrefix(s, "runtime.") || strings.HasPrefix(s, "internal/runtime")
		}},
	}
	return func(report string) []string {
		sums := make([]float64, len(rules)+1)
		for _, l := range strings.Split(report, "\n") {
			f := strings.Fields(l)
			// "12.34%  dso  [.]  symbol"
			if len(f) < 4 || !strings.HasSuffix(f[0], "%") || strings.HasPrefix(f[0], "#") {
				continue
			}
			pct, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
			if err != nil {
				continue
			}
			dso, sym := f[1], f[3]
			i := len(rules) // other
			for j, r := range rules {
				if r.match(dso, sym) {
					i = j
					break
				}
			}
			sums[i] += pct
		}
		var out []string
		for i, v := range sums {
			name := "other"
			if i < len(rules) {
				name = rules[i].name
			}
			if v > 0 {
				out = append(out, fmt.Sprintf("%5.1f%%  %s", v, name))
			}
		}
		slices.SortStableFunc(out, func(a, b string) int { return strings.Compare(b[:6], a[:6]) })
		return out
	}
}()

// profileMemory runs the default sink config once more in this binary's
// inprocess mode and returns the Go heap's peak and what held it, and the
// CPU profile of the same run (top functions by flat and cumulative time;
// the heap snapshots taken at new peaks are in it, a few milliseconds).
func (b *bench) profileMemory(ctx context.Context, p *Profile) {
	table := "sink_heap"
	if err := b.createTable(ctx, table); err != nil {
		p.HeapError = err.Error()
		return
	}
	sc := sinkConf{name: "bench-sink", group: b.group("heap", 0), topic: b.topic, table: table,
		brokers: b.opt.brokers, chAddrs: []string{b.srv.native}}
	path := filepath.Join(b.opt.work, "sink_heap.yaml")
	if err := os.WriteFile(path, []byte(sc.yaml()), 0o644); err != nil {
		p.HeapError = err.Error()
		return
	}
	defer b.deleteGroups(context.Background(), []string{sc.group})
	b.quiesce()
	heap := filepath.Join(b.opt.work, "sink.heap.pprof")
	cpu := filepath.Join(b.opt.work, "sink.cpu.pprof")
	args := []string{"inprocess", "--config", path, "--rows", fmt.Sprint(b.opt.count), "--clickhouse-http", b.srv.http, "--memprofile", heap, "--cpuprofile", cpu}
	logf("heap profile of the pipeline in process")
	out, err := exec.CommandContext(ctx, b.opt.benchBin, args...).CombinedOutput()
	if err != nil {
		p.HeapError = oneLine(err.Error() + ": " + string(out))
		return
	}
	p.HeapCommand = "bench " + strings.Join(args, " ") + "; go tool pprof -top -sample_index=inuse_space bin/bench " + heap
	p.HeapPeak = strings.TrimSpace(string(out))
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-sample_index=inuse_space", b.opt.benchBin, heap).Output()
	if err != nil {
		p.HeapError = "go tool pprof: " + err.Error()
		return
	}
	p.HeapTop = pprofTop(string(top), 10)
	p.CPUCommand = "bench " + strings.Join(args, " ") + "; go tool pprof -top [-cum] bin/bench " + cpu
	for _, cum := range []bool{false, true} {
		pargs := []string{"tool", "pprof", "-top", "-nodecount=20"}
		if cum {
			pargs = append(pargs, "-cum")
		}
		out, err := exec.CommandContext(ctx, "go", append(pargs, b.opt.benchBin, cpu)...).Output()
		if err != nil {
			p.CPUError = "go tool pprof: " + err.Error()
			return
		}
		if cum {
			p.CPUCum = pprofTop(string(out), 20)
		} else {
			p.CPUFlat = pprofTop(string(out), 20)
		}
	}
}

// pprofTop keeps the header total and the first n rows of `pprof -top`.
func pprofTop(out string, n int) []string {
	var res []string
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "Showing nodes"), strings.HasPrefix(t, "Duration:"):
			res = append(res, t)
		case len(t) > 0 && (t[0] >= '0' && t[0] <= '9') && strings.Contains(t, "%"):
			if rows < n {
				// Generic shapes make some names very long.
				if len(t) > 160 {
					t = t[:160] + "…"
				}
				res = append(res, t)
			}
			rows++
		}
	}
	return res
}

// perfTop keeps the sample lines of a perf report (percentages first).
func perfTop(report string, n int) []string {
	var out []string
	for _, l := range strings.Split(report, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") || !strings.Contains(strings.Fields(t)[0], "%") {
			continue
		}
		// perf pads the line with "-" for the sort keys it has no value for
		out = append(out, strings.TrimRight(strings.Join(strings.Fields(t), " "), " -"))
		if len(out) == n {
			break
		}
	}
	return out
}
