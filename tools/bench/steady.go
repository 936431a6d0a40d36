package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"sink/tools/gen"
)

// The steady-state phase: besides draining a backlog, a pod spends its
// days on a continuous stream well below what it could drain. For each
// level (a fraction of the backlog rate measured in the same run, on the
// same server), the sink runs with its default config on an empty topic
// while a producer in this process paces records into it for the
// duration; then the benchmark waits until every record is a row. It
// reports the sink's CPU per row over that window (idle time included,
// as a pod pays it), its resident set sampled every second, the INSERTs
// per minute from system.query_log and the end-to-end latency of every
// row against the configured batch.max_wait.
//
// Latency is from the record's Kafka timestamp (set by the producer's
// client when the record is handed to it: the produce time) to the moment
// its row became visible, on the same machine's clock:
//   - 26.9: the row's INSERT query id (a MATERIALIZED queryID() column)
//     joined with that query's QueryFinish in system.query_log
//     (event_time_microseconds): when the INSERT returned, its part
//     committed. Millisecond resolution.
//   - 18.16 has neither queryID() nor sub-second log times: a
//     MATERIALIZED now() column holds the second the INSERT was
//     processed, and the row's visible time is taken as the middle of
//     that second (±0.5 s; the INSERT's own duration, tens of
//     milliseconds here, is inside that error).
type steadyOptions struct {
	enabled  bool          // run the phase (make bench does)
	only     bool          // the phase alone: backlog drains of the sink variant, then the levels
	duration time.Duration // of each level's paced stream
	levels   []float64     // fractions of the backlog rate
	rates    []float64     // fixed rates in rows/s instead of levels (--steady-rates)
	drain    time.Duration // longest wait for the last rows after the producer stopped
}

// SteadyResults is the steady-state phase on one server.
type SteadyResults struct {
	// BacklogRowsPerSec is the rate the levels are fractions of: the
	// median rows/s of the sink variant's backlog drains on this server
	// in this run (BacklogRuns of them).
	BacklogRowsPerSec float64       `json:"backlog_rows_per_sec"`
	BacklogRuns       int           `json:"backlog_runs"`
	BacklogAll        []float64     `json:"backlog_all_rows_per_sec"`
	LatencyMethod     string        `json:"latency_method"`
	Levels            []SteadyLevel `json:"levels"`
	Error             string        `json:"error,omitempty"`
}

// SteadyLevel is one paced stream.
type SteadyLevel struct {
	Fraction          float64 `json:"fraction"` // of the backlog rate; 0 for a fixed rate (--steady-rates)
	TargetRowsPerSec  float64 `json:"target_rows_per_sec"`
	Status            string  `json:"status"`
	Note              string  `json:"note,omitempty"`
	Table             string  `json:"table"`
	Config            string  `json:"config,omitempty"`
	MaxWaitSec        float64 `json:"max_wait_sec"` // the sink's batch.max_wait
	Produced          int     `json:"produced"`
	ProduceSec        float64 `json:"produce_sec"`
	OfferedRowsPerSec float64 `json:"offered_rows_per_sec"` // produced / produce time: what the producer achieved
	Rows              int64   `json:"rows"`
	WindowSec         float64 `json:"window_sec"` // first record produced → last row landed
	DrainSec          float64 `json:"drain_sec"`  // producer done → last row landed
	ClientCPUSec      float64 `json:"client_cpu_sec"`
	ClientCPUUsPerRow float64 `json:"client_cpu_us_per_row"`
	ClientCores       float64 `json:"client_cores"` // CPU seconds per second of the window
	RSSMedianMiB      float64 `json:"rss_median_mib"`
	RSSMaxMiB         float64 `json:"rss_max_mib"`
	RSSSamples        int     `json:"rss_samples"`
	Inserts           int     `json:"inserts"`
	InsertsPerMin     float64 `json:"inserts_per_min"`
	RowsPerInsertMed  float64 `json:"rows_per_insert_median"`
	LatencyRows       int64   `json:"latency_rows"`
	LatencyP50Ms      float64 `json:"latency_p50_ms"`
	LatencyP99Ms      float64 `json:"latency_p99_ms"`
	LatencyMaxMs      float64 `json:"latency_max_ms"`
	CHCPUUsPerRow     float64 `json:"clickhouse_cpu_us_per_row"`
	OtherCPUCores     float64 `json:"other_cpu_cores"` // everything else on the machine, per second of the window
}

