package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"sink/config"
	"sink/internal/cluster"
	"sink/internal/command/report"
	"sink/internal/writer"
)

const reportUsage = `Usage: sink report --table DB.TABLE [--since 2h] [--until now] [--split T]
                   [--config FILE] [--clickhouse HOST:PORT] [--user U] [--password-file F]
                   [--database DB] [--cluster NAME] [--format text|csv|json] [--chart FILE.svg]
                   [--html FILE.html] [--connector NAME] [--utc]

Per minute, the finished INSERTs into one table (from system.query_log: count,
written_rows, written_bytes, query_duration_ms) and the new parts it got (from
system.part_log): inserts, rows, rows/insert, p50/p99 insert ms, new parts.
With --split, a before/after summary with ratios, like a tuning write-up's
"360-488 inserts/min with 4-21 rows -> 1/min with 20,000+ rows".

Which INSERTs count: where query_log lists each query's tables (current
ClickHouse), an INSERT whose only table is db.table; one that also read other
tables (INSERT ... SELECT) when its statement writes into db.table, names
resolved in the client's database as logged. On ClickHouse 18.16, which logs
neither a table list nor the current database, an INSERT counts when its
statement is INSERT INTO [TABLE] db.table or INSERT INTO table (bare, quoted
with backquotes or double quotes, any case of the keywords, comments allowed
before it), and one that names no database counts for --database, whichever
database its client was in.

On a cluster (--cluster NAME, or clickhouse.cluster or clickhouse.shards in
--config): the nodes are read from system.clusters of the first address (or
taken from clickhouse.shards), and every node's logs
are read over a connection of its own (the same user, password and TLS),
summed into the minutes and the before/after view, and split per shard with
each replica's inserts, rows and new parts. A node that cannot be read is
named in a note and left out of the sums. For a Distributed table, INSERTs are
those clients sent into it or into its local table (a sink with target: local
writes the shards' local tables), not those it forwarded to the shards, and new
parts are those of its local table.

The connection: with --config, the connector's clickhouse section (addresses,
protocol, user, password or password_file, TLS, timeouts) and its environment
overrides; --clickhouse, --user, --password-file and --database, when given,
win over it. Without --config, those flags and $SINK_CLICKHOUSE__PASSWORD.

Per server: with --config (its name:) or --connector NAME, the report also
sums every table that connector writes on the server, found by the query_id
of its INSERTs (sink-NAME-…): INSERTs/min, rows/INSERT, new parts/min and,
with --split, before/after with ratios, then each table's share. On a
cluster it is left out (a note says so): run the report per node for it.

With --html, the same report as one HTML file with no external resource
and no script: the before/after summary, the chart and the per-minute table,
for pasting into or attaching to a ticket.

Times (--since, --until, --split): a duration ago (2h), "now", unix seconds,
RFC 3339, "2006-01-02 15:04[:05]" or "15:04[:05]" (today), in the local zone
(UTC with --utc). The logs are flushed first (SYSTEM FLUSH LOGS) when the
user may.

Flags:
`

func reportCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, reportUsage); fs.PrintDefaults() }
	def := config.DefaultClickHouse()
	path := fs.String("config", "", "take the ClickHouse connection from this connector's YAML `file`")
	addr := fs.String("clickhouse", def.Addrs[0], "ClickHouse native `host:port`")
	user := fs.String("user", def.Username, "ClickHouse user")
	// No --password: a password on the command line is visible to every
	// user of the machine in ps.
	passwordFile := fs.String("password-file", "", "read the ClickHouse password from this `file` (default: $SINK_CLICKHOUSE__PASSWORD)")
	database := fs.String("database", def.Database, "database of a --table without one, and of INSERTs that name none")
	clusterName := fs.String("cluster", "", "sum the logs of every node of this `cluster` (default: clickhouse.cluster of --config)")
	connector := fs.String("connector", "", "add the per-server view: every table this connector (its `name`) writes on the server, summed (default: name of --config)")
	var req report.Request
	fs.StringVar(&req.Table, "table", "", "the table, `DB.TABLE` or TABLE (required)")
	fs.StringVar(&req.Since, "since", "2h", "start of the range")
	fs.StringVar(&req.Until, "until", "now", "end of the range")
	fs.StringVar(&req.Split, "split", "", "the moment the sink was switched on or retuned: print before/after")
	fs.StringVar(&req.Format, "format", "text", "text, csv or json")
	fs.StringVar(&req.Chart, "chart", "", "also draw inserts/min and rows/insert to this SVG `file`")
	fs.StringVar(&req.HTML, "html", "", "also write the report (tables and chart) as one self-contained HTML `file`, for a ticket")
	utc := fs.Bool("utc", false, "show times in UTC instead of the local time zone")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sink report: "+format+"\n", a...)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sink report: %v\n", err)
		return 1
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	ch := def
	ch.Password = config.Secret(os.Getenv("SINK_CLICKHOUSE__PASSWORD"))
	var dlqTables []string // "db.table", from --config
	if *path != "" {
		cfg, err := config.Load(*path, os.Environ())
		if err != nil {
			return fail(err)
		}
		ch = cfg.ClickHouse
		req.Connector = cfg.Name
		dlqTables = cfg.DLQTables()
	}
	// Without --config every flag applies, with its default; with one,
	// only the flags given.
	if *path == "" || set["clickhouse"] {
		ch.Addrs = []string{*addr}
	}
	if *path == "" || set["user"] {
		ch.Username = *user
	}
	if *path == "" || set["database"] {
		ch.Database = *database
	}
	if *passwordFile != "" {
		b, err := os.ReadFile(*passwordFile)
		if err != nil {
			fmt.Fprintf(stderr, "sink report: --password-file: %v\n", err)
			return 1
		}
		ch.Password, ch.PasswordFile = config.Secret(strings.TrimRight(string(b), "\r\n")), ""
	}
	req.Database = ch.Database
	if set["connector"] {
		req.Connector = *connector
	}
	req.Loc = time.Local
	if *utc {
		req.Loc = time.UTC
	}
	o, err := req.Options(time.Now())
	if err != nil {
		return usageErr("%v", err)
	}
	for _, d := range dlqTables {
		db, table, _ := strings.Cut(d, ".")
		o.DeadLetters = append(o.DeadLetters, report.Target{Database: db, Table: table})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The same constructor as `sink run`: TLS, the HTTP protocol and the
	// password file work here as they do there.
	w, err := writer.Open(ctx, "report", ch)
	if err != nil {
		return fail(err)
	}
	defer w.Close()
	where := strings.Join(ch.Addrs, ",")
	name := ch.Cluster
	if set["cluster"] {
		name = *clusterName
	}
	// clickhouse.shards lists the nodes itself (and wins, as for run).
	listed := !set["cluster"] && len(ch.Shards) > 0
	if name == "" && !listed {
		if err := req.Run(ctx, w.Conn(), where, o, stdout); err != nil {
			return fail(err)
		}
		return 0
	}
	var topo *cluster.Topology
	if listed {
		if topo, err = cluster.FromShards(ch.Shards); err != nil {
			return fail(fmt.Errorf("clickhouse.shards: %w", err))
		}
		if name == "" {
			name = "clickhouse.shards"
		}
	} else if topo, err = cluster.Discover(ctx, w.Conn(), name); err != nil {
		return fail(fmt.Errorf("clickhouse %s: %w", where, err))
	}
	var nodes []report.Node
	for _, s := range topo.Shards {
		for _, r := range s.Replicas {
			n := report.Node{Shard: s.Num, Replica: r.Num, Addr: r.Addr}
			node := ch
			node.Addrs = []string{r.Addr}
			if nw, err := writer.Open(ctx, "report", node); err != nil {
				n.Err = err
			} else {
				defer nw.Close()
				n.Conn = nw.Conn()
			}
			nodes = append(nodes, n)
		}
	}
	if err := req.RunCluster(ctx, w.Conn(), where, name, nodes, o, stdout); err != nil {
		return fail(err)
	}
	return 0
}
