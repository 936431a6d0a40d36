// Command pgcdc-demo shows change data capture end to end on the local
// stack (make demo-cdc): it creates a PostgreSQL database with the seeded
// workload's tables and snapshot rows, registers a Debezium PostgreSQL
// connector on the Kafka Connect worker, creates the ReplacingMergeTree
// mirrors in ClickHouse, runs `sink run` with one debezium-json route,
// streams the workload's transactions, waits until the sink has committed
// every change, and prints the comparison of every table, key by key and
// column by column. It exits 1 when anything differs. Everything it created
// is removed at the end (--keep leaves the ClickHouse database).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/tools/internal/pgcdc"
)

type demo struct {
	pgAddr, connect, brokers, chAddr, sinkBin string
	keep                                      bool
	name                                      string // database, connector, topic prefix, group
	pgAdmin, pg                               *pgx.Conn
	ch                                        driver.Conn
	adm                                       *kadm.Client
	kcl                                       *kgo.Client
	cleanup                                   []func()
}

func main() {
	d := &demo{}
	fs := flag.NewFlagSet("pgcdc-demo", flag.ExitOnError)
	fs.StringVar(&d.pgAddr, "postgres", "127.0.0.1:15432", "PostgreSQL host:port (user sink, password sink)")
	fs.StringVar(&d.connect, "connect", "http://127.0.0.1:8083", "Kafka Connect worker REST URL (with Debezium's PostgreSQL connector)")
	fs.StringVar(&d.brokers, "brokers", "127.0.0.1:9092", "Kafka broker")
	fs.StringVar(&d.chAddr, "clickhouse", "127.0.0.1:19000", "ClickHouse native host:port")
	fs.StringVar(&d.sinkBin, "sink", "bin/sink", "the sink binary")
	seed := fs.Uint64("seed", 1, "workload seed")
	txs := fs.Int("transactions", 400, "transactions after the snapshot")
	fs.BoolVar(&d.keep, "keep", false, "keep the ClickHouse database (to look at the mirrors)")
	_ = fs.Parse(os.Args[1:])
	d.name = fmt.Sprintf("pgcdc_demo_%d", time.Now().Unix())
	code := 0
	if err := d.run(context.Background(), pgcdc.Config{Seed: *seed, SnapshotRows: 50, Transactions: *txs}); err != nil {
		fmt.Fprintln(os.Stderr, "pgcdc-demo:", err)
		code = 1
	}
	for i := len(d.cleanup) - 1; i >= 0; i-- {
		d.cleanup[i]()
	}
	os.Exit(code)
}

func say(format string, args ...any) { fmt.Printf("pgcdc-demo: "+format+"\n", args...) }

const markerTable = "demo_marker"

