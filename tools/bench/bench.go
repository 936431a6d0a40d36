package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/tools/gen"
)

// benchDB is the ClickHouse database the benchmark owns: dropped and made
// anew at every run, so every variant writes into a fresh table. --database
// names another, so that two benchmarks on one shared server do not drop
// each other's tables.
var benchDB = "bench"

type options struct {
	brokers     []string
	servers     []chServer // one after the other, each with every variant
	stackRoot   string     // the checkout that started the stack: server logs, Kafka jars
	sinkBin     string
	sinkBefore  string // the build variant sink_before runs ("": not run)
	benchBin    string
	loadgenBin  string // produces the registry-framed workloads
	registry    string // the schema registry the avro/protobuf variants use
	explain     string // file of explanations for missed targets
	machineName string // what the results call the machine
	before      string // an earlier results .json whose CPU profile is shown as "before"
	out, work   string
	topic       string // the workload topic, deleted and produced anew
	count       int
	size        int
	partitions  int
	skew        float64
	seed        uint64
	runs        int
	sample      int
	variants    []string
	timeout     time.Duration
	quiet       time.Duration // longest wait for an idle machine before a run
	seed004     seed004Options
	steady      steadyOptions
	goBench     bool
	perf        bool
	keep        bool
	command     string // how the run was started, for the results file
}

// chServer is one ClickHouse server of the local stack.
type chServer struct {
	key    string // "18" or "26", as --clickhouse names it
	native string // host:port of the native protocol (the sink, clickhouse-client)
	http   string // http://host:port/ (control queries, the HTTP pipe, naive inserts)
	stack  string // its directory under <stack root>/.stack, for its error log
}

// httpAddr is the host:port of the server's HTTP interface.
func (s chServer) httpAddr() string {
	a := strings.TrimPrefix(strings.TrimPrefix(s.http, "http://"), "https://")
	return strings.TrimSuffix(a, "/")
}

type bench struct {
	opt   options
	srv   chServer // the server being measured
	ch    *chHTTP  // control queries to srv
	meter cpuMeter // srv's and Kafka's CPU
	kcl   *kgo.Client
	adm   *kadm.Client
	id    string // names groups and files of this run
	topic string
	res   Results
	// formatSkip says, per registry format, why its variant does not run
	// (empty when it does); formatTopics are the topics produced for them.
	formatSkip   map[string]string
	formatTopics []string
	formatBytes  map[string]float64 // mean record size of each format's topic
	jsonDigest   string             // the rows of the first JSON sink run on the current server (digest)
	progress     progress
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func newBench(ctx context.Context, opt options) (*bench, error) {
	if opt.topic == "" {
		opt.topic = "bench_workload"
	}
	b := &bench{opt: opt, id: time.Now().UTC().Format("20060102t150405"), topic: opt.topic}
	if err := os.MkdirAll(opt.work, 0o755); err != nil {
		return nil, err
	}
	var err error
	if b.meter.kafkaPID, err = listenerPID(portOf(opt.brokers[0], 9092)); err != nil {
		logf("Kafka broker process not found (%v); its CPU is not reported", err)
	}
	b.kcl, err = kgo.NewClient(kgo.SeedBrokers(opt.brokers...))
	if err != nil {
		return nil, err
	}
	b.adm = kadm.NewClient(b.kcl)
	return b, nil
}

// useServer points the benchmark at srv: control queries, the CPU meter
// and the clients of every variant run from now on. It returns the
// server's version.
func (b *bench) useServer(ctx context.Context, srv chServer) (string, error) {
	b.srv, b.ch, b.jsonDigest = srv, newCH(srv.http), ""
	version, err := b.ch.query(ctx, "SELECT version()")
	if err != nil {
		return "", fmt.Errorf("ClickHouse %s is not reachable (make stack-up): %w", srv.http, err)
	}
	if b.meter.chPID, err = listenerPID(portOf(srv.native, 9000)); err != nil {
		return version, fmt.Errorf("the process of ClickHouse %s (for its CPU): %w", srv.native, err)
	}
	return version, nil
}

func portOf(addr string, def int) int {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		var p int
		if _, err := fmt.Sscanf(addr[i+1:], "%d", &p); err == nil {
			return p
		}
	}
	return def
}

