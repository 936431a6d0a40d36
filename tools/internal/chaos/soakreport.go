package chaos

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sink/tools/gen"
)

// life is one sink process's samples: from its start to its SIGTERM, kill
// or the end of the soak.
type life struct {
	pid     int
	samples []Sample
	ended   string // "SIGTERM", "kill -9" or "end"
}

// lives splits the samples by process, in order, with how each ended.
func (o *SoakResult) lives() []life {
	var out []life
	for _, s := range o.Samples {
		if len(out) == 0 || out[len(out)-1].pid != s.PID {
			out = append(out, life{pid: s.PID, ended: "end"})
		}
		out[len(out)-1].samples = append(out[len(out)-1].samples, s)
	}
	// Each event ended the life whose last sample came before it.
	for _, e := range o.Events {
		for i := range out {
			ss := out[i].samples
			if ss[len(ss)-1].At <= e.At && (i == len(out)-1 || out[i+1].samples[0].At >= e.At) {
				out[i].ended = e.What
			}
		}
	}
	return out
}

// write stores results.csv, soak.svg and soak.md (the verdict, each check
// with its limit and what was measured, each sink's life, and how the
// numbers were taken) in ss.Dir.
func (o *SoakResult) write(ss SoakSpec) error {
	if err := os.MkdirAll(ss.Dir, 0o755); err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("seconds,pid,rss_bytes,heap_inuse_bytes,goroutines,sockets,fds,gc_pause_max_seconds,inserts_per_minute,lag_seconds_max,insert_retries,cpu_seconds,cpu_percent,load1,rss_anon_bytes,rss_file_bytes\n")
	for _, s := range o.Samples {
		fmt.Fprintf(&csv, "%.0f,%d,%d,%.0f,%.0f,%d,%d,%.6f,%.1f,%.1f,%.0f,%.2f,%.1f,%.2f,%d,%d\n", s.At.Seconds(), s.PID, s.RSS, s.Heap, s.Goroutines,
			s.Conns, s.FDs, s.GCPauseMax, s.InsertsMin, s.LagSeconds, s.RetriesSeen, s.CPUSeconds, s.CPUPercent, s.Load1, s.RSSAnon, s.RSSFile)
	}
	if err := os.WriteFile(filepath.Join(ss.Dir, "results.csv"), []byte(csv.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ss.Dir, "soak.svg"), []byte(o.svg()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(ss.Dir, "soak.md"), []byte(o.markdown()), 0o644)
}

// markdown is the results file.
func (o *SoakResult) markdown() string {
	ss, res := o.Spec, o.Result
	var md strings.Builder
	verdict := "PASS"
	if !res.OK() {
		verdict = "FAIL"
	}
	p := ss.Profile()
	fmt.Fprintf(&md, "## Soak: %s, %s\n\n", ss.Duration, verdict)
	if ss.About != "" {
		md.WriteString(ss.About + "\n\n")
	}
	if len(o.Samples) > 0 {
		ld := span(o.Samples, func(s Sample) float64 { return s.Load1 })
		fmt.Fprintf(&md, "The machine's one-minute load average during the run: %.1f–%.1f (median %.1f), sampled with the sink.\n\n",
			ld[0], ld[1], median(values(o.Samples, func(s Sample) float64 { return s.Load1 })))
	}
	fmt.Fprintf(&md, "The stream: %d records into the main topic (8 partitions) paced by the rate profile %s "+
		"(%.0f/s, 5× that for a tenth of every %s cycle; mean %.0f/s), 1%% malformed JSON and 1%% with a key that is not a number; "+
		"one record in 4 of that pace also into the evolving topic (4 partitions), which gains f_int, f_str and f_float at 25%%, 50%% and 75%% of the run. "+
		"Three routes: the main topic into its table and, fanned out (`fanout: all`), into a second table; the evolving topic into a table "+
		"created without those columns (`schema.evolve: add_columns`). %d SIGTERM restarts (every %s), %d kill -9 (at %s), a sample every %s.\n\n",
		res.Produced+res.Bad-o.evoBad(), profileText(p), ss.Rate, cycleOf(ss), float64(p.Events())/p.Duration().Seconds(),
		o.Restarts, ss.RestartEvery, o.Kills, ss.KillAt, ss.Sample)

	judged := "judged"
	if !ss.JudgeTrends {
		judged = "reported only: a run under 30 min"
	}
	ok := func(pass bool) string {
		if pass {
			return "ok"
		}
		return "**FAIL**"
	}
	trendOK := func(slope float64) string {
		if !ss.JudgeTrends {
			return "not judged"
		}
		return ok(slope < 1)
	}
	peakPath := "-"
	if len(o.Samples) > 0 {
		peak := slices.MaxFunc(o.Samples, func(a, b Sample) int { return int(a.RSS - b.RSS) })
		peakPath = fmt.Sprintf("%.1f MiB at %s", float64(peak.RSS)/(1<<20), peak.At.Round(time.Second))
	}
	md.WriteString("| check | limit | measured | |\n|---|---|---|---|\n")
	_, rssSE := trendFit(o.Samples, ss.Warmup, func(s Sample) float64 { return float64(s.RSS) / (1 << 20) })
	_, gSE := trendFit(o.Samples, ss.Warmup, func(s Sample) float64 { return s.Goroutines })
	fmt.Fprintf(&md, "| RSS trend within each sink's life, after its first %s | < 1 MiB per 10 min, %s | %.2f ± %.2f MiB per 10 min | %s |\n",
		ss.Warmup, judged, o.RSSSlope, rssSE, trendOK(o.RSSSlope))
	for _, part := range []struct {
		name string
		f    func(Sample) float64
	}{{"anonymous", mib(func(s Sample) int64 { return s.RSSAnon })}, {"file-backed", mib(func(s Sample) int64 { return s.RSSFile })}} {
		sl, se := trendFit(o.Samples, ss.Warmup, part.f)
		fmt.Fprintf(&md, "| of which %s (`Rss%s` of `/proc/PID/status`), likewise | reported | %.2f ± %.2f MiB per 10 min | |\n",
			part.name, map[string]string{"anonymous": "Anon", "file-backed": "File"}[part.name], sl, se)
	}
	fmt.Fprintf(&md, "| goroutine trend, likewise | < 1 per 10 min, %s | %.2f ± %.2f per 10 min | %s |\n",
		judged, o.GoroutineSlope, gSE, trendOK(o.GoroutineSlope))
	fmt.Fprintf(&md, "| peak RSS (sampled every 100 ms) | buffer_memory + 128 MiB = %d MiB | %d MiB (10-s samples: %s) | %s |\n",
		res.RSSLimit>>20, res.MaxRSS>>20, peakPath, ok(res.MaxRSS <= res.RSSLimit))
	fmt.Fprintf(&md, "| main table, `count()` after `FINAL` | = good records produced, keys 0…n-1 | %d of %d | %s |\n",
		res.Landed, res.Produced, ok(res.Landed == res.Produced && !hasProblem(res, "keys:")))
	fmt.Fprintf(&md, "| fan-out table, likewise | the same | %s | %s |\n", noteOr(res, "fan-out table "), ok(!hasProblem(res, "fan-out table")))
	fmt.Fprintf(&md, "| evolving table: count, the 3 added columns' types and every value | exact | %s | %s |\n",
		noteOr(res, "evolving table "), ok(!hasProblem(res, "evolving table")))
	fmt.Fprintf(&md, "| DLQ | every bad record of both topics, once (twice allowed only for records after the kill -9's last commit) | %d records for %d bad | %s |\n",
		res.DLQ, res.Bad, ok(!hasProblem(res, "DLQ") && !hasProblem(res, "dlq")))
	fmt.Fprintf(&md, "| committed offsets after the last SIGTERM | the end of every partition of both topics | %s | %s |\n",
		strings.Join(res.Offsets, " ")+"; "+noteOr(res, "evolving topic committed "), ok(!hasProblem(res, "partition ")))
	fmt.Fprintf(&md, "| INSERT errors left unretried (a sink that logged `connector stopping` or exited by itself) | 0 | %d | %s |\n",
		o.Stopped, ok(o.Stopped == 0 && !hasProblem(res, "exited by itself")))
	fmt.Fprintf(&md, "| INSERT attempts retried, by ClickHouse code | reported | %s | |\n", retries(res.Retries))
	fmt.Fprintf(&md, "| longest time with no INSERT acknowledged | reported | %.0f s | |\n", res.MaxGap.Seconds())
	fmt.Fprintf(&md, "| duplicates written before merges (at-least-once replays) | reported | %d | |\n\n", res.Duplicates)
	if !res.OK() {
		md.WriteString("Problems:\n\n")
		for _, p := range res.Problems {
			fmt.Fprintf(&md, "- %s\n", p)
		}
		md.WriteString("\n")
	}

	md.WriteString("Each sink's life (samples every " + ss.Sample.String() + "; the trend columns are that life's own least-squares slope after its warm-up, " +
		"blank when it had fewer than 3 samples after it):\n\n")
	md.WriteString("| pid | from | to | ended by | samples | RSS MiB min–max | RSS trend MiB/10 min | anon / file trend | heap MiB min–max | heap trend | goroutines min–max | goroutine trend /10 min | fds | sockets | GC pause max ms | inserts/min median | CPU % of a core, median | lag s max |\n")
	md.WriteString("|---:|---:|---:|---|---:|---|---:|---:|---|---:|---|---:|---|---|---:|---:|---:|---:|\n")
	for _, l := range o.lives() {
		ls := l.samples
		rr := span(ls, func(s Sample) float64 { return float64(s.RSS) / (1 << 20) })
		hh := span(ls, func(s Sample) float64 { return s.Heap / (1 << 20) })
		gg := span(ls, func(s Sample) float64 { return s.Goroutines })
		ff := span(ls, func(s Sample) float64 { return float64(s.FDs) })
		cc := span(ls, func(s Sample) float64 { return float64(s.Conns) })
		gc := span(ls, func(s Sample) float64 { return s.GCPauseMax * 1000 })
		lag := span(ls, func(s Sample) float64 { return s.LagSeconds })
		// A life's first sample has no interval for the rates.
		ins := values(ls[1:], func(s Sample) float64 { return s.InsertsMin })
		cpu := values(ls[1:], func(s Sample) float64 { return s.CPUPercent })
		fmt.Fprintf(&md, "| %d | %s | %s | %s | %d | %.0f–%.0f | %s | %s / %s | %.0f–%.0f | %s | %.0f–%.0f | %s | %.0f–%.0f | %.0f–%.0f | %.1f | %.0f | %.0f | %.1f |\n",
			l.pid, ls[0].At.Round(time.Second), ls[len(ls)-1].At.Round(time.Second), l.ended, len(ls), rr[0], rr[1],
			slopeText(trend(ls, ss.Warmup, func(s Sample) float64 { return float64(s.RSS) / (1 << 20) })),
			slopeText(trend(ls, ss.Warmup, mib(func(s Sample) int64 { return s.RSSAnon }))),
			slopeText(trend(ls, ss.Warmup, mib(func(s Sample) int64 { return s.RSSFile }))),
			hh[0], hh[1], slopeText(trend(ls, ss.Warmup, func(s Sample) float64 { return s.Heap / (1 << 20) })), gg[0], gg[1],
			slopeText(trend(ls, ss.Warmup, func(s Sample) float64 { return s.Goroutines })), ff[0], ff[1], cc[0], cc[1], gc[1], median(ins), median(cpu), lag[1])
	}
	md.WriteString(o.heapGrowth(ss))
	md.WriteString("\nHow the numbers are taken: RSS is `VmRSS` of `/proc/PID/status` (split into `RssAnon` and `RssFile`); fds and sockets are the entries of `/proc/PID/fd` " +
		"(sockets: those linked to `socket:`); heap (`go_memstats_heap_inuse_bytes`), goroutines (`go_goroutines`), the GC pause " +
		"(`go_gc_duration_seconds{quantile=\"1\"}`, the longest of the recent pauses), inserts per minute (the change of `sink_inserts_total`, " +
		"all three tables, between two samples of one process), CPU (user and system time of `/proc/PID/stat` between two samples, 100% = one core), load (`/proc/loadavg`) and lag (the largest `sink_consumer_lag_seconds` of any partition) come from " +
		"the sink's `/metrics`. A trend is the least-squares slope per 10 minutes, pooled over the lives: each life's samples after its " +
		"warm-up are centred on their own means, so the drop at a restart is not a trend and the heap's growth to its steady size in a " +
		"new process's first minutes is not counted; ± is its standard error (the samples' scatter around the fitted lines), so a " +
		"slope within about twice that of 0 is no trend the samples can tell from noise. The counts are taken after the last sink's clean SIGTERM. Plot: soak.svg " +
		"(grey bands: the samples the trends are computed on; dashed lines: SIGTERM restarts; red: the kill -9).\n\n")
	PrintTable(&md, []*Result{res})
	return md.String()
}

// evoBad is the evolving topic's share of the bad records, from the note
// the check wrote (0 if none).
func (o *SoakResult) evoBad() int {
	for _, n := range o.Result.Notes {
		if i := strings.Index(n, "DLQ share "); i >= 0 {
			var v int
			fmt.Sscan(n[i+len("DLQ share "):], &v)
			return v
		}
	}
	return 0
}

func hasProblem(res *Result, prefix string) bool {
	for _, p := range res.Problems {
		if strings.Contains(p, prefix) {
			return true
		}
	}
	return false
}

// noteOr is the note that starts with prefix, without it, or what the
// problem with that prefix said.
func noteOr(res *Result, prefix string) string {
	for _, n := range res.Notes {
		if strings.HasPrefix(n, prefix) {
			return strings.TrimPrefix(n, prefix)
		}
	}
	for _, p := range res.Problems {
		if strings.Contains(p, strings.TrimSpace(prefix)) {
			return p
		}
	}
	return "-"
}

// profileText is the profile's first cycle as loadgen's --rate-profile
// takes it, and how often it repeats.
func profileText(p gen.Profile) string {
	var steps []string
	for _, st := range p[:min(3, len(p))] {
		steps = append(steps, fmt.Sprintf("%s:%s", trimFloat(st.Rate), st.For))
	}
	return fmt.Sprintf("`%s` repeated over %s", strings.Join(steps, ","), p.Duration())
}

func cycleOf(ss SoakSpec) time.Duration {
	if ss.Duration < 30*time.Minute {
		return ss.Duration / 2
	}
	return 5 * time.Minute
}

func slopeText(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return fmt.Sprintf("%.2f", v)
}

func span(ss []Sample, f func(Sample) float64) [2]float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		lo, hi = min(lo, f(s)), max(hi, f(s))
	}
	return [2]float64{lo, hi}
}