func (d *demo) run(ctx context.Context, cfg pgcdc.Config) error {
	start := time.Now()
	var err error
	if d.pgAdmin, err = pgx.Connect(ctx, fmt.Sprintf("postgres://sink:sink@%s/postgres?sslmode=disable", d.pgAddr)); err != nil {
		return fmt.Errorf("postgres (run `scripts/stack.sh cdc up`): %w", err)
	}
	if _, err := d.pgAdmin.Exec(ctx, "CREATE DATABASE "+d.name); err != nil {
		return err
	}
	d.cleanup = append(d.cleanup, func() {
		_, _ = d.pgAdmin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)")
		_ = d.pgAdmin.Close(context.Background())
	})
	if d.pg, err = pgx.Connect(ctx, fmt.Sprintf("postgres://sink:sink@%s/%s?sslmode=disable", d.pgAddr, d.name)); err != nil {
		return err
	}
	d.cleanup = append(d.cleanup, func() { _ = d.pg.Close(context.Background()) })
	w := pgcdc.New(cfg)
	if err := w.Setup(ctx, d.pg); err != nil {
		return err
	}
	if _, err := d.pg.Exec(ctx, "CREATE TABLE "+markerTable+" (id integer PRIMARY KEY)"); err != nil {
		return err
	}
	var pgVersion string
	_ = d.pg.QueryRow(ctx, "SHOW server_version").Scan(&pgVersion)
	say("1/6 PostgreSQL %s at %s: database %s, %d tables (every type; composite and text keys; REPLICA IDENTITY DEFAULT and FULL; TOASTed values), %d rows before capture starts",
		strings.Fields(pgVersion + " ?")[0], d.pgAddr, d.name, len(w.Tables), w.Stats.SnapshotRows)

	if d.kcl, err = kgo.NewClient(kgo.SeedBrokers(d.brokers)); err != nil {
		return err
	}
	d.adm = kadm.NewClient(d.kcl)
	d.cleanup = append(d.cleanup, d.kcl.Close)
	if err := d.startConnector(ctx, w); err != nil {
		return err
	}
	topics := make([]string, 0, len(w.Tables))
	for _, n := range w.TableNames() {
		topics = append(topics, d.name+".public."+n)
	}
	snap, err := d.waitRecords(ctx, topics, int64(w.Stats.SnapshotRows))
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	say("2/6 Debezium's PostgreSQL connector %s (pgoutput, JSON with schemas): the snapshot is in Kafka, %d events in %d topics %s.public.*", d.name, snap, len(topics), d.name)

	if d.ch, err = clickhouse.Open(&clickhouse.Options{Addr: []string{d.chAddr}}); err != nil {
		return err
	}
	d.cleanup = append(d.cleanup, func() { _ = d.ch.Close() })
	var chVersion string
	if err := d.ch.QueryRow(ctx, "SELECT version()").Scan(&chVersion); err != nil {
		return fmt.Errorf("clickhouse at %s: %w", d.chAddr, err)
	}
	var major, minor int
	_, _ = fmt.Sscanf(chVersion, "%d.%d", &major, &minor)
	dialect := pgcdc.DialectFor(major, minor)
	if err := d.ch.Exec(ctx, "CREATE DATABASE "+d.name); err != nil {
		return err
	}
	if !d.keep {
		d.cleanup = append(d.cleanup, func() { _ = d.ch.Exec(context.Background(), "DROP DATABASE IF EXISTS "+d.name) })
	}
	for _, t := range w.Tables {
		if err := d.ch.Exec(ctx, t.ClickHouseDDL(d.name, dialect, pgcdc.MirrorOptions{})); err != nil {
			return err
		}
	}
	truncateApplied, sink, err := d.startSink(w)
	if err != nil {
		return err
	}
	say("3/6 ClickHouse %s at %s: database %s, one ReplacingMergeTree(_version) mirror per table; `sink run` with one route: format debezium-json, table '${topic.last}'", chVersion, d.chAddr, d.name)

	hooks := pgcdc.Hooks{BeforeAddColumn: func(ctx context.Context, t *pgcdc.Table) error {
		if err := d.ch.Exec(ctx, t.AddColumnClickHouse(d.name, dialect)); err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // the sink reads the new column within schema_refresh (1s)
		return nil
	}}
	if err := w.Stream(ctx, d.pg, hooks); err != nil {
		return err
	}
	s := w.Stats
	say("4/6 %d transactions committed and %d rolled back (%d savepoints rolled back): %d inserts, %d updates, %d deletes, %d primary-key changes, %d updates leaving TOASTed values unchanged, ALTER TABLE items ADD COLUMN tier integer NOT NULL DEFAULT 7 (added to ClickHouse first), TRUNCATE events (%d rows)",
		s.Committed, s.RolledBack, s.SavepointsRolledBack, s.Inserts, s.Updates, s.Deletes, s.KeyChanges, s.BigKept, s.Truncated)

	// The marker's event follows every change of the workload.
	if _, err := d.pg.Exec(ctx, "INSERT INTO "+markerTable+" VALUES (1)"); err != nil {
		return err
	}
	if _, err := d.waitRecords(ctx, []string{d.name + ".public." + markerTable}, 1); err != nil {
		return fmt.Errorf("the marker's event: %w", err)
	}
	events, err := d.waitCommitted(ctx, topics, sink)
	if err != nil {
		return err
	}
	if err := sink.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := <-sink.exited; err != nil {
		return fmt.Errorf("sink after SIGTERM: %w", err)
	}
	dead, firstError := d.deadLettered(ctx)
	say("5/6 the sink has handled every change: its group committed all %d records of the %d topics (change events and tombstones), %v after the start; %d dead-lettered%s",
		events, len(topics), time.Since(start).Round(time.Second), dead, firstError)

	rep, err := pgcdc.Compare(ctx, d.pg, d.ch, d.name, dialect, w, pgcdc.CompareOptions{TruncateApplied: truncateApplied, Examples: 5})
	if err != nil {
		return err
	}
	how := "applied (routes[].truncate: apply)"
	if !truncateApplied {
		how = "skipped (this sink has no truncate: apply): the rows events had before it are expected to stay"
	}
	say("6/6 each mirror read with FINAL WHERE _deleted = 0, compared with PostgreSQL key by key and column by column (values as values: 1.5000 = 1.5, instants, bytes, NaN, arrays with NULLs, JSON parsed); TRUNCATE %s:", how)
	fmt.Print(rep.String())
	if d.keep {
		say("the mirrors stay in ClickHouse: clickhouse-client --port %s -q 'SELECT * FROM %s.items FINAL WHERE _deleted = 0 LIMIT 3 FORMAT Vertical'",
			d.chAddr[strings.LastIndex(d.chAddr, ":")+1:], d.name)
	}
	if n := rep.Differences(); n > 0 || dead > 0 {
		return fmt.Errorf("%d rows differ, %d change events dead-lettered", n, dead)
	}
	return nil
}

