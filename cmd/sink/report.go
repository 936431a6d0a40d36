package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"sink/config"
	"sink/internal/command/report"
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
	var conn report.Connection
	fs.StringVar(&conn.ConfigPath, "config", "", "take the ClickHouse connection from this connector's YAML `file`")
	fs.StringVar(&conn.Addr, "clickhouse", def.Addrs[0], "ClickHouse native `host:port`")
	fs.StringVar(&conn.User, "user", def.Username, "ClickHouse user")
	// No --password: a password on the command line is visible to every
	// user of the machine in ps.
	fs.StringVar(&conn.PasswordFile, "password-file", "", "read the ClickHouse password from this `file` (default: $SINK_CLICKHOUSE__PASSWORD)")
	fs.StringVar(&conn.Database, "database", def.Database, "database of a --table without one, and of INSERTs that name none")
	fs.StringVar(&conn.Cluster, "cluster", "", "sum the logs of every node of this `cluster` (default: clickhouse.cluster of --config)")
	fs.StringVar(&conn.Connector, "connector", "", "add the per-server view: every table this connector (its `name`) writes on the server, summed (default: name of --config)")
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
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sink report: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	conn.Given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { conn.Given[f.Name] = true })
	return printReport(conn, req, *utc, stdout, stderr)
}

// printReport resolves where the report reads, checks the request and
// prints the report: exit status 2 on a usage error, 1 on any other.
func printReport(conn report.Connection, req report.Request, utc bool, stdout, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "sink report: %v\n", err)
		return code
	}
	src, err := conn.Resolve(os.Environ())
	if err != nil {
		return fail(1, err)
	}
	req.Database, req.Connector = src.ClickHouse.Database, src.Connector
	req.Loc = time.Local
	if utc {
		req.Loc = time.UTC
	}
	o, err := req.Options(time.Now())
	if err != nil {
		return fail(2, err)
	}
	o.DeadLetters = append(o.DeadLetters, src.DeadLetters...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := req.From(ctx, src, o, stdout); err != nil {
		return fail(1, err)
	}
	return 0
}
