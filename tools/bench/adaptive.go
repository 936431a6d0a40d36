package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"sink/tools/gen"
)

// bench adaptive: batch.mode adaptive against the fixed defaults and seed
// 004's hand-tuned setting, in the same run, on one paced workload whose
// rate changes 20× up and down. One producer writes the profile to one
// topic; three sinks (one consumer group each) read it into three tables at
// the same time, so they see the same records at the same moments. Two more
// sinks read it into tables whose merges are stopped and whose
// parts_to_delay_insert / parts_to_throw_insert are low: the fixed defaults
// and adaptive mode with the same cadence, to show which one ClickHouse
// refuses with TOO_MANY_PARTS first. The bench polls ClickHouse (query_log
// for every INSERT, system.parts) and every sink's /metrics while it runs,
// and writes bench/results/adaptive-<date>.md and .svg.

// adaptDB is the database the adaptive bench owns (not `make bench`'s).
const adaptDB = "bench_adaptive"

type adaptiveOptions struct {
	brokers          []string
	servers          []chServer
	sinkBin          string
	out, work        string
	profile          gen.Profile
	profileText      string
	partitions, size int
	target           float64
	maxLatency       time.Duration
	delayAt, throwAt int
	every            time.Duration
	drain            time.Duration
	command          string
}