// steadyRetention is the retention.bytes of each partition of a level's
// topic: 1 GiB, about 5 million of the workload's records.
const steadyRetention = 1 << 30

// latBucket is how many rows had one latency (milliseconds).
type latBucket struct {
	ms    float64
	count int64
}

// histQuantile is the q-quantile (0 < q ≤ 1) of a latency histogram: the
// smallest latency at or below which at least q of the rows lie (the
// nearest-rank definition, so p50 of 1,2,3,4 is 2). NaN when empty.
func histQuantile(h []latBucket, q float64) float64 {
	var total int64
	for _, b := range h {
		total += b.count
	}
	if total == 0 {
		return math.NaN()
	}
	s := slices.Clone(h)
	slices.SortFunc(s, func(a, b latBucket) int { return cmpFloat(a.ms, b.ms) })
	rank := int64(math.Ceil(q * float64(total)))
	rank = max(rank, 1)
	var seen int64
	for _, b := range s {
		seen += b.count
		if seen >= rank {
			return b.ms
		}
	}
	return s[len(s)-1].ms
}

// steadyRaw is what one level measured, before the arithmetic.
type steadyRaw struct {
	produced          int
	produceStart      time.Time
	produceEnd        time.Time
	landed            time.Time
	rows              int64
	cpuBefore         float64 // the sink's CPU seconds at the producer's start
	cpuAfter          float64 // and when the last row landed
	rss               []int64 // bytes, one a second
	insertRows        []int64 // rows of each INSERT in the window
	hist              []latBucket
	chBefore, chAfter float64 // ClickHouse's CPU seconds
	sysBefore         float64 // the machine's busy CPU seconds
	sysAfter          float64
}

// summarize turns one level's measurements into its figures.
func (raw steadyRaw) summarize(l *SteadyLevel) {
	l.Produced, l.Rows = raw.produced, raw.rows
	l.ProduceSec = raw.produceEnd.Sub(raw.produceStart).Seconds()
	if l.ProduceSec > 0 {
		l.OfferedRowsPerSec = float64(raw.produced) / l.ProduceSec
	}
	l.WindowSec = raw.landed.Sub(raw.produceStart).Seconds()
	l.DrainSec = raw.landed.Sub(raw.produceEnd).Seconds()
	l.ClientCPUSec = raw.cpuAfter - raw.cpuBefore
	if raw.rows > 0 {
		l.ClientCPUUsPerRow = l.ClientCPUSec / float64(raw.rows) * 1e6
		l.CHCPUUsPerRow = (raw.chAfter - raw.chBefore) / float64(raw.rows) * 1e6
	}
	if l.WindowSec > 0 {
		l.ClientCores = l.ClientCPUSec / l.WindowSec
		l.OtherCPUCores = max(0, (raw.sysAfter-raw.sysBefore)-(raw.chAfter-raw.chBefore)-l.ClientCPUSec) / l.WindowSec
		l.InsertsPerMin = float64(len(raw.insertRows)) / (l.WindowSec / 60)
	}
	l.Inserts = len(raw.insertRows)
	if len(raw.insertRows) > 0 {
		f := make([]float64, len(raw.insertRows))
		for i, n := range raw.insertRows {
			f[i] = float64(n)
		}
		l.RowsPerInsertMed = spreadOf(f).Median
	}
	if len(raw.rss) > 0 {
		f := make([]float64, len(raw.rss))
		for i, n := range raw.rss {
			f[i] = float64(n) / (1 << 20)
		}
		sp := spreadOf(f)
		l.RSSMedianMiB, l.RSSMaxMiB, l.RSSSamples = sp.Median, sp.Max, sp.N
	}
	for _, b := range raw.hist {
		l.LatencyRows += b.count
	}
	if l.LatencyRows > 0 { // NaN otherwise, which JSON cannot hold
		l.LatencyP50Ms, l.LatencyP99Ms, l.LatencyMaxMs = histQuantile(raw.hist, 0.5), histQuantile(raw.hist, 0.99), histQuantile(raw.hist, 1)
	}
}

