package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"sink/internal/report"
)

const reportUsage = `Usage: sink report --table DB.TABLE [--since 2h] [--until now] [--split T]
                   [--clickhouse HOST:PORT] [--user U] [--password-file F] [--database DB]
                   [--format text|csv|json] [--chart FILE.svg] [--utc]

Per minute, the finished INSERTs into one table (from system.query_log: count,
written_rows, written_bytes, query_duration_ms) and the new parts it got (from
system.part_log): inserts, rows, rows/insert, p50/p99 insert ms, new parts.
With --split, a before/after summary with ratios, like seed 004's
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
	addr := fs.String("clickhouse", "127.0.0.1:9000", "ClickHouse native `host:port`")
	user := fs.String("user", "default", "ClickHouse user")
	// No --password: a password on the command line is visible to every
	// user of the machine in ps.
	passwordFile := fs.String("password-file", "", "read the ClickHouse password from this `file` (default: $SINK_CLICKHOUSE__PASSWORD)")
	database := fs.String("database", "default", "database of a --table without one, and of INSERTs that name none")
	table := fs.String("table", "", "the table, `DB.TABLE` or TABLE (required)")
	since := fs.String("since", "2h", "start of the range")
	until := fs.String("until", "now", "end of the range")
	split := fs.String("split", "", "the moment the sink was switched on or retuned: print before/after")
	format := fs.String("format", "text", "text, csv or json")
	chart := fs.String("chart", "", "also draw inserts/min and rows/insert to this SVG `file`")
	utc := fs.Bool("utc", false, "show times in UTC instead of the local time zone")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	pw := os.Getenv("SINK_CLICKHOUSE__PASSWORD")
	if *passwordFile != "" {
		b, err := os.ReadFile(*passwordFile)
		if err != nil {
			fmt.Fprintf(stderr, "sink report: --password-file: %v\n", err)
			return 1
		}
		pw = strings.TrimRight(string(b), "\r\n")
	}
	password := &pw
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sink report: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *table == "" {
		return usageErr("--table DB.TABLE is required")
	}
	if *format != "text" && *format != "csv" && *format != "json" {
		return usageErr("--format %q: want text, csv or json", *format)
	}
	loc := time.Local
	if *utc {
		loc = time.UTC
	}
	now := time.Now()
	var o report.Options
	var err error
	if o.Since, err = report.ParseTime(*since, now, loc); err != nil {
		return usageErr("--since %v", err)
	}
	if o.Until, err = report.ParseTime(*until, now, loc); err != nil {
		return usageErr("--until %v", err)
	}
	if !o.Since.Before(o.Until) {
		return usageErr("--since %s is not before --until %s", o.Since.Format(time.RFC3339), o.Until.Format(time.RFC3339))
	}
	if *split != "" {
		t, err := report.ParseTime(*split, now, loc)
		if err != nil {
			return usageErr("--split %v", err)
		}
		if t.Before(o.Since) || t.After(o.Until) {
			return usageErr("--split %s is outside the range %s .. %s", t.Format(time.RFC3339), o.Since.Format(time.RFC3339), o.Until.Format(time.RFC3339))
		}
		o.Split = &t
	}
	db, name, ok := strings.Cut(*table, ".")
	if !ok {
		db, name = *database, *table
	}
	if db == "" || name == "" {
		return usageErr("--table %q: want DB.TABLE or TABLE", *table)
	}
	o.Target = report.Target{Database: db, Table: name, DefaultDatabase: *database}
	o.Flush = true

	fail := func(err error) int {
		fmt.Fprintf(stderr, "sink report: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{*addr},
		Auth:        clickhouse.Auth{Database: *database, Username: *user, Password: *password},
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		return fail(fmt.Errorf("clickhouse %s: %w", *addr, err))
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		return fail(fmt.Errorf("clickhouse %s: not reachable: %w", *addr, err))
	}
	var exists uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", db, name).Scan(&exists); err != nil {
		return fail(fmt.Errorf("clickhouse %s: looking up %s.%s: %w", *addr, db, name, err))
	}
	if exists == 0 {
		return fail(fmt.Errorf("table %s.%s does not exist on %s", db, name, *addr))
	}
	r, err := report.Query(ctx, conn, o)
	if err != nil {
		return fail(err)
	}
	switch *format {
	case "csv":
		err = r.CSV(stdout, loc)
	case "json":
		err = r.JSON(stdout)
	default:
		err = r.Text(stdout, loc)
	}
	if err != nil {
		return fail(err)
	}
	if *chart != "" {
		f, err := os.Create(*chart)
		if err != nil {
			return fail(fmt.Errorf("--chart: %w", err))
		}
		if err := r.SVG(f, loc); err != nil {
			f.Close()
			return fail(fmt.Errorf("--chart %s: %w", *chart, err))
		}
		if err := f.Close(); err != nil {
			return fail(fmt.Errorf("--chart %s: %w", *chart, err))
		}
		if *format == "text" {
			fmt.Fprintf(stdout, "chart: %s\n", *chart)
		}
	}
	return 0
}