func adaptiveMain(args []string) error {
	fs := flag.NewFlagSet("adaptive", flag.ContinueOnError)
	var o adaptiveOptions
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka brokers, comma-separated")
	servers := serverFlags(fs, "26")
	fs.StringVar(&o.sinkBin, "sink", "bin/sink", "the sink binary to run")
	fs.StringVar(&o.out, "out", "bench/results", "where the results files go")
	fs.StringVar(&o.work, "work", ".stack/bench", "generated configs and logs of the sinks")
	fs.StringVar(&o.profileText, "rate-profile", "100:60s,2000:60s,100:60s", "the producer's rate steps, RATE:DURATION,… in records per second")
	fs.IntVar(&o.partitions, "partitions", 6, "partitions of the workload topic")
	fs.IntVar(&o.size, "size", 180, "bytes per record")
	fs.Float64Var(&o.target, "target", 6, "adaptive: batch.target_inserts_per_minute")
	fs.DurationVar(&o.maxLatency, "max-latency", 30*time.Second, "adaptive: batch.max_latency")
	fs.IntVar(&o.delayAt, "stopped-delay", 10, "merges-stopped tables: parts_to_delay_insert")
	fs.IntVar(&o.throwAt, "stopped-throw", 20, "merges-stopped tables: parts_to_throw_insert")
	fs.DurationVar(&o.every, "every", 5*time.Second, "how often ClickHouse and the sinks' /metrics are read")
	fs.DurationVar(&o.drain, "drain", 150*time.Second, "how long the last rows may take to land after the producer stopped (seed 004's fetch wait is 72s)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.servers, err = servers(); err != nil {
		return err
	}
	if o.profile, err = gen.ParseProfile(o.profileText); err != nil {
		return err
	}
	if o.target <= 0 || o.maxLatency <= 0 || o.partitions < 1 || o.delayAt < 1 || o.throwAt <= o.delayAt {
		return errors.New("--target, --max-latency and --partitions must be positive, --stopped-throw above --stopped-delay")
	}
	o.brokers = strings.Split(*brokers, ",")
	o.command = "make bench-adaptive"
	if len(args) > 0 {
		o.command = "make bench-adaptive ADAPTIVE_ARGS='" + strings.Join(args, " ") + "'"
	}
	ctx, cancel := signalContext()
	defer cancel()
	b, err := newBench(ctx, options{brokers: o.brokers, work: o.work, sinkBin: o.sinkBin, stackRoot: envOr("SINK_STACK_ROOT", ".")})
	if err != nil {
		return err
	}
	defer b.close()
	rep := adaptiveReport{Date: time.Now().UTC().Format("2006-01-02"), Command: o.command, Profile: o.profileText,
		Target: o.target, MaxLatency: o.maxLatency, DelayAt: o.delayAt, ThrowAt: o.throwAt, Machine: machine(b)}
	for _, srv := range o.servers {
		rep.Servers = append(rep.Servers, b.runAdaptive(ctx, o, srv))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	md, svg, err := rep.write(o.out)
	if err != nil {
		return err
	}
	fmt.Print(rep.markdown(filepath.Base(svg)))
	logf("results: %s and %s", md, svg)
	return nil
}

// adVariant is one sink of the run.
type adVariant struct {
	Key, Name string
	Table     string
	Stopped   bool    // merges stopped, low parts thresholds
	Target    float64 // the inserts/min the config aims at (0: none)
	Config    string
	kafka     map[string]string
	batch     map[string]string
	port      int
	child     *child
	group     string
}

// adaptiveVariants are the sinks of one run: the three configurations on
// the same records, and the two on merges-stopped tables.
func adaptiveVariants(o adaptiveOptions) []*adVariant {
	// Seed 004's hand-tuned setting, in real time: fetch.min.bytes a
	// little above a minute of its 20,000 records/min, fetch.max.wait 72s,
	// one batch across partitions per poll.
	seed := seed004Options{rate: 20_000, scale: 1}
	var tuned seedStage
	for _, st := range seed.stageDefs(float64(o.size)) {
		if st.key == "cross_partition" {
			tuned = st
		}
	}
	adaptive := map[string]string{"mode": "adaptive", "target_inserts_per_minute": strconv.FormatFloat(o.target, 'g', -1, 64),
		"max_latency": o.maxLatency.String()}
	stoppedAdaptive := map[string]string{"mode": "adaptive", "target_inserts_per_minute": "12", "max_latency": o.maxLatency.String()}
	return []*adVariant{
		{Key: "fixed", Name: "fixed defaults (max_wait 5s)", Table: "fixed", Target: 12},
		{Key: "seed004", Name: "hand-tuned (seed 004 stage 2: fetch_min_bytes ≈ 1.2 min of 20,000/min, fetch_max_wait 72s)", Table: "seed004",
			kafka: tuned.kafka, batch: tuned.batch, Target: 1},
		{Key: "adaptive", Name: fmt.Sprintf("adaptive (target %g/min, max_latency %s)", o.target, o.maxLatency), Table: "adaptive",
			batch: adaptive, Target: o.target},
		{Key: "stopped_fixed", Name: "merges stopped: fixed defaults (12/min)", Table: "stopped_fixed", Stopped: true, Target: 12},
		{Key: "stopped_adaptive", Name: "merges stopped: adaptive (target 12/min)", Table: "stopped_adaptive", Stopped: true,
			batch: stoppedAdaptive, Target: 12},
	}
}

// freePort finds a port nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// runAdaptive is one server's run.
func (b *bench) runAdaptive(ctx context.Context, o adaptiveOptions, srv chServer) adServer {
	res := adServer{Key: srv.key}
	fail := func(err error) adServer {
		res.Error = oneLine(err.Error())
		logf("adaptive on ClickHouse %s: %s", srv.key, res.Error)
		return res
	}
	version, err := b.useServer(ctx, srv)
	if err != nil {
		return fail(err)
	}
	res.Name = "ClickHouse " + version
	logf("adaptive bench on %s: rate profile %s", res.Name, o.profileText)
	if err := b.ch.exec(ctx, "DROP DATABASE IF EXISTS "+adaptDB); err != nil {
		return fail(err)
	}
	if err := b.ch.exec(ctx, "CREATE DATABASE "+adaptDB); err != nil {
		return fail(err)
	}
	topic := "bench_adaptive_ch" + srv.key
	// EnsureTopic returns once the recreated topic is in the metadata: a
	// sink that started before would stop with "topic does not exist".
	if err := gen.EnsureTopic(ctx, b.adm, topic, o.partitions, true); err != nil {
		return fail(err)
	}
	vs := adaptiveVariants(o)
	for _, v := range vs {
		// landed: when the row became visible (the INSERT's server time).
		q := "CREATE TABLE " + adaptDB + "." + v.Table + " (" + eventColumns + ", landed DateTime DEFAULT now()) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (user_id, ts)"
		if v.Stopped {
			q += fmt.Sprintf(" SETTINGS parts_to_delay_insert = %d, parts_to_throw_insert = %d", o.delayAt, o.throwAt)
		}
		if err := b.ch.exec(ctx, q); err != nil {
			return fail(err)
		}
		if v.Stopped {
			if err := b.ch.exec(ctx, "SYSTEM STOP MERGES "+adaptDB+"."+v.Table); err != nil {
				return fail(err)
			}
		}
		if v.port, err = freePort(); err != nil {
			return fail(err)
		}
		v.group = b.group("adaptive-"+v.Key, 0)
		sc := sinkConf{name: "bench-adaptive-" + v.Key, group: v.group, topic: topic, table: v.Table, database: adaptDB,
			brokers: o.brokers, chAddrs: []string{srv.native}, kafka: v.kafka, batch: v.batch,
			listen: fmt.Sprintf("127.0.0.1:%d", v.port)}
		if _, err := sc.parse(); err != nil {
			return fail(err)
		}
		v.Config = strings.TrimSpace(sc.yaml())
		path := filepath.Join(o.work, "ch"+srv.key+"_adaptive_"+v.Key+".yaml")
		if err := os.WriteFile(path, []byte(sc.yaml()), 0o644); err != nil {
			return fail(err)
		}
		if v.child, err = start(o.sinkBin, []string{"run", "--config", path}, strings.TrimSuffix(path, ".yaml")+".log", nil); err != nil {
			return fail(err)
		}
	}
	var groups []string
	for _, v := range vs {
		groups = append(groups, v.group)
	}
	defer b.deleteGroups(context.Background(), groups)
	stopAllSinks := func() {
		var wg sync.WaitGroup
		for _, v := range vs {
			wg.Add(1)
			go func() { defer wg.Done(); _ = v.child.stop(40 * time.Second) }()
		}
		wg.Wait()
	}
	// Give the sinks a moment to join their groups before records come;
	// all five must be running.
	time.Sleep(3 * time.Second)
	for _, v := range vs {
		select {
		case <-v.child.exited:
			stopAllSinks()
			return fail(fmt.Errorf("sink %s exited at start: %s", v.Key, v.child.tail(2)))
		default:
		}
	}

	// Poll ClickHouse and the sinks while the producer runs and the rows drain.
	pollCtx, stopPoll := context.WithCancel(ctx)
	began := time.Now()
	res.Started = began.UTC()
	samples := map[string][]adSample{}
	var partsSeries []adParts
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		tick := time.NewTicker(o.every)
		defer tick.Stop()
		for {
			at := time.Since(began).Seconds()
			for _, v := range vs {
				if s, err := scrapeSink(pollCtx, v.port); err == nil {
					s.T = at
					samples[v.Key] = append(samples[v.Key], s)
				}
			}
			if p, err := b.ch.query(pollCtx, "SELECT table, max(n) FROM (SELECT table, partition_id, count() AS n FROM system.parts WHERE database = '"+
				adaptDB+"' AND active GROUP BY table, partition_id) GROUP BY table"); err == nil {
				ps := adParts{T: at, Max: map[string]int{}}
				for _, line := range strings.Split(p, "\n") {
					if f := strings.Split(line, "\t"); len(f) == 2 {
						n, _ := strconv.Atoi(f[1])
						ps.Max[f[0]] = n
					}
				}
				partsSeries = append(partsSeries, ps)
			}
			select {
			case <-pollCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	load0 := loadAvg()
	p := gen.Produce{Brokers: o.brokers, Topic: topic, Count: o.profile.Events(), Partitions: o.partitions, Profile: o.profile,
		Events: gen.Config{Size: o.size, Seed: 18}}
	logf("producing %d records over %s; five sinks reading", p.Count, o.profile.Duration())
	prod, perr := p.Run(ctx)
	produced := time.Now()
	res.ProducerSec = produced.Sub(began).Seconds()
	res.Produced = int64(prod.Events)
	if perr != nil {
		stopPoll()
		<-polled
		stopAllSinks()
		return fail(perr)
	}
	// The three main tables must get every row; the stopped ones may not.
	for _, v := range vs[:3] {
		if _, _, err := b.waitRows(ctx, adaptDB+"."+v.Table, res.Produced, time.Until(produced.Add(o.drain)), v.child.exited); err != nil {
			res.Notes = append(res.Notes, v.Key+": "+oneLine(err.Error()))
		}
	}
	// A little more for the stopped tables' last inserts to be tried.
	time.Sleep(2 * o.every)
	stopPoll()
	<-polled
	res.DurationSec = time.Since(began).Seconds()
	res.LoadAvg = [2]float64{load0, loadAvg()}
	stopAllSinks()
	res.PartsSeries = partsSeries

	if err := b.ch.exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		return fail(err)
	}
	for _, v := range vs {
		r := adResult{Key: v.Key, Name: v.Name, Table: adaptDB + "." + v.Table, Stopped: v.Stopped, Target: v.Target,
			Config: v.Config, Samples: samples[v.Key]}
		if err := b.collectAdaptive(ctx, &r, began, o); err != nil {
			r.Error = oneLine(err.Error())
		}
		if log, err := os.ReadFile(v.child.log); err == nil {
			r.PushbackLogs = strings.Count(string(log), "ClickHouse pushes back")
			r.RetryLogs = strings.Count(string(log), "insert failed, retrying")
		}
		res.Variants = append(res.Variants, r)
	}
	res.analyze(o)
	_ = b.ch.exec(context.Background(), "DROP DATABASE IF EXISTS "+adaptDB)
	if _, err := b.adm.DeleteTopics(context.Background(), topic); err != nil {
		logf("deleting %s: %v", topic, err)
	}
	return res
}

// collectAdaptive reads what ClickHouse saw of r's table: every INSERT
// (query_log), the refusals with TOO_MANY_PARTS, and each row's latency
// from the producer's schedule to its landing second.
func (b *bench) collectAdaptive(ctx context.Context, r *adResult, began time.Time, o adaptiveOptions) error {
	db, table, _ := strings.Cut(r.Table, ".")
	t0 := float64(began.UnixMilli()) / 1000
	s, err := b.ch.query(ctx, fmt.Sprintf(
		"SELECT toUnixTimestamp(event_time), written_rows FROM system.query_log WHERE type = 2 AND event_date >= yesterday() AND event_time >= %d AND %s ORDER BY event_time",
		began.Unix()-1, insertMatch(db, table)))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(s, "\n") {
		var at, rows int64
		if _, err := fmt.Sscanf(line, "%d\t%d", &at, &rows); err == nil && rows > 0 {
			r.Inserts = append(r.Inserts, adInsert{T: float64(at) - t0, Rows: rows})
		}
	}
	// Refusals: the server's message says "Too many parts" on 18.16 and
	// today's servers alike (18.16's query_log has no exception_code).
	s, err = b.ch.query(ctx, fmt.Sprintf(
		"SELECT count(), min(toUnixTimestamp(event_time)) FROM system.query_log WHERE type IN (3, 4) AND event_date >= yesterday() AND event_time >= %d AND %s AND exception LIKE '%%oo many parts%%'",
		began.Unix()-1, insertMatch(db, table)))
	if err != nil {
		return err
	}
	var first int64
	if _, err := fmt.Sscanf(s, "%d\t%d", &r.TooManyParts, &first); err == nil && r.TooManyParts > 0 {
		r.FirstTooManySec = float64(first) - t0
	}
	if r.Rows, err = b.ch.int64(ctx, "SELECT count() FROM "+r.Table); err != nil {
		return err
	}
	// Latency per row: from when the producer's schedule sent its record
	// (the record's id is its place in the schedule) to the end of the
	// second it landed in: an upper bound, 1s resolution.
	s, err = b.ch.query(ctx, fmt.Sprintf(
		"SELECT t, count(), max(lat), countIf(lat <= %g) FROM (SELECT toUnixTimestamp(landed) + 1 - %f AS t, t - (%s) AS lat FROM %s) GROUP BY t ORDER BY t",
		o.maxLatency.Seconds(), t0, scheduleSQL(o.profile), r.Table))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(s, "\n") {
		var l adLanded
		if _, err := fmt.Sscanf(line, "%g\t%d\t%g\t%d", &l.T, &l.Rows, &l.MaxLatency, &l.Within); err == nil {
			r.Landed = append(r.Landed, l)
		}
	}
	return nil
}

// scheduleSQL is when the producer was due to send the record with id
// (seconds from its start), as a ClickHouse expression of the profile.
func scheduleSQL(p gen.Profile) string {
	var b strings.Builder
	b.WriteString("multiIf(")
	var events int
	var start time.Duration
	for _, s := range p {
		n := int(s.Rate*s.For.Seconds() + 0.5)
		fmt.Fprintf(&b, "id < %d, %g + (id - %d) / %g, ", events+n, start.Seconds(), events, s.Rate)
		events += n
		start += s.For
	}
	fmt.Fprintf(&b, "%g)", start.Seconds())
	return b.String()
}

// scrapeSink reads the batch controller's series from a sink's /metrics.
func scrapeSink(ctx context.Context, port int) (adSample, error) {
	s := adSample{V: map[string]float64{}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "sink_batch_") && !strings.HasPrefix(line, "sink_table_") && !strings.HasPrefix(line, "sink_fetch_paused") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		labels, val, ok := strings.Cut(rest, "} ")
		if !ok {
			name, val, _ = strings.Cut(line, " ")
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		if name == "sink_batch_target_reason" {
			if v == 1 {
				if _, r, ok := strings.Cut(labels, `reason="`); ok {
					s.Reason, _, _ = strings.Cut(r, `"`)
				}
			}
			continue
		}
		s.V[name] = v
	}
	return s, sc.Err()
}

// loadAvg is the machine's 1-minute load average (0 if unreadable).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}
