package report

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ErrNoQueryLog says the server keeps no query log, so there is nothing
// to report on.
var ErrNoQueryLog = errors.New("system.query_log does not exist on this server: it logs no queries " +
	"(enable the <query_log> section in the server config and the log_queries setting for the writing users)")

// queryPrefix bounds how much statement text is read per INSERT: the target
// table comes right after INSERT INTO, and the column list after it can be
// long.
const queryPrefix = 1024

// insertsSQL and partsSQL use only columns present in ClickHouse 18.16 and
// current releases. type and event_type are compared as numbers through
// toInt8, which works for 18.16's UInt8 type column and for the Enum8
// columns of both versions (2 = QueryFinish, 1 = NewPart). event_date
// narrows the scan to the partitions of the range. position(query, table)
// is a cheap server-side prefilter; InsertTarget decides. The fourth
// argument, when 1, keeps only the INSERTs a client sent
// (is_initial_query, which both versions log): a report on a Distributed
// table counts those into it and into its local table, and not the INSERTs
// the Distributed table itself forwarded to the shards' local tables.
//
// insertsByTablesSQL is for servers whose query_log lists the tables a query
// used (tables, as 'db.table' after resolving the current database) and its
// kind: an INSERT with only the target table in tables needs no statement
// text; one that also read other tables (INSERT … SELECT) brings its text and
// current database so that Target.MatchesLogged can tell the target from the
// sources.
const (
	insertsByTablesSQL = `SELECT toUInt32(event_time) AS t, written_rows, written_bytes, query_duration_ms,
  length(tables) AS n, if(n > 1, current_database, '') AS db, if(n > 1, substring(query, 1, %d), '') AS q
FROM system.query_log
WHERE event_date >= toDate(toDateTime(?)) AND event_time >= toDateTime(?) AND event_time < toDateTime(?)
  AND (? = 0 OR is_initial_query = 1) AND toInt8(type) = 2 AND query_kind = 'Insert' AND hasAny(tables, ?)`
	insertsSQL = `SELECT toUInt32(event_time) AS t, written_rows, written_bytes, query_duration_ms, substring(query, 1, %d) AS q
FROM system.query_log
WHERE event_date >= toDate(toDateTime(?)) AND event_time >= toDateTime(?) AND event_time < toDateTime(?)
  AND (? = 0 OR is_initial_query = 1) AND toInt8(type) = 2 AND positionCaseInsensitive(query, 'insert') > 0
  AND (position(query, ?) > 0 OR position(query, ?) > 0)`
	partsSQL = `SELECT toUInt32(event_time) AS t, rows
FROM system.part_log
WHERE event_date >= toDate(toDateTime(?)) AND event_time >= toDateTime(?) AND event_time < toDateTime(?)
  AND toInt8(event_type) = 1 AND database = ? AND table = ?`
)

// Options select what to read.
type Options struct {
	Target       Target
	Since, Until time.Time
	Split        *time.Time
	// Flush runs SYSTEM FLUSH LOGS first so the last seconds are in the
	// logs; without the privilege it is skipped silently.
	Flush bool
	// Local, when set, is the local table of a Distributed Target: the
	// INSERTs clients sent into it count as Target's (a sink with `target:
	// local` writes each shard's local table, one with `target: distributed`
	// the Distributed table, and the report is the same for both), only
	// INSERTs a client sent count (not those the Distributed table forwarded
	// to the shards), and the new parts counted are Local's, since a
	// Distributed table has no parts of its own.
	Local *Target
	// DeadLetters are the connector's dead-letter tables (errors.dlq_table):
	// the report counts the records of its table each one got.
	DeadLetters []Target
}

// targets are the tables whose INSERTs the report counts: Target, and Local
// when set.
func (o Options) targets() []Target {
	if o.Local == nil {
		return []Target{o.Target}
	}
	return []Target{o.Target, *o.Local}
}

// insertTargets names the tables whose INSERTs count, for the notes.
func (o Options) insertTargets() string {
	if o.Local == nil {
		return o.Target.FullName()
	}
	return o.Target.FullName() + " or " + o.Local.FullName()
}