// steadyColumns are the workload's columns plus what the latency needs:
// the record's timestamp in milliseconds (filled by the sink from
// $timestamp) and the server's mark of the INSERT that wrote the row.
func steadyColumns(srvKey string) string {
	if srvKey == "18" {
		return eventColumns + ", _timestamp UInt64, _ins DateTime MATERIALIZED now()"
	}
	return eventColumns + ", _timestamp UInt64, _qid String MATERIALIZED queryID()"
}

// latencyQuery is the histogram of db.table's rows by latency in
// milliseconds, for the server srvKey names (see the top of this file).
func latencyQuery(srvKey, db, table string, from time.Time) string {
	if srvKey == "18" {
		return fmt.Sprintf("SELECT toInt64(toUInt32(_ins)) * 1000 + 500 - toInt64(_timestamp) AS ms, count() FROM %s.%s GROUP BY ms", db, table)
	}
	return fmt.Sprintf("SELECT toInt64(toUnixTimestamp64Milli(q.fin)) - toInt64(t._timestamp) AS ms, count() FROM %s.%s AS t "+
		"INNER JOIN (SELECT query_id, any(event_time_microseconds) AS fin FROM system.query_log WHERE type = 2 AND event_date >= yesterday() AND event_time >= %d AND %s GROUP BY query_id) AS q "+
		"ON t._qid = q.query_id GROUP BY ms", db, table, from.Unix()-1, insertMatch(db, table))
}

const (
	latencyMethod18 = "record timestamp (produce time) → the second of the row's INSERT on the server (MATERIALIZED now()), taken at its middle: ±0.5 s"
	latencyMethod26 = "record timestamp (produce time) → the row's INSERT finished (queryID() column joined with query_log's QueryFinish event_time_microseconds): ±1 ms"
)

func parseHist(s string) ([]latBucket, error) {
	var out []latBucket
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		a, c, ok := strings.Cut(l, "\t")
		ms, err1 := strconv.ParseFloat(a, 64)
		n, err2 := strconv.ParseInt(c, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("latency histogram line %q", l)
		}
		out = append(out, latBucket{ms: ms, count: n})
	}
	return out, nil
}

// backlogRate is the sink variant's median rows/s among runs.
func backlogRate(runs []Result) (median float64, all []float64) {
	for _, r := range runs {
		if r.Key == "sink" && r.ok() && r.RowsPerSec > 0 {
			all = append(all, r.RowsPerSec)
		}
	}
	return spreadOf(all).Median, all
}

// runSteady measures every level on the current server; runs are what
// the server's variants measured (the backlog drains of the sink variant
// among them).
func (b *bench) runSteady(ctx context.Context, runs []Result) *SteadyResults {
	o := b.opt.steady
	sr := &SteadyResults{LatencyMethod: latencyMethod26}
	if b.srv.key == "18" {
		sr.LatencyMethod = latencyMethod18
	}
	sr.BacklogRowsPerSec, sr.BacklogAll = backlogRate(runs)
	sr.BacklogRuns = len(sr.BacklogAll)
	if len(o.rates) > 0 {
		// Fixed rates: the same stream for any build, whatever its
		// backlog rate, so two builds' runs compare.
		for _, r := range o.rates {
			if ctx.Err() != nil {
				break
			}
			sr.Levels = append(sr.Levels, b.runLevel(ctx, 0, r))
		}
		return sr
	}
	if sr.BacklogRowsPerSec <= 0 {
		sr.Error = "no backlog drain of the sink variant succeeded on this server: no rate to pace at"
		logf("steady: %s", sr.Error)
		return sr
	}
	for _, f := range o.levels {
		if ctx.Err() != nil {
			break
		}
		sr.Levels = append(sr.Levels, b.runLevel(ctx, f, f*sr.BacklogRowsPerSec))
	}
	return sr
}

