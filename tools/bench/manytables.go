package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"sink/tools/gen"
)

// bench manytables: one connector writing many tables of one server at
// modest rates, the case where INSERTs per server (not per table) are what
// the server feels. Per scenario (a number of tables and a rate shape), N
// topics of --partitions partitions each are routed by `table: t${1}` into
// N MergeTree tables; one producer in this process paces JSON records over
// the N topics (evenly, "low", or with a Zipf skew across them, "skewed",
// at the same total) for --duration while the sink runs with its default
// config plus the variant's overrides; then the benchmark waits until every
// record is a row. The variants of a scenario run one after the other,
// interleaved run by run (off 1, budget 1, off 2, budget 2, …), so a slow
// minute of the shared machine lands on one run of each.
//
// Per run, from the server's own logs summed over every table of the run:
// INSERTs/min (system.query_log) and new parts/min (system.part_log); from
// the tables: every row exact (per table, the rows equal the records its
// topic got, and no id twice) and the record→row latency of every row
// (steady.go's method), p50/p99 per table class (busy: the tenth of the
// topics with the largest shares; quiet: the rest; "all" when even); from
// the sink's process: CPU per row and resident set; from its log: the
// INSERTs that waited for a pooled connection in vain and the warnings.
// The budget variant is the default config plus --budget-config (e.g.
// clickhouse.max_inserts_per_minute=60): a build whose config does not know
// the key reports the run as "not run" with the config's message.

// mtDB is the database the many-tables bench owns on each server
// (--database): dropped and made anew for every run.
var mtDB = "bench_mt"

type mtOptions struct {
	brokers           []string
	servers           []chServer
	sinkBin, out      string
	prefix            string
	keep              bool
	work              string
	tables            []int
	shapes            []string
	ratePerTable      float64
	skew              float64
	partitions, size  int
	runs              int
	duration, drain   time.Duration
	variants          []string
	overrides         map[string]string // variant → "section.key=value,…"
	bounds            map[string]time.Duration
	machineName, date string
	command           string
	// cluster, when set, measures the cluster (cluster.go's nodes) in
	// place of the single servers: per shard ReplicatedMergeTree tables
	// and Distributed tables over them, written by the sink with
	// target: local; INSERTs and parts are counted per shard.
	cluster clusterOptions
	nodes   []clusterNode
}

func manytablesMain(args []string) error {
	fs := flag.NewFlagSet("manytables", flag.ContinueOnError)
	var o mtOptions
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka brokers, comma-separated")
	servers := serverFlags(fs, "both")
	fs.StringVar(&o.sinkBin, "sink", "bin/sink", "the sink binary to run")
	fs.StringVar(&o.out, "out", "bench/results", "where the results files go")
	fs.StringVar(&o.work, "work", ".stack/bench", "generated configs and logs of the sinks")
	fs.StringVar(&o.machineName, "machine", envOr("SINK_BENCH_MACHINE", ""), "a name for the machine in the results")
	tables := fs.String("tables", "100,500", "scenarios' table counts (one topic per table), comma-separated")
	shapes := fs.String("shapes", "low,skewed", "rate shapes, comma-separated: low (every topic --rate) or skewed (the same total, Zipf --skew across topics)")
	fs.Float64Var(&o.ratePerTable, "rate", 20, "records per second per topic (the mean, for skewed)")
	fs.Float64Var(&o.skew, "skew", 1.1, "skewed: Zipf exponent (> 1) of the topics' shares")
	fs.IntVar(&o.partitions, "partitions", 3, "partitions per topic")
	fs.BoolVar(&o.keep, "keep", false, "keep the topics and the last run's database afterwards")
	fs.StringVar(&mtDB, "database", mtDB, "the ClickHouse database the bench owns on each server, dropped and made anew for every run")
	fs.StringVar(&o.prefix, "topic-prefix", "bench_mt", "the topics are PREFIX<N>_<i> (kept between runs; two benches at once need different prefixes)")
	fs.IntVar(&o.size, "size", 180, "bytes per record")
	fs.IntVar(&o.runs, "runs", 3, "runs per variant and scenario, interleaved")
	fs.DurationVar(&o.duration, "duration", 5*time.Minute, "how long each run's paced stream runs (shorten for a quick look: --duration 1m)")
	fs.DurationVar(&o.drain, "drain", 4*time.Minute, "longest wait for the last rows after the producer stopped")
	variants := fs.String("variants", "off,budget", "variants, comma-separated: off (the default config, no budget) and budget (plus --budget-config)")
	budget := fs.String("budget-config", "clickhouse.max_inserts_per_minute=60,route.max_latency=2m", "the budget variant's overrides of the default config: section.key=value, comma-separated (sections kafka, clickhouse, batch, route)")
	common := fs.String("config", "", "overrides for every variant, as --budget-config (e.g. batch.mode=adaptive)")
	offBound := fs.Duration("latency-bound", 10*time.Second, "off: a table is over its bound when one of its rows took longer (record → row)")
	budgetBound := fs.Duration("budget-latency-bound", 2*time.Minute, "budget: the same bound for the budget variant")
	fs.StringVar(&o.cluster.name, "cluster", "", "measure this cluster (remote_servers; e.g. sink_cluster, scripts/stack.sh cluster up) instead of --clickhouse's servers: per shard INSERTs and parts")
	fs.StringVar(&o.cluster.ddl, "cluster-ddl", "sink_cluster_nodes", "--cluster: a cluster of the same nodes, each its own shard (listing the nodes)")
	clusterHTTP := fs.String("cluster-http", "http://127.0.0.1:8201/,http://127.0.0.1:8202/,http://127.0.0.1:8203/,http://127.0.0.1:8204/", "--cluster: every node's HTTP address")
	merge := fs.String("merge", "", "instead of measuring, merge these results .json files (comma-separated; benches run at the same time on different servers) into one results file in --out")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *merge != "" {
		return mergeMT(splitList(*merge), o.out)
	}
	var err error
	if o.servers, err = servers(); err != nil {
		return err
	}
	o.brokers = strings.Split(*brokers, ",")
	o.cluster.http = splitList(*clusterHTTP)
	for _, t := range splitList(*tables) {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 {
			return fmt.Errorf("--tables: %q is not a positive count", t)
		}
		o.tables = append(o.tables, n)
	}
	o.shapes, o.variants = splitList(*shapes), splitList(*variants)
	for _, s := range o.shapes {
		if s != "low" && s != "skewed" {
			return fmt.Errorf("--shapes: %q (want low or skewed)", s)
		}
	}
	o.overrides, o.bounds = map[string]string{}, map[string]time.Duration{}
	for _, v := range o.variants {
		switch v {
		case "off":
			o.overrides[v], o.bounds[v] = *common, *offBound
		case "budget":
			o.overrides[v], o.bounds[v] = strings.Trim(*common+","+*budget, ","), *budgetBound
		default:
			return fmt.Errorf("--variants: %q (want off or budget)", v)
		}
		if _, err := parseOverrides(o.overrides[v]); err != nil {
			return err
		}
	}
	if o.ratePerTable <= 0 || o.runs < 1 || o.partitions < 1 || o.duration <= 0 || o.drain <= 0 || o.skew <= 1 {
		return errors.New("--rate, --runs, --partitions, --duration and --drain must be positive, --skew above 1")
	}
	o.command = "make bench BENCH_ARGS='" + strings.TrimSpace("--manytables-only "+strings.Join(args, " ")) + "'"
	ctx, cancel := signalContext()
	defer cancel()
	b, err := newBench(ctx, options{brokers: o.brokers, work: o.work, sinkBin: o.sinkBin, stackRoot: envOr("SINK_STACK_ROOT", "."), machineName: o.machineName})
	if err != nil {
		return err
	}
	defer b.close()
	began := time.Now().UTC()
	o.date = began.Format("2006-01-02")
	rep := MTReport{Date: o.date, Started: began, Command: o.command, Machine: machine(b), RatePerTable: o.ratePerTable,
		Skew: o.skew, Partitions: o.partitions, Size: o.size, DurationSec: o.duration.Seconds(), Overrides: o.overrides}
	if o.cluster.name != "" {
		// The cluster's first node stands for the server: control
		// queries, its CPU; the sink finds the others from it.
		cr, err := openCluster(ctx, o.cluster)
		if err != nil {
			return err
		}
		o.nodes = cr.Nodes
		o.servers = []chServer{{key: "cluster", native: cr.Nodes[0].Native, http: cr.Nodes[0].HTTP}}
	}
scenarios:
	for _, srv := range o.servers {
		for _, n := range o.tables {
			for _, shape := range o.shapes {
				rep.Runs = append(rep.Runs, b.runManyTables(ctx, o, srv, n, shape)...)
				if ctx.Err() != nil {
					break scenarios
				}
			}
		}
	}
	if !o.keep {
		b.dropManyTables(o)
	}
	// Interrupted, the runs so far are written all the same (the one
	// interrupted among them, failed).
	rep.Summary = summarizeMT(rep.Runs)
	md, js, err := rep.write(o.out)
	if err != nil {
		return err
	}
	logf("results: %s and %s", md, js)
	return ctx.Err()
}

