// Package chaos proves the sink's delivery guarantees on the real stack: each
// scenario produces a known set of keys into a topic, runs real `sink`
// processes against a ReplacingMergeTree table (ordered by the key, the Kafka
// offset as version), breaks something on purpose (kill -9, server restarts,
// TOO_MANY_PARTS, poison records, bursts), and then checks ClickHouse: every
// key exactly once after FINAL, the DLQ holding exactly the bad records, the
// sink's memory within its budget, and the group's offsets at the end.
//
// Concurrency: a Harness runs one scenario at a time; within a scenario the
// producer, the RSS samplers and the fault timeline run on their own
// goroutines and share only what is guarded by a mutex or atomic.
package chaos

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/internal/consumer"
	"sink/tools/gen"
)

// Env says where the stack and the sink binary are.
type Env struct {
	Brokers []string
	CHAddr  string // the ClickHouse server under test, native protocol
	// CHStack names that server in the local stack: its directory and pid
	// file under StackRoot/.stack ("clickhouse" for 18.16, the default;
	// "clickhouse26" for 26.9). Only the scenarios that restart it use it.
	CHStack  string
	SinkBin  string // a built cmd/sink
	RepoRoot string // the checkout being tested
	// StackRoot is the checkout whose scripts/stack.sh started the stack:
	// the pid files are in StackRoot/.stack and a restart runs its
	// scripts/stack.sh up. Empty means RepoRoot.
	StackRoot string
	WorkDir   string // configs and sink logs
	Log       io.Writer
	// Delivery is the sinks' delivery setting ("" is at_least_once). With
	// exactly_once the target is a plain MergeTree table with a
	// deduplication window, and the verdict needs count() = produced and
	// no (_topic, _partition, _offset) twice, without FINAL.
	Delivery string
	// ReplicationFactor of the scenario's topics (0 is 1): 3 on the
	// 3-broker Kafka of `scripts/stack.sh kafka-cluster up`.
	ReplicationFactor int
	// Cluster, when set, makes the target a replicated table on every
	// node of a ClickHouse cluster behind a Distributed table, written by
	// the sink with clickhouse.cluster and the route's target; CHAddr is
	// then unused.
	Cluster *ClusterEnv
}

func (e Env) exactlyOnce() bool { return e.Delivery == "exactly_once" }

func (e Env) chStack() string {
	if e.CHStack == "" {
		return "clickhouse"
	}
	return e.CHStack
}

func (e Env) stackRoot() string {
	if e.StackRoot == "" {
		return e.RepoRoot
	}
	return e.StackRoot
}

// Result is one row of the report.
type Result struct {
	Scenario   string
	Produced   int // good records (distinct keys)
	Bad        int // records that must go to the DLQ
	Landed     int // SELECT count() FROM t FINAL
	Duplicates int // count() - uniqExact(key) before any OPTIMIZE
	DLQ        int
	MaxRSS     int64 // bytes, highest of all sink processes
	RSSLimit   int64
	Took       time.Duration
	Problems   []string
	Notes      []string
	// Delivery is the sinks' delivery setting, for the report.
	Delivery string
	// MaxGap is the longest time between two INSERTs the sinks logged,
	// from the first to the last ("inserted", second resolution).
	MaxGap time.Duration
	// Retries counts the sinks' retried INSERT attempts by ClickHouse
	// error code (0: a network error without a server code).
	Retries map[int32]int
	// Offsets is each partition's committed offset at the end, as
	// "partition:offset".
	Offsets []string
	// Log is what the sinks' logs said, warnings and errors by message.
	Log []string
}

// OK reports whether every check passed.
func (r *Result) OK() bool { return len(r.Problems) == 0 }