// runLevel paces one stream at target rows/s: frac of the backlog rate,
// or a fixed rate (frac 0).
func (b *bench) runLevel(ctx context.Context, frac, target float64) SteadyLevel {
	o := b.opt.steady
	id := strconv.Itoa(int(math.Round(frac * 100)))
	name := id + "%"
	if frac == 0 {
		name, id = num(target)+" rows/s", "r"+strconv.Itoa(int(math.Round(target)))
	}
	l := SteadyLevel{Fraction: frac, TargetRowsPerSec: target, Status: "ok"}
	fail := func(err error) SteadyLevel {
		l.Status = "failed: " + oneLine(err.Error())
		logf("steady %s: %s", name, l.Status)
		return l
	}
	table, topic := "steady_"+id, fmt.Sprintf("bench_steady_%s_%s", b.srv.key, id)
	l.Table = benchDB + "." + table
	if err := b.ch.exec(ctx, "CREATE TABLE "+l.Table+" ("+steadyColumns(b.srv.key)+") ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (user_id, ts)"); err != nil {
		return fail(err)
	}
	defer func() {
		if !b.opt.keep {
			_ = b.ch.exec(context.Background(), "DROP TABLE IF EXISTS "+l.Table)
			_, _ = b.adm.DeleteTopics(context.Background(), topic)
		}
	}()
	sc := sinkConf{name: "bench-steady", group: b.group("steady-"+id, 0), topic: topic, table: table,
		brokers: b.opt.brokers, chAddrs: []string{b.srv.native}}
	cfg, err := sc.parse()
	if err != nil {
		return fail(err)
	}
	l.Config, l.MaxWaitSec = strings.TrimSpace(sc.yaml()), cfg.Batch.MaxWait.Seconds()
	path := filepath.Join(b.opt.work, fmt.Sprintf("ch%s_steady_%s.yaml", b.srv.key, id))
	if err := os.WriteFile(path, []byte(sc.yaml()), 0o644); err != nil {
		return fail(err)
	}
	count := int(l.TargetRowsPerSec * o.duration.Seconds())
	// The topic keeps at most steadyRetention bytes per partition (older
	// segments are deleted, read or not), so a stream of hundreds of
	// thousands of records a second does not fill the disk the stack
	// shares; a sink that falls that far behind loses records, and the
	// level then says "incomplete". The table's parts must fit too.
	need := uint64(b.opt.partitions)*steadyRetention + uint64(float64(count)*float64(b.opt.size)*0.5)
	if free, err := freeBytes(filepath.Join(b.opt.stackRoot, ".stack")); err == nil && need+10<<30 > free {
		l.Status = fmt.Sprintf("not run: %s records need about %d GiB, the disk has %d GiB free (10 GiB kept free)", num(float64(count)), need>>30, free>>30)
		logf("steady %s: %s", name, l.Status)
		return l
	}
	if err := gen.EnsureTopic(ctx, b.adm, topic, b.opt.partitions, true); err != nil {
		return fail(err)
	}
	ret, seg := strconv.FormatUint(steadyRetention, 10), strconv.Itoa(128<<20)
	if _, err := b.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: &ret}, {Name: "segment.bytes", Value: &seg}}, topic); err != nil {
		return fail(fmt.Errorf("bounding %s's retention: %w", topic, err))
	}
	b.quiesce()
	c, err := start(b.opt.sinkBin, []string{"run", "--config", path}, strings.TrimSuffix(path, ".yaml")+".log", nil)
	if err != nil {
		return fail(err)
	}
	defer b.deleteGroups(context.Background(), []string{sc.group})
	pid := c.cmd.Process.Pid
	// Produce only once the sink has its partitions, so the first records
	// do not wait for its start-up.
	if err := b.waitGroupStable(ctx, sc.group, 30*time.Second); err != nil {
		_ = c.stop(60 * time.Second)
		return fail(fmt.Errorf("%w; sink log: %s", err, c.tail(3)))
	}
	var raw steadyRaw
	logf("steady %s: %s records at %s/s for %s into %s", name, num(float64(count)), num(l.TargetRowsPerSec), o.duration, l.Table)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); raw.rss = sampleRSS(sampleCtx, pid, time.Second) }()
	s0 := b.meter.snap()
	raw.cpuBefore, _ = procCPU(pid)
	raw.chBefore, raw.sysBefore, raw.produceStart = s0.ch, s0.sysBusy, s0.at
	p := gen.Produce{Brokers: b.opt.brokers, Topic: topic, Count: count, Partitions: b.opt.partitions, Rate: l.TargetRowsPerSec,
		Events: gen.Config{Size: b.opt.size, Seed: b.opt.seed + 24}}
	// A producer that cannot keep the pace (it shares the machine with
	// the broker, the sink and ClickHouse) is stopped at the duration, so
	// every level runs as long; what it produced is read from the topic.
	pctx, stopProducing := context.WithTimeout(ctx, o.duration+2*time.Second)
	_, perr := p.Run(pctx)
	stopProducing()
	raw.produceEnd = time.Now()
	if perr != nil && ctx.Err() == nil && errors.Is(perr, context.DeadlineExceeded) {
		l.Note = fmt.Sprintf("the producer fell behind the pace and was stopped at %s", o.duration)
		perr = nil
	}
	if perr == nil {
		// The end offsets of the fresh topic (its start may have moved:
		// retention).
		var ends kadm.ListedOffsets
		if ends, perr = b.adm.ListEndOffsets(ctx, topic); perr == nil {
			perr = ends.Error()
		}
		if perr == nil {
			ends.Each(func(o kadm.ListedOffset) { raw.produced += int(o.Offset) })
		}
	}
	if perr != nil {
		stopSampling()
		wg.Wait()
		_ = c.stop(60 * time.Second)
		return fail(perr)
	}
	rows, landed, werr := b.waitRows(ctx, table, int64(raw.produced), o.drain, c.exited)
	raw.landed, raw.rows = landed, rows
	raw.cpuAfter, _ = procCPU(pid)
	s1 := b.meter.snap()
	raw.chAfter, raw.sysAfter = s1.ch, s1.sysBusy
	stopSampling()
	wg.Wait()
	serr := c.stop(60 * time.Second)
	if werr != nil {
		l.Status = "incomplete: " + oneLine(werr.Error())
	} else if serr != nil {
		l.Status = "sink did not exit cleanly: " + oneLine(serr.Error())
	}
	raw.insertRows, err = b.ch.insertsOf(ctx, benchDB, table, raw.produceStart.Add(-time.Second), raw.landed.Add(time.Second))
	if err != nil {
		return fail(err)
	}
	hs, err := b.ch.query(ctx, latencyQuery(b.srv.key, benchDB, table, raw.produceStart))
	if err == nil {
		raw.hist, err = parseHist(hs)
	}
	if err != nil {
		return fail(fmt.Errorf("latency: %w", err))
	}
	raw.summarize(&l)
	if l.LatencyRows != l.Rows && l.Status == "ok" {
		l.Status = fmt.Sprintf("ok; latency of %s of the %s rows (the rest not matched to an INSERT)", num(float64(l.LatencyRows)), num(float64(l.Rows)))
	}
	logf("steady %s: offered %s rows/s, %s rows landed %.1fs after the producer stopped; client %.2f µs/row (%.2f cores), RSS %.0f MiB median %.0f max, %.1f inserts/min, latency p50 %s ms p99 %s ms (max_wait %gs)",
		name, num(l.OfferedRowsPerSec), num(float64(l.Rows)), l.DrainSec, l.ClientCPUUsPerRow, l.ClientCores, l.RSSMedianMiB, l.RSSMaxMiB,
		l.InsertsPerMin, num(l.LatencyP50Ms), num(l.LatencyP99Ms), l.MaxWaitSec)
	return l
}