// deadLettered counts the records in the dead-letter topic and returns the
// first one's error.
func (d *demo) deadLettered(ctx context.Context) (int64, string) {
	n, _ := d.endOffsets(ctx, []string{d.dlq()})
	if n == 0 {
		return 0, ""
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers), kgo.ConsumeTopics(d.dlq()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return n, ""
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	first := ""
	for first == "" && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "sink.error" && first == "" {
					first = " (the first: " + string(h.Value) + ")"
				}
			}
		})
	}
	return n, first
}

// dlq is the sink's dead-letter topic.
func (d *demo) dlq() string { return d.name + ".dlq" }

// connectCall sends one request to the worker's REST API.
func (d *demo) connectCall(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.connect+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("kafka connect (run `scripts/stack.sh cdc up`): %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("kafka connect %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// startConnector registers the connector (removed at the end with its
// replication slot and topics) and waits until its task runs.
func (d *demo) startConnector(ctx context.Context, w *pgcdc.Workload) error {
	tables := []string{"public." + markerTable}
	for _, n := range w.TableNames() {
		tables = append(tables, "public."+n)
	}
	host, port, _ := strings.Cut(d.pgAddr, ":")
	cfg := map[string]string{
		"connector.class":             "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":                   "1",
		"database.hostname":           host,
		"database.port":               port,
		"database.user":               "sink",
		"database.password":           "sink",
		"database.dbname":             d.name,
		"topic.prefix":                d.name,
		"plugin.name":                 "pgoutput",
		"slot.name":                   d.name,
		"publication.name":            d.name + "_pub",
		"publication.autocreate.mode": "filtered",
		"table.include.list":          strings.Join(tables, ","),
		"skipped.operations":          "none", // TRUNCATE as op t
		"key.converter":               "org.apache.kafka.connect.json.JsonConverter",
		"value.converter":             "org.apache.kafka.connect.json.JsonConverter",
	}
	if err := d.connectCall(http.MethodPost, "/connectors", map[string]any{"name": d.name, "config": cfg}, nil); err != nil {
		return err
	}
	d.cleanup = append(d.cleanup, func() { d.removeConnector() })
	deadline := time.Now().Add(90 * time.Second)
	for {
		var st struct {
			Connector struct{ State string } `json:"connector"`
			Tasks     []struct {
				State string `json:"state"`
				Trace string `json:"trace"`
			} `json:"tasks"`
		}
		err := d.connectCall(http.MethodGet, "/connectors/"+d.name+"/status", nil, &st)
		if err == nil && len(st.Tasks) > 0 && st.Tasks[0].State == "RUNNING" {
			return nil
		}
		if err == nil && len(st.Tasks) > 0 && st.Tasks[0].State == "FAILED" {
			return fmt.Errorf("connector %s failed: %s", d.name, strings.SplitN(st.Tasks[0].Trace, "\n", 2)[0])
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("connector %s not running after 90s (%v)", d.name, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (d *demo) removeConnector() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = d.connectCall(http.MethodDelete, "/connectors/"+d.name, nil, nil)
	for ctx.Err() == nil {
		var n int
		if err := d.pgAdmin.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", d.name).Scan(&n); err != nil || n == 0 {
			break
		}
		if _, err := d.pgAdmin.Exec(ctx, "SELECT pg_drop_replication_slot($1)", d.name); err == nil {
			break
		}
		time.Sleep(300 * time.Millisecond) // still active until the task has stopped
	}
	topics, err := d.adm.ListTopics(ctx)
	if err != nil {
		return
	}
	var ours []string
	for _, n := range topics.Names() {
		if strings.HasPrefix(n, d.name+".") {
			ours = append(ours, n)
		}
	}
	if len(ours) > 0 {
		_, _ = d.adm.DeleteTopics(ctx, ours...)
	}
}

// endOffsets sums the end offsets of topics (a topic not there yet is 0).
func (d *demo) endOffsets(ctx context.Context, topics []string) (int64, kadm.ListedOffsets) {
	ends, err := d.adm.ListEndOffsets(ctx, topics...)
	var n int64
	if err != nil {
		return 0, nil
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n, ends
}

// waitRecords waits until topics hold at least n records.
func (d *demo) waitRecords(ctx context.Context, topics []string, n int64) (int64, error) {
	deadline := time.Now().Add(90 * time.Second)
	for {
		got, _ := d.endOffsets(ctx, topics)
		if got >= n {
			return got, nil
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("%d of %d records in Kafka after 90s", got, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sinkProc is the running sink; exited receives its exit once.
type sinkProc struct {
	cmd    *exec.Cmd
	exited chan error
}

// waitCommitted waits until the sink's group has committed the end of every
// partition of topics.
func (d *demo) waitCommitted(ctx context.Context, topics []string, sink *sinkProc) (int64, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		end, ends := d.endOffsets(ctx, topics)
		got, err := d.adm.FetchOffsets(ctx, d.name)
		if err == nil && ends != nil {
			var done int64
			ends.Each(func(o kadm.ListedOffset) {
				if c, ok := got.Lookup(o.Topic, o.Partition); ok && c.At >= 0 {
					done += min(c.At, o.Offset)
				}
			})
			if done == end {
				return end, nil
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("the sink committed %d of %d records after 2 minutes", done, end)
			}
		}
		select {
		case err := <-sink.exited:
			return 0, fmt.Errorf("the sink exited (%v; its log is .stack/pgcdc-demo-sink.log)", err)
		default:
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startSink writes the sink's config and starts it; it reports whether the
// route applies TRUNCATE (routes[].truncate: apply, where this sink has it).
func (d *demo) startSink(w *pgcdc.Workload) (bool, *sinkProc, error) {
	pattern := d.name + `\.public\.(` + strings.Join(w.TableNames(), "|") + `)`
	route := fmt.Sprintf(`{topic_regex: '%s', table: '${topic.last}', format: debezium-json, truncate: apply}`, pattern)
	yaml := func(route string) string {
		return fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topic_regex: '%s', fetch_min_bytes: 1, fetch_max_wait: 200ms, commit_interval: 500ms}
clickhouse: {addrs: [%q], database: %s, schema_refresh: 1s}
batch: {max_rows: 1000, max_latency: 500ms}
routes: [%s]
errors: {tolerance: all, dlq_topic: %s, dlq_create: true}
http: {listen: ""}
log: {level: warn, format: console}
`, d.name, d.brokers, pattern, d.chAddr, d.name, route, d.dlq())
	}
	applied := true
	if _, err := config.Parse([]byte(yaml(route)), nil); err != nil {
		applied = false
		route = strings.Replace(route, ", truncate: apply", "", 1)
	}
	dir := ".stack"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, nil, err
	}
	cfgPath := filepath.Join(dir, "pgcdc-demo.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml(route)), 0o600); err != nil {
		return false, nil, err
	}
	log, err := os.Create(filepath.Join(dir, "pgcdc-demo-sink.log"))
	if err != nil {
		return false, nil, err
	}
	cmd := exec.Command(d.sinkBin, "run", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return false, nil, err
	}
	p := &sinkProc{cmd: cmd, exited: make(chan error, 1)}
	done := make(chan struct{})
	go func() { p.exited <- cmd.Wait(); close(done) }()
	d.cleanup = append(d.cleanup, func() {
		_ = cmd.Process.Kill()
		<-done
		_ = log.Close()
		_, _ = d.adm.DeleteGroup(context.Background(), d.name)
	})
	return applied, p, nil
}