func (r *Result) fail(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// run is the state of one scenario execution.
type run struct {
	env      Env
	name     string
	db       string
	table    string
	topic    string
	dlqTopic string
	group    string
	cfgPath  string
	// fanTable is the fan-out route's table (Spec.Fanout), or "".
	fanTable string
	// evo is the evolving route's topic, table and expected contents
	// (Spec.Evolve), or nil.
	evo *evolving
	kcl *kgo.Client
	adm *kadm.Client
	ch  driver.Conn
	// queryLogTables: system.query_log has the tables column (newer
	// servers), so INSERTs are found by table rather than by their text.
	queryLogTables bool
	// loggedLost counts the rows of INSERTs a server's query_log had
	// logged before a restart emptied it.
	loggedLost atomic.Uint64

	// bg is canceled when the scenario stops loading, for fault helpers
	// that must keep running until then.
	bg context.Context

	mu    sync.Mutex
	procs []*sinkProc
	notes []string // a fault's own findings, for the verdict
	// hardKills counts the sinks kill9 ended.
	hardKills atomic.Int32
	marks     map[string]time.Time // when a fault reached a named point
	maxRSS    atomic.Int64
	logf      func(format string, args ...any)
}

type sinkProc struct {
	cmd     *exec.Cmd
	logPath string
	done    chan error
	exited  atomic.Bool
	killed  atomic.Bool // by kill9, on purpose
}

// Spec describes a scenario's load and configuration.
type Spec struct {
	Name       string
	Records    int
	Partitions int
	Duration   time.Duration // the producer spreads the records over this long
	BadPercent float64       // percent of records malformed and percent type-invalid
	Buffer     string        // batch.buffer_memory
	MaxRows    int
	Settings   string // table SETTINGS clause, may be ""
	// Prepare, when set, runs after the table is created, before any sink;
	// Check, when set, after the common checks.
	Prepare func(ctx context.Context, r *run) error
	Check   func(ctx context.Context, r *run, res *Result, good int)
	// Faults runs alongside the producer; it returns when its faults are
	// done (the harness then waits for the rows).
	Faults func(ctx context.Context, r *run) error
	// Instances at start.
	Instances int
	// Listen is the sinks' http.listen ("" for none): the soak reads
	// /metrics there.
	Listen string
	// Admin turns on http.admin, so the soak can read the sink's heap
	// profiles at /debug/pprof/ (loopback listener: no token).
	Admin bool
	// Pad lengthens each good record's v by this many bytes, so a
	// scenario reaches buffer_memory with fewer records.
	Pad int
	// Target is the route's target on a ClickHouse cluster (Env.Cluster):
	// "local" (the default; sharding_key: key) or "distributed".
	Target string
	// Burst, when set, replaces the even pacing: records go out at Rate per
	// second, except Factor times that between Start and Start+Length.
	Burst *Burst
	// Profile, when set, paces the records instead, by the loadgen's rate
	// profile (tools/gen: steps of a rate for a time); Records should be
	// its Events().
	Profile gen.Profile
	// Fanout adds a second route from the topic into a second table of the
	// same columns (fanout: all), checked like the first: every key once
	// in both, each bad record once in the DLQ.
	Fanout bool
	// Evolve, when set, adds a route from a second topic whose records
	// gain new top-level fields during the run into a table that starts
	// without them (schema.evolve: add_columns); checked value by value.
	Evolve *Evolve
	// NoDuplicates requires count() = uniqExact(key) before any merge: no
	// replay at all, as after clean rebalances and stops.
	NoDuplicates bool
	// ExpectPause requires the sink to have paused fetching (the buffer
	// budget was reached), proving the scenario exercised backpressure.
	ExpectPause bool
}

// Burst describes a producer rate profile.
type Burst struct {
	Rate          float64 // records per second outside the burst
	Factor        float64
	Start, Length time.Duration
}

// at returns when record i is due under the profile.
func (b *Burst) at(i int) time.Duration {
	x := float64(i)
	before := b.Rate * b.Start.Seconds()
	if x < before {
		return time.Duration(x / b.Rate * float64(time.Second))
	}
	x -= before
	during := b.Rate * b.Factor * b.Length.Seconds()
	if x < during {
		return b.Start + time.Duration(x/(b.Rate*b.Factor)*float64(time.Second))
	}
	x -= during
	return b.Start + b.Length + time.Duration(x/b.Rate*float64(time.Second))
}

// ServerVersion is the version the ClickHouse server at addr reports, or
// "at ADDR (unreachable: …)" when it does not answer; for report headings.
func ServerVersion(ctx context.Context, addr string) string {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Sprintf("at %s (unreachable: %v)", addr, err)
	}
	defer conn.Close()
	var v string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return fmt.Sprintf("at %s (unreachable: %v)", addr, err)
	}
	return v
}

func (e Env) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, "chaos: "+format+"\n", args...)
	}
}