// mergeMT merges results files into one: every run, the summary made
// anew, the commands joined; the workload's figures are the first file's.
func mergeMT(files []string, out string) error {
	var rep MTReport
	var cmds []string
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r MTReport
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if i == 0 {
			rep = r
			rep.Runs = nil
		}
		rep.Runs = append(rep.Runs, r.Runs...)
		cmds = append(cmds, r.Command)
	}
	rep.Command = strings.Join(cmds, "` and `")
	rep.Summary = summarizeMT(rep.Runs)
	md, js, err := rep.write(out)
	if err != nil {
		return err
	}
	logf("merged %d files: %s and %s", len(files), md, js)
	return nil
}

// dropManyTables deletes the scenarios' topics and the database on every
// server.
func (b *bench) dropManyTables(o mtOptions) {
	ctx := context.Background()
	for _, ch := range o.controls() {
		if err := ch.exec(ctx, "DROP DATABASE IF EXISTS "+mtDB); err != nil {
			logf("cleanup: %v", err)
		}
	}
	var topics []string
	for _, n := range o.tables {
		for i := range n {
			topics = append(topics, fmt.Sprintf("%s%d_%d", o.prefix, n, i))
		}
	}
	if _, err := b.adm.DeleteTopics(ctx, topics...); err != nil {
		logf("cleanup: %v", err)
	}
}

// parseOverrides reads "section.key=value,…" into section → key → value;
// section route is the route's keys (route.max_latency=2m).
func parseOverrides(s string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		sec, key, ok2 := strings.Cut(strings.TrimSpace(k), ".")
		if !ok || !ok2 || key == "" {
			return nil, fmt.Errorf("override %q is not section.key=value", kv)
		}
		switch sec {
		case "kafka", "clickhouse", "batch", "route":
		default:
			return nil, fmt.Errorf("override %q: section %q (want kafka, clickhouse, batch or route)", kv, sec)
		}
		if out[sec] == nil {
			out[sec] = map[string]string{}
		}
		out[sec][key] = strings.TrimSpace(v)
	}
	return out, nil
}

// MTReport is the many-tables results file.
type MTReport struct {
	Date         string            `json:"date"`
	Started      time.Time         `json:"started"`
	Command      string            `json:"command"`
	Machine      Machine           `json:"machine"`
	RatePerTable float64           `json:"rate_per_table"`
	Skew         float64           `json:"skew"`
	Partitions   int               `json:"partitions"`
	Size         int               `json:"size"`
	DurationSec  float64           `json:"duration_sec"`
	Overrides    map[string]string `json:"overrides"`
	Runs         []MTRun           `json:"runs"`
	Summary      []MTSummary       `json:"summary"`
}

