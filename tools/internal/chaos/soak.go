package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"sink/tools/gen"
)

// SoakSpec is a long run at a paced rate with restarts.
type SoakSpec struct {
	Duration     time.Duration // how long records are produced
	Rate         float64       // records per second of the main topic outside the bursts
	RestartEvery time.Duration // a SIGTERM and a new sink every this long
	KillAt       time.Duration // one kill -9 (and a new sink) this far in
	Sample       time.Duration // the sampling interval (10 s)
	// ProfileEvery: from the end of each sink's warm-up on, its heap and
	// goroutine profiles are saved this often into Dir/profiles (0: never),
	// so what grew within a life can be read (go tool pprof -diff_base).
	ProfileEvery time.Duration
	Warmup       time.Duration // samples this soon after a sink started do not count for the trends
	Dir          string        // results.csv, soak.svg, soak.md go here
	// About is what the results file says of the run besides the spec:
	// the command, the commit, the machine (may be "").
	About string
	// JudgeTrends fails the soak on an upward trend. A run of a few
	// minutes has sink lives shorter than the heap's own growth to its
	// steady size (about 30 s here), so its trend is reported only.
	JudgeTrends bool
}

// SoakParams is the soak of length d at rate records per second, writing
// into dir: a SIGTERM restart every 15 minutes and a sample every 10 s with
// a 5-minute warm-up; a run under 30 minutes (the 2-minute one of make
// test) restarts at half its length, samples every 5 s, warms up 10 s,
// takes profiles every eighth of the run and reports the trends without
// judging them.
// The kill -9 comes at 70% of the run.
func SoakParams(d time.Duration, rate float64, dir string) SoakSpec {
	ss := SoakSpec{Duration: d, Rate: rate, RestartEvery: 15 * time.Minute, KillAt: d * 7 / 10,
		Sample: 10 * time.Second, Warmup: 5 * time.Minute, ProfileEvery: 5 * time.Minute, Dir: dir, JudgeTrends: true}
	if d < 30*time.Minute {
		ss.RestartEvery, ss.Sample, ss.Warmup, ss.JudgeTrends = d/2, 5*time.Second, 10*time.Second, false
		ss.ProfileEvery = max(d/8, ss.Sample)
	}
	return ss
}

// Profile is the soak's rate profile, in the loadgen's terms (tools/gen,
// `loadgen --rate-profile`): cycles of Rate for 40% of the cycle, a burst
// of 5× Rate for 10%, Rate again for 50%, repeated until Duration. A cycle
// is 5 minutes, so each 10-minute window the trends are judged on holds
// two bursts at the same places; in a run under 30 minutes it is half the
// run. The mean rate is 1.4× Rate.
func (ss SoakSpec) Profile() gen.Profile {
	cycle := 5 * time.Minute
	if ss.Duration < 30*time.Minute {
		cycle = ss.Duration / 2
	}
	var p gen.Profile
	left := ss.Duration
	for left > 0 {
		for _, st := range []gen.Step{{Rate: ss.Rate, For: cycle * 4 / 10}, {Rate: 5 * ss.Rate, For: cycle / 10}, {Rate: ss.Rate, For: cycle / 2}} {
			st.For = min(st.For, left)
			if st.For <= 0 {
				break
			}
			p = append(p, st)
			left -= st.For
		}
	}
	return p
}

// Sample is one reading of the running sink.
type Sample struct {
	At  time.Duration // since the soak began
	PID int
	RSS int64 // bytes, /proc/PID/status VmRSS
	// RSSAnon and RSSFile split RSS (with RssShmem, not kept: the sink
	// maps none) into anonymous memory (the Go heap, stacks, the
	// runtime's retained pages) and file-backed pages (the binary's
	// text and data as they are paged in).
	RSSAnon, RSSFile int64
	Heap             float64
	Goroutines       float64
	Conns            int     // sockets among the open fds
	FDs              int     // open fds
	GCPauseMax       float64 // seconds, go_gc_duration_seconds{quantile="1"}
	Inserts          float64 // sink_inserts_total (since this process started)
	InsertsMin       float64 // inserts per minute over the last interval
	LagSeconds       float64 // max of sink_consumer_lag_seconds
	RetriesSeen      float64 // sink_insert_retries_total
	// CPUSeconds is the process's user and system time so far
	// (/proc/PID/stat); CPUPercent its share of one core over the last
	// interval.
	CPUSeconds, CPUPercent float64
	// Load1 is the machine's one-minute load average (/proc/loadavg): the
	// soak shares its cores with whatever else runs.
	Load1 float64
}