// Run executes one scenario and returns its verdict.
func Run(ctx context.Context, env Env, s Spec) (res *Result) {
	start := time.Now()
	res = &Result{Scenario: s.Name, Delivery: cmp.Or(env.Delivery, "at_least_once")}
	defer func() { res.Took = time.Since(start) }()
	r, err := setup(ctx, env, s)
	if err != nil {
		res.fail("setup: %v", err)
		return res
	}
	defer r.close()
	buf, _ := parseSize(s.Buffer)
	// The memory contract: the buffer budget plus a fixed allowance for
	// the runtime, the code and the clients' own buffers.
	res.RSSLimit = buf + consumer.RSSHeadroom

	if s.Prepare != nil {
		if err := s.Prepare(ctx, r); err != nil {
			res.fail("prepare: %v", err)
			return res
		}
	}
	for i := 0; i < max(1, s.Instances); i++ {
		if err := r.startSink(); err != nil {
			res.fail("start sink: %v", err)
			return res
		}
	}
	samplerCtx, stopSampler := context.WithCancel(ctx)
	go r.sampleRSS(samplerCtx)
	defer stopSampler()

	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	r.bg = bg
	faultsDone := make(chan error, 1)
	if s.Faults != nil {
		go func() { faultsDone <- s.Faults(ctx, r) }()
	} else {
		faultsDone <- nil
	}
	good, bad, err := r.produce(ctx, s)
	res.Produced, res.Bad = good, bad
	if err != nil {
		res.fail("produce: %v", err)
	}
	if err := <-faultsDone; err != nil {
		res.fail("faults: %v", err)
	}
	// Whatever the faults did, at least one sink must be running to finish.
	if r.running() == 0 {
		if err := r.startSink(); err != nil {
			res.fail("restart sink: %v", err)
			return res
		}
	}
	if err := r.waitRows(ctx, good, 3*time.Minute); err != nil {
		res.fail("%v", err)
	}
	stopBG()
	// SIGTERM: each must flush, commit and exit 0.
	for i, p := range r.procs {
		if p.exited.Load() {
			// Only kill9 ends a sink before this stop; one that exited by
			// itself missed the faults it was meant to ride out.
			if !p.killed.Load() {
				res.fail("sink #%d exited by itself: %s (log %s)", i, lastLine(p.logPath), p.logPath)
			}
			continue
		}
		if err := p.stop(60 * time.Second); err != nil {
			res.fail("sink shutdown: %v (log %s)", err, p.logPath)
		}
	}
	stopSampler()
	res.MaxRSS = r.maxRSS.Load()
	if res.MaxRSS > res.RSSLimit {
		res.fail("max RSS %d MiB above buffer_memory + 128 MiB = %d MiB", res.MaxRSS>>20, res.RSSLimit>>20)
	}
	r.verify(ctx, res, good, bad)
	if s.Check != nil {
		s.Check(ctx, r, res, good)
	}
	r.summarizeLogs(res)
	r.mu.Lock()
	res.Notes = append(res.Notes, r.notes...)
	r.mu.Unlock()
	if s.NoDuplicates && res.Duplicates != 0 {
		res.fail("%d duplicates: a clean rebalance must flush and commit before giving partitions up", res.Duplicates)
	}
	for _, p := range r.procs {
		if n := countInFile(p.logPath, `"code":252`); n > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%d TOO_MANY_PARTS retries", n))
			break
		}
	}
	if n := r.countLogs(`fetching paused`); n > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("fetching paused %d times", n))
	} else if s.ExpectPause {
		res.fail("the sink never paused fetching: the scenario did not reach buffer_memory")
	}
	return res
}