func (b *bench) close() { b.kcl.Close() }

// prepare makes the bench database fresh on the current server.
func (b *bench) prepare(ctx context.Context) error {
	if err := b.ch.exec(ctx, "DROP DATABASE IF EXISTS "+benchDB); err != nil {
		return err
	}
	return b.ch.exec(ctx, "CREATE DATABASE "+benchDB)
}

// produceWorkload produces the workload once, for every server.
func (b *bench) produceWorkload(ctx context.Context) error {
	logf("producing the workload: %d events of ~%d bytes into %s (%d partitions, skew %g)",
		b.opt.count, b.opt.size, b.topic, b.opt.partitions, b.opt.skew)
	p := gen.Produce{
		Brokers: b.opt.brokers, Topic: b.topic, Count: b.opt.count, Partitions: b.opt.partitions, Recreate: true,
		Events: gen.Config{Size: b.opt.size, Seed: b.opt.seed, Skew: b.opt.skew},
	}
	r, err := p.Run(ctx)
	if err != nil && ctx.Err() == nil {
		// A topic just deleted and created again may still be known to
		// the broker under its old id (UNKNOWN_TOPIC_ID): once more.
		logf("producing the workload failed (%v); once more in 2 s", err)
		time.Sleep(2 * time.Second)
		r, err = p.Run(ctx)
	}
	if err != nil {
		return err
	}
	per, err := b.partitionCounts(ctx, b.topic)
	if err != nil {
		return err
	}
	b.res.Workload = Workload{
		Topic: b.topic, Records: r.Events, Bytes: r.Bytes, RecordBytes: float64(r.Bytes) / float64(max(r.Events, 1)),
		Partitions: b.opt.partitions, PerPartition: per, Skew: b.opt.skew, Seed: b.opt.seed, ProduceSec: r.Took.Seconds(),
	}
	logf("produced %d events (%.0f MB) in %.1fs", r.Events, float64(r.Bytes)/1e6, r.Took.Seconds())
	return nil
}

// partitionCounts is how many records each partition of topic holds.
func (b *bench) partitionCounts(ctx context.Context, topic string) ([]int64, error) {
	ends, err := b.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	starts, err := b.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []int64
	ends.Each(func(o kadm.ListedOffset) {
		for int(o.Partition) >= len(out) {
			out = append(out, 0)
		}
		s, _ := starts.Lookup(o.Topic, o.Partition)
		out[o.Partition] = o.Offset - s.Offset
	})
	return out, nil
}

// createTable makes a fresh target table: the workload's JSON fields, as
// the demo's table has them, ordered for queries by user.
func (b *bench) createTable(ctx context.Context, table string) error {
	return b.ch.exec(ctx, "CREATE TABLE "+benchDB+"."+table+" ("+eventColumns+
		") ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (user_id, ts)")
}

// eventColumns are the fields of tools/gen's events, and nothing the
// JSONEachRow pipes could not fill, so every variant writes the same thing.
const eventColumns = "id UInt64, user_id UInt64, ts DateTime, event_type String, channel String, cost Decimal(18, 2), payload String"

// quiesce waits, up to opt.quiet, until ClickHouse's background merges
// from the previous run are done and the machine is idle, so a run is not
// charged for its predecessor.
func (b *bench) quiesce() {
	deadline := time.Now().Add(b.opt.quiet)
	for {
		s0 := b.meter.snap()
		time.Sleep(time.Second)
		s1 := b.meter.snap()
		ch, sys := s1.ch-s0.ch, s1.sysBusy-s0.sysBusy
		if ch < 0.05 && sys < 0.2 {
			return
		}
		if time.Now().After(deadline) {
			logf("machine not idle after %s (last second: ClickHouse %.2f, all processes %.2f CPU-s/s); measuring anyway", b.opt.quiet, ch, sys)
			return
		}
	}
}