// SoakResult is the soak's verdict.
type SoakResult struct {
	*Result
	Samples         []Sample
	RSSSlope        float64 // MiB per 10 minutes, after each sink's warm-up
	GoroutineSlope  float64 // per 10 minutes, likewise
	Restarts, Kills int
	// Events are the restarts and the kill, for the plot.
	Events []SoakEvent
	// Stopped counts the sinks that stopped on an error (an INSERT error
	// not retried, or any other): "connector stopping" in their logs.
	Stopped int
	// Spec is what ran, for the results file.
	Spec SoakSpec
}

// SoakEvent is a sink stopped on purpose: "SIGTERM" or "kill -9", At since
// the soak began.
type SoakEvent struct {
	At   time.Duration
	What string
}

// Soak produces a paced stream (Profile: the loadgen's rate profile with a
// 5× burst every cycle) with 2% bad records on three routes: the main topic
// into the scenario table and, fanned out, into a second table, and a
// second topic into a table that gains three columns during the run
// (schema.evolve: add_columns); into the ClickHouse cluster with
// Env.Cluster. It restarts the sink with SIGTERM every RestartEvery and
// kills it once, samples it every Sample, and checks: the counts exact in
// all three tables and the evolved columns' values, every partition of
// both topics committed at the end, every bad record in the DLQ, no INSERT
// error that stopped a sink, RSS within buffer_memory + 128 MiB, and
// (JudgeTrends) no upward trend of RSS (under 1 MiB per 10 minutes) or
// goroutines (under 1 per 10 minutes) within a sink's life after its
// warm-up.
func Soak(ctx context.Context, env Env, ss SoakSpec) *SoakResult {
	out := &SoakResult{Spec: ss}
	began := time.Now()
	var mu sync.Mutex
	profile := ss.Profile()
	s := Spec{
		Name: "soak", Records: profile.Events(), Partitions: 8, Buffer: "64MiB", Instances: 1, BadPercent: 1,
		Listen: "127.0.0.1:18099", Admin: ss.ProfileEvery > 0,
		Profile: profile, Fanout: true, Evolve: &Evolve{Partitions: 4, Every: 4},
		Faults: func(ctx context.Context, r *run) error {
			go func() {
				t := time.NewTicker(ss.Sample)
				defer t.Stop()
				var last Sample
				// By pid: its first sample, and when its last profile was taken.
				born, profiled := map[int]time.Duration{}, map[int]time.Duration{}
				for {
					select {
					case <-r.bg.Done():
						return
					case <-t.C:
					}
					smp, ok := sampleSink(r, time.Since(began))
					if !ok {
						continue
					}
					if last.PID == smp.PID && smp.Inserts >= last.Inserts {
						smp.InsertsMin = (smp.Inserts - last.Inserts) / (smp.At - last.At).Minutes()
					}
					if last.PID == smp.PID && smp.CPUSeconds >= last.CPUSeconds {
						smp.CPUPercent = 100 * (smp.CPUSeconds - last.CPUSeconds) / (smp.At - last.At).Seconds()
					}
					last = smp
					mu.Lock()
					out.Samples = append(out.Samples, smp)
					mu.Unlock()
					if _, ok := born[smp.PID]; !ok {
						born[smp.PID] = smp.At
					}
					if ss.ProfileEvery > 0 && ss.Dir != "" && smp.At-born[smp.PID] >= ss.Warmup {
						if at, ok := profiled[smp.PID]; !ok || smp.At-at >= ss.ProfileEvery {
							if err := saveProfiles(r, filepath.Join(ss.Dir, "profiles"), smp); err == nil {
								profiled[smp.PID] = smp.At
							} else {
								r.logf("soak: profiles of pid %d: %v", smp.PID, err)
							}
						}
					}
				}
			}()
			killed := false
			for next := ss.RestartEvery; ; next += ss.RestartEvery {
				if !killed && ss.KillAt > 0 && ss.KillAt < next {
					if !sleep(ctx, ss.KillAt-time.Since(began)) || time.Since(began) > ss.Duration {
						return nil
					}
					if err := r.kill9(0); err != nil {
						return err
					}
					out.Kills++
					mu.Lock()
					out.Events = append(out.Events, SoakEvent{time.Since(began), "kill -9"})
					mu.Unlock()
					killed = true
					if err := r.startSink(); err != nil {
						return err
					}
				}
				if next >= ss.Duration || !sleep(ctx, next-time.Since(began)) {
					return nil
				}
				at := time.Since(began)
				if err := r.restartSink(); err != nil {
					return err
				}
				out.Restarts++
				mu.Lock()
				out.Events = append(out.Events, SoakEvent{at, "SIGTERM"})
				mu.Unlock()
			}
		},
	}
	out.Result = Run(ctx, env, s)
	res := out.Result
	res.Scenario = "soak"
	if n := countLogsIn(env.WorkDir, "connector stopping"); n > 0 {
		out.Stopped = n
		res.fail("%d sink(s) stopped on an error (\"connector stopping\" in the logs)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	out.RSSSlope = trend(out.Samples, ss.Warmup, func(s Sample) float64 { return float64(s.RSS) / (1 << 20) })
	out.GoroutineSlope = trend(out.Samples, ss.Warmup, func(s Sample) float64 { return s.Goroutines })
	if math.IsNaN(out.RSSSlope) {
		res.fail("too few samples after the warm-up to compute a trend (%d samples)", len(out.Samples))
	} else if ss.JudgeTrends {
		if out.RSSSlope >= 1 {
			res.fail("RSS grows %.2f MiB per 10 minutes within a sink's life (limit 1)", out.RSSSlope)
		}
		if out.GoroutineSlope >= 1 {
			res.fail("goroutines grow %.2f per 10 minutes within a sink's life (limit 1)", out.GoroutineSlope)
		}
	}
	if ss.Dir != "" {
		if err := out.write(ss); err != nil {
			res.fail("writing the results: %v", err)
		}
	}
	return out
}

// restartSink stops the first running sink with SIGTERM (it must exit 0)
// and starts a new one.
func (r *run) restartSink() error {
	r.mu.Lock()
	var p *sinkProc
	for _, q := range r.procs {
		if !q.exited.Load() {
			p = q
			break
		}
	}
	r.mu.Unlock()
	if p != nil {
		r.logf("%s: SIGTERM pid %d", r.name, p.cmd.Process.Pid)
		p.killed.Store(true) // ended on purpose: not "exited by itself"
		if err := p.stop(60 * time.Second); err != nil {
			return fmt.Errorf("restart: %v (log %s)", err, p.logPath)
		}
		p.done <- nil // keep the channel readable for close()
	}
	return r.startSink()
}

// sampleSink reads the running sink's /proc and /metrics.
func sampleSink(r *run, at time.Duration) (Sample, bool) {
	r.mu.Lock()
	var p *sinkProc
	for _, q := range r.procs {
		if !q.exited.Load() {
			p = q
		}
	}
	listen := sinkListen(r)
	r.mu.Unlock()
	if p == nil {
		return Sample{}, false
	}
	pid := p.cmd.Process.Pid
	mem := readStatus(pid, "VmRSS:", "RssAnon:", "RssFile:")
	s := Sample{At: at, PID: pid, RSS: mem[0], RSSAnon: mem[1], RSSFile: mem[2], CPUSeconds: readCPU(pid), Load1: readLoad1()}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	s.FDs = len(fds)
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			s.Conns++
		}
	}
	cl := http.Client{Timeout: 3 * time.Second}
	resp, err := cl.Get("http://" + listen + "/metrics")
	if err != nil {
		return s, s.RSS > 0
	}
	defer resp.Body.Close()
	m := parseMetrics(resp.Body)
	s.Heap = m["go_memstats_heap_inuse_bytes"].sum
	s.Goroutines = m["go_goroutines"].sum
	s.GCPauseMax = m[`go_gc_duration_seconds{quantile="1"}`].sum
	s.Inserts = m["sink_inserts_total"].sum
	s.LagSeconds = m["sink_consumer_lag_seconds"].max
	s.RetriesSeen = m["sink_insert_retries_total"].sum
	return s, s.RSS > 0
}