func setup(ctx context.Context, env Env, s Spec) (*run, error) {
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e10, 36)
	r := &run{
		env:   env,
		name:  s.Name,
		db:    "chaos",
		table: strings.ReplaceAll(s.Name, "-", "_") + "_" + suffix,
		topic: "chaos-" + s.Name + "-" + suffix,
		group: "chaos-" + s.Name + "-" + suffix,
		logf:  env.logf,
	}
	if s.BadPercent > 0 {
		r.dlqTopic = r.topic + "-dlq"
	}
	if s.Fanout {
		r.fanTable = r.table + "_fan"
	}
	if s.Evolve != nil {
		r.evo = &evolving{Evolve: *s.Evolve, topic: r.topic + "-evolving", table: r.table + "_evolving"}
	}
	var err error
	r.kcl, err = kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.DefaultProduceTopic(r.topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		// Kafka may be restarted under us: keep retrying rather than fail records.
		kgo.RecordDeliveryTimeout(2*time.Minute))
	if err != nil {
		return nil, err
	}
	r.adm = kadm.NewClient(r.kcl)
	chAddrs := []string{env.CHAddr}
	if env.Cluster != nil {
		// Any node answers for the Distributed table: a scenario may have
		// one down.
		chAddrs = env.Cluster.Addrs()
	}
	r.ch, err = clickhouse.Open(&clickhouse.Options{Addr: chAddrs, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rf := int16(max(1, env.ReplicationFactor))
	if _, err := r.adm.CreateTopic(cctx, int32(s.Partitions), rf, nil, r.topic); err != nil {
		return nil, fmt.Errorf("create topic: %w", err)
	}
	if r.dlqTopic != "" {
		if _, err := r.adm.CreateTopic(cctx, 1, rf, nil, r.dlqTopic); err != nil {
			return nil, fmt.Errorf("create dlq topic: %w", err)
		}
	}
	if r.evo != nil {
		if _, err := r.adm.CreateTopic(cctx, int32(r.evo.Partitions), rf, nil, r.evo.topic); err != nil {
			return nil, fmt.Errorf("create evolving topic: %w", err)
		}
	}
	// The broker answers CreateTopics before its metadata shows the topic;
	// a sink started in between exits with "topic does not exist".
	if err := r.waitTopic(cctx, r.topic, s.Partitions); err != nil {
		return nil, err
	}
	// The sink checks its dead-letter topic at start, so it must be visible too.
	if r.dlqTopic != "" {
		if err := r.waitTopic(cctx, r.dlqTopic, 1); err != nil {
			return nil, err
		}
	}
	if r.evo != nil {
		if err := r.waitTopic(cctx, r.evo.topic, r.evo.Partitions); err != nil {
			return nil, err
		}
	}
	if err := r.ch.Exec(cctx, "CREATE DATABASE IF NOT EXISTS chaos"); err != nil {
		return nil, err
	}
	var n uint64
	if err := r.ch.QueryRow(cctx, "SELECT count() FROM system.columns WHERE database = 'system' AND table = 'query_log' AND name = 'tables'").Scan(&n); err != nil {
		return nil, fmt.Errorf("system.columns: %w", err)
	}
	r.queryLogTables = n > 0
	settings := s.Settings
	if env.exactlyOnce() {
		settings = strings.Trim(settings+", non_replicated_deduplication_window = 1000", ", ")
	}
	for _, t := range []string{r.table, r.fanTable, r.evo.tableName()} {
		if t == "" {
			continue
		}
		if err := r.createTable(cctx, t, settings); err != nil {
			return nil, err
		}
	}
	errorsYAML := "{tolerance: none}"
	if r.dlqTopic != "" {
		errorsYAML = fmt.Sprintf("{tolerance: all, dlq_topic: %q}", r.dlqTopic)
	}
	topics, clusterYAML, routeYAML := []string{r.topic}, "", ""
	if c := env.Cluster; c != nil {
		clusterYAML = "\n  cluster: " + c.Name
		routeYAML = ", target: " + cmp.Or(s.Target, "local")
		if cmp.Or(s.Target, "local") == "local" {
			routeYAML += ", sharding_key: key"
		}
	}
	routes := []string{fmt.Sprintf("{topic: %q, table: %s%s}", r.topic, r.table, routeYAML)}
	fanoutYAML := ""
	if r.fanTable != "" {
		routes = append(routes, fmt.Sprintf("{topic: %q, table: %s%s}", r.topic, r.fanTable, routeYAML))
		fanoutYAML = "fanout: all\n"
	}
	if r.evo != nil {
		topics = append(topics, r.evo.topic)
		routes = append(routes, fmt.Sprintf("{topic: %q, table: %s%s, schema: {evolve: add_columns}}", r.evo.topic, r.evo.table, routeYAML))
	}
	maxRows := s.MaxRows
	if maxRows == 0 {
		maxRows = 20000
	}
	cfg := fmt.Sprintf(`name: %s
kafka:
  brokers: [%s]
  topics: [%s]
  fetch_max_wait: 200ms
  session_timeout: 6s
  rebalance_timeout: 20s
  commit_interval: 1s
  request_timeout: 10s
clickhouse:
  addrs: [%s]%s
  database: chaos
  query_timeout: 20s
  retry_initial: 200ms
  retry_max: 3s
batch: {max_rows: %d, max_wait: 1s, buffer_memory: %s}
%sroutes: [%s]
errors: %s
http: {listen: "%s", admin: %t}
log: {level: debug, format: json}
shutdown_timeout: 50s
delivery: %s
`, r.group, strings.Join(env.Brokers, ", "), quoted(topics), quoted(chAddrs), clusterYAML, maxRows, s.Buffer, fanoutYAML, strings.Join(routes, ", "), errorsYAML, s.Listen, s.Admin, cmp.Or(env.Delivery, "at_least_once"))
	r.cfgPath = filepath.Join(env.WorkDir, r.group+".yaml")
	if err := os.WriteFile(r.cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return r, nil
}

// createTable creates the scenario's table name (the cluster's pair of
// tables with Env.Cluster): key, v and n, and the Kafka position, as a
// ReplacingMergeTree with the offset as version, or with exactly-once a
// plain MergeTree whose duplicates the check must not find.
func (r *run) createTable(ctx context.Context, name, settings string) error {
	if r.env.Cluster != nil {
		return r.createClusterTable(ctx, name, settings)
	}
	ddl := fmt.Sprintf("CREATE TABLE chaos.%s (key UInt64, v String, n UInt32, _partition UInt16, _offset UInt64) "+
		"ENGINE = ReplacingMergeTree(_offset) ORDER BY key", name)
	if r.env.exactlyOnce() {
		ddl = fmt.Sprintf("CREATE TABLE chaos.%s (key UInt64, v String, n UInt32, _topic LowCardinality(String), _partition Int32, _offset Int64) "+
			"ENGINE = MergeTree ORDER BY key", name)
	}
	if settings != "" {
		ddl += " SETTINGS " + settings
	}
	if err := r.ch.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return nil
}

// waitTopic waits until the brokers' metadata lists topic with all its
// partitions.
func (r *run) waitTopic(ctx context.Context, topic string, partitions int) error {
	for {
		if r.topicEverywhere(ctx, topic, partitions) {
			return nil
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("topic %s not in the metadata after creating it: %v", topic, ctx.Err())
		}
	}
}

// topicEverywhere reports whether every broker's metadata lists topic with
// its partitions and their leaders: a broker learns of a new topic from the
// controller a moment after the others, and a sink started meanwhile may
// ask that one (and be told the topic does not exist).
func (r *run) topicEverywhere(ctx context.Context, topic string, partitions int) bool {
	brokers, err := r.adm.ListBrokers(ctx)
	if err != nil || len(brokers) == 0 {
		return false
	}
	for _, b := range brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, r.kcl.Broker(int(b.NodeID)))
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != partitions {
			return false
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

func (r *run) close() {
	r.mu.Lock()
	for _, p := range r.procs {
		if !p.exited.Load() {
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r.adm.DeleteTopics(ctx, r.topic)
	if r.dlqTopic != "" {
		r.adm.DeleteTopics(ctx, r.dlqTopic)
	}
	if r.evo != nil {
		r.adm.DeleteTopics(ctx, r.evo.topic)
	}
	r.adm.DeleteGroup(ctx, r.group)
	r.ch.Exec(ctx, "DROP TABLE IF EXISTS chaos."+r.table+"_slow") // a scenario's view, if any
	r.ch.Exec(ctx, "DROP TABLE IF EXISTS chaos."+r.table+"_count")
	for _, t := range []string{r.table, r.fanTable, r.evo.tableName()} {
		if t == "" {
			continue
		}
		r.ch.Exec(ctx, "DROP TABLE IF EXISTS chaos."+t)
		if r.env.Cluster != nil {
			r.dropClusterTable(ctx, t)
		}
	}
	r.kcl.Close()
	r.ch.Close()
}

// startSink starts one more sink process on the scenario's config.
func (r *run) startSink() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	logPath := filepath.Join(r.env.WorkDir, fmt.Sprintf("%s-%d.log", r.group, len(r.procs)))
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.env.SinkBin, "run", "--config", r.cfgPath)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = sinkEnv()
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	p := &sinkProc{cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		f.Close()
		p.exited.Store(true)
		p.done <- err
	}()
	r.procs = append(r.procs, p)
	r.logf("%s: started sink #%d (pid %d)", r.name, len(r.procs)-1, cmd.Process.Pid)
	return nil
}

// sinkEnv is the harness's environment without SINK_* variables: the sink
// reads those as configuration (SINK_KAFKA__BROKERS, …) and refuses unknown
// ones, while the tests set their own (SINK_REQUIRE_STACK, SINK_STACK_ROOT).
func sinkEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SINK_") {
			env = append(env, kv)
		}
	}
	return env
}