// Query reads the logs and aggregates them. A server without query_log is
// an error (ErrNoQueryLog); one without part_log gives a report without new
// parts and a note saying why.
func Query(ctx context.Context, conn driver.Conn, o Options) (Report, error) {
	l, err := readLogs(ctx, conn, o)
	if err != nil {
		return Report{}, err
	}
	r := Aggregate(o.Target.FullName(), o.Since, o.Until, l.ins, l.parts, l.partLog, o.Split)
	r.MatchedBy = l.matchedBy
	if !l.partLog {
		r.Notes = append(r.Notes, noPartLog)
	}
	if len(l.ins) == 0 {
		r.Notes = append(r.Notes, noInsertsNote(ctx, conn, o.insertTargets()))
	}
	return r, nil
}

const noPartLog = "system.part_log does not exist on this server: new parts are not known (enable the <part_log> section in the server config)"

// noInsertsNote says that the range holds no INSERT into tables, and why
// that may be when the user's queries are not logged.
func noInsertsNote(ctx context.Context, conn driver.Conn, tables string) string {
	note := "no finished INSERT into " + tables + " in system.query_log in this range"
	if on, err := settingOn(ctx, conn, "log_queries"); err == nil && !on {
		note += "; log_queries is 0 for this user, so queries of users like it are not logged"
	}
	return note
}

// logs is what one server's query_log and part_log hold for a report.
type logs struct {
	ins       []Insert
	parts     []Part
	partLog   bool   // the server has system.part_log
	matchedBy string // MatchedByTables or MatchedByText
}

// readLogs reads the INSERTs into o's targets and the new parts in o's range
// from the server conn is connected to.
func readLogs(ctx context.Context, conn driver.Conn, o Options) (logs, error) {
	var l logs
	r, err := openLogs(ctx, conn, o)
	if err != nil {
		return l, err
	}
	if l.ins, l.matchedBy, err = r.inserts(ctx, conn, o); err != nil {
		return l, err
	}
	l.partLog = r.has["part_log"]
	if !l.partLog {
		return l, nil
	}
	partsOf := o.Target
	if o.Local != nil {
		partsOf = *o.Local
	}
	l.parts, err = r.parts(ctx, conn, partsOf)
	return l, err
}

// logRange is what a read of one server's logs over a range knows: which
// logs exist, and the range in whole seconds, since..until-1.
type logRange struct {
	has          map[string]bool
	since, until int64
}

// openLogs refuses a server without query_log, flushes the logs when o
// asks, and returns the range to read.
func openLogs(ctx context.Context, conn driver.Conn, o Options) (logRange, error) {
	has, err := systemTables(ctx, conn)
	if err != nil {
		return logRange{}, err
	}
	if !has["query_log"] {
		return logRange{}, ErrNoQueryLog
	}
	if o.Flush {
		_ = conn.Exec(ctx, "SYSTEM FLUSH LOGS")
	}
	// event_time has whole seconds: an INSERT that finished at 12:00:03.5
	// is logged at 12:00:03, so an end of 12:00:03.9 must include that
	// second (round up), while an end given as 12:00:03 excludes it.
	r := logRange{has: has, since: o.Since.Unix(), until: o.Until.Unix()}
	if o.Until.Nanosecond() != 0 {
		r.until++
	}
	return r, nil
}