// MTRun is one run of one variant.
type MTRun struct {
	Server          string    `json:"server"`
	Tables          int       `json:"tables"`
	Shape           string    `json:"shape"`
	Variant         string    `json:"variant"`
	Run             int       `json:"run"`
	Status          string    `json:"status"`
	Config          string    `json:"config,omitempty"`
	TargetPerSec    float64   `json:"target_rows_per_sec"`
	Produced        int64     `json:"produced"`
	Rows            int64     `json:"rows"`
	Exact           bool      `json:"exact"`
	TablesWrong     int       `json:"tables_wrong"`       // rows ≠ records of its topic
	Duplicates      int64     `json:"duplicate_rows"`     // rows whose id another row has
	WindowSec       float64   `json:"window_sec"`         // first record → last row
	DrainSec        float64   `json:"drain_sec"`          // producer done → last row
	Inserts         int       `json:"inserts"`            // query_log, every table of the run
	InsertsPerMin   float64   `json:"inserts_per_min"`    // over the window
	MinuteInserts   []int     `json:"minute_inserts"`     // per whole clock minute within the window
	MaxMinute       int       `json:"max_minute_inserts"` // the largest of them (of any shard's, on a cluster)
	NewParts        int64     `json:"new_parts"`          // part_log NewPart, every table of the run
	PartsPerMin     float64   `json:"new_parts_per_min"`
	RowsPerInsert   float64   `json:"rows_per_insert_median"`
	ClientCPUSec    float64   `json:"client_cpu_sec"`
	CPUUsPerRow     float64   `json:"client_cpu_us_per_row"`
	RSSMedianMiB    float64   `json:"rss_median_mib"`
	RSSMaxMiB       float64   `json:"rss_max_mib"`
	ConnWaitErrors  int       `json:"conn_wait_errors"` // "acquire conn timeout" in the sink's log
	Warnings        int       `json:"log_warnings"`     // warn and error lines of the sink's log
	BoundSec        float64   `json:"latency_bound_sec"`
	Classes         []MTClass `json:"classes"`
	LoadAvg1Start   float64   `json:"loadavg1_start"`
	LoadAvg1End     float64   `json:"loadavg1_end"`
	LoadAvg5End     float64   `json:"loadavg5_end"`
	OtherCPUCores   float64   `json:"other_cpu_cores"` // the machine's busy CPU beyond the sink and this server, per second
	ServerCPUCores  float64   `json:"server_cpu_cores"`
	LatencyMethod   string    `json:"latency_method"`
	MaxWaitSec      float64   `json:"max_wait_sec"`
	TopShare        float64   `json:"top_topic_share"` // the busiest topic's expected share of the records
	StartedAt       time.Time `json:"started_at"`
	LatencyRowsSeen int64     `json:"latency_rows"`

	// On a cluster, per shard (summed over its replicas): INSERTs per
	// minute over the window, per whole minute, and new parts per minute.
	ShardInsertsPerMin []float64 `json:"shard_inserts_per_min,omitempty"`
	ShardMinutes       [][]int   `json:"shard_minute_inserts,omitempty"`
	ShardPartsPerMin   []float64 `json:"shard_new_parts_per_min,omitempty"`
}