// kill9 kills the i-th running sink without any chance to flush or commit.
func (r *run) kill9(i int) error {
	r.mu.Lock()
	var alive []*sinkProc
	for _, p := range r.procs {
		if !p.exited.Load() {
			alive = append(alive, p)
		}
	}
	r.mu.Unlock()
	if len(alive) == 0 {
		return errors.New("no sink running to kill")
	}
	p := alive[i%len(alive)]
	r.logf("%s: kill -9 pid %d", r.name, p.cmd.Process.Pid)
	p.killed.Store(true)
	r.hardKills.Add(1)
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.done <- nil // keep the channel readable for close()
	return nil
}

// note adds a fault's finding to the scenario's verdict.
func (r *run) note(s string) {
	r.mu.Lock()
	r.notes = append(r.notes, s)
	r.mu.Unlock()
}

// mark records that a fault reached the named point now.
func (r *run) mark(name string) {
	r.mu.Lock()
	if r.marks == nil {
		r.marks = map[string]time.Time{}
	}
	r.marks[name] = time.Now()
	r.mu.Unlock()
}

func (r *run) marked(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.marks[name]
	return t, ok
}

func (r *run) running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.procs {
		if !p.exited.Load() {
			n++
		}
	}
	return n
}

// stop sends SIGTERM and waits for a clean exit.
func (p *sinkProc) stop(timeout time.Duration) error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("exit after SIGTERM: %v", err)
		}
		return nil
	case <-time.After(timeout):
		// SIGQUIT makes the Go runtime dump every goroutine into the log.
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		return fmt.Errorf("no exit %s after SIGTERM (goroutine dump in the log)", timeout)
	}
}