// inserts reads the finished INSERTs into o's targets: by query_log's
// tables column where the server has it, else by the statement's text.
func (r logRange) inserts(ctx context.Context, conn driver.Conn, o Options) ([]Insert, string, error) {
	byTables, err := hasColumns(ctx, conn, "query_log", "tables", "query_kind", "current_database")
	if err != nil {
		return nil, "", err
	}
	targets := o.targets()
	initialOnly := 0
	if o.Local != nil {
		initialOnly = 1
	}
	if !byTables {
		rows, err := conn.Query(ctx, fmt.Sprintf(insertsSQL, queryPrefix), r.since, r.since, r.until, initialOnly,
			targets[0].Table, targets[len(targets)-1].Table)
		ins, err := scanInserts(rows, err, func(rows driver.Rows, in *insertRow) (bool, error) {
			var q string
			err := rows.Scan(&in.at, &in.Rows, &in.Bytes, &in.DurationMS, &q)
			return slices.ContainsFunc(targets, func(t Target) bool { return t.Matches(q) }), err
		})
		return ins, MatchedByText, err
	}
	var names []string
	for _, t := range targets {
		names = append(names, t.LoggedNames()...)
	}
	rows, err := conn.Query(ctx, fmt.Sprintf(insertsByTablesSQL, queryPrefix), r.since, r.since, r.until, initialOnly, names)
	ins, err := scanInserts(rows, err, func(rows driver.Rows, in *insertRow) (bool, error) {
		var n uint64
		var db, q string
		err := rows.Scan(&in.at, &in.Rows, &in.Bytes, &in.DurationMS, &n, &db, &q)
		return slices.ContainsFunc(targets, func(t Target) bool { return t.MatchesLogged(int(n), db, q) }), err
	})
	return ins, MatchedByTables, err
}

// insertRow is an Insert as query_log's row holds it: its event time in
// whole seconds.
type insertRow struct {
	Insert
	at uint32
}

// scanInserts reads query_log's rows (queried with err) with scan, which
// fills an insertRow and says whether it counts.
func scanInserts(rows driver.Rows, err error, scan func(driver.Rows, *insertRow) (bool, error)) ([]Insert, error) {
	var ins []Insert
	err = eachRow(rows, err, "query_log", func(rows driver.Rows) error {
		var in insertRow
		match, err := scan(rows, &in)
		if err == nil && match {
			in.At = time.Unix(int64(in.at), 0).UTC()
			ins = append(ins, in.Insert)
		}
		return err
	})
	return ins, err
}

// parts reads the new parts of t.
func (r logRange) parts(ctx context.Context, conn driver.Conn, t Target) ([]Part, error) {
	rows, err := conn.Query(ctx, partsSQL, r.since, r.since, r.until, t.Database, t.Table)
	var parts []Part
	err = eachRow(rows, err, "part_log", func(rows driver.Rows) error {
		var at uint32
		var n uint64
		if err := rows.Scan(&at, &n); err != nil {
			return err
		}
		parts = append(parts, Part{At: time.Unix(int64(at), 0).UTC(), Rows: n})
		return nil
	})
	return parts, err
}

// eachRow calls scan for every row of rows (the result of a query that
// failed with err, when err is not nil) and closes them; its errors name
// the system log read.
func eachRow(rows driver.Rows, err error, log string, scan func(driver.Rows) error) error {
	if err != nil {
		return fmt.Errorf("reading system.%s: %w", log, err)
	}
	for rows.Next() {
		if err := scan(rows); err != nil {
			rows.Close()
			return fmt.Errorf("reading system.%s: %w", log, err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading system.%s: %w", log, err)
	}
	return nil
}

// systemTables says which of the two logs exist. ClickHouse creates them on
// the first flush after a query or part was logged, so a missing table
// means the log is disabled (or nothing was ever logged).
func systemTables(ctx context.Context, conn driver.Conn) (map[string]bool, error) {
	rows, err := conn.Query(ctx, "SELECT name FROM system.tables WHERE database = 'system' AND name IN ('query_log', 'part_log')")
	if err != nil {
		return nil, fmt.Errorf("listing system tables: %w", err)
	}
	defer rows.Close()
	has := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("listing system tables: %w", err)
		}
		has[n] = true
	}
	return has, rows.Err()
}

// hasColumns says whether system.table has every one of the columns.
func hasColumns(ctx context.Context, conn driver.Conn, table string, columns ...string) (bool, error) {
	var n uint64
	err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = 'system' AND table = ? AND has(?, name)", table, columns).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("listing the columns of system.%s: %w", table, err)
	}
	return n == uint64(len(columns)), nil
}

func settingOn(ctx context.Context, conn driver.Conn, name string) (bool, error) {
	var v string
	if err := conn.QueryRow(ctx, "SELECT value FROM system.settings WHERE name = ?", name).Scan(&v); err != nil {
		return false, err
	}
	return v != "0", nil
}
