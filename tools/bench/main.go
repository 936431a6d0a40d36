// Command bench measures the sink against the alternatives on the local
// stack, on one fixed workload produced once: the sink (default config,
// per-partition batches, over HTTP where the server supports it, with
// GOMAXPROCS 1 and 2 against a ClickHouse pinned to the other core, and on
// the same events framed as Avro and Protobuf for the schema registry),
// ClickHouse's Kafka engine with a materialized view, kcat piped into
// clickhouse-client or into ClickHouse's HTTP interface, and naive
// per-record INSERTs; then replays seed 004's three configurations with a
// paced producer. All of that runs on each ClickHouse server of the stack
// in turn (18.16, then 26.9), each with its own tables of results; the
// runs of the variants are interleaved and each metric is reported as the
// median with its range. Then it runs the hot path's Go benchmarks and
// profiles the sink once (perf, and runtime/pprof in process), checks the
// performance targets per server and writes bench/results/<date>.md and .json.
// Per server, after the variants, the steady state (steady.go): paced
// streams at fractions of the sink's backlog rate; --steady-only runs the
// backlog drains and that alone (steady-<date>.md).
//
// Usage (scripts/bench.sh builds bin/sink and bin/bench first):
//
//	bench run [flags]     the whole benchmark (make bench)
//	bench naive [flags]   one INSERT per record; the naive variant runs it
//	bench inprocess [flags]  the sink's pipeline in this process, under
//	                      runtime/pprof (CPU and heap-at-peak profiles)
//	bench adaptive [flags]  batch.mode adaptive against the fixed defaults
//	                      and seed 004's hand-tuned setting on a workload
//	                      whose rate changes 20× (make bench-adaptive;
//	                      adaptive.go)
//	bench manytables [flags]  one connector into 100–500 tables of a server
//	                      at modest paced rates: INSERTs and new parts per
//	                      minute per server, with and without the insert
//	                      budget (manytables.go)
//	bench consume [flags]  read a topic with the sink's Kafka options and
//	                      nothing else: the CPU floor per record (consume.go)
//
// Concurrency: one variant runs at a time; each runs its clients as child
// processes and only polls ClickHouse meanwhile.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench run [flags] | bench naive [flags] | bench inprocess [flags] | bench adaptive [flags] | bench manytables [flags] | bench consume [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runMain(os.Args[2:])
	case "naive":
		err = naiveMain(os.Args[2:])
	case "inprocess":
		err = inprocessMain(os.Args[2:])
	case "adaptive":
		err = adaptiveMain(os.Args[2:])
	case "consume":
		err = consumeMain(os.Args[2:])
	case "manytables":
		err = manytablesMain(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (run, naive, inprocess, adaptive, manytables, consume)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func runMain(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var o options
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka brokers, comma-separated")
	servers := serverFlags(fs, "both")
	fs.StringVar(&o.stackRoot, "stack-root", envOr("SINK_STACK_ROOT", "."), "the checkout that started the local stack (server logs, Kafka jars); env SINK_STACK_ROOT")
	fs.StringVar(&o.sinkBin, "sink", "bin/sink", "the sink binary to measure")
	fs.StringVar(&o.sinkBefore, "sink-before", "", "another sink build for an A/B comparison: variants sink_before (default config) and sink_before_gomaxprocs2 (as sink_gomaxprocs2) run it, interleaved with the others (name them in --variants)")
	fs.StringVar(&o.loadgenBin, "loadgen", "bin/loadgen", "the loadgen binary (produces the avro and protobuf workloads)")
	fs.StringVar(&o.registry, "registry", "http://127.0.0.1:8081/apis/ccompat/v7", "schema registry (Confluent-compatible API) for the avro and protobuf variants")
	fs.StringVar(&o.explain, "explain", "bench/explain.txt", "file of explanations for missed targets, one per line: TARGET[@SERVER]: text (TARGET: cpu, rows_pipe, rows_engine, rss; SERVER: 18 or 26); a missing file explains nothing")
	fs.StringVar(&o.machineName, "machine", envOr("SINK_BENCH_MACHINE", ""), "a name for the machine in the results (e.g. \"2-core dev VM\"); env SINK_BENCH_MACHINE")
	fs.StringVar(&o.before, "profile-before", "", "an earlier results .json: its CPU profile is printed beside this run's as \"before\"")
	fs.StringVar(&o.out, "out", "bench/results", "where the results files go")
	fs.StringVar(&o.work, "work", ".stack/bench", "generated configs and logs of the clients")
	fs.StringVar(&o.topic, "topic", "bench_workload", "the workload topic: deleted, produced anew, and deleted afterwards unless --keep")
	fs.StringVar(&benchDB, "database", benchDB, "the ClickHouse database the benchmark owns on each server: dropped and made anew, and dropped afterwards unless --keep")
	fs.IntVar(&o.count, "count", 1_000_000, "records in the workload")
	fs.IntVar(&o.size, "size", 180, "bytes per record")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions of the workload topic")
	fs.Float64Var(&o.skew, "skew", 0, "key skew: Zipf exponent (> 1) of user_id, records keyed by it; 0 = uniform, round-robin")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of the workload")
	fs.IntVar(&o.runs, "runs", 3, "runs per variant, interleaved (every variant's run 1, then every variant's run 2, ...); the median and the spread are reported; the naive variant runs once")
	fs.IntVar(&o.sample, "naive-sample", 2000, "records the naive variant inserts one by one (then extrapolated)")
	variants := fs.String("variants", "sink,sink_per_partition,sink_http,kafka_engine,kcat_pipe,kcat_http,naive,sink_gomaxprocs1,sink_gomaxprocs2,sink_avro,sink_protobuf,sink_json_schema", "variants to run, comma-separated")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "longest a variant may take to land the workload")
	fs.DurationVar(&o.quiet, "settle", 15*time.Second, "longest wait for ClickHouse's merges to settle before each run")
	fs.BoolVar(&o.seed004.enabled, "seed004", true, "replay seed 004")
	fs.IntVar(&o.seed004.rate, "seed004-rate", 20_000, "seed 004 replay: records per replayed minute")
	fs.IntVar(&o.seed004.partitions, "seed004-partitions", 12, "seed 004 replay: partitions")
	fs.Float64Var(&o.seed004.minutes, "seed004-minutes", 6, "seed 004 replay: replayed minutes per stage")
	fs.Float64Var(&o.seed004.scale, "seed004-scale", 12, "seed 004 replay: time compression")
	fs.DurationVar(&o.seed004.drain, "seed004-drain", time.Minute, "seed 004 replay: how long the last rows may take to land beyond the stage's fetch waits")
	stages := fs.String("seed004-stages", "before,fetch_tuned,cross_partition,sink_defaults", "seed 004 replay: stages to run")
	fs.BoolVar(&o.steady.enabled, "steady", true, "measure the steady state: a paced stream at --steady-levels of the sink variant's backlog rate for --steady-duration per level, per server (steady.go)")
	fs.BoolVar(&o.steady.only, "steady-only", false, "the steady state alone: --runs backlog drains of the sink variant per server for its rate, then the levels; no other variants, seed 004 replay, cluster table, Go benchmarks or profile (writes steady-<date>.md)")
	fs.DurationVar(&o.steady.duration, "steady-duration", 5*time.Minute, "steady state: how long each level's paced stream runs")
	steadyLevels := fs.String("steady-levels", "0.5,0.9", "steady state: the paced rates, as fractions of the backlog rate, comma-separated")
	steadyRates := fs.String("steady-rates", "", "steady state: fixed paced rates in rows/s, comma-separated, instead of --steady-levels: the same stream for every build, so runs of two builds (--sink) compare")
	fs.DurationVar(&o.steady.drain, "steady-drain", 3*time.Minute, "steady state: longest wait for the last rows after the producer stopped (beyond it the level is reported incomplete)")
	fs.BoolVar(&o.goBench, "gobench", true, "run the hot path's Go benchmarks")
	fs.BoolVar(&o.perf, "profile", true, "profile one extra run of the sink with perf (not timed) and report its top functions")
	fs.BoolVar(&o.keep, "keep", false, "keep the bench database and topics afterwards")
	var co clusterOptions
	fs.StringVar(&co.mode, "cluster", "auto", "the cluster table (cluster.go): auto (when the cluster answers: scripts/stack.sh cluster up), on (a cluster that does not answer is an error row) or off")
	fs.BoolVar(&co.only, "cluster-only", false, "run the cluster table alone: no single-server variants, seed 004 replay, Go benchmarks or profile")
	fs.StringVar(&co.name, "cluster-name", "sink_cluster", "the cluster (remote_servers) the cluster table writes to")
	fs.StringVar(&co.ddl, "cluster-ddl", "sink_cluster_nodes", "a cluster of the same nodes, each its own shard, for the CREATE/DROP … ON CLUSTER of the bench tables; \"\" for a cluster without distributed DDL (the 26.9 servers: no Keeper), whose tables are created node by node as MergeTree")
	clusterHTTP := fs.String("cluster-http", "http://127.0.0.1:8201/,http://127.0.0.1:8202/,http://127.0.0.1:8203/,http://127.0.0.1:8204/", "every cluster node's HTTP address (control queries, query_log); the first one's system.clusters lists the nodes")
	fs.IntVar(&co.runs, "cluster-runs", 0, "runs per cluster variant, interleaved; 0 is --runs")
	clusterVars := fs.String("cluster-variants", "cluster_local_key,cluster_local_random,cluster_distributed", "cluster variants to run, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	co.http, co.variants = splitList(*clusterHTTP), splitList(*clusterVars)
	var err error
	if o.steady.levels, err = parseLevels(*steadyLevels); err != nil {
		return err
	}
	if o.steady.rates, err = parseRates(*steadyRates); err != nil {
		return err
	}
	if o.steady.only {
		if co.only {
			return errors.New("--steady-only and --cluster-only: pick one")
		}
		o.steady.enabled = true
		*variants, co.mode, o.goBench, o.perf, o.seed004.enabled = "sink", "off", false, false, false
	}
	if o.steady.enabled && (o.steady.duration <= 0 || o.steady.drain <= 0) {
		return errors.New("--steady-duration and --steady-drain must be positive")
	}
	if co.runs == 0 {
		co.runs = o.runs
	}
	for _, v := range co.variants {
		if clusterVariantName(v) == v {
			return fmt.Errorf("unknown cluster variant %q", v)
		}
	}
	switch co.mode {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("--cluster %q: want auto, on or off", co.mode)
	}
	if co.only && co.mode == "off" {
		return errors.New("--cluster-only with --cluster off measures nothing")
	}
	o.brokers = strings.Split(*brokers, ",")
	if o.servers, err = servers(); err != nil {
		return err
	}
	o.variants = splitList(*variants)
	o.seed004.stages = splitList(*stages)
	for _, v := range o.variants {
		if variantName(v) == v {
			return fmt.Errorf("unknown variant %q", v)
		}
	}
	if o.count < 1 || o.runs < 1 || o.partitions < 1 || o.seed004.scale <= 0 {
		return errors.New("--count, --runs, --partitions and --seed004-scale must be positive")
	}
	o.command = "make bench"
	if len(args) > 0 {
		o.command = "make bench BENCH_ARGS='" + strings.Join(quoteArgs(args), " ") + "'"
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.benchBin = exe

	ctx, cancel := signalContext()
	defer cancel()
	began := time.Now()
	b, err := newBench(ctx, o)
	if err != nil {
		return err
	}
	defer b.close()
	b.res.Started = began.UTC()
	b.res.Date = began.Format("2006-01-02")
	b.res.Command = o.command
	b.res.Machine = machine(b)
	b.res.SteadyOnly = o.steady.only
	if err := b.produceWorkload(ctx); err != nil {
		return err
	}
	clusterOn := co.mode == "on" || co.only
	if co.mode == "auto" && !co.only {
		if _, err := openCluster(ctx, co); err != nil {
			logf("no cluster table: %v", err)
		} else {
			clusterOn = true
		}
	}
	planned := 0
	if clusterOn {
		planned = co.runs * len(co.variants)
	}
	if co.only {
		o.servers, o.goBench, o.perf, o.seed004.enabled, o.seed004.stages = nil, false, false, false, nil
		b.opt = o
	} else {
		b.produceFormats(ctx)
		planned += b.plannedRuns()
	}
	b.progress = newProgress(planned)
	for _, srv := range o.servers {
		b.res.Servers = append(b.res.Servers, b.runServer(ctx, srv))
	}
	if clusterOn && ctx.Err() == nil {
		b.res.Cluster = b.runCluster(ctx, co)
	}
	if o.goBench && ctx.Err() == nil {
		b.quiesce()
		logf("Go benchmarks: %s", strings.Join(goBenchPackages, " "))
		var err error
		b.res.GoBench, b.res.GoBenchCommand, err = runGoBench(ctx)
		if err != nil {
			b.res.GoBenchError = oneLine(err.Error())
		}
	}
	// The profile is of the sink, not the server: once, on the first
	// server that answered.
	if o.perf && ctx.Err() == nil && slices.Contains(o.variants, "sink") {
		for i, sr := range b.res.Servers {
			if sr.Error != "" {
				continue
			}
			if _, err := b.useServer(ctx, o.servers[i]); err == nil {
				b.res.Profile = b.profileSink(ctx)
				b.res.Profile.Server = sr.Name
				b.profileMemory(ctx, b.res.Profile)
			}
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	explanations, err := readExplanations(o.explain, o.explain == "bench/explain.txt")
	if err != nil {
		return err
	}
	for i := range b.res.Servers {
		sr := &b.res.Servers[i]
		sr.Targets = evaluate(sr.Stats)
		explain(sr.Targets, sr.Key, explanations)
	}
	if o.before != "" {
		b.res.ProfileBefore, b.res.ProfileBeforeFrom = readProfileBefore(o.before)
	}
	if !o.keep {
		b.cleanup(ctx)
	}
	b.res.TookSec = time.Since(began).Seconds()
	path, err := b.res.write(o.out)
	if err != nil {
		return err
	}
	fmt.Print(b.res.markdown())
	logf("results: %s (and .json), took %.0f s", path, b.res.TookSec)
	return nil
}

// serverFlags declares the flags that pick the ClickHouse servers and their
// addresses; the function it returns resolves them after fs.Parse.
func serverFlags(fs *flag.FlagSet, def string) func() ([]chServer, error) {
	which := fs.String("clickhouse", def, "which ClickHouse server(s) to measure, one after the other: 18 (18.16), 26 (26.9) or both")
	s18 := chServer{key: "18", stack: "clickhouse"}
	s26 := chServer{key: "26", stack: "clickhouse26"}
	fs.StringVar(&s18.native, "ch18-addr", "127.0.0.1:9000", "ClickHouse 18.16 native address (the sink, clickhouse-client)")
	fs.StringVar(&s18.http, "ch18-http", "http://127.0.0.1:8123/", "ClickHouse 18.16 HTTP address (control queries, the HTTP pipe, naive inserts)")
	fs.StringVar(&s26.native, "ch26-addr", "127.0.0.1:19000", "ClickHouse 26.9 native address")
	fs.StringVar(&s26.http, "ch26-http", "http://127.0.0.1:18123/", "ClickHouse 26.9 HTTP address (also the sink's, over HTTP)")
	return func() ([]chServer, error) {
		switch *which {
		case "18", "18.16":
			return []chServer{s18}, nil
		case "26", "26.9":
			return []chServer{s26}, nil
		case "both":
			return []chServer{s18, s26}, nil
		}
		return nil, fmt.Errorf("--clickhouse %q: want 18, 26 or both", *which)
	}
}

// parseRates reads --steady-rates: rows/s above 0 (none when s is empty).
func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, x := range splitList(s) {
		f, err := strconv.ParseFloat(x, 64)
		if err != nil || !(f >= 1) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("--steady-rates: %q is not a rate of at least 1 row/s", x)
		}
		out = append(out, f)
	}
	return out, nil
}

// parseLevels reads --steady-levels: fractions in (0, 1].
func parseLevels(s string) ([]float64, error) {
	var out []float64
	for _, x := range splitList(s) {
		f, err := strconv.ParseFloat(x, 64)
		if err != nil || f <= 0 || f > 1 {
			return nil, fmt.Errorf("--steady-levels: %q is not a fraction in (0, 1]", x)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, errors.New("--steady-levels: no level")
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// signalContext is canceled by SIGINT/SIGTERM; running clients are
// stopped with SIGTERM first, so none outlives the benchmark.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		if _, ok := <-ch; ok {
			logf("interrupted: stopping clients")
			stopAll()
			cancel()
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// runServer measures every variant (and the seed 004 replay) against one
// server; a server that does not answer gets a row saying so.
func (b *bench) runServer(ctx context.Context, srv chServer) ServerResults {
	sr := ServerResults{Key: srv.key, Native: srv.native, HTTP: srv.http, Name: "ClickHouse " + srv.key}
	version, err := b.useServer(ctx, srv)
	if version != "" {
		sr.Version, sr.Name = version, "ClickHouse "+version
	}
	if err == nil {
		err = b.prepare(ctx)
	}
	if err != nil {
		sr.Error = oneLine(err.Error())
		logf("%s: %s", sr.Name, sr.Error)
		return sr
	}
	logf("=== %s (native %s, HTTP %s)", sr.Name, srv.native, srv.http)
	// Interleaved: every variant's first run, then every variant's
	// second, ..., so a slow minute of the shared machine lands on one run
	// of each variant rather than on all runs of one.
	for _, x := range runOrder(b.opt.variants, srv, b.opt.runs) {
		if ctx.Err() != nil {
			break
		}
		b.progress.next(fmt.Sprintf("%s: %s run %d of %d", sr.Name, x.key, x.run, runsOf(x.key, srv, b.opt.runs)))
		sr.Runs = append(sr.Runs, b.runVariant(ctx, x.key, x.run))
	}
	sr.Variants = pickMedians(sr.Runs)
	sr.Stats = summarizeRuns(sr.Runs)
	if b.opt.seed004.enabled && ctx.Err() == nil {
		sr.Seed004 = b.runSeed004(ctx)
	}
	if b.opt.steady.enabled && ctx.Err() == nil {
		sr.Steady = b.runSteady(ctx, sr.Runs)
	}
	return sr
}

// cleanup drops the bench database on every server and deletes the topics.
func (b *bench) cleanup(ctx context.Context) {
	for _, srv := range b.opt.servers {
		if err := newCH(srv.http).exec(ctx, "DROP DATABASE IF EXISTS "+benchDB); err != nil {
			logf("cleanup: %v", err)
		}
	}
	topics := append([]string{b.topic}, b.formatTopics...)
	for _, s := range b.opt.seed004.stages {
		topics = append(topics, "bench_seed004_"+s)
	}
	if _, err := b.adm.DeleteTopics(ctx, topics...); err != nil {
		logf("cleanup: %v", err)
	}
}

func machine(b *bench) Machine {
	m := Machine{Name: b.opt.machineName, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	// The stack's jars are named after the Kafka release.
	if jars, _ := filepath.Glob(filepath.Join(b.opt.stackRoot, ".cache/kafka-libs/kafka_2.13-*.jar")); len(jars) > 0 {
		m.Kafka = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "kafka_2.13-"), ".jar")
	} else if b.adm != nil {
		// Run from another checkout than the stack's: the broker's API
		// versions say which release it is at least.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if vs, err := b.adm.ApiVersions(ctx); err == nil {
			for _, v := range vs.Sorted() {
				if v.Err == nil {
					m.Kafka = v.VersionGuess() + " (guessed from the broker's API versions)"
					break
				}
			}
		}
	}
	if out, err := exec.Command(b.opt.sinkBin, "version").Output(); err == nil {
		m.Sink = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "sink "))
	}
	return m
}

// quoteArgs double-quotes the arguments that the shell would otherwise
// split or drop (empty, or holding a space), for the command line a
// results file gives to reproduce it.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t") {
			out[i] = `"` + a + `"`
		}
	}
	return out
}