// sampleRSS records the highest resident set of any sink process.
func (r *run) sampleRSS(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		procs := append([]*sinkProc(nil), r.procs...)
		r.mu.Unlock()
		for _, p := range procs {
			if p.exited.Load() {
				continue
			}
			if rss := readRSS(p.cmd.Process.Pid); rss > r.maxRSS.Load() {
				r.maxRSS.Store(rss)
			}
		}
	}
}

// readRSS is the resident set of the process (VmRSS), 0 if unreadable.
func readRSS(pid int) int64 { return readStatus(pid, "VmRSS:")[0] }

// readStatus reads the named fields (kB) of /proc/PID/status, in bytes, 0
// for a field it cannot read.
func readStatus(pid int, fields ...string) []int64 {
	out := make([]int64, len(fields))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		for i, name := range fields {
			if strings.HasPrefix(line, name) {
				if f := strings.Fields(line); len(f) >= 2 {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					out[i] = kb << 10
				}
			}
		}
	}
	return out
}

// produce writes the scenario's records paced over its duration: good
// records have keys 0..n-1; bad ones (malformed JSON, then a key that is not
// a number) have no key in the table at all.
func (r *run) produce(ctx context.Context, s Spec) (good, bad int, err error) {
	rng := rand.New(rand.NewPCG(uint64(len(s.Name)), 99))
	start := time.Now()
	pad := strings.Repeat("x", s.Pad)
	var failed atomic.Pointer[error]
	for i := 0; i < s.Records; i++ {
		var due time.Duration
		switch {
		case s.Profile != nil:
			due, _ = s.Profile.At(i)
		case s.Burst != nil:
			due = s.Burst.at(i)
		case s.Duration > 0:
			due = time.Duration(int64(s.Duration) * int64(i) / int64(s.Records))
		}
		// Sleeping per record would cap the rate far below a burst's; catch
		// up in steps of at least a millisecond.
		if d := time.Until(start.Add(due)); d > time.Millisecond {
			time.Sleep(d)
		}
		var v []byte
		switch x := rng.Float64() * 100; {
		case x < s.BadPercent:
			v = []byte(fmt.Sprintf(`{"key": %d, "v": "broken`, i))
			bad++
		case x < 2*s.BadPercent:
			v = []byte(fmt.Sprintf(`{"key": "k%d", "v": "wrong type", "n": 1}`, i))
			bad++
		default:
			v = fmt.Appendf(nil, `{"key": %d, "v": "value-%d%s", "n": %d}`, good, good, pad, rng.IntN(1000))
			good++
		}
		promise := func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		}
		r.kcl.Produce(ctx, &kgo.Record{Value: v}, promise)
		if r.evo != nil && i%r.evo.Every == 0 {
			r.kcl.Produce(ctx, &kgo.Record{Topic: r.evo.topic, Value: r.evo.next(rng, s.BadPercent, float64(i)/float64(s.Records))}, promise)
		}
	}
	if err := r.kcl.Flush(ctx); err != nil {
		return good, bad, err
	}
	if p := failed.Load(); p != nil {
		return good, bad, *p
	}
	r.logf("%s: produced %d good and %d bad records in %s", r.name, good, bad, time.Since(start).Round(time.Millisecond))
	if r.evo != nil {
		r.logf("%s: and %d good and %d bad records to the evolving topic %s", r.name, r.evo.good, r.evo.bad, r.evo.topic)
	}
	return good, bad, nil
}