// MTClass is the latency of one class of tables.
type MTClass struct {
	Name          string  `json:"name"` // busy, quiet or all
	Tables        int     `json:"tables"`
	Rows          int64   `json:"rows"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	MaxMs         float64 `json:"max_ms"`
	WorstTableP99 float64 `json:"worst_table_p99_ms"`
	OverBound     int     `json:"tables_over_bound"` // tables with a row slower than the bound
}

// runManyTables runs one scenario on srv: every variant, --runs times,
// interleaved.
func (b *bench) runManyTables(ctx context.Context, o mtOptions, srv chServer, n int, shape string) []MTRun {
	var out []MTRun
	version, err := b.useServer(ctx, srv)
	// Dropping and creating hundreds of tables on a shared server under
	// load has taken over the control queries' usual minute.
	b.ch.hc.Timeout = 3 * time.Minute
	name := "ClickHouse " + srv.key
	if version != "" {
		name = "ClickHouse " + version
	}
	if srv.key == "cluster" {
		name += fmt.Sprintf(" cluster %s (%d shards)", o.cluster.name, len(o.shards()))
	}
	topics := make([]string, n)
	for i := range topics {
		topics[i] = fmt.Sprintf("%s%d_%d", o.prefix, n, i)
	}
	if err == nil {
		err = gen.EnsureTopics(ctx, b.adm, topics, o.partitions)
	}
	if err != nil {
		logf("manytables %s: %v", name, err)
		for _, v := range o.variants {
			out = append(out, MTRun{Server: name, Tables: n, Shape: shape, Variant: v, Status: "failed: " + oneLine(err.Error())})
		}
		return out
	}
	for run := 1; run <= o.runs; run++ {
		for _, v := range o.variants {
			if ctx.Err() != nil {
				return out
			}
			r := b.runMTOnce(ctx, o, srv, name, topics, shape, v, run)
			logf("manytables %s %d tables %s %s run %d: %s; %.1f INSERTs/min, %.1f parts/min, %s rows exact=%v, CPU %.2f µs/row, RSS %.0f MiB, load %.2f",
				name, n, shape, v, run, r.Status, r.InsertsPerMin, r.PartsPerMin, num(float64(r.Rows)), r.Exact, r.CPUUsPerRow, r.RSSMedianMiB, r.LoadAvg1End)
			out = append(out, r)
		}
	}
	return out
}

func (b *bench) runMTOnce(ctx context.Context, o mtOptions, srv chServer, name string, topics []string, shape, variant string, run int) MTRun {
	n := len(topics)
	r := MTRun{Server: name, Tables: n, Shape: shape, Variant: variant, Run: run, Status: "ok", BoundSec: o.bounds[variant].Seconds(),
		TargetPerSec: o.ratePerTable * float64(n), LatencyMethod: latencyMethod26}
	if srv.key != "26" {
		r.LatencyMethod = latencyMethod18
	}
	skew := 0.0
	if shape == "skewed" {
		skew = o.skew
	}
	shares := gen.TopicShares(n, skew)
	r.TopShare = shares[0]
	fail := func(err error) MTRun {
		r.Status = "failed: " + oneLine(err.Error())
		return r
	}
	ov, _ := parseOverrides(o.overrides[variant])
	sc := sinkConf{name: "bench-manytables", group: b.group(fmt.Sprintf("mt%d-%s-%s", n, shape, variant), run),
		topicRegex: fmt.Sprintf("%s%d_([0-9]+)", o.prefix, n), table: "t${1}", database: mtDB,
		brokers: o.brokers, chAddrs: []string{srv.native}, kafka: ov["kafka"], batch: ov["batch"], clickhouse: ov["clickhouse"]}
	if o.cluster.name != "" {
		// Each shard's local table by key, as cluster.go's first variant.
		sc.cluster, sc.table = o.cluster.name, "t${1}_all"
		sc.route = "    target: local\n    sharding_key: user_id\n"
	}
	for _, k := range slices.Sorted(maps.Keys(ov["route"])) {
		sc.route += fmt.Sprintf("    %s: %s\n", k, ov["route"][k])
	}
	r.Config = strings.TrimSpace(sc.yaml())
	cfg, err := sc.parse()
	if err != nil {
		r.Status = "not run: " + oneLine(err.Error())
		return r
	}
	r.MaxWaitSec = cfg.Batch.MaxWait.Seconds()
	if err := b.mtCreate(ctx, o, srv, n, fmt.Sprintf("%s_%s_%d", shape, variant, run)); err != nil {
		return fail(err)
	}
	// The new group starts at the topics' ends: the records of earlier
	// runs are not this run's.
	ends, err := b.adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fail(err)
	}
	begin := map[string]int64{}
	ends.Each(func(l kadm.ListedOffset) { begin[l.Topic] += l.Offset })
	if _, err := b.adm.CommitOffsets(ctx, sc.group, ends.Offsets()); err != nil {
		return fail(fmt.Errorf("committing the group's start: %w", err))
	}
	defer b.deleteGroups(context.Background(), []string{sc.group})
	path := filepath.Join(o.work, fmt.Sprintf("ch%s_mt%d_%s_%s_%d.yaml", srv.key, n, shape, variant, run))
	if err := os.WriteFile(path, []byte(sc.yaml()), 0o644); err != nil {
		return fail(err)
	}
	b.quiesce()
	logPath := strings.TrimSuffix(path, ".yaml") + ".log"
	c, err := start(o.sinkBin, []string{"run", "--config", path}, logPath, nil)
	if err != nil {
		return fail(err)
	}
	pid := c.cmd.Process.Pid
	if err := b.waitGroupStable(ctx, sc.group, 90*time.Second); err != nil {
		_ = c.stop(60 * time.Second)
		return fail(fmt.Errorf("%w; sink log: %s", err, c.tail(3)))
	}
	r.LoadAvg1Start = loadAvg()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var rss []int64
	wg.Add(1)
	go func() { defer wg.Done(); rss = sampleRSS(sampleCtx, pid, time.Second) }()
	s0 := b.meter.snap()
	cpu0, _ := procCPU(pid)
	r.StartedAt = s0.at.UTC()
	p := gen.Produce{Brokers: o.brokers, Topics: topics, TopicSkew: skew, Rate: r.TargetPerSec,
		Count: int(r.TargetPerSec * o.duration.Seconds()), Events: gen.Config{Size: o.size, Seed: uint64(run)*1000 + uint64(n)}}
	pctx, stopProducing := context.WithTimeout(ctx, o.duration+2*time.Second)
	_, perr := p.Run(pctx)
	stopProducing()
	produceEnd := time.Now()
	if perr != nil && errors.Is(perr, context.DeadlineExceeded) && ctx.Err() == nil {
		perr = nil
		r.Status = "ok; the producer fell behind the pace and was stopped at the duration"
	}
	var after kadm.ListedOffsets
	if perr == nil {
		after, perr = settledEnds(ctx, b.adm, topics)
	}
	if perr != nil {
		stopSampling()
		wg.Wait()
		_ = c.stop(60 * time.Second)
		return fail(perr)
	}
	produced := map[string]int64{}
	after.Each(func(l kadm.ListedOffset) { produced[l.Topic] += l.Offset })
	for t := range produced {
		produced[t] -= begin[t]
		r.Produced += produced[t]
	}
	landed, werr := b.waitMTRows(ctx, o, r.Produced, o.drain, c.exited)
	cpu1, _ := procCPU(pid)
	s1 := b.meter.snap()
	stopSampling()
	wg.Wait()
	serr := c.stop(60 * time.Second)
	r.LoadAvg1End, r.LoadAvg5End = loadAvgs()
	if werr != nil {
		r.Status = "incomplete: " + oneLine(werr.Error())
	} else if serr != nil {
		r.Status = "sink did not exit cleanly: " + oneLine(serr.Error())
	}
	r.WindowSec = landed.Sub(s0.at).Seconds()
	r.DrainSec = landed.Sub(produceEnd).Seconds()
	r.ClientCPUSec = cpu1 - cpu0
	if r.WindowSec > 0 {
		r.ServerCPUCores = (s1.ch - s0.ch) / r.WindowSec
		r.OtherCPUCores = max(0, (s1.sysBusy-s0.sysBusy)-(s1.ch-s0.ch)-r.ClientCPUSec) / r.WindowSec
	}
	r.RSSMedianMiB, r.RSSMaxMiB = rssSpread(rss)
	r.ConnWaitErrors, r.Warnings = scanSinkLog(logPath)
	if err := b.mtServerLog(ctx, o, &r, s0.at, landed); err != nil {
		return fail(err)
	}
	if err := b.mtTables(ctx, o, &r, srv.key, topics, produced, shares, s0.at); err != nil {
		return fail(err)
	}
	if r.Rows > 0 {
		r.CPUUsPerRow = r.ClientCPUSec / float64(r.Rows) * 1e6
	}
	if !r.Exact && strings.HasPrefix(r.Status, "ok") {
		r.Status = fmt.Sprintf("not exact: %d tables' rows differ from their topics' records (%d rows, %d records), %d duplicate rows; ", r.TablesWrong, r.Rows, r.Produced, r.Duplicates) + r.Status
	}
	return r
}

// settledEnds lists the topics' end offsets once two listings two seconds
// apart agree (for at most 30 s). A producer stopped at its deadline may
// have produce requests on the wire that the broker appends after it
// returned; counted from an earlier listing, those records would land as
// rows the run did not expect.
func settledEnds(ctx context.Context, adm *kadm.Client, topics []string) (kadm.ListedOffsets, error) {
	sum := func(l kadm.ListedOffsets) (n int64) {
		l.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}
	var last kadm.ListedOffsets
	for deadline := time.Now().Add(30 * time.Second); ; {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return nil, err
		}
		if last != nil && sum(ends) == sum(last) || time.Now().After(deadline) {
			return ends, nil
		}
		last = ends
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// loadAvgs is the machine's 1- and 5-minute load averages.
func loadAvgs() (one, five float64) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0
	}
	one, _ = strconv.ParseFloat(f[0], 64)
	five, _ = strconv.ParseFloat(f[1], 64)
	return one, five
}

// rssSpread is the median and peak of RSS samples in MiB.
func rssSpread(rss []int64) (median, peak float64) {
	if len(rss) == 0 {
		return 0, 0
	}
	f := make([]float64, len(rss))
	for i, x := range rss {
		f[i] = float64(x) / (1 << 20)
	}
	sp := spreadOf(f)
	return sp.Median, sp.Max
}

// scanSinkLog counts, in the sink's log, the INSERTs that found no free
// pooled connection in time (clickhouse-go's "acquire conn timeout") and
// the warning and error lines.
func scanSinkLog(path string) (connWait, warnings int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "acquire conn timeout") {
			connWait++
		}
		if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) {
			warnings++
		}
	}
	return connWait, warnings
}

// mtTablesExpr is every table of the run, as one table expression.
func mtTablesExpr() string { return "merge('" + mtDB + "', '^t[0-9]+$')" }

// controls are the connections the run's database is made on: every
// node of the cluster, or the measured servers.
func (o mtOptions) controls() []*chHTTP {
	var out []*chHTTP
	if o.cluster.name != "" {
		for _, n := range o.nodes {
			out = append(out, n.ch)
		}
		return out
	}
	for _, srv := range o.servers {
		out = append(out, newCH(srv.http))
	}
	return out
}

// shards are the cluster's nodes by shard, in shard order.
func (o mtOptions) shards() [][]clusterNode {
	var out [][]clusterNode
	for _, n := range o.nodes {
		for len(out) < n.Shard {
			out = append(out, nil)
		}
		out[n.Shard-1] = append(out[n.Shard-1], n)
	}
	return out
}

// mtReaders are the connections the rows are read through, one per
// shard (its first replica: every replica holds the shard's rows once
// replicated), or the server.
func (b *bench) mtReaders(o mtOptions) []*chHTTP {
	if o.cluster.name == "" {
		return []*chHTTP{b.ch}
	}
	var out []*chHTTP
	for _, sh := range o.shards() {
		out = append(out, sh[0].ch)
	}
	return out
}

// mtCreate makes the run's database and its n tables afresh: on a
// server MergeTree tables t0…; on a cluster, on every node, a
// ReplicatedMergeTree table per shard (its ZooKeeper path carries tag and
// this benchmark's id, so nothing of an earlier run collides) and a
// Distributed table t…_all over them.
func (b *bench) mtCreate(ctx context.Context, o mtOptions, srv chServer, n int, tag string) error {
	if o.cluster.name == "" {
		cols := steadyColumns(srv.key)
		if err := b.ch.exec(ctx, "DROP DATABASE IF EXISTS "+mtDB); err != nil {
			return err
		}
		if err := b.ch.exec(ctx, "CREATE DATABASE "+mtDB); err != nil {
			return err
		}
		for i := range n {
			if err := b.ch.exec(ctx, fmt.Sprintf("CREATE TABLE %s.t%d (%s) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (user_id, ts)", mtDB, i, cols)); err != nil {
				return err
			}
		}
		return nil
	}
	cols := steadyColumns("18") // the cluster's nodes are 18.16
	errs := make([]error, len(o.nodes))
	var wg sync.WaitGroup
	for k, node := range o.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := node.ch
			ch.hc.Timeout = 3 * time.Minute
			q := []string{"DROP DATABASE IF EXISTS " + mtDB, "CREATE DATABASE " + mtDB}
			for i := range n {
				q = append(q,
					fmt.Sprintf("CREATE TABLE %s.t%d (%s) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/%s_%s_%s/t%d', '{replica}') PARTITION BY toYYYYMM(ts) ORDER BY (user_id, ts)",
						mtDB, i, cols, mtDB, b.id, tag, i),
					fmt.Sprintf("CREATE TABLE %s.t%d_all AS %s.t%d ENGINE = Distributed(%s, %s, t%d, cityHash64(user_id))", mtDB, i, mtDB, i, o.cluster.name, mtDB, i))
			}
			for _, x := range q {
				if err := ch.exec(ctx, x); err != nil {
					errs[k] = fmt.Errorf("node %s: %w", node.Native, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitMTRows waits until the run's tables hold want rows in all.
func (b *bench) waitMTRows(ctx context.Context, o mtOptions, want int64, timeout time.Duration, exited <-chan struct{}) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var got int64
	for {
		var n int64
		var err error
		for _, ch := range b.mtReaders(o) {
			c, e := ch.int64(ctx, "SELECT count() FROM "+mtTablesExpr())
			n, err = n+c, errors.Join(err, e)
		}
		if err == nil {
			got = n
			if n >= want {
				return time.Now(), nil
			}
		}
		select {
		case <-exited:
			return time.Now(), fmt.Errorf("the sink exited with %d of %d rows", got, want)
		case <-ctx.Done():
			return time.Now(), ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return time.Now(), fmt.Errorf("%d of %d rows after %s", got, want, timeout)
		}
	}
}

// mtServerLog reads the server's INSERTs into the run's tables and the new
// parts they made between from and to (query_log, part_log); on a cluster
// every node's, summed per shard, and the run's INSERTs/min and whole
// minutes are the busiest shard's (the budget is per shard).
func (b *bench) mtServerLog(ctx context.Context, o mtOptions, r *MTRun, from, to time.Time) error {
	shards := [][]*chHTTP{{b.ch}}
	if o.cluster.name != "" {
		shards = nil
		for _, sh := range o.shards() {
			var chs []*chHTTP
			for _, n := range sh {
				chs = append(chs, n.ch)
			}
			shards = append(shards, chs)
		}
	}
	var rows []float64
	mins := r.WindowSec / 60
	for _, sh := range shards {
		perMinute := map[int64]int{}
		var inserts int
		var parts int64
		for _, ch := range sh {
			x, err := mtNodeLog(ctx, ch, from, to, perMinute)
			if err != nil {
				return err
			}
			rows = append(rows, x.rows...)
			inserts += len(x.rows)
			parts += x.parts
		}
		r.Inserts += inserts
		r.NewParts += parts
		list, most := wholeMinutes(perMinute, from, to)
		r.MaxMinute = max(r.MaxMinute, most)
		if mins > 0 {
			r.ShardInsertsPerMin = append(r.ShardInsertsPerMin, float64(inserts)/mins)
			r.ShardPartsPerMin = append(r.ShardPartsPerMin, float64(parts)/mins)
		}
		r.ShardMinutes = append(r.ShardMinutes, list)
	}
	r.RowsPerInsert = spreadOf(rows).Median
	if mins > 0 {
		r.InsertsPerMin = slices.Max(r.ShardInsertsPerMin)
		r.PartsPerMin = slices.Max(r.ShardPartsPerMin)
	}
	r.MinuteInserts = r.ShardMinutes[0]
	for _, l := range r.ShardMinutes {
		if slices.Max(append([]int{0}, l...)) == r.MaxMinute {
			r.MinuteInserts = l
		}
	}
	if len(shards) == 1 {
		r.ShardInsertsPerMin, r.ShardMinutes, r.ShardPartsPerMin = nil, nil, nil
	}
	return nil
}

// nodeLog is one node's INSERTs into the run's tables: the rows of each,
// and the new parts.
type nodeLog struct {
	rows  []float64
	parts int64
}

// mtNodeLog reads one node's query_log and part_log between from and to,
// adding its INSERTs per clock minute (Unix seconds) to perMinute.
func mtNodeLog(ctx context.Context, ch *chHTTP, from, to time.Time, perMinute map[int64]int) (nodeLog, error) {
	var x nodeLog
	if err := ch.exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		return x, err
	}
	t0, t1 := from.Unix()-1, to.Unix()+1
	ours := `match(query, '^INSERT INTO ` + "`?" + mtDB + "`?" + `\\.')`
	s, err := ch.query(ctx, fmt.Sprintf("SELECT toUnixTimestamp(toStartOfMinute(event_time)) AS m, written_rows FROM system.query_log WHERE type = 2 AND event_date >= yesterday() AND event_time BETWEEN %d AND %d AND %s",
		t0, t1, ours))
	if err != nil {
		return x, err
	}
	for _, l := range splitLines(s) {
		var m int64
		var n float64
		if _, err := fmt.Sscanf(l, "%d\t%g", &m, &n); err != nil {
			return x, fmt.Errorf("query_log answer %q", l)
		}
		x.rows = append(x.rows, n)
		perMinute[m]++
	}
	x.parts, err = ch.int64(ctx, fmt.Sprintf("SELECT count() FROM system.part_log WHERE event_type = 1 AND event_date >= yesterday() AND event_time BETWEEN %d AND %d AND database = '%s'",
		t0, t1, mtDB))
	return x, err
}

// wholeMinutes lists the counts of the clock minutes that lie wholly
// within [from, to], in order (a minute without INSERTs counts 0), and
// their largest.
func wholeMinutes(counts map[int64]int, from, to time.Time) (list []int, most int) {
	for m := from.Truncate(time.Minute).Add(time.Minute); !m.Add(time.Minute).After(to); m = m.Add(time.Minute) {
		c := counts[m.Unix()]
		list = append(list, c)
		most = max(most, c)
	}
	return list, most
}

func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// mtTables checks every table's rows against its topic's records and
// measures the latency of every row, per class of tables.
func (b *bench) mtTables(ctx context.Context, o mtOptions, r *MTRun, srvKey string, topics []string, produced map[string]int64, shares []float64, from time.Time) error {
	var s string
	for _, ch := range b.mtReaders(o) {
		x, err := ch.query(ctx, "SELECT _table, count(), uniqExact(id) FROM "+mtTablesExpr()+" GROUP BY _table")
		if err != nil {
			return err
		}
		s += x + "\n"
	}
	rows := map[string]int64{}
	for _, l := range splitLines(s) {
		var t string
		var c, u int64
		if _, err := fmt.Sscanf(l, "%s\t%d\t%d", &t, &c, &u); err != nil {
			return fmt.Errorf("row counts: %q", l)
		}
		rows[t] += c
		r.Rows += c
		r.Duplicates += c - u
	}
	for i, topic := range topics {
		if rows[fmt.Sprintf("t%d", i)] != produced[topic] {
			r.TablesWrong++
		}
	}
	var q string
	if srvKey != "26" {
		q = "SELECT _table, toInt64(toUInt32(_ins)) * 1000 + 500 - toInt64(_timestamp) AS ms, count() FROM " + mtTablesExpr() + " GROUP BY _table, ms"
	} else {
		q = fmt.Sprintf("SELECT t._table, toInt64(toUnixTimestamp64Milli(q.fin)) - toInt64(t._timestamp) AS ms, count() FROM %s AS t "+
			"INNER JOIN (SELECT query_id, any(event_time_microseconds) AS fin FROM system.query_log WHERE type = 2 AND event_date >= yesterday() AND event_time >= %d "+
			"AND match(query, '^INSERT INTO `?%s`?\\\\.') GROUP BY query_id) AS q ON t._qid = q.query_id GROUP BY t._table, ms", mtTablesExpr(), from.Unix()-1, mtDB)
	}
	s = ""
	for _, ch := range b.mtReaders(o) {
		x, err := ch.query(ctx, q)
		if err != nil {
			return fmt.Errorf("latency: %w", err)
		}
		s += x + "\n"
	}
	hists := map[int][]latBucket{}
	for _, l := range splitLines(s) {
		f := strings.Split(l, "\t")
		if len(f) != 3 || !strings.HasPrefix(f[0], "t") {
			return fmt.Errorf("latency line %q", l)
		}
		i, err1 := strconv.Atoi(f[0][1:])
		ms, err2 := strconv.ParseFloat(f[1], 64)
		c, err3 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("latency line %q", l)
		}
		hists[i] = append(hists[i], latBucket{ms: ms, count: c})
		r.LatencyRowsSeen += c
	}
	r.Classes = mtClasses(hists, len(topics), shares[0] != shares[len(shares)-1], r.BoundSec*1000)
	r.Exact = r.TablesWrong == 0 && r.Duplicates == 0 && r.Rows == r.Produced
	return nil
}

// mtClasses sums the tables' latency histograms per class: with skewed
// rates, busy (the tenth of the tables with the largest shares, at least
// one: tables 0 … n/10-1) and quiet (the rest); with even rates one class,
// all. boundMs counts the tables with a row slower than it.
func mtClasses(hists map[int][]latBucket, n int, skewed bool, boundMs float64) []MTClass {
	type class struct {
		name   string
		lo, hi int
	}
	classes := []class{{"all", 0, n}}
	if skewed {
		busy := max(1, n/10)
		classes = []class{{"busy", 0, busy}, {"quiet", busy, n}}
	}
	var out []MTClass
	for _, cl := range classes {
		c := MTClass{Name: cl.name, Tables: cl.hi - cl.lo}
		var all []latBucket
		for i := cl.lo; i < cl.hi; i++ {
			h := hists[i]
			if len(h) == 0 {
				continue
			}
			all = append(all, h...)
			c.WorstTableP99 = max(c.WorstTableP99, histQuantile(h, 0.99))
			if histQuantile(h, 1) > boundMs {
				c.OverBound++
			}
		}
		for _, x := range all {
			c.Rows += x.count
		}
		if c.Rows > 0 {
			c.P50Ms, c.P99Ms, c.MaxMs = histQuantile(all, 0.5), histQuantile(all, 0.99), histQuantile(all, 1)
		}
		out = append(out, c)
	}
	return out
}

// MTSummary is one variant of one scenario over its runs: the median and
// range of each figure, and the ratio of its median INSERTs/min to the off
// variant's.
type MTSummary struct {
	Server        string  `json:"server"`
	Tables        int     `json:"tables"`
	Shape         string  `json:"shape"`
	Variant       string  `json:"variant"`
	Runs          int     `json:"runs"` // that succeeded
	Of            int     `json:"of"`
	Exact         int     `json:"exact_runs"`
	InsertsPerMin Spread  `json:"inserts_per_min"`
	MaxMinute     Spread  `json:"max_minute_inserts"`
	PartsPerMin   Spread  `json:"new_parts_per_min"`
	RowsPerInsert Spread  `json:"rows_per_insert"`
	CPUUsPerRow   Spread  `json:"client_cpu_us_per_row"`
	RSSMiB        Spread  `json:"rss_median_mib"`
	P99Busy       Spread  `json:"p99_ms_busy_or_all"`
	P99Quiet      Spread  `json:"p99_ms_quiet"`
	LoadAvg1      Spread  `json:"loadavg1_end"`
	InsertsRatio  float64 `json:"inserts_ratio_to_off,omitempty"`
	ConnWait      int     `json:"conn_wait_errors"`
	Status        string  `json:"status,omitempty"` // of a variant with no successful run
}

func summarizeMT(runs []MTRun) []MTSummary {
	type key struct {
		server  string
		tables  int
		shape   string
		variant string
	}
	var order []key
	groups := map[key][]MTRun{}
	for _, r := range runs {
		k := key{r.Server, r.Tables, r.Shape, r.Variant}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []MTSummary
	offMedian := map[key]float64{}
	for _, k := range order {
		s := MTSummary{Server: k.server, Tables: k.tables, Shape: k.shape, Variant: k.variant, Of: len(groups[k])}
		var ins, maxMin, parts, rpi, cpu, rss, p99a, p99b, load []float64
		for _, r := range groups[k] {
			if !strings.HasPrefix(r.Status, "ok") && !strings.HasPrefix(r.Status, "not exact") {
				s.Status = r.Status
				continue
			}
			s.Runs++
			if r.Exact {
				s.Exact++
			}
			s.ConnWait += r.ConnWaitErrors
			ins, parts, rpi = append(ins, r.InsertsPerMin), append(parts, r.PartsPerMin), append(rpi, r.RowsPerInsert)
			maxMin = append(maxMin, float64(r.MaxMinute))
			cpu, rss, load = append(cpu, r.CPUUsPerRow), append(rss, r.RSSMedianMiB), append(load, r.LoadAvg1End)
			if len(r.Classes) > 0 {
				p99a = append(p99a, r.Classes[0].P99Ms)
			}
			if len(r.Classes) > 1 {
				p99b = append(p99b, r.Classes[1].P99Ms)
			}
		}
		s.InsertsPerMin, s.PartsPerMin, s.RowsPerInsert = spreadOf(ins), spreadOf(parts), spreadOf(rpi)
		s.MaxMinute = spreadOf(maxMin)
		s.CPUUsPerRow, s.RSSMiB, s.LoadAvg1 = spreadOf(cpu), spreadOf(rss), spreadOf(load)
		s.P99Busy, s.P99Quiet = spreadOf(p99a), spreadOf(p99b)
		if k.variant == "off" && s.Runs > 0 {
			offMedian[key{k.server, k.tables, k.shape, ""}] = s.InsertsPerMin.Median
		}
		out = append(out, s)
	}
	for i, s := range out {
		if off := offMedian[key{s.Server, s.Tables, s.Shape, ""}]; s.Variant != "off" && off > 0 && s.Runs > 0 {
			out[i].InsertsRatio = s.InsertsPerMin.Median / off
		}
	}
	return out
}

// write puts the report into dir as manytables-<date>.md and .json.
func (rep MTReport) write(dir string) (md, js string, err error) {
	if err = os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	md = filepath.Join(dir, "manytables-"+rep.Date+".md")
	js = filepath.Join(dir, "manytables-"+rep.Date+".json")
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return
	}
	if err = os.WriteFile(js, append(data, '\n'), 0o644); err != nil {
		return
	}
	err = os.WriteFile(md, []byte(rep.markdown()), 0o644)
	return
}

func (rep MTReport) markdown() string {
	var b strings.Builder
	w := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	w("# Many tables: INSERTs per server\n\n")
	w("Command: `%s` (%s, started %s UTC).\n\n", rep.Command, rep.Date, rep.Started.Format("15:04"))
	m := rep.Machine
	if m.Name != "" {
		w("Machine: %s, ", m.Name)
	} else {
		w("Machine: ")
	}
	w("%d CPUs (`nproc`), %s, kernel %s, %s, Kafka %s, sink %s. The machine is shared with other builds and tests: each run's 1-minute load average at its end is in its row. ",
		m.CPUs, m.CPUModel, m.Kernel, m.Go, m.Kafka, m.Sink)
	w("Absolute numbers are this machine's under that load, not the product's speed; compare variants of the same scenario, which ran interleaved.\n\n")
	w("Workload: per scenario N topics of %d partitions, routed by `table: t${1}` into N MergeTree tables of one server by one connector; one producer paces %s-byte JSON records at %g records/s per topic on average for %s: *low* every topic the same rate, *skewed* the same total with a Zipf exponent %g across topics (topic i gets (i+1)^-%g of the records). ",
		rep.Partitions, num(float64(rep.Size)), rep.RatePerTable, time.Duration(rep.DurationSec*float64(time.Second)), rep.Skew, rep.Skew)
	w("Variants: ")
	for _, v := range slices.Sorted(maps.Keys(rep.Overrides)) {
		o := rep.Overrides[v]
		if o == "" {
			o = "the default config"
		} else {
			o = "the default config with `" + o + "`"
		}
		w("*%s*: %s; ", v, o)
	}
	w("each run a fresh consumer group starting at the topics' ends and fresh tables.\n\n")
	w("Per run: INSERTs/min and new parts/min are the server's own counts (`system.query_log` QueryFinish INSERTs and `system.part_log` NewPart events, summed over every table of the run) over the window from the first record produced to the last row landed; *exact* means every table holds exactly its topic's records and no id twice; latency is per row, record timestamp → row visible (18.16: ±0.5 s; 26.9: ±1 ms, as in the steady state); classes: *busy* the tenth of the tables with the largest shares, *quiet* the rest, *all* with even rates; *over bound* counts tables with a row slower than the variant's bound; client CPU per row and RSS (median of 1 s samples) are the sink's process; *conn wait* the INSERTs whose pooled connection did not come in time (sink log).\n\n")
	w("## Summary (median and range over the runs)\n\n")
	w("| server | tables | shape | variant | runs ok / exact / of | INSERTs/min | busiest whole minute | ÷ off | new parts/min | rows/INSERT | p99 busy or all | p99 quiet | client CPU µs/row | RSS MiB | conn wait | load avg (1 min) |\n")
	w("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range rep.Summary {
		ratio := "—"
		if s.InsertsRatio > 0 {
			ratio = f2(s.InsertsRatio)
		}
		status := ""
		if s.Runs == 0 {
			status = " " + mdEscape(s.Status)
		}
		w("| %s | %d | %s | %s | %d / %d / %d%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n", s.Server, s.Tables, s.Shape, s.Variant,
			s.Runs, s.Exact, s.Of, status, spreadText(s.InsertsPerMin, f1), spreadText(s.MaxMinute, num), ratio, spreadText(s.PartsPerMin, f1), spreadText(s.RowsPerInsert, num),
			spreadText(s.P99Busy, msSecs), spreadText(s.P99Quiet, msSecs), spreadText(s.CPUUsPerRow, f2), spreadText(s.RSSMiB, f1), s.ConnWait, spreadText(s.LoadAvg1, f2))
	}
	w("\n## Every run\n\n")
	w("| server | tables | shape | variant | run | status | offered rows/s | rows | exact | INSERTs/min | INSERTs per whole minute | new parts/min | rows/INSERT | class: p50 / p99 / max, worst table p99, over bound | landed after | client CPU µs/row | RSS MiB median / peak | conn wait | warnings | server cores | rest of machine, cores | load avg 1 min start → end (5 min) |\n")
	w("|---|---:|---|---|---:|---|---:|---:|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rep.Runs {
		var cls []string
		for _, c := range r.Classes {
			cls = append(cls, fmt.Sprintf("%s (%d): %s / %s / %s, %s, %d", c.Name, c.Tables, msSecs(c.P50Ms), msSecs(c.P99Ms), msSecs(c.MaxMs), msSecs(c.WorstTableP99), c.OverBound))
		}
		offered := 0.0
		if r.WindowSec > r.DrainSec {
			offered = float64(r.Produced) / (r.WindowSec - r.DrainSec)
		}
		w("| %s | %d | %s | %s | %d | %s | %s | %s | %v | %.1f | %s | %.1f | %s | %s | %.1f s | %s | %.0f / %.0f | %d | %d | %s | %s | %.2f → %.2f (%.2f) |\n",
			r.Server, r.Tables, r.Shape, r.Variant, r.Run, mdEscape(r.Status), num(offered), num(float64(r.Rows)), r.Exact, r.InsertsPerMin, runMinutesText(r), r.PartsPerMin,
			num(r.RowsPerInsert), strings.Join(cls, "; "), r.DrainSec, f2(r.CPUUsPerRow), r.RSSMedianMiB, r.RSSMaxMiB, r.ConnWaitErrors, r.Warnings,
			f2(r.ServerCPUCores), f2(r.OtherCPUCores), r.LoadAvg1Start, r.LoadAvg1End, r.LoadAvg5End)
	}
	w("\nLatency: %s; %s.\n", latencyMethod18, latencyMethod26)
	return b.String()
}

// runMinutesText is a run's INSERTs per whole minute; on a cluster per
// shard, with the shard's INSERTs and new parts per minute.
func runMinutesText(r MTRun) string {
	if len(r.ShardMinutes) == 0 {
		return minutesText(r.MinuteInserts)
	}
	var out []string
	for i, l := range r.ShardMinutes {
		t := fmt.Sprintf("shard %d: %s", i+1, minutesText(l))
		if i < len(r.ShardInsertsPerMin) {
			t += fmt.Sprintf(" (%.1f/min, %.1f parts/min)", r.ShardInsertsPerMin[i], r.ShardPartsPerMin[i])
		}
		out = append(out, t)
	}
	return strings.Join(out, "; ")
}

// minutesText lists per-minute counts, comma-separated.
func minutesText(c []int) string {
	var s []string
	for _, x := range c {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ", ")
}

// msSecs formats milliseconds as seconds with one decimal.
func msSecs(ms float64) string {
	if math.IsNaN(ms) {
		return "—"
	}
	return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s"
}
