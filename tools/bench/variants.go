package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The variants, in the order they run and appear in the results. A
// variant with only set runs on that server alone; on the others its row
// says why not (notOn).
var allVariants = []struct{ key, name, only, notOn string }{
	{key: "sink", name: "sink (default config)"},
	// A/B: the same default config run by another build (--sink-before),
	// interleaved with the sink's runs; not in the default --variants.
	{key: "sink_before", name: "sink (default config), the --sink-before build"},
	{key: "sink_per_partition", name: "sink (ignore_partitions: false)"},
	{key: "sink_http", name: "sink over HTTP (clickhouse.protocol: http)", only: "26",
		notOn: "clickhouse-go's HTTP protocol does not work with ClickHouse 18.16"},
	{key: "kafka_engine", name: "ClickHouse Kafka engine + MV"},
	{key: "kcat_pipe", name: "kcat | clickhouse-client (JSONEachRow)"},
	{key: "kcat_http", name: "kcat | curl HTTP (JSONEachRow, server parses)"},
	{key: "naive", name: "naive: one INSERT per record"},
	// Floors, not alternatives: read the workload and insert nothing. With
	// franz-go and the sink's own Kafka options (bench consume), and with
	// kcat into /dev/null (the consume half of kcat_pipe). What they cost
	// per record, no decoding or inserting can save.
	{key: "consume_kgo", name: "floor: franz-go with the sink's Kafka options, reading only (bench consume)"},
	{key: "consume_kcat", name: "floor: kcat reading only (> /dev/null)"},
	// The same sink against a "remote-like" server: ClickHouse pinned to
	// the last core, the sink's Go scheduler limited to 1 or 2 threads.
	{key: "sink_gomaxprocs1", name: "sink, GOMAXPROCS=1, ClickHouse pinned to the other core", only: "26",
		notOn: "the remote-like runs pin ClickHouse 26.9 only (the 18.16 server is measured unpinned)"},
	{key: "sink_gomaxprocs2", name: "sink, GOMAXPROCS=2, ClickHouse pinned to the other core", only: "26",
		notOn: "the remote-like runs pin ClickHouse 26.9 only (the 18.16 server is measured unpinned)"},
	{key: "sink_before_gomaxprocs2", name: "the --sink-before build, GOMAXPROCS=2, ClickHouse pinned to the other core", only: "26",
		notOn: "the remote-like runs pin ClickHouse 26.9 only (the 18.16 server is measured unpinned)"},
	// The same events, re-encoded by bin/loadgen --format and framed with
	// the schema id it registers (registryFormats), each in a topic of
	// its own, into the same table.
	{key: "sink_avro", name: "sink, format avro (same events as Avro)"},
	{key: "sink_protobuf", name: "sink, format protobuf (same events as Protobuf)"},
	{key: "sink_json_schema", name: "sink, format json-schema (same JSON, registry-framed)"},
}

// registryFormats maps the registry-framed variants to their route format.
var registryFormats = map[string]string{"sink_avro": "avro", "sink_protobuf": "protobuf", "sink_json_schema": "json-schema"}

// notRunOn says why variant key does not run on server srv, or "".
func notRunOn(key string, srv chServer) string {
	for _, v := range allVariants {
		if v.key == key && v.only != "" && v.only != srv.key {
			return v.notOn
		}
	}
	return ""
}

func variantName(key string) string {
	for _, v := range allVariants {
		if v.key == key {
			return v.name
		}
	}
	return key
}