// sinkListen is the http.listen of the run's sink config ("" if none);
// the caller holds r.mu.
func sinkListen(r *run) string {
	b, err := os.ReadFile(r.cfgPath)
	if err != nil {
		return ""
	}
	i := strings.Index(string(b), `listen: "`)
	if i < 0 {
		return ""
	}
	rest := string(b)[i+9:]
	return rest[:strings.IndexByte(rest, '"')]
}

// saveProfiles stores the sampled sink's heap profile (heap-PID-SECONDS.pb.gz)
// and goroutine dump (goroutines-PID-SECONDS.txt) in dir.
func saveProfiles(r *run, dir string, s Sample) error {
	r.mu.Lock()
	listen := sinkListen(r)
	r.mu.Unlock()
	if listen == "" {
		return fmt.Errorf("no http.listen in the sink's config")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cl := http.Client{Timeout: 10 * time.Second}
	for _, f := range []struct{ path, name string }{
		{"/debug/pprof/heap", "heap-%d-%04.0f.pb.gz"},
		{"/debug/pprof/goroutine?debug=1", "goroutines-%d-%04.0f.txt"},
	} {
		resp, err := cl.Get("http://" + listen + f.path)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %.200s", f.path, resp.Status, b)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf(f.name, s.PID, s.At.Seconds())), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readCPU is the user plus system CPU seconds of the process so far
// (fields 14 and 15 of /proc/PID/stat, in clock ticks of 1/100 s), 0 if
// unreadable.
func readCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100
}

// readLoad1 is the one-minute load average, 0 if unreadable.
func readLoad1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return v
}

type metricValue struct{ sum, max float64 }

// parseMetrics reads the Prometheus text format: by metric name, the sum
// and the max of its series; a series with a quantile label also under its
// name with that label.
func parseMetrics(r io.Reader) map[string]metricValue {
	out := map[string]metricValue{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		series := line[:sp]
		name := series
		if i := strings.IndexByte(series, '{'); i >= 0 {
			name = series[:i]
			if q := strings.Index(series, `quantile="`); q >= 0 {
				end := strings.IndexByte(series[q+10:], '"')
				add(out, name+`{quantile="`+series[q+10:q+10+end]+`"}`, v)
			}
		}
		add(out, name, v)
	}
	return out
}

func add(m map[string]metricValue, k string, v float64) {
	mv, ok := m[k]
	mv.sum += v
	if !ok || v > mv.max {
		mv.max = v
	}
	m[k] = mv
}

// trend is the least-squares slope of f per 10 minutes, pooled over each
// sink's life (each pid's samples after its warm-up, centred on their own
// mean, so a restart's drop does not count as a trend); NaN without enough
// samples.
func trend(samples []Sample, warmup time.Duration, f func(Sample) float64) float64 {
	slope, _ := trendFit(samples, warmup, f)
	return slope
}

// trendFit is trend and its standard error: the spread of the samples
// around the fitted lines, as a slope (NaN without enough samples).
func trendFit(samples []Sample, warmup time.Duration, f func(Sample) float64) (slope, stderr float64) {
	byPID := map[int][]Sample{}
	first := map[int]time.Duration{}
	for _, s := range samples {
		if _, ok := first[s.PID]; !ok {
			first[s.PID] = s.At
		}
		if s.At-first[s.PID] >= warmup {
			byPID[s.PID] = append(byPID[s.PID], s)
		}
	}
	type centred struct{ dx, dy float64 }
	var pts []centred
	lives := 0
	for _, ss := range byPID {
		if len(ss) < 3 {
			continue
		}
		var mx, my float64
		for _, s := range ss {
			mx += s.At.Minutes() / 10
			my += f(s)
		}
		mx /= float64(len(ss))
		my /= float64(len(ss))
		for _, s := range ss {
			pts = append(pts, centred{s.At.Minutes()/10 - mx, f(s) - my})
		}
		lives++
	}
	var sxy, sxx float64
	for _, p := range pts {
		sxy += p.dx * p.dy
		sxx += p.dx * p.dx
	}
	if len(pts) < 3 || sxx == 0 {
		return math.NaN(), math.NaN()
	}
	slope = sxy / sxx
	// One mean per life and the common slope are fitted.
	dof := len(pts) - lives - 1
	if dof <= 0 {
		return slope, math.NaN()
	}
	var ssr float64
	for _, p := range pts {
		r := p.dy - slope*p.dx
		ssr += r * r
	}
	return slope, math.Sqrt(ssr / float64(dof) / sxx)
}

func countLogsIn(dir, needle string) int {
	logs, _ := filepath.Glob(filepath.Join(dir, "chaos-soak-*.log"))
	n := 0
	for _, l := range logs {
		n += countInFile(l, needle)
	}
	return n
}