// waitRows waits until every good key is in the table, and in the
// fan-out and evolving tables if any (duplicates aside).
func (r *run) waitRows(ctx context.Context, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	waits := map[string]int{r.table: want}
	if r.fanTable != "" {
		waits[r.fanTable] = want
	}
	if r.evo != nil {
		waits[r.evo.table] = r.evo.good
	}
	for _, table := range []string{r.table, r.fanTable, r.evo.tableName()} {
		if table == "" {
			continue
		}
		var have uint64
		for {
			qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := r.ch.QueryRow(qctx, "SELECT uniqExact(key) FROM chaos."+table).Scan(&have)
			cancel()
			if err == nil && have >= uint64(waits[table]) {
				break
			}
			if r.running() == 0 {
				return fmt.Errorf("every sink exited with %d of %d keys in %s (logs in %s)", have, waits[table], table, r.env.WorkDir)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("only %d of %d keys in %s after %s", have, waits[table], table, timeout)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}

func (r *run) verify(ctx context.Context, res *Result, good, bad int) {
	var final, total, distinct, minKey, maxKey uint64
	if err := r.ch.QueryRow(ctx, "SELECT count(), uniqExact(key), min(key), max(key) FROM chaos."+r.table).
		Scan(&total, &distinct, &minKey, &maxKey); err != nil {
		res.fail("query: %v", err)
		return
	}
	if r.env.exactlyOnce() {
		r.verifyExactlyOnce(ctx, res, total)
		final = total // no FINAL: every row must be there once as inserted
	} else if err := r.ch.QueryRow(ctx, "SELECT count() FROM chaos."+r.table+" FINAL").Scan(&final); err != nil {
		res.fail("query FINAL: %v", err)
		return
	}
	res.Landed = int(final)
	// Background merges may already have collapsed some duplicates, so
	// count what the INSERTs wrote (query_log) rather than what is left.
	res.Duplicates = int(total - distinct)
	switch written, err := r.writtenRows(ctx); {
	case err != nil:
		res.Notes = append(res.Notes, "duplicates counted from the table (query_log: "+err.Error()+")")
	case written < uint64(good):
		// A server restarted before flushing its logs loses entries.
		res.Notes = append(res.Notes, fmt.Sprintf("duplicates counted from the table: query_log lists only %d rows written", written))
	default:
		res.Duplicates = int(written) - good
	}
	if r.env.exactlyOnce() {
		// Deduplicated INSERTs may count in query_log; the table is exact.
		res.Duplicates = int(total) - int(distinct)
	}
	if final != uint64(good) {
		res.fail("FINAL count %d, want %d distinct produced keys", final, good)
	}
	if good > 0 && (distinct != uint64(good) || minKey != 0 || maxKey != uint64(good-1)) {
		res.fail("keys: %d distinct in [%d, %d], want %d in [0, %d]: some key is missing or foreign", distinct, minKey, maxKey, good, good-1)
	}
	if r.fanTable != "" {
		r.verifyFanout(ctx, res, good)
	}
	if r.evo != nil {
		r.evo.verify(ctx, r, res)
		bad += r.evo.bad
		res.Bad = bad
	}
	if r.dlqTopic != "" {
		n, distinct, err := r.countTopic(ctx, r.dlqTopic)
		if err != nil {
			res.fail("dlq: %v", err)
		}
		res.DLQ = n
		// A bad record dead-lettered after the last commit is read again,
		// and dead-lettered again, when its range is replayed: after a
		// sink's kill -9, or after a sink lost its partitions without the
		// revoke's flush and commit (its group session expired, as when the
		// coordinator's broker dies). The dead-letter topic is
		// at-least-once in both deliveries (docs/guarantees.md); exactly-once
		// covers the table. Without a replay, a repeat is a fault.
		var replay string
		if r.hardKills.Load() > 0 {
			replay = "after the kill -9"
		} else if r.countLogs(`"partitions lost; dropping their uncommitted state"`) > 0 {
			replay = "after partitions were lost (group session expired)"
		}
		switch {
		case distinct != bad:
			res.fail("DLQ holds %d distinct bad records (%d in all), want %d", distinct, n, bad)
		case n != distinct && replay != "":
			res.Notes = append(res.Notes, fmt.Sprintf("%d bad records dead-lettered twice %s: read again from before the last commit", n-distinct, replay))
		case n != distinct:
			res.fail("DLQ holds %d records for %d bad ones: some dead-lettered twice", n, distinct)
		}
	} else if bad != 0 {
		res.fail("%d bad records without a DLQ", bad)
	}
	// After the clean stop nothing is left to replay.
	var ends kadm.ListedOffsets
	err := askAgain(ctx, func() (err error) { ends, err = r.adm.ListEndOffsets(ctx, r.topic); return err })
	if err != nil {
		res.fail("end offsets: %v", err)
		return
	}
	var committed kadm.OffsetResponses
	err = askAgain(ctx, func() (err error) { committed, err = r.adm.FetchOffsets(ctx, r.group); return err })
	if err != nil {
		res.fail("committed offsets: %v", err)
		return
	}
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		res.Offsets = append(res.Offsets, fmt.Sprintf("%d:%d", o.Partition, c.At))
		if !ok || c.At != o.Offset {
			res.fail("partition %d: committed %d, end %d", o.Partition, c.At, o.Offset)
		}
	})
	if r.evo != nil {
		ends, err := r.adm.ListEndOffsets(ctx, r.evo.topic)
		if err != nil {
			res.fail("end offsets of %s: %v", r.evo.topic, err)
			return
		}
		var at []string
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := committed.Lookup(o.Topic, o.Partition)
			at = append(at, fmt.Sprintf("%d:%d", o.Partition, c.At))
			if !ok || c.At != o.Offset {
				res.fail("evolving topic partition %d: committed %d, end %d", o.Partition, c.At, o.Offset)
			}
		})
		slices.Sort(at)
		res.Notes = append(res.Notes, "evolving topic committed "+strings.Join(at, " "))
	}
}