// waitRows polls count() until the table (in benchDB unless qualified
// as db.table) holds want rows. exited, when it
// closes, means the writer is gone: one more count decides.
func (b *bench) waitRows(ctx context.Context, table string, want int64, timeout time.Duration, exited <-chan struct{}) (int64, time.Time, error) {
	deadline := time.Now().Add(timeout)
	if !strings.Contains(table, ".") {
		table = benchDB + "." + table
	}
	q := "SELECT count() FROM " + table
	var n int64
	for {
		var err error
		n, err = b.ch.int64(ctx, q)
		if err != nil {
			return n, time.Now(), err
		}
		if n >= want {
			return n, time.Now(), nil
		}
		select {
		case <-exited:
			if n, err = b.ch.int64(ctx, q); err == nil && n >= want {
				return n, time.Now(), nil
			}
			return n, time.Now(), fmt.Errorf("the writer exited with %d of %d rows in %s", n, want, table)
		case <-ctx.Done():
			return n, time.Now(), ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return n, time.Now(), fmt.Errorf("%d of %d rows in %s after %s", n, want, table, timeout)
		}
	}
}

// insertStats is what ClickHouse logged about the INSERTs into a table.
type insertStats struct {
	inserts, rows, parts int64
	queryCPU             float64 // seconds, in the INSERT queries' threads
}

// insertStats reads what ClickHouse logged for db.table since t0: INSERT
// queries, the rows they wrote and the CPU they used (query_log), and new
// parts (part_log).
func (c *chHTTP) insertStats(ctx context.Context, db, table string, t0 time.Time) (st insertStats, err error) {
	if err = c.exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		return
	}
	// The server's CPU inside the INSERT queries themselves, as the query
	// threads' getrusage counted it: neither merges nor other users'
	// queries on the shared server.
	cpu := func(ev string) string {
		return "arrayElement(ProfileEvents.Values, indexOf(ProfileEvents.Names, '" + ev + "'))"
	}
	s, err := c.query(ctx, fmt.Sprintf(
		"SELECT count(), sum(written_rows), sum(%s + %s) FROM system.query_log WHERE type = 2 AND event_date >= yesterday() AND event_time >= %d AND %s",
		cpu("UserTimeMicroseconds"), cpu("SystemTimeMicroseconds"), t0.Unix()-1, insertMatch(db, table)))
	if err != nil {
		return
	}
	var us int64
	if _, err = fmt.Sscanf(s, "%d\t%d\t%d", &st.inserts, &st.rows, &us); err != nil {
		err = fmt.Errorf("query_log answer %q: %w", s, err)
		return
	}
	st.queryCPU = float64(us) / 1e6
	st.parts, err = c.int64(ctx, fmt.Sprintf(
		"SELECT count() FROM system.part_log WHERE event_type = 1 AND event_date >= yesterday() AND event_time >= %d AND database = '%s' AND table = '%s'",
		t0.Unix()-1, db, table))
	return
}

// insertMatch is a query_log condition for INSERTs into db.table, quoted
// or not (the sink quotes with backticks, clickhouse-client does not), and
// not into a table whose name merely starts the same.
func insertMatch(db, table string) string {
	return `match(query, '^INSERT INTO ` + "`?" + db + "`?" + `\\.` + "`?" + table + "`?" + `[ (]')`
}

// settle waits, up to opt.quiet, until ClickHouse is idle again (the
// merges the run's parts caused are done) and returns when that was.
func (b *bench) settle() cpuSnap {
	deadline := time.Now().Add(b.opt.quiet)
	prev := b.meter.snap()
	for {
		time.Sleep(500 * time.Millisecond)
		s := b.meter.snap()
		if s.ch-prev.ch < 0.03 || time.Now().After(deadline) {
			return prev
		}
		prev = s
	}
}