func values(ss []Sample, f func(Sample) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// svg plots the samples in seven panels over a shared time axis in
// minutes: RSS and heap in use (MiB), goroutines, fds and sockets, inserts
// per minute, the largest lag in seconds, the longest GC pause (ms) and the
// sink's CPU (% of one core). Each
// panel has its own scale from 0 to its maximum, labelled; a line breaks
// where one sink process ends and the next begins. Grey bands mark the
// samples the trends are computed on (each life after its warm-up),
// dashed lines the SIGTERM restarts and the red line the kill -9.
func (o *SoakResult) svg() string {
	const w, left, right, top, panelH, gap = 900.0, 70.0, 20.0, 75.0, 90.0, 28.0
	type series struct {
		name  string
		color string
		f     func(Sample) float64
	}
	panels := []struct {
		title string
		unit  string
		lines []series
	}{
		{"memory", "MiB", []series{{"RSS", "#c0392b", func(s Sample) float64 { return float64(s.RSS) / (1 << 20) }},
			{"anonymous", "#f1948a", mib(func(s Sample) int64 { return s.RSSAnon })},
			{"file-backed", "#aab7b8", mib(func(s Sample) int64 { return s.RSSFile })},
			{"heap in use", "#e67e22", func(s Sample) float64 { return s.Heap / (1 << 20) }}}},
		{"goroutines", "", []series{{"goroutines", "#2471a3", func(s Sample) float64 { return s.Goroutines }}}},
		{"open files", "", []series{{"fds", "#117a65", func(s Sample) float64 { return float64(s.FDs) }},
			{"sockets", "#76d7c4", func(s Sample) float64 { return float64(s.Conns) }}}},
		{"inserts per minute", "", []series{{"inserts/min (3 tables)", "#7d3c98", func(s Sample) float64 { return s.InsertsMin }}}},
		{"lag", "s", []series{{"max sink_consumer_lag_seconds", "#b7950b", func(s Sample) float64 { return s.LagSeconds }}}},
		{"GC pause", "ms", []series{{"longest recent GC pause", "#566573", func(s Sample) float64 { return s.GCPauseMax * 1000 }}}},
		{"CPU", "% of one core", []series{{"sink user + system", "#1e8449", func(s Sample) float64 { return s.CPUPercent }}}},
	}
	h := top + float64(len(panels))*(panelH+gap) + 20
	maxT := o.Spec.Duration.Seconds()
	for _, s := range o.Samples {
		maxT = max(maxT, s.At.Seconds())
	}
	maxT = max(maxT, 1)
	x := func(t time.Duration) float64 { return left + t.Seconds()/maxT*(w-left-right) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w, h)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	verdict := "PASS"
	if o.Result != nil && !o.Result.OK() {
		verdict = "FAIL"
	}
	judged := "limit 1 each"
	if !o.Spec.JudgeTrends {
		judged = "reported only: run under 30 min"
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="16" font-size="14" font-weight="bold">soak %s: %s (%d SIGTERM restarts, %d kill -9)</text>`+"\n",
		left, o.Spec.Duration, verdict, o.Restarts, o.Kills)
	fmt.Fprintf(&b, `<text x="%.0f" y="32">trends within each sink's life after its first %s: RSS %.2f MiB / 10 min, goroutines %.2f / 10 min (%s)</text>`+"\n",
		left, o.Spec.Warmup, o.RSSSlope, o.GoroutineSlope, judged)
	fmt.Fprintf(&b, `<text x="%.0f" y="47" fill="#555">time in minutes; grey: the samples the trends are computed on; orange ticks: the 5× bursts; dashed: SIGTERM restart; red: kill -9</text>`+"\n",
		left)
	// Minute ticks: every 5 minutes for an hour, every 10 s for a short run.
	tick := 5 * time.Minute
	if maxT < 20*60 {
		tick = 30 * time.Second
	}
	lives := o.lives()
	for pi, p := range panels {
		y0 := top + float64(pi)*(panelH+gap)
		yb := y0 + panelH
		var hi float64
		for _, l := range p.lines {
			for _, s := range o.Samples {
				hi = max(hi, l.f(s))
			}
		}
		hi = niceCeil(hi)
		y := func(v float64) float64 { return yb - v/hi*panelH }
		for _, l := range lives {
			ls := l.samples
			from := ls[0].At + o.Spec.Warmup
			if from < ls[len(ls)-1].At {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#eeeeee"/>`+"\n", x(from), y0, x(ls[len(ls)-1].At)-x(from), panelH)
			}
		}
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="black"/><line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="black"/>`+"\n",
			left, yb, w-right, yb, left, y0, left, yb)
		for _, frac := range []float64{0, 0.5, 1} {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text><line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n",
				left-4, y(hi*frac)+4, trimFloat(hi*frac), left, y(hi*frac), w-right, y(hi*frac))
		}
		for t := time.Duration(0); t.Seconds() <= maxT; t += tick {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/><text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n",
				x(t), yb, x(t), yb+3, x(t), yb+13, trimFloat(t.Minutes()))
		}
		var at time.Duration
		for _, st := range o.Spec.Profile() {
			if st.Rate > o.Spec.Rate {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="4" fill="#f5b041"/>`+"\n", x(at), y0, max(1, x(at+st.For)-x(at)))
			}
			at += st.For
		}
		for _, e := range o.Events {
			color, dash := "#888", ` stroke-dasharray="4,3"`
			if e.What != "SIGTERM" {
				color, dash = "#e74c3c", ""
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"%s/>`+"\n", x(e.At), y0, x(e.At), yb, color, dash)
		}
		label := p.title
		if p.unit != "" {
			label += " (" + p.unit + ")"
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-weight="bold">%s</text>`, left, y0-4, label)
		lx := left + 160
		for _, l := range p.lines {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" fill="%s">— %s</text>`, lx, y0-4, l.color, l.name)
			lx += 40 + 6*float64(len(l.name))
		}
		b.WriteString("\n")
		for _, l := range p.lines {
			var d strings.Builder
			for _, lf := range lives {
				ls := lf.samples
				if (p.title == "inserts per minute" || p.title == "CPU") && len(ls) > 0 {
					ls = ls[1:] // a life's first sample has no interval to count over
				}
				for i, s := range ls {
					cmd := 'L'
					if i == 0 {
						cmd = 'M'
					}
					fmt.Fprintf(&d, "%c%.1f,%.1f ", cmd, x(s.At), y(l.f(s)))
				}
			}
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.3"/>`+"\n", strings.TrimSpace(d.String()), l.color)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// mib reads a byte count of a sample in MiB.
func mib(f func(Sample) int64) func(Sample) float64 {
	return func(s Sample) float64 { return float64(f(s)) / (1 << 20) }
}

// heapGrowth is, for each life with two heap profiles or more (saved every
// ProfileEvery after its warm-up), the largest changes in bytes in use
// between its first and last profile: go tool pprof -top -diff_base.
func (o *SoakResult) heapGrowth(ss SoakSpec) string {
	dir := filepath.Join(ss.Dir, "profiles")
	var b strings.Builder
	for _, l := range o.lives() {
		files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("heap-%d-*.pb.gz", l.pid)))
		if len(files) < 2 {
			continue
		}
		slices.Sort(files) // the seconds are zero-padded
		first, last := files[0], files[len(files)-1]
		cmd := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount=12", "-diff_base="+first, last)
		out, err := cmd.Output()
		if b.Len() == 0 {
			b.WriteString("\nWhat grew in the Go heap within each life, between its first and last heap profile after the warm-up " +
				"(`go tool pprof -top -sample_index=inuse_space -diff_base=FIRST LAST`, profiles in `profiles/`):\n")
		}
		fmt.Fprintf(&b, "\n- pid %d, %s → %s:", l.pid, filepath.Base(first), filepath.Base(last))
		if err != nil {
			fmt.Fprintf(&b, " go tool pprof: %v\n", err)
			continue
		}
		b.WriteString("\n\n```\n")
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for _, line := range lines {
			// Leave out pprof's header lines about the file and the type.
			if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Type:") || strings.HasPrefix(line, "Time:") ||
				strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Duration:") {
				continue
			}
			b.WriteString(line + "\n")
		}
		b.WriteString("```\n")
	}
	return b.String()
}