// verifyFanout requires the fan-out table to hold every good key once
// after FINAL, like the first table: both routes took every record.
func (r *run) verifyFanout(ctx context.Context, res *Result, good int) {
	var final, distinct, minKey, maxKey uint64
	if err := r.ch.QueryRow(ctx, "SELECT count(), uniqExact(key), min(key), max(key) FROM chaos."+r.fanTable+" FINAL").
		Scan(&final, &distinct, &minKey, &maxKey); err != nil {
		res.fail("fan-out table: %v", err)
		return
	}
	if final != uint64(good) || distinct != uint64(good) || good > 0 && (minKey != 0 || maxKey != uint64(good-1)) {
		res.fail("fan-out table %s: FINAL count %d, %d distinct keys in [%d, %d], want %d in [0, %d]", r.fanTable, final, distinct, minKey, maxKey, good, good-1)
		return
	}
	res.Notes = append(res.Notes, fmt.Sprintf("fan-out table %d of %d", final, good))
}

// verifyExactlyOnce requires each source record once in the table, by its
// (_topic, _partition, _offset), without FINAL or merges.
func (r *run) verifyExactlyOnce(ctx context.Context, res *Result, total uint64) {
	var distinct uint64
	if err := r.ch.QueryRow(ctx, "SELECT uniqExact(_topic, _partition, _offset) FROM chaos."+r.table).Scan(&distinct); err != nil {
		res.fail("query: %v", err)
		return
	}
	if distinct != total {
		res.fail("exactly-once: count() %d but uniqExact(_topic, _partition, _offset) %d: %d rows inserted twice", total, distinct, total-distinct)
	}
}

// writtenRows is the number of rows the sinks' successful INSERTs into the
// scenario's table wrote: what query_log lists now, plus what it listed
// before a restart emptied it.
func (r *run) writtenRows(ctx context.Context) (uint64, error) {
	n, err := r.loggedRows(ctx)
	return n + r.loggedLost.Load(), err
}

// loggedRows is what the server's query_log lists as written by INSERTs
// into the scenario's table.
func (r *run) loggedRows(ctx context.Context) (uint64, error) {
	if err := r.ch.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		return 0, err
	}
	var n uint64
	if r.queryLogTables {
		err := r.ch.QueryRow(ctx, "SELECT sum(written_rows) FROM system.query_log WHERE type = 2 AND query_kind = 'Insert' AND has(tables, ?)",
			"chaos."+r.table).Scan(&n)
		return n, err
	}
	// Older servers log no table list: match the statement the sink sends.
	err := r.ch.QueryRow(ctx, "SELECT sum(written_rows) FROM system.query_log WHERE type = 2 AND query LIKE ?",
		"INSERT INTO `chaos`.`"+r.table+"` %").Scan(&n)
	return n, err
}

// countTopic counts the dead-lettered records of a topic from the start to
// its end offsets, in all and distinct by value (every bad record the
// harness produces is unique).
func (r *run) countTopic(ctx context.Context, topic string) (n, distinct int, err error) {
	ends, err := r.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, 0, err
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	if want == 0 {
		return 0, 0, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.env.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	seen := map[string]bool{}
	var read int64
	for read < want {
		f := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			return n, len(seen), fmt.Errorf("read %d of %d records of %s", read, want, topic)
		}
		f.EachRecord(func(rec *kgo.Record) {
			read++
			for _, h := range rec.Headers {
				if h.Key == "sink.error" {
					n++
					seen[string(rec.Value)] = true
					return
				}
			}
		})
	}
	return n, len(seen), nil
}

func (r *run) countLogs(needle string) int {
	n := 0
	for _, p := range r.procs {
		n += countInFile(p.logPath, needle)
	}
	return n
}

// lastLine is the last line of a sink's log, shortened, for a verdict.
func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	l := lines[len(lines)-1]
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	return l
}

func countInFile(path, needle string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(needle)) {
			n++
		}
	}
	return n
}

func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

// askAgain calls f until it succeeds, at most ten times two seconds apart:
// a broker the scenario restarted may close the admin client's connection
// under its first request (EOF), and answers when asked again.
func askAgain(ctx context.Context, f func() error) error {
	for try := 1; ; try++ {
		err := f()
		if err == nil || try == 10 || !sleep(ctx, 2*time.Second) {
			return err
		}
	}
}
