package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Results is everything one `make bench` measured; it is written as JSON
// and rendered as markdown.
type Results struct {
	Date           string          `json:"date"`
	Started        time.Time       `json:"started"`
	TookSec        float64         `json:"took_sec"`
	Command        string          `json:"command"`
	Machine        Machine         `json:"machine"`
	Workload       Workload        `json:"workload"`
	Servers        []ServerResults `json:"servers"` // in the order they ran
	Cluster        *ClusterResults `json:"cluster,omitempty"`
	GoBench        []GoBench       `json:"go_bench,omitempty"`
	GoBenchCommand string          `json:"go_bench_command,omitempty"`
	GoBenchError   string          `json:"go_bench_error,omitempty"`
	Profile        *Profile        `json:"profile,omitempty"`
	// ProfileBefore is the CPU profile of an earlier results file
	// (--profile-before), shown beside this run's.
	ProfileBefore     *Profile `json:"profile_before,omitempty"`
	ProfileBeforeFrom string   `json:"profile_before_from,omitempty"`
	// SteadyOnly: the steady-state phase alone (--steady-only): the
	// servers' runs are only the backlog drains its rates come from.
	SteadyOnly bool `json:"steady_only,omitempty"`
}

// ServerResults is what one ClickHouse server measured.
type ServerResults struct {
	Key      string         `json:"key"`  // 18 or 26, as --clickhouse names it
	Name     string         `json:"name"` // "ClickHouse <version>"
	Version  string         `json:"version"`
	Native   string         `json:"native"`
	HTTP     string         `json:"http"`
	Error    string         `json:"error,omitempty"` // set when the server could not be measured
	Variants []Result       `json:"variants"`        // the median run of each (by rows/s)
	Stats    []VariantStats `json:"stats"`           // median and spread of each over its runs
	Runs     []Result       `json:"runs"`            // every run
	Seed004  []StageResult  `json:"seed004,omitempty"`
	Steady   *SteadyResults `json:"steady,omitempty"`
	Targets  []Target       `json:"targets"`
}

type Machine struct {
	Name     string `json:"name,omitempty"` // --machine
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Kafka    string `json:"kafka"`
	Sink     string `json:"sink"`
}

type Workload struct {
	Topic        string  `json:"topic"`
	Records      int     `json:"records"`
	Bytes        int64   `json:"bytes"`
	RecordBytes  float64 `json:"record_bytes"`
	Partitions   int     `json:"partitions"`
	PerPartition []int64 `json:"per_partition"`
	Skew         float64 `json:"skew"`
	Seed         uint64  `json:"seed"`
	ProduceSec   float64 `json:"produce_sec"`
}

// Result is one run of one variant.
type Result struct {
	Key      string `json:"key"`
	Name     string `json:"name"`
	Run      int    `json:"run"`
	Status   string `json:"status"` // "ok", "failed: …", "could not run: …"
	Table    string `json:"table"`
	Config   string `json:"config,omitempty"`
	Note     string `json:"note,omitempty"`
	Expected int64  `json:"expected_rows"` // rows the run waited for
	Rows     int64  `json:"rows"`          // rows in the table afterwards
	// Sample: measured on Expected rows only; ExtrapolatedWallSec is the
	// time the whole workload would take at the measured rate.
	Sample              bool    `json:"sample"`
	ExtrapolatedWallSec float64 `json:"extrapolated_wall_sec,omitempty"`
	WallSec             float64 `json:"wall_sec"`
	RowsPerSec          float64 `json:"rows_per_sec"`
	Inserts             int64   `json:"inserts"` // -1: writes without INSERT queries
	InsertRows          int64   `json:"insert_rows"`
	RowsPerInsert       float64 `json:"rows_per_insert"`
	Parts               int64   `json:"parts"`
	ClientCPUSec        float64 `json:"client_cpu_sec"`
	ClientCPUUsPerRow   float64 `json:"client_cpu_us_per_row"`
	ClientMaxRSSMB      float64 `json:"client_max_rss_mib"`
	BufferMemory        int64   `json:"buffer_memory,omitempty"`
	CHCPUSec            float64 `json:"clickhouse_cpu_sec"`
	CHCPUUsPerRow       float64 `json:"clickhouse_cpu_us_per_row"`
	// CHCPUToIdleSec adds what ClickHouse spent after the rows landed
	// until it was idle again (SettleSec later): the merges of the parts.
	CHCPUToIdleSec float64 `json:"clickhouse_cpu_to_idle_sec"`
	// CHQueryCPUSec is the server CPU inside the run's INSERT queries
	// (query_log ProfileEvents UserTime+SystemTime): no merges, no other
	// users of the server. Zero for the Kafka engine, which runs no query.
	CHQueryCPUSec float64 `json:"clickhouse_insert_query_cpu_sec"`
	SettleSec     float64 `json:"settle_sec"`
	KafkaCPUSec   float64 `json:"kafka_cpu_sec"`
	OtherCPUSec   float64 `json:"other_cpu_sec"` // busy CPU of everything else on the machine
}

