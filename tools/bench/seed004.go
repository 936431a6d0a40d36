package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"sink/tools/gen"
)

// Seed 004 (Magnit OMNI's Kafka → ClickHouse sink): the same traffic,
// 20,000 records/min over 12 partitions, through three configurations:
// the connector's defaults, fetch tuning (fetch.min.bytes a little above a
// minute of data, fetch.max.wait.ms 72 s), and batching across partitions.
// The replay compresses time by scale: the producer runs scale× faster and
// every time setting is divided by scale, so inserts per replayed minute
// and rows per insert are what real time would give, as long as the
// machine keeps up.
type seed004Options struct {
	enabled    bool
	rate       int           // records per replayed minute
	partitions int           // of the replay topic
	minutes    float64       // replayed minutes per stage
	scale      float64       // replay speed-up
	drain      time.Duration // extra time the last records may take to land
	stages     []string
}

type seedStage struct {
	key, name    string
	kafka, batch map[string]string
	published    string // what seed 004 reports for the stage
}

// stages builds the stage configs for o; recordBytes is the size of one
// produced record, for the seed's fetch sizing arithmetic.
func (o seed004Options) stageDefs(recordBytes float64) []seedStage {
	d := func(real time.Duration) string { return o.scaled(real).String() }
	// Seed 004's formula: bytes per minute, fetch.min.bytes a little above
	// (2.08 MB/min → 2.5 MB, ×1.2), fetch.max.wait.ms the longest tolerable
	// delay (72 s), request.timeout.ms above it (100 s).
	minBytes := strconv.Itoa(int(math.Ceil(1.2 * recordBytes * float64(o.rate))))
	tuned := map[string]string{"fetch_min_bytes": minBytes, "fetch_max_wait": d(72 * time.Second), "request_timeout": d(100 * time.Second)}
	// "Insert what each poll returned": the batch closes right after the fetch that opened it.
	perPoll := d(500 * time.Millisecond)
	return []seedStage{
		{
			key: "before", name: "before: Kafka client defaults, insert per poll per partition",
			kafka:     map[string]string{"fetch_min_bytes": "1", "fetch_max_wait": d(500 * time.Millisecond)},
			batch:     map[string]string{"ignore_partitions": "false", "max_wait": perPoll},
			published: "360–488 inserts/min, 4–21 rows/insert",
		},
		{
			key: "fetch_tuned", name: "stage 1: fetch tuned, per-partition batches",
			kafka:     tuned,
			batch:     map[string]string{"ignore_partitions": "false", "max_wait": perPoll},
			published: "8–16 inserts/min, 1,700–2,800 rows/insert",
		},
		{
			key: "cross_partition", name: "stage 2: fetch tuned + batches across partitions",
			kafka:     tuned,
			batch:     map[string]string{"ignore_partitions": "true", "max_wait": perPoll},
			published: "1 insert/min, 20,000–23,500 rows/insert",
		},
		{
			key: "sink_defaults", name: "sink defaults (fetch_min_bytes 1MiB, max_wait 5s, across partitions)",
			kafka:     map[string]string{"fetch_max_wait": d(500 * time.Millisecond)},
			batch:     map[string]string{"max_wait": d(5 * time.Second)},
			published: "—",
		},
	}
}

func (o seed004Options) scaled(real time.Duration) time.Duration {
	return (time.Duration(float64(real) / o.scale)).Round(time.Millisecond)
}

func (b *bench) runSeed004(ctx context.Context) []StageResult {
	o := b.opt.seed004
	recordBytes := float64(b.opt.size)
	if b.res.Workload.RecordBytes > 0 {
		recordBytes = b.res.Workload.RecordBytes
	}
	var out []StageResult
	for _, st := range o.stageDefs(recordBytes) {
		if !slices.Contains(o.stages, st.key) {
			continue
		}
		out = append(out, b.runStage(ctx, st))
	}
	return out
}