func (b *bench) runVariant(ctx context.Context, key string, run int) Result {
	r := Result{Key: key, Name: variantName(key), Run: run, Expected: int64(b.opt.count), Inserts: -1, Status: "ok"}
	table := fmt.Sprintf("%s_%d", key, run)
	r.Table = benchDB + "." + table
	if why := notRunOn(key, b.srv); why != "" {
		r.Status = "not run: " + why
		return r
	}
	if f := registryFormats[key]; f != "" && b.formatSkip[f] != "" {
		r.Status = "not run: " + b.formatSkip[f]
		return r
	}
	if strings.HasPrefix(key, "consume_") {
		b.quiesce()
		logf("%s run %d: reading %s", key, run, b.topic)
		return b.runConsumeOnly(r)
	}
	if err := b.createTable(ctx, table); err != nil {
		return failed(r, err)
	}
	b.quiesce()
	logf("%s run %d: into %s", key, run, r.Table)
	switch key {
	case "sink":
		r = b.runSink(ctx, r, table, nil, nil)
		if r.ok() && b.jsonDigest == "" {
			b.jsonDigest, _ = b.digest(ctx, table)
		}
		return r
	case "sink_before", "sink_before_gomaxprocs2":
		if b.opt.sinkBefore == "" {
			r.Status = "not run: no --sink-before binary"
			return r
		}
		if key == "sink_before_gomaxprocs2" {
			return b.runRemoteLike(ctx, r, table, "2", b.opt.sinkBefore)
		}
		return b.runSinkConf(ctx, r, sinkConf{bin: b.opt.sinkBefore}, table, nil)
	case "sink_per_partition":
		return b.runSink(ctx, r, table, map[string]string{"ignore_partitions": "false"}, nil)
	case "sink_gomaxprocs1", "sink_gomaxprocs2":
		return b.runRemoteLike(ctx, r, table, strings.TrimPrefix(key, "sink_gomaxprocs"), "")
	case "sink_avro", "sink_protobuf", "sink_json_schema":
		f := registryFormats[key]
		if why := b.formatSkip[f]; why != "" {
			r.Status = "not run: " + why
			return r
		}
		r = b.runSinkConf(ctx, r, sinkConf{format: f, registry: b.opt.registry, topicOverride: b.formatTopic(f)}, table, nil)
		if r.ok() {
			size := fmt.Sprintf("%.0f bytes/record (JSON: %.0f)", b.formatBytes[f], b.res.Workload.RecordBytes)
			r.Note = strings.TrimPrefix(r.Note+"; "+size+"; "+b.sameRows(ctx, table), "; ")
		}
		return r
	case "sink_http":
		// Needs the config's clickhouse.protocol; a build without it
		// rejects the generated config and the row says so.
		return b.runSinkConf(ctx, r, sinkConf{batch: nil, protocol: "http", chAddrs: []string{b.srv.httpAddr()}}, table, nil)
	case "kafka_engine":
		return b.runKafkaEngine(ctx, r, table)
	case "kcat_pipe":
		return b.runPipe(ctx, r, table, "clickhouse-client", "--host", chHost(b.srv.native), "--port", fmt.Sprint(portOf(b.srv.native, 9000)),
			"--query", "INSERT INTO "+r.Table+" FORMAT JSONEachRow")
	case "kcat_http":
		// -T - streams stdin chunked (--data-binary @- would read it all into
		// memory first); -X POST because current servers answer PUT with 501.
		return b.runPipe(ctx, r, table, "curl", "-sS", "--fail-with-body", "-X", "POST", "-T", "-", b.ch.insertURL(r.Table, "JSONEachRow"))
	case "naive":
		r.Expected = int64(min(b.opt.sample, b.opt.count))
		r.Sample = true
		return b.runNaive(ctx, r, table)
	}
	return failed(r, fmt.Errorf("unknown variant %q", key))
}

func chHost(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		return addr[:i]
	}
	return addr
}

// group names a consumer group of this benchmark, unique per server.
func (b *bench) group(key string, run int) string {
	return fmt.Sprintf("bench-%s-ch%s-%s-%d", b.id, b.srv.key, key, run)
}

// runSink runs the real bin/sink on a generated config until every record
// is a row, then stops it with SIGTERM (flush, commit, leave the group).
// attach, if set, is called with the sink's pid once it runs and returns
// the function that detaches it when the rows are in.
func (b *bench) runSink(ctx context.Context, r Result, table string, batch map[string]string, attach func(pid int) func()) Result {
	return b.runSinkConf(ctx, r, sinkConf{batch: batch}, table, attach)
}