func (r Result) ok() bool { return r.Status == "ok" }

// StageResult is one stage of the seed 004 replay.
type StageResult struct {
	Key                 string  `json:"key"`
	Name                string  `json:"name"`
	Status              string  `json:"status"`
	Table               string  `json:"table"`
	Config              string  `json:"config"`
	Published           string  `json:"published"`
	Note                string  `json:"note,omitempty"`
	Scale               float64 `json:"scale"`
	RatePerMin          int     `json:"rate_per_min"`
	Partitions          int     `json:"partitions"`
	Produced            int     `json:"produced"`
	Rows                int64   `json:"rows"`
	WindowSec           float64 `json:"window_sec"`
	DrainSec            float64 `json:"drain_sec"` // from the producer's end until every row landed
	ReplayedMinutes     float64 `json:"replayed_minutes"`
	Inserts             int     `json:"inserts"`
	InsertedRows        int64   `json:"inserted_rows"`
	InsertsPerMin       float64 `json:"inserts_per_min"`
	RowsPerMin          float64 `json:"rows_per_min"`
	RowsPerInsertMin    int64   `json:"rows_per_insert_min"`
	RowsPerInsertMedian float64 `json:"rows_per_insert_median"`
	RowsPerInsertMean   float64 `json:"rows_per_insert_mean"`
	RowsPerInsertMax    int64   `json:"rows_per_insert_max"`
	CHCPUSec            float64 `json:"clickhouse_cpu_sec"`
	CHCPUUsPerRow       float64 `json:"clickhouse_cpu_us_per_row"`
}

// Target is one of the performance goals the bench checks
// (docs/performance.md). Met is nil when it could not be measured. Explanation
// says why a target was missed: what the numbers show (a spread across the
// threshold) and, from --explain, what the lead found.
type Target struct {
	ID          string `json:"id"` // cpu, rows_pipe, rows_engine, rss: the keys of --explain
	Name        string `json:"name"`
	Measured    string `json:"measured"`
	Met         *bool  `json:"met"`
	Explanation string `json:"explanation,omitempty"`
}

