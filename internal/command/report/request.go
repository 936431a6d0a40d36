package report

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/internal/writer"
)

// Formats are the output formats of a report (Request.Format).
var Formats = []string{"text", "csv", "json"}

// Request is a report as asked for on the command line (`sink report`),
// before it is checked: the table, the time range as typed, and where the
// report goes.
type Request struct {
	Table    string // DB.TABLE, or TABLE in Database
	Database string // of a bare Table, and of INSERTs that name no database
	// Since, Until and Split are ParseTime arguments; Split may be "".
	Since, Until, Split string
	Format              string         // one of Formats
	Chart               string         // an SVG file to draw, or ""
	HTML                string         // a self-contained HTML report file to write, or ""
	Loc                 *time.Location // the time zone of the output and of wall-clock times
	// Connector, when set, adds the per-server view: every table that
	// connector (its name:) writes on the server, summed.
	Connector string
}

// Options checks r and reads its times against now. An error is one line
// that names the flag it is about (--table, --since, --until, --split,
// --format): a usage error, found before any server is asked.
func (r Request) Options(now time.Time) (Options, error) {
	var o Options
	if r.Table == "" {
		return o, fmt.Errorf("--table DB.TABLE is required")
	}
	if !slices.Contains(Formats, r.Format) {
		return o, fmt.Errorf("--format %q: want text, csv or json", r.Format)
	}
	loc := r.location()
	var err error
	if o.Since, err = ParseTime(r.Since, now, loc); err != nil {
		return o, fmt.Errorf("--since %v", err)
	}
	if o.Until, err = ParseTime(r.Until, now, loc); err != nil {
		return o, fmt.Errorf("--until %v", err)
	}
	if !o.Since.Before(o.Until) {
		return o, fmt.Errorf("--since %s is not before --until %s", o.Since.Format(time.RFC3339), o.Until.Format(time.RFC3339))
	}
	if r.Split != "" {
		t, err := ParseTime(r.Split, now, loc)
		if err != nil {
			return o, fmt.Errorf("--split %v", err)
		}
		if t.Before(o.Since) || t.After(o.Until) {
			return o, fmt.Errorf("--split %s is outside the range %s .. %s", t.Format(time.RFC3339), o.Since.Format(time.RFC3339), o.Until.Format(time.RFC3339))
		}
		o.Split = &t
	}
	db, name, ok := strings.Cut(r.Table, ".")
	if !ok {
		db, name = r.Database, r.Table
	}
	if db == "" || name == "" {
		return o, fmt.Errorf("--table %q: want DB.TABLE or TABLE", r.Table)
	}
	o.Target = Target{Database: db, Table: name, DefaultDatabase: r.Database}
	o.Flush = true
	return o, nil
}

func (r Request) location() *time.Location {
	if r.Loc == nil {
		return time.Local
	}
	return r.Loc
}

// Run makes the report of o (from r.Options) on conn, the server at where
// (for messages): it checks that the table exists, queries the logs,
// writes the report to w in r.Format and, with r.Chart, draws the chart,
// with r.HTML writes the HTML report.
// With r.Connector, the report also holds the per-server view of that
// connector (QueryServer).
func (r Request) Run(ctx context.Context, conn driver.Conn, where string, o Options, w io.Writer) error {
	return r.run(ctx, conn, where, o, w, func(o Options) (Report, error) {
		rep, err := Query(ctx, conn, o)
		if err != nil || r.Connector == "" {
			return rep, err
		}
		v, err := QueryServer(ctx, conn, r.Connector, o)
		if err != nil {
			return rep, err
		}
		rep.Server = &v
		return rep, nil
	})
}

// RunCluster is Run over every node of cluster (QueryCluster); conn is the
// node the table is looked up on, where names it.
func (r Request) RunCluster(ctx context.Context, conn driver.Conn, where, cluster string, nodes []Node, o Options, w io.Writer) error {
	return r.run(ctx, conn, where, o, w, func(o Options) (Report, error) {
		rep, err := QueryCluster(ctx, cluster, nodes, o)
		if err == nil && r.Connector != "" {
			rep.Notes = append(rep.Notes, "the per-server view of connector "+r.Connector+" is read on a single server only: run the report against each shard's node for it")
		}
		return rep, err
	})
}

func (r Request) run(ctx context.Context, conn driver.Conn, where string, o Options, w io.Writer, query func(Options) (Report, error)) error {
	local, err := localOf(ctx, conn, where, o.Target)
	if err != nil {
		return err
	}
	o.Local = local
	rep, err := query(o)
	if err != nil {
		return err
	}
	var dlNotes []string
	rep.DeadLettered, dlNotes = deadLettered(ctx, conn, o)
	rep.Notes = append(rep.Notes, dlNotes...)
	if o.Local != nil {
		t := o.Target
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s is a Distributed table: INSERTs are those clients sent into it or into its local table %s "+
			"(a sink with target: local writes the local table on each shard), new parts those of %s",
			t.FullName(), o.Local.FullName(), o.Local.FullName()))
	}
	return r.write(rep, where, w)
}

// localOf checks that t exists on the server at where and returns its
// local table when it is a Distributed one (nil otherwise): a Distributed
// table has no parts and, with target: local, no INSERTs either; its
// local table gets them.
func localOf(ctx context.Context, conn driver.Conn, where string, t Target) (*Target, error) {
	var engine, engineFull string
	err := conn.QueryRow(ctx, "SELECT engine, engine_full FROM system.tables WHERE database = ? AND name = ?", t.Database, t.Table).Scan(&engine, &engineFull)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("table %s does not exist on %s", t.FullName(), where)
	}
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: looking up %s: %w", where, t.FullName(), err)
	}
	dist, err := writer.ParseDistributed(engine, engineFull)
	if err != nil {
		return nil, fmt.Errorf("table %s on %s: %w", t.FullName(), where, err)
	}
	if dist == nil {
		return nil, nil
	}
	db := dist.Database
	if db == "" || strings.ContainsAny(db, "()") { // currentDatabase()
		db = t.Database
	}
	return &Target{Database: db, Table: dist.Table, DefaultDatabase: t.DefaultDatabase}, nil
}

// write writes rep to w in r.Format and, when asked, the chart and the
// HTML report to their files (named on w after a text report).
func (r Request) write(rep Report, where string, w io.Writer) error {
	loc := r.location()
	var err error
	switch r.Format {
	case "csv":
		err = rep.CSV(w, loc)
	case "json":
		err = rep.JSON(w)
	default:
		err = rep.Text(w, loc)
	}
	if err != nil {
		return err
	}
	files := []struct {
		flag, path, name string
		write            func(io.Writer) error
	}{
		{"--chart", r.Chart, "chart", func(f io.Writer) error { return rep.SVG(f, loc) }},
		{"--html", r.HTML, "html", func(f io.Writer) error { return rep.HTML(f, loc, where) }},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if err := writeFile(f.flag, f.path, f.write); err != nil {
			return err
		}
		if r.Format == "text" {
			fmt.Fprintf(w, "%s: %s\n", f.name, f.path)
		}
	}
	return nil
}

// writeFile creates path and writes it with write; errors name the flag
// the path came from.
func writeFile(flag, path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return nil
}