// runSinkConf is runSink with more of the config set: sc's name, group,
// topic, table and brokers are filled in, its addresses default to the
// server's native one.
func (b *bench) runSinkConf(ctx context.Context, r Result, sc sinkConf, table string, attach func(pid int) func()) Result {
	sc.name, sc.group, sc.topic, sc.table, sc.brokers = "bench-"+r.Key, b.group(r.Key, r.Run), b.topic, table, b.opt.brokers
	if sc.topicOverride != "" {
		sc.topic = sc.topicOverride
	}
	if len(sc.chAddrs) == 0 {
		sc.chAddrs = []string{b.srv.native}
	}
	cfg, err := sc.parse()
	if err != nil && sc.protocol != "" {
		r.Status = "could not run: this build's config does not take clickhouse.protocol: " + oneLine(err.Error())
		logf("%s run %d: %s", r.Key, r.Run, r.Status)
		return r
	}
	if err != nil {
		return failed(r, err)
	}
	r.Config = strings.TrimSpace(sc.yaml())
	r.BufferMemory = int64(cfg.Batch.BufferMemory)
	path := filepath.Join(b.opt.work, fmt.Sprintf("ch%s_%s_%d.yaml", b.srv.key, r.Key, r.Run))
	if err := os.WriteFile(path, []byte(sc.yaml()), 0o644); err != nil {
		return failed(r, err)
	}
	before := b.meter.snap()
	bin := b.opt.sinkBin
	if sc.bin != "" {
		bin = sc.bin
	}
	name, args := bin, []string{"run", "--config", path}
	if len(sc.wrap) > 0 {
		name, args = sc.wrap[0], append(append(sc.wrap[1:len(sc.wrap):len(sc.wrap)], bin), args...)
	}
	c, err := start(name, args, strings.TrimSuffix(path, ".yaml")+".log", func(cmd *exec.Cmd) { cmd.Env = append(cmd.Env, sc.env...) })
	if err != nil {
		return failed(r, err)
	}
	defer b.deleteGroups(context.Background(), []string{sc.group})
	detach := func() {}
	if attach != nil {
		detach = attach(c.cmd.Process.Pid)
	}
	rows, reached, werr := b.waitRows(ctx, table, r.Expected, b.opt.timeout, c.exited)
	after := b.meter.snap()
	detach()
	serr := c.stop(60 * time.Second)
	r.Rows = rows
	if werr != nil {
		return failed(r, fmt.Errorf("%w; sink log: %s", werr, c.tail(3)))
	}
	if serr != nil {
		r.Note = "sink did not exit cleanly: " + oneLine(serr.Error())
	}
	return b.finishRun(ctx, r, table, before, after, reached, c.usage())
}

func (b *bench) finishRun(ctx context.Context, r Result, table string, before, after cpuSnap, reached time.Time, u usage) Result {
	idle := b.settle()
	r.CHCPUToIdleSec = idle.ch - before.ch
	r.SettleSec = idle.at.Sub(reached).Seconds()
	st, err := b.ch.insertStats(ctx, benchDB, table, before.at)
	if err != nil {
		return failed(r, err)
	}
	r.Inserts, r.InsertRows, r.Parts, r.CHQueryCPUSec = st.inserts, st.rows, st.parts, st.queryCPU
	if r.Key == "kafka_engine" {
		r.Inserts = -1 // the MV writes blocks, not INSERT queries
	}
	r.Rows, _ = b.ch.int64(ctx, "SELECT count() FROM "+benchDB+"."+table)
	finish(&r, before, after, reached, u)
	if r.Sample && r.RowsPerSec > 0 {
		r.ExtrapolatedWallSec = float64(b.opt.count) / r.RowsPerSec
	}
	logf("%s run %d: %d rows in %.2fs (%.0f rows/s), %d inserts, %d parts, client CPU %.2fs, CH CPU %.2fs",
		r.Key, r.Run, r.Expected, r.WallSec, r.RowsPerSec, r.Inserts, r.Parts, r.ClientCPUSec, r.CHCPUSec)
	return r
}