// Profile is where the sink's CPU went in the profiled run.
type Profile struct {
	Server     string   `json:"server"` // the ClickHouse the profiled sink wrote to
	Command    string   `json:"command"`
	Categories []string `json:"categories"`
	Top        []string `json:"top"`
	// The CPU profile of the pipeline run in process (bench inprocess,
	// runtime/pprof): the top functions by flat and by cumulative time.
	CPUCommand string   `json:"cpu_command,omitempty"`
	CPUFlat    []string `json:"cpu_flat,omitempty"`
	CPUCum     []string `json:"cpu_cum,omitempty"`
	CPUError   string   `json:"cpu_error,omitempty"`
	// The heap of the same pipeline run in process (bench inprocess).
	HeapCommand string   `json:"heap_command,omitempty"`
	HeapPeak    string   `json:"heap_peak,omitempty"`
	HeapTop     []string `json:"heap_top,omitempty"`
	HeapError   string   `json:"heap_error,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// pickMedians keeps, per variant, the run with the median rows/s among the
// successful ones (or the first run when none succeeded).
func pickMedians(runs []Result) []Result {
	var out []Result
	var keys []string
	for _, r := range runs {
		if !slices.Contains(keys, r.Key) {
			keys = append(keys, r.Key)
		}
	}
	for _, k := range keys {
		var ok, all []Result
		for _, r := range runs {
			if r.Key == k {
				all = append(all, r)
				if r.ok() {
					ok = append(ok, r)
				}
			}
		}
		if len(ok) == 0 {
			out = append(out, all[0])
			continue
		}
		slices.SortFunc(ok, func(a, b Result) int { return cmpFloat(a.RowsPerSec, b.RowsPerSec) })
		out = append(out, ok[(len(ok)-1)/2])
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func boolp(b bool) *bool { return &b }

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

// num formats with thousands separators and no decimals (or 2 significant
// decimals below 10).
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	if math.Abs(v) < 10 && v != math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// markdown renders the results file: the workload, then per server the
// end-to-end table, the targets and the seed 004 replay, then the Go
// benchmarks and the profile.
func (res *Results) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmark %s\n\n", res.Date)
	var servers []string
	for _, sr := range res.Servers {
		servers = append(servers, fmt.Sprintf("%s (native %s, HTTP %s)", sr.Name, sr.Native, strings.TrimSuffix(sr.HTTP, "/")))
	}
	if len(servers) == 0 {
		servers = []string{"none (the cluster table alone)"}
	}
	name := ""
	if res.Machine.Name != "" {
		name = res.Machine.Name + ", "
	}
	w("Reproduce: `%s` (took %.0f s). Machine: %s%d cores (%s), Linux %s, %s; Kafka %s (local stack); sink %s. ClickHouse servers, measured one after the other: %s.\n\n",
		res.Command, res.TookSec, name, res.Machine.CPUs, res.Machine.CPUModel, res.Machine.Kernel, res.Machine.Go,
		res.Machine.Kafka, res.Machine.Sink, strings.Join(servers, "; "))
	wl := res.Workload
	w("Workload: %s JSON records of %.0f bytes (%s MB) in topic `%s`, %d partitions (records per partition %s), skew %g, seed %d; produced once in %.1f s before any timing, and read by every variant on every server. ",
		num(float64(wl.Records)), wl.RecordBytes, num(float64(wl.Bytes)/1e6), wl.Topic, wl.Partitions, joinInts(wl.PerPartition), wl.Skew, wl.Seed, wl.ProduceSec)
	w("Every variant reads the same topic from the beginning into a fresh table (`%s`) with its own consumer group; one variant at a time, each after ClickHouse's merges of the previous one settled. All processes share the machine's cores: Kafka, ClickHouse, the client and the stopwatch.\n\n", eventColumns)

	if len(res.Servers) > 0 && !res.SteadyOnly {
		w("## End to end\n\n")
		w("Wall time runs from starting the client until `count()` of the table reaches the workload (polled every 50 ms). CPU is user+system: the client processes' from their rusage (whole life, shutdown included), ClickHouse's and Kafka's from `/proc/PID/stat` over the wall time; \"until idle\" keeps counting ClickHouse after the rows landed until its CPU use drops to idle (the merges the run's parts caused), the time that took in parentheses. The server is shared with whatever else runs on the machine, so \"in the INSERT queries\" adds the CPU that `system.query_log` attributes to the run's own INSERTs (ProfileEvents UserTimeMicroseconds + SystemTimeMicroseconds of the query threads): parsing, building and writing the parts, but no merges and nobody else's queries. INSERTs come from `system.query_log`, parts from `system.part_log` (new parts only). Runs are interleaved (every variant's first run, then every variant's second, ...), so a busy minute of the shared machine lands on one run of each variant rather than on every run of one. The first table per server gives each metric's median over the successful runs and its range [min–max]; the second shows the run with the median rows/s in full. ClickHouse 26.9 here is ClickHouse's engine from the chdb-core wheel serving clickhouse-local's listeners: its CPU is that Python process's.\n\n")
		for _, sr := range res.Servers {
			w("### %s\n\n", sr.Name)
			if sr.Error != "" {
				w("Not measured: %s\n\n", mdEscape(sr.Error))
				continue
			}
			sr.endToEnd(w, res.Workload.Records)
		}

		w("## Targets\n\n")
		w("Ratios of the medians over the runs, per server; in brackets the range over the runs, and the ratio's range pairs the sink's worst run with the other's best and the other way round. A miss is explained in the last column: automatically when the runs' range crosses the threshold, otherwise from `--explain`.\n\n")
		for _, sr := range res.Servers {
			if sr.Error != "" {
				continue
			}
			w("### %s\n\n| target | measured | PASS/MISS | explanation of a miss |\n|---|---|---|---|\n", sr.Name)
			for _, t := range sr.Targets {
				w("| %s | %s | %s | %s |\n", mdEscape(t.Name), mdEscape(t.Measured), t.verdict(), mdEscape(t.Explanation))
			}
			w("\n")
		}
	}
	if res.Cluster != nil {
		res.Cluster.markdown(w, res.Workload.Records)
	}

	for i, sr := range res.Servers {
		if len(sr.Seed004) == 0 {
			continue
		}
		if i == 0 || len(res.Servers[i-1].Seed004) == 0 {
			s0 := sr.Seed004[0]
			w("## Seed 004 replay\n\n")
			w("Magnit OMNI's Kafka → ClickHouse sink, replayed: %s records/min over %d partitions, %.1f replayed minutes per stage, time compressed ×%g (the producer runs ×%g faster and every time setting is divided by %g). The sink is stopped only once every record is a row, so every INSERT counted (from `system.query_log`) is one the traffic caused; counts are divided by the replayed minutes of traffic. \"Landed after\" is how long the last rows took after the producer stopped: beyond the configured waits (fetch_max_wait + max_wait), it is ClickHouse falling behind the compressed time.\n\n",
				num(float64(s0.RatePerMin)), s0.Partitions, s0.ReplayedMinutes, s0.Scale, s0.Scale, s0.Scale)
		}
		w("### %s\n\n", sr.Name)
		seed004Table(w, sr.Seed004)
	}

	res.steadyMarkdown(w)

	if len(res.GoBench) > 0 || res.GoBenchError != "" {
		w("## Go benchmarks (hot path)\n\n`%s`\n\n", res.GoBenchCommand)
		if res.GoBenchError != "" {
			w("Error: %s\n\n", mdEscape(res.GoBenchError))
		}
		w("| package | benchmark | ns/op | MB/s | B/op | allocs/op | other |\n|---|---|---:|---:|---:|---:|---|\n")
		for _, g := range res.GoBench {
			var extra []string
			for _, k := range sortedKeys(g.Extra) {
				extra = append(extra, num(g.Extra[k])+" "+k)
			}
			w("| %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(g.Package, "sink/"), g.Name, f2(g.NsPerOp), num(g.MBPerSec),
				num(g.BytesPerOp), num(g.AllocsPerOp), strings.Join(extra, ", "))
		}
		w("\n")
	}
	if res.Profile != nil {
		w("## Where the sink's CPU goes\n\nWriting to %s. `%s`\n\n", res.Profile.Server, res.Profile.Command)
		if res.Profile.Error != "" {
			w("Error: %s\n\n", mdEscape(res.Profile.Error))
		}
		if len(res.Profile.CPUFlat) > 0 || res.Profile.CPUError != "" {
			writeCPUProfile(w, "In process, runtime/pprof", res.Profile)
		}
		if res.ProfileBefore != nil {
			writeCPUProfile(w, "Before: "+res.ProfileBeforeFrom, res.ProfileBefore)
		}
		w("The whole process under perf (kernel included). By part of the sink (flat samples, each symbol to the first matching group):\n\n```\n%s\n```\n\nHottest symbols:\n\n```\n%s\n```\n\n",
			strings.Join(res.Profile.Categories, "\n"), strings.Join(res.Profile.Top, "\n"))
		if res.Profile.HeapPeak != "" || res.Profile.HeapError != "" {
			w("## Where the sink's memory goes\n\n`%s`\n\n", res.Profile.HeapCommand)
			if res.Profile.HeapError != "" {
				w("Error: %s\n\n", mdEscape(res.Profile.HeapError))
			}
			w("%s\n\nLive heap at the peak (the profile is of the last GC; the heap grows to about twice that before the next one with GOGC=100):\n\n```\n%s\n```\n\n",
				res.Profile.HeapPeak, strings.Join(res.Profile.HeapTop, "\n"))
		}
	}
	w("Raw numbers, every run and the generated configs: `%s.json` beside this file.\n", res.base())
	return b.String()
}

// endToEnd writes one server's variant table, the ratios against the
// sink, the notes and every run's rows/s.
func (sr *ServerResults) endToEnd(w func(string, ...any), records int) {
	sr.spreadTable(w)
	w("| variant | rows | wall s | rows/s | INSERTs | rows/INSERT | parts | client CPU s | client µs/row | client peak RSS MiB | ClickHouse CPU s | ClickHouse µs/row | ClickHouse CPU s until idle (merges) | ClickHouse µs/row in the INSERT queries | Kafka CPU s |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range sr.Variants {
		if !r.ok() {
			w("| %s | %s: %s |||||||||||||\n", mdEscape(r.Name), statusWord(r.Status), mdEscape(statusDetail(r.Status)))
			continue
		}
		name, wall := mdEscape(r.Name), f2(r.WallSec)
		if r.Sample {
			name += fmt.Sprintf(" (sample of %s, extrapolated)", num(float64(r.Expected)))
			wall = fmt.Sprintf("%s (%s for %s: %s s)", f2(r.WallSec), "extrapolated", num(float64(records)), num(r.ExtrapolatedWallSec))
		}
		inserts, perInsert := num(float64(r.Inserts)), num(r.RowsPerInsert)
		if r.Inserts < 0 && strings.HasPrefix(r.Key, "consume_") {
			inserts, perInsert = "— (reads only)", "—"
		} else if r.Inserts < 0 {
			inserts = "— (MV blocks)"
			if r.Parts > 0 {
				perInsert = num(float64(r.Rows)/float64(r.Parts)) + " per part"
			}
		}
		client := [3]string{f2(r.ClientCPUSec), f2(r.ClientCPUUsPerRow), num(r.ClientMaxRSSMB)}
		if r.Key == "kafka_engine" {
			client = [3]string{"— (in server)", "—", "—"}
		}
		inQuery := f2(perRowF(r.CHQueryCPUSec, r.Expected) * 1e6)
		if r.Inserts < 0 {
			inQuery = "— (no queries)"
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, num(float64(r.Rows)), wall, num(r.RowsPerSec),
			inserts, perInsert, num(float64(r.Parts)), client[0], client[1], client[2], f2(r.CHCPUSec), f2(r.CHCPUUsPerRow),
			fmt.Sprintf("%s (+%.1f s)", f2(r.CHCPUToIdleSec), r.SettleSec), inQuery, f2(r.KafkaCPUSec))
	}
	w("\n")
	if sink, ok := findStats(sr.Stats, "sink"); ok {
		w("Ratios of medians against the sink (default config) on %s:\n\n", sr.Name)
		w("| variant | sink is × faster (rows/s) | × the sink's ClickHouse CPU per row | × the sink's client CPU per row |\n|---|---:|---:|---:|\n")
		for _, v := range sr.Stats {
			if v.Key == "sink" || v.OK == 0 {
				continue
			}
			client := "—"
			if v.Key != "kafka_engine" && sink.ClientUsPerRow.Median > 0 {
				client = f2(v.ClientUsPerRow.Median/sink.ClientUsPerRow.Median) + "×"
			}
			w("| %s | %s× | %s× | %s |\n", mdEscape(v.Name), f2(sink.RowsPerSec.Median/v.RowsPerSec.Median),
				f2(v.CHUsPerRow.Median/sink.CHUsPerRow.Median), client)
		}
		w("\n")
	}
	var notes []string
	for _, r := range sr.Variants {
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s: %s", r.Name, r.Note))
		}
		if r.OtherCPUSec > 0.1*r.WallSec && r.ok() {
			notes = append(notes, fmt.Sprintf("- %s: other processes used %.2f CPU-s during the run (the machine was not otherwise idle)", r.Name, r.OtherCPUSec))
		}
	}
	if len(notes) > 0 {
		w("Notes:\n\n%s\n\n", strings.Join(notes, "\n"))
	}
	if len(sr.Runs) > len(sr.Variants) {
		w("All runs (rows/s): ")
		var parts []string
		for _, v := range sr.Variants {
			var xs []string
			for _, r := range sr.Runs {
				if r.Key == v.Key {
					if r.ok() {
						xs = append(xs, num(r.RowsPerSec))
					} else {
						xs = append(xs, statusWord(r.Status))
					}
				}
			}
			parts = append(parts, fmt.Sprintf("%s %s", v.Key, strings.Join(xs, " / ")))
		}
		w("%s.\n\n", strings.Join(parts, "; "))
	}
}

// spreadTable writes each variant's medians with their ranges.
func (sr *ServerResults) spreadTable(w func(string, ...any)) {
	if len(sr.Stats) == 0 {
		return
	}
	w("| variant | runs ok | rows/s median [min–max] | client CPU µs/row median [min–max] | client peak RSS MiB median [min–max] | ClickHouse CPU µs/row median [min–max] |\n|---|---:|---:|---:|---:|---:|\n")
	for _, v := range sr.Stats {
		if v.OK == 0 {
			w("| %s | 0 of %d | %s: %s ||||\n", mdEscape(v.Name), v.Runs, statusWord(v.Status), mdEscape(statusDetail(v.Status)))
			continue
		}
		name := mdEscape(v.Name)
		if v.Sample {
			name += " (sample)"
		}
		cpu, rss := spreadText(v.ClientUsPerRow, f2), spreadText(v.ClientRSSMB, num)
		if v.Key == "kafka_engine" {
			cpu, rss = "— (in server)", "—"
		}
		w("| %s | %d of %d | %s | %s | %s | %s |\n", name, v.OK, v.Runs, spreadText(v.RowsPerSec, num), cpu, rss, spreadText(v.CHUsPerRow, f2))
	}
	w("\nThe run with the median rows/s of each variant:\n\n")
}

// writeCPUProfile writes a pprof top by flat and by cumulative time.
func writeCPUProfile(w func(string, ...any), title string, p *Profile) {
	if p.CPUCommand != "" {
		w("%s: `%s`\n\n", title, p.CPUCommand)
	} else {
		w("%s:\n\n", title)
	}
	if p.CPUError != "" {
		w("Error: %s\n\n", mdEscape(p.CPUError))
	}
	switch {
	case len(p.CPUFlat) > 0:
		w("By flat time:\n\n```\n%s\n```\n\nBy cumulative time:\n\n```\n%s\n```\n\n", strings.Join(p.CPUFlat, "\n"), strings.Join(p.CPUCum, "\n"))
	case len(p.Top) > 0:
		// An older results file has only the perf profile.
		w("perf (%s):\n\n```\n%s\n\n%s\n```\n\n", p.Command, strings.Join(p.Categories, "\n"), strings.Join(p.Top, "\n"))
	}
}

// seed004Table writes one server's replay stages.
func seed004Table(w func(string, ...any), stages []StageResult) {
	w("| stage | inserts/min | rows/insert (min / median / max) | rows/min | landed after (s) | ClickHouse µs/row | seed 004 published | settings (as run, i.e. divided by the scale) |\n|---|---:|---:|---:|---:|---:|---|---|\n")
	for _, s := range stages {
		if s.Status != "ok" && !strings.HasPrefix(s.Status, "incomplete") {
			w("| %s | %s |||||||\n", mdEscape(s.Name), mdEscape(s.Status))
			continue
		}
		name := s.Name
		if s.Status != "ok" {
			name += " (" + s.Status + ")"
		}
		w("| %s | %s | %s / %s / %s | %s | %s | %s | %s | %s |\n", mdEscape(name), f1(s.InsertsPerMin),
			num(float64(s.RowsPerInsertMin)), num(s.RowsPerInsertMedian), num(float64(s.RowsPerInsertMax)), num(s.RowsPerMin),
			f1(s.DrainSec), f2(s.CHCPUUsPerRow), s.Published, mdEscape(stageSettings(s.Config)))
	}
	w("\n")
}

func perRowF(v float64, rows int64) float64 {
	if rows == 0 {
		return 0
	}
	return v / float64(rows)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// statusWord and statusDetail split a run's status ("could not run: …",
// "not run: …", "failed: …") for the table.
func statusWord(s string) string {
	word, _, _ := strings.Cut(s, ": ")
	return word
}

func statusDetail(s string) string {
	_, detail, _ := strings.Cut(s, ": ")
	return detail
}

// stageSettings picks the overridden kafka and batch keys out of a
// generated config, for the replay table.
func stageSettings(yaml string) string {
	var out []string
	for _, l := range strings.Split(yaml, "\n") {
		l = strings.TrimSpace(l)
		for _, k := range []string{"fetch_min_bytes", "fetch_max_wait", "ignore_partitions", "max_wait"} {
			if strings.HasPrefix(l, k+":") {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, ", ")
}

func joinInts(xs []int64) string {
	var s []string
	for _, x := range xs {
		s = append(s, num(float64(x)))
	}
	return strings.Join(s, " / ")
}

func sortedKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// base is the results files' name without extension: the date, or
// cluster-<date> for the cluster table alone (--cluster-only), beside the
// day's full results rather than over them.
func (res *Results) base() string {
	if len(res.Servers) == 0 && res.Cluster != nil {
		return "cluster-" + res.Date
	}
	if res.SteadyOnly {
		return "steady-" + res.Date
	}
	return res.Date
}

// write saves dir/<date>.md and dir/<date>.json.
func (res *Results) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", err
	}
	base := filepath.Join(dir, res.base())
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".md", []byte(res.markdown()), 0o644); err != nil {
		return "", err
	}
	return base + ".md", nil
}