// child is a started process whose exit is observed.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	log    string
}

// start runs name with args, its stderr (and stdout unless set) to logPath.
func start(name string, args []string, logPath string, setup func(*exec.Cmd)) (*child, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = cleanEnv()
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	if setup != nil {
		setup(cmd)
	}
	if cmd.Stdout == nil {
		cmd.Stdout = f
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{}), log: logPath}
	liveMu.Lock()
	live[c] = true
	liveMu.Unlock()
	go func() {
		c.err = cmd.Wait()
		f.Close()
		liveMu.Lock()
		delete(live, c)
		liveMu.Unlock()
		close(c.exited)
	}()
	return c, nil
}

// live are the children not yet exited, for stopAll.
var (
	liveMu sync.Mutex
	live   = map[*child]bool{}
)

// stopAll sends SIGTERM to every running child (on interrupt).
func stopAll() {
	liveMu.Lock()
	defer liveMu.Unlock()
	for c := range live {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// cleanEnv is this process's environment without SINK_* overrides, so the
// generated config is exactly what runs.
func cleanEnv() []string {
	var out []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SINK_") {
			out = append(out, e)
		}
	}
	return out
}

// stop sends SIGTERM and waits up to grace, then kills.
func (c *child) stop(grace time.Duration) error {
	select {
	case <-c.exited:
		return c.err
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return c.err
	case <-time.After(grace):
		// A Go program dumps its goroutines on SIGQUIT: the log shows where it hung.
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-c.exited:
		case <-time.After(2 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
		return fmt.Errorf("%s did not stop within %s of SIGTERM; sent SIGQUIT (goroutine dump in %s)", filepath.Base(c.cmd.Path), grace, c.log)
	}
}

func (c *child) wait(timeout time.Duration) error {
	select {
	case <-c.exited:
		return c.err
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("%s still running after %s; killed", filepath.Base(c.cmd.Path), timeout)
	}
}

func (c *child) usage() usage { return rusageOf(c.cmd.ProcessState) }

// tail returns the last lines of the child's log, for error messages.
func (c *child) tail(n int) string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// finish fills the derived fields of a result.
func finish(r *Result, before, after cpuSnap, reached time.Time, client usage) {
	r.WallSec = reached.Sub(before.at).Seconds()
	if r.WallSec > 0 {
		r.RowsPerSec = float64(r.Expected) / r.WallSec
	}
	r.CHCPUSec = after.ch - before.ch
	r.KafkaCPUSec = after.kafka - before.kafka
	r.ClientCPUSec = client.CPU
	r.ClientMaxRSSMB = float64(client.MaxRSS) / (1 << 20)
	r.OtherCPUSec = max(0, (after.sysBusy-before.sysBusy)-r.CHCPUSec-r.KafkaCPUSec-r.ClientCPUSec)
	if r.Expected > 0 {
		r.CHCPUUsPerRow = r.CHCPUSec / float64(r.Expected) * 1e6
		r.ClientCPUUsPerRow = r.ClientCPUSec / float64(r.Expected) * 1e6
	}
	if r.Inserts > 0 {
		r.RowsPerInsert = float64(r.InsertRows) / float64(r.Inserts)
	}
}

func failed(r Result, err error) Result {
	r.Status = "failed: " + oneLine(err.Error())
	logf("%s run %d: %s", r.Key, r.Run, r.Status)
	return r
}

// deleteGroups removes this run's consumer groups from the broker, so the
// benchmark does not leave hundreds behind.
func (b *bench) deleteGroups(ctx context.Context, groups []string) {
	if len(groups) == 0 {
		return
	}
	if _, err := b.adm.DeleteGroups(ctx, groups...); err != nil && !errors.Is(err, context.Canceled) {
		logf("deleting consumer groups: %v", err)
	}
}