// runKafkaEngine measures ClickHouse's own Kafka consumer: a Kafka engine
// table and a materialized view into the target. The group's offsets are
// committed at the start of every partition first, because librdkafka's
// default for a group without offsets is the end of the topic.
func (b *bench) runKafkaEngine(ctx context.Context, r Result, table string) Result {
	group := b.group(r.Key, r.Run)
	queue, mv := table+"_queue", table+"_mv"
	starts, err := b.adm.ListStartOffsets(ctx, b.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return failed(r, fmt.Errorf("start offsets of %s: %w", b.topic, err))
	}
	if err := b.adm.CommitAllOffsets(ctx, group, starts.Offsets()); err != nil {
		return failed(r, fmt.Errorf("committing start offsets for group %s: %w", group, err))
	}
	defer b.deleteGroups(context.Background(), []string{group})
	r.Config = fmt.Sprintf("ENGINE = Kafka('%s', '%s', '%s', 'JSONEachRow'); CREATE MATERIALIZED VIEW … TO %s AS SELECT * FROM …",
		strings.Join(b.opt.brokers, ","), b.topic, group, r.Table)
	if s, err := b.ch.query(ctx, "SELECT name, value FROM system.settings WHERE name IN ('max_block_size', 'stream_flush_interval_ms', 'max_insert_block_size') ORDER BY name"); err == nil {
		r.Note = "server settings: " + strings.ReplaceAll(strings.ReplaceAll(s, "\t", "="), "\n", ", ")
	}
	before := b.meter.snap()
	drop := func() {
		// Dropping stops the engine's consumer; it must not keep polling during later runs.
		_ = b.ch.exec(context.Background(), "DROP TABLE IF EXISTS "+benchDB+"."+mv)
		_ = b.ch.exec(context.Background(), "DROP TABLE IF EXISTS "+benchDB+"."+queue)
	}
	defer drop()
	err = b.ch.exec(ctx, fmt.Sprintf("CREATE TABLE %s.%s (%s) ENGINE = Kafka('%s', '%s', '%s', 'JSONEachRow')",
		benchDB, queue, eventColumns, strings.Join(b.opt.brokers, ","), b.topic, group))
	if err == nil {
		err = b.ch.exec(ctx, fmt.Sprintf("CREATE MATERIALIZED VIEW %s.%s TO %s.%s AS SELECT * FROM %s.%s",
			benchDB, mv, benchDB, table, benchDB, queue))
	}
	if err != nil {
		r.Status = "could not run: CREATE TABLE … ENGINE = Kafka / the MV failed: " + exceptionOf(err)
		if v, berr := b.ch.query(ctx, "SELECT value FROM system.build_options WHERE name = 'USE_RDKAFKA'"); berr == nil && v != "" {
			r.Status += " (system.build_options USE_RDKAFKA = " + v + ")"
		}
		logf("%s run %d: %s", r.Key, r.Run, r.Status)
		return r
	}
	rows, reached, werr := b.waitRows(ctx, table, r.Expected, b.opt.timeout, nil)
	after := b.meter.snap()
	drop()
	r.Rows = rows
	if werr != nil {
		r.Status = "could not run: " + oneLine(werr.Error())
		if l := b.chKafkaError(); l != "" {
			r.Status += "; server log: " + l
		}
		logf("%s run %d: %s", r.Key, r.Run, r.Status)
		return r
	}
	return b.finishRun(ctx, r, table, before, after, reached, usage{})
}