func (b *bench) runStage(ctx context.Context, st seedStage) StageResult {
	o := b.opt.seed004
	r := StageResult{Key: st.key, Name: st.name, Published: st.published, Scale: o.scale,
		RatePerMin: o.rate, Partitions: o.partitions, Status: "ok"}
	fail := func(err error) StageResult {
		r.Status = "failed: " + oneLine(err.Error())
		logf("seed 004 %s: %s", st.key, r.Status)
		return r
	}
	topic, table := "bench_seed004_"+st.key, "seed004_"+st.key
	r.Table = benchDB + "." + table
	if err := b.createTable(ctx, table); err != nil {
		return fail(err)
	}
	sc := sinkConf{
		name: "bench-seed004-" + st.key, group: b.group("seed004-"+st.key, 0), topic: topic, table: table,
		brokers: b.opt.brokers, chAddrs: []string{b.srv.native}, kafka: st.kafka, batch: st.batch,
	}
	if _, err := sc.parse(); err != nil {
		return fail(err)
	}
	r.Config = strings.TrimSpace(sc.yaml())
	path := filepath.Join(b.opt.work, "ch"+b.srv.key+"_seed004_"+st.key+".yaml")
	if err := os.WriteFile(path, []byte(sc.yaml()), 0o644); err != nil {
		return fail(err)
	}
	// An empty topic first, so the sink is already waiting when records arrive.
	if err := gen.EnsureTopic(ctx, b.adm, topic, o.partitions, true); err != nil {
		return fail(err)
	}
	b.quiesce()
	count := int(float64(o.rate) * o.minutes)
	perSec := float64(o.rate) / 60 * o.scale
	logf("seed 004 %s: %d records at %.0f/s (%d/min replayed ×%g) into %s", st.key, count, perSec, o.rate, o.scale, r.Table)
	c, err := start(b.opt.sinkBin, []string{"run", "--config", path}, strings.TrimSuffix(path, ".yaml")+".log", nil)
	if err != nil {
		return fail(err)
	}
	defer b.deleteGroups(context.Background(), []string{sc.group})
	before := b.meter.snap()
	p := gen.Produce{
		Brokers: b.opt.brokers, Topic: topic, Count: count, Partitions: o.partitions, Rate: perSec,
		Events: gen.Config{Size: b.opt.size, Seed: b.opt.seed + 4},
	}
	prod, perr := p.Run(ctx)
	end := time.Now()
	if perr != nil {
		_ = c.stop(60 * time.Second)
		return fail(perr)
	}
	// Every record of the replayed minutes must land before the sink is
	// stopped, so SIGTERM flushes nothing and every INSERT counted is one
	// the traffic caused. How long that takes after the producer stopped
	// shows whether the machine kept up with the compressed time.
	_, landed, derr := b.waitRows(ctx, table, int64(prod.Events), 2*o.scaled(72*time.Second)+o.drain, c.exited)
	after := b.meter.snap()
	serr := c.stop(60 * time.Second)
	if derr != nil {
		r.Note = oneLine(derr.Error())
	}
	if serr != nil {
		return fail(fmt.Errorf("%w; sink log: %s", serr, c.tail(3)))
	}
	r.Produced = prod.Events
	r.WindowSec = end.Sub(before.at).Seconds()
	r.DrainSec = landed.Sub(end).Seconds()
	r.ReplayedMinutes = r.WindowSec * o.scale / 60
	r.CHCPUSec = after.ch - before.ch
	r.Rows, _ = b.ch.int64(ctx, "SELECT count() FROM "+r.Table)
	ins, err := b.ch.insertsOf(ctx, benchDB, table, before.at, landed.Add(time.Second))
	if err != nil {
		return fail(err)
	}
	r.summarize(ins)
	if r.Rows < int64(r.Produced) {
		r.Status = fmt.Sprintf("incomplete: %d of %d rows landed", r.Rows, r.Produced)
	}
	logf("seed 004 %s: %.1f inserts/min, %.0f rows/insert (median), %d rows, landed %.1fs after the producer stopped",
		st.key, r.InsertsPerMin, r.RowsPerInsertMedian, r.Rows, r.DrainSec)
	return r
}

// insertsOf lists the rows written by each INSERT into db.table that
// finished in [from, to].
func (c *chHTTP) insertsOf(ctx context.Context, db, table string, from, to time.Time) ([]int64, error) {
	if err := c.exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		return nil, err
	}
	s, err := c.query(ctx, fmt.Sprintf(
		"SELECT written_rows FROM system.query_log WHERE type = 2 AND event_date >= yesterday() AND event_time >= %d AND event_time <= %d AND %s ORDER BY event_time",
		from.Unix(), to.Unix(), insertMatch(db, table)))
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, l := range strings.Fields(s) {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("query_log written_rows %q: %w", l, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// summarize turns the INSERTs of the window into per-minute figures.
func (r *StageResult) summarize(rows []int64) {
	r.Inserts = len(rows)
	if len(rows) == 0 || r.ReplayedMinutes <= 0 {
		return
	}
	s := slices.Clone(rows)
	slices.Sort(s)
	var sum int64
	for _, n := range s {
		sum += n
	}
	r.InsertedRows = sum
	r.InsertsPerMin = float64(len(s)) / r.ReplayedMinutes
	r.RowsPerMin = float64(sum) / r.ReplayedMinutes
	r.RowsPerInsertMin = s[0]
	r.RowsPerInsertMax = s[len(s)-1]
	r.RowsPerInsertMedian = float64(s[len(s)/2])
	if len(s)%2 == 0 {
		r.RowsPerInsertMedian = float64(s[len(s)/2-1]+s[len(s)/2]) / 2
	}
	r.RowsPerInsertMean = float64(sum) / float64(len(s))
	if r.InsertedRows > 0 {
		r.CHCPUUsPerRow = r.CHCPUSec / float64(r.InsertedRows) * 1e6
	}
}