// waitGroupStable waits until the consumer group has members and is
// Stable (its partitions assigned).
func (b *bench) waitGroupStable(ctx context.Context, group string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		gs, err := b.adm.DescribeGroups(ctx, group)
		if err == nil {
			if g, ok := gs[group]; ok && g.Err == nil && g.State == "Stable" && len(g.Members) > 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer group %s not stable after %s", group, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freeBytes is the space left to unprivileged users on path's filesystem.
func freeBytes(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// sampleRSS reads pid's resident set every interval until ctx ends.
func sampleRSS(ctx context.Context, pid int, every time.Duration) []int64 {
	var out []int64
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := rssOf(pid); err == nil {
			out = append(out, n)
		}
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// rssOf is VmRSS of /proc/PID/status, in bytes.
func rssOf(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmRSS(f)
}

func parseVmRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS %q", v)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/PID/status")
}

// steadyMarkdown renders the steady-state phase: how it was measured, then
// a table per server.
func (res *Results) steadyMarkdown(w func(string, ...any)) {
	have := false
	for _, sr := range res.Servers {
		have = have || sr.Steady != nil
	}
	if !have {
		return
	}
	w("## Steady state\n\n")
	w("A continuous paced stream instead of a backlog: per level, the sink (default config) waits on an empty topic of %d partitions; once its group is stable, a producer in the benchmark's process paces JSON records (the workload's kind) into the topic at the level's fraction of the backlog rate (the median rows/s of the sink variant's backlog drains on the same server in this run), then the benchmark waits until every record is a row; a *fixed* level paces at the rate `--steady-rates` names instead, the same for any build, so two builds' runs compare. ", res.Workload.Partitions)
	w("*Offered* is what the producer achieved (it shares the machine with the broker, the sink and ClickHouse). Over the window from the first record produced to the last row landed: the sink's CPU (`/proc/PID/stat`, idle time included) per row and in cores, its resident set (`VmRSS`, sampled every second: median and peak), the INSERTs per minute (`system.query_log`), rows per INSERT (median). ")
	w("Latency is per row, from the record's Kafka timestamp (set by the producer's client when it takes the record) to the row visible, on the machine's one clock; p50, p99 and the maximum over every row of the level, against the sink's `batch.max_wait`. *Landed after* is how long the last rows took after the producer stopped; a level the sink could not keep up with shows there and in the latency.\n\n")
	for _, sr := range res.Servers {
		st := sr.Steady
		if st == nil {
			continue
		}
		w("### %s\n\n", sr.Name)
		if st.Error != "" {
			w("Not measured: %s\n\n", mdEscape(st.Error))
			continue
		}
		all := make([]string, len(st.BacklogAll))
		for i, x := range st.BacklogAll {
			all[i] = num(x)
		}
		w("Backlog rate: %s rows/s (median of %d drains: %s). Latency: %s.\n\n", num(st.BacklogRowsPerSec), st.BacklogRuns, strings.Join(all, " / "), st.LatencyMethod)
		w("| level | target rows/s | offered rows/s | rows | landed after | client CPU µs/row | client cores | RSS MiB median / peak | INSERTs/min | rows/INSERT | latency p50 | p99 | max | max_wait | ClickHouse µs/row | rest of machine, cores | status |\n")
		w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, l := range st.Levels {
			w("| %s | %s | %s | %s | %.1f s | %s | %s | %.0f / %.0f | %.1f | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				levelName(l.Fraction), num(l.TargetRowsPerSec), num(l.OfferedRowsPerSec), num(float64(l.Rows)), l.DrainSec,
				f2(l.ClientCPUUsPerRow), f2(l.ClientCores), l.RSSMedianMiB, l.RSSMaxMiB, l.InsertsPerMin, num(l.RowsPerInsertMed),
				secs(l.LatencyP50Ms), secs(l.LatencyP99Ms), secs(l.LatencyMaxMs), secs(l.MaxWaitSec*1000), f2(l.CHCPUUsPerRow), f2(l.OtherCPUCores), mdEscape(strings.TrimSuffix(l.Status+"; "+l.Note, "; ")))
		}
		w("\n")
	}
}

// levelName is a level's first column: its fraction of the backlog rate,
// or "fixed" for a rate of --steady-rates.
func levelName(frac float64) string {
	if frac == 0 {
		return "fixed"
	}
	return strconv.FormatFloat(frac*100, 'f', 0, 64) + "%"
}

// secs formats milliseconds as seconds with two decimals ("—" for NaN).
func secs(ms float64) string {
	if math.IsNaN(ms) {
		return "—"
	}
	return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
}