// chKafkaError is the last Kafka-related line of the server's error log,
// when the log is where the local stack puts it.
func (b *bench) chKafkaError() string {
	data, err := os.ReadFile(filepath.Join(b.opt.stackRoot, ".stack", b.srv.stack, "log", "clickhouse-server.err.log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(string(data), "\n")
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-2000; i-- {
		if strings.Contains(lines[i], "Kafka") || strings.Contains(lines[i], "rdkafka") {
			return oneLine(lines[i])
		}
	}
	return ""
}

// runPipe measures `kcat … | cmd args…`: no group, no offsets, no retries;
// the ceiling of what moving bytes costs. Client CPU and memory are the
// two processes' together.
func (b *bench) runPipe(ctx context.Context, r Result, table string, cmd string, args ...string) Result {
	if _, err := exec.LookPath(cmd); err != nil {
		r.Status = "could not run: " + cmd + " is not installed"
		return r
	}
	kcatArgs := []string{"-C", "-b", strings.Join(b.opt.brokers, ","), "-t", b.topic, "-e", "-o", "beginning", "-q", "-f", `%s\n`}
	r.Config = "kcat " + strings.Join(kcatArgs, " ") + " | " + cmd + " " + strings.Join(args, " ")
	pr, pw, err := os.Pipe()
	if err != nil {
		return failed(r, err)
	}
	base := filepath.Join(b.opt.work, fmt.Sprintf("ch%s_%s_%d", b.srv.key, r.Key, r.Run))
	before := b.meter.snap()
	sinkSide, err := start(cmd, args, base+".client.log", func(c *exec.Cmd) { c.Stdin = pr })
	if err != nil {
		pr.Close()
		pw.Close()
		return failed(r, err)
	}
	kcat, err := start("kcat", kcatArgs, base+".kcat.log", func(c *exec.Cmd) { c.Stdout = pw })
	pr.Close()
	pw.Close()
	if err != nil {
		_ = sinkSide.stop(5 * time.Second)
		return failed(r, err)
	}
	rows, reached, werr := b.waitRows(ctx, table, r.Expected, b.opt.timeout, sinkSide.exited)
	after := b.meter.snap()
	kerr := kcat.wait(30 * time.Second)
	cerr := sinkSide.wait(30 * time.Second)
	r.Rows = rows
	if werr != nil {
		return failed(r, fmt.Errorf("%w; kcat: %v %s; %s: %v %s", werr, kerr, kcat.tail(2), cmd, cerr, sinkSide.tail(2)))
	}
	if kerr != nil || cerr != nil {
		r.Note = fmt.Sprintf("exit: kcat %v, %s %v", kerr, cmd, cerr)
	}
	u1, u2 := kcat.usage(), sinkSide.usage()
	return b.finishRun(ctx, r, table, before, after, reached, usage{CPU: u1.CPU + u2.CPU, MaxRSS: u1.MaxRSS + u2.MaxRSS})
}

// runConsumeOnly runs a reference reader (consume_kgo, consume_kcat) over
// the whole workload topic and measures its CPU; it writes no table, so
// Rows is what it read and Inserts is -1.
func (b *bench) runConsumeOnly(r Result) Result {
	r.Table, r.Inserts = "", -1
	name, args := b.opt.benchBin, []string{"consume", "--brokers", strings.Join(b.opt.brokers, ","), "--topic", b.topic, "--count", fmt.Sprint(b.opt.count)}
	setup := func(*exec.Cmd) {}
	if r.Key == "consume_kcat" {
		name, args = "kcat", []string{"-C", "-b", strings.Join(b.opt.brokers, ","), "-t", b.topic, "-e", "-o", "beginning", "-q", "-f", `%s\n`}
		if _, err := exec.LookPath("kcat"); err != nil {
			r.Status = "could not run: kcat is not installed"
			return r
		}
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return failed(r, err)
		}
		defer devnull.Close()
		setup = func(c *exec.Cmd) { c.Stdout = devnull }
	}
	r.Config = filepath.Base(name) + " " + strings.Join(args, " ")
	before := b.meter.snap()
	c, err := start(name, args, filepath.Join(b.opt.work, fmt.Sprintf("ch%s_%s_%d.log", b.srv.key, r.Key, r.Run)), setup)
	if err != nil {
		return failed(r, err)
	}
	var werr error
	select {
	case <-c.exited:
		werr = c.err
	case <-time.After(b.opt.timeout):
		werr = fmt.Errorf("still reading after %s; %v", b.opt.timeout, c.stop(5*time.Second))
	}
	reached := time.Now()
	after := b.meter.snap()
	if werr != nil {
		return failed(r, fmt.Errorf("%w; log: %s", werr, c.tail(3)))
	}
	r.Rows = int64(b.opt.count)
	finish(&r, before, after, reached, c.usage())
	logf("%s run %d: %d records in %.2fs, client CPU %.2fs", r.Key, r.Run, r.Expected, r.WallSec, r.ClientCPUSec)
	return r
}

// runNaive runs `bench naive` (one INSERT per record over HTTP, the way a
// connector without batching writes) on a sample of the workload; the
// results are per row and extrapolated to the whole workload.
func (b *bench) runNaive(ctx context.Context, r Result, table string) Result {
	group := b.group(r.Key, r.Run)
	args := []string{"naive", "--brokers", strings.Join(b.opt.brokers, ","), "--topic", b.topic, "--group", group,
		"--count", fmt.Sprint(r.Expected), "--url", b.srv.http, "--table", r.Table}
	r.Config = "bench " + strings.Join(args, " ")
	before := b.meter.snap()
	c, err := start(b.opt.benchBin, args, filepath.Join(b.opt.work, fmt.Sprintf("ch%s_%s_%d.log", b.srv.key, r.Key, r.Run)), nil)
	if err != nil {
		return failed(r, err)
	}
	defer b.deleteGroups(context.Background(), []string{group})
	rows, reached, werr := b.waitRows(ctx, table, r.Expected, b.opt.timeout, c.exited)
	after := b.meter.snap()
	var serr error
	if werr == nil {
		serr = c.wait(30 * time.Second) // it exits by itself after --count records
	} else {
		serr = c.stop(10 * time.Second)
	}
	r.Rows = rows
	if werr != nil {
		return failed(r, fmt.Errorf("%w; log: %s", werr, c.tail(3)))
	}
	if serr != nil {
		r.Note = oneLine(serr.Error())
	}
	return b.finishRun(ctx, r, table, before, after, reached, c.usage())
}

// runsOf is how many runs variant key gets on srv: one for the naive
// variant (a sample) and for a variant that does not run there (its row
// says why), runs otherwise.
func runsOf(key string, srv chServer, runs int) int {
	if key == "naive" || notRunOn(key, srv) != "" {
		return 1
	}
	return runs
}

// plannedRun is one run of a variant.
type plannedRun struct {
	key string
	run int
}

// runOrder interleaves the runs: every variant's run 1, then every
// variant's run 2, ..., each variant as often as runsOf allows.
func runOrder(variants []string, srv chServer, runs int) []plannedRun {
	var out []plannedRun
	for run := 1; run <= runs; run++ {
		for _, key := range variants {
			if run <= runsOf(key, srv, runs) {
				out = append(out, plannedRun{key, run})
			}
		}
	}
	return out
}

// plannedRuns is how many variant runs the whole benchmark makes, for the
// progress line.
func (b *bench) plannedRuns() int {
	n := 0
	for _, srv := range b.opt.servers {
		n += len(runOrder(b.opt.variants, srv, b.opt.runs))
	}
	return n
}

// progress prints, before each run, how far the benchmark is and a rough
// estimate of the time left (the mean time per run so far).
type progress struct {
	total, done int
	began       time.Time
}

func newProgress(total int) progress { return progress{total: total, began: time.Now()} }

func (p *progress) next(what string) {
	el := time.Since(p.began)
	eta := "?"
	if p.done > 0 {
		eta = (el / time.Duration(p.done) * time.Duration(p.total-p.done)).Round(time.Second).String()
	}
	p.done++
	logf("[%d/%d, %s elapsed, ~%s left for the variant runs] %s", p.done, p.total, el.Round(time.Second), eta, what)
}

// digest sums a hash of every row of table: equal digests mean the same
// rows, whatever order they landed in.
func (b *bench) digest(ctx context.Context, table string) (string, error) {
	return b.ch.query(ctx, "SELECT count(), sum(cityHash64(id, user_id, ts, event_type, channel, toString(cost), payload)) FROM "+benchDB+"."+table)
}

// sameRows compares table with the first JSON sink run on this server: the
// registry formats carry the same logical events and must land the same
// rows.
func (b *bench) sameRows(ctx context.Context, table string) string {
	d, err := b.digest(ctx, table)
	switch {
	case err != nil:
		return "rows not compared: " + oneLine(err.Error())
	case b.jsonDigest == "":
		return "rows not compared: no JSON sink run succeeded before it"
	case d == b.jsonDigest:
		return "the same rows as the JSON sink run (count and row hash sum)"
	}
	return fmt.Sprintf("DIFFERENT rows from the JSON sink run: count, hash sum %q vs %q", d, b.jsonDigest)
}
