// Package chtable is what the pipeline and the ClickHouse writer say to
// each other about writing a table, with no I/O: the insert target
// (Table, its INSERT statement, and Project for a table whose columns
// changed), how an insert attempt failed (Attempt, the error classes of
// Classify, Code), what an INSERT carries besides its block (the settings
// of WithInsertSettings and WithDedupToken, the shard callback of
// WithShardInserted), the questions a sink answers about tables (TableName,
// LatestQuery), and the statements the sink runs on its own (CreateTableDDL
// for schema.create and the dead-letter table, AddColumnDDL for schema
// evolution).
//
// The pipeline declares its Sink port in these terms and the writer
// implements it in them, so the pipeline imports this package and not the
// writer (docs/architecture.md). chtable imports no package of the sink
// but chschema.
//
// Concurrency: a Table and a TableSpec are immutable once built; the
// functions keep no state and are safe for concurrent use.
package chtable

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/ClickHouse/clickhouse-go/v2"

	"sink/internal/chschema"
)

// Table is a resolved insert target: its schema and the INSERT statement
// naming exactly the columns the sink fills.
type Table struct {
	Database, Name string
	Schema         []chschema.ColumnSchema // all columns, table order
	Insert         []chschema.ColumnSchema // the columns every INSERT names
	query          string
	unsendable     error // a column name the driver cannot carry; see CheckColumnName
	// columns names the INSERT's columns and types for clickhouse-go's
	// HTTP batch, which otherwise runs DESCRIBE TABLE before every INSERT.
	columns []clickhouse.ColumnNameAndType
}

// FullName is db.table as users write it.
func (t *Table) FullName() string { return t.Database + "." + t.Name }

// Query is the INSERT statement naming t's Insert columns.
func (t *Table) Query() string { return t.query }

// Err says why no INSERT into t can be sent (a column name the driver
// cannot carry, CheckColumnName); nil when one can.
func (t *Table) Err() error { return t.unsendable }

// NamesAndTypes are the INSERT's columns and types as clickhouse-go's
// HTTP batch takes them.
func (t *Table) NamesAndTypes() []clickhouse.ColumnNameAndType { return t.columns }

// Renamed is t's insert target under another table's name (a cluster's
// local table behind t): the same columns, and the same Err, which names
// t.
func (t *Table) Renamed(db, name string) *Table {
	r := NewTable(db, name, t.Schema, t.Insert)
	r.unsendable = t.unsendable
	return r
}

// ErrNoTable is in a Sink's Describe error when the table does not exist.
var ErrNoTable = errors.New("does not exist")

// UnfitError is in a Sink's Describe error when the table exists but the
// sink cannot insert into it as it is (a column name the driver cannot
// carry: CheckColumnName): the table's own doing, which reading it again
// does not change, not a failure of the server. Its text is Err's.
type UnfitError struct{ Err error }

func (e *UnfitError) Error() string { return e.Err.Error() }
func (e *UnfitError) Unwrap() error { return e.Err }

// settingsRE is what clickhouse-go takes for a trailing SETTINGS clause of an
// INSERT, wherever it appears in the text (its scan is a regular expression,
// not quote-aware).
var settingsRE = regexp.MustCompile(`(?i)\bSETTINGS\s+\w+\s*=`)

// CheckColumnName reports a column name that clickhouse-go's batch INSERT
// cannot carry. The driver parses the column list out of the statement text
// with regular expressions, strips every backtick from the names and
// compares the rest, unescaped, with the server's names. So a name with a
// backtick, a backslash (escaped in the text, not in the comparison),
// parentheses (which end its column-list pattern), control characters or
// "SETTINGS x =" text would either never match or cut the statement short.
// Refusing such a name is the clean error; no name gets into the SQL as
// anything but a quoted identifier either way.
func CheckColumnName(name string) error {
	if strings.ContainsAny(name, "`\\()") || strings.ContainsFunc(name, unicode.IsControl) || settingsRE.MatchString(name) {
		return fmt.Errorf("column %q cannot be inserted into by clickhouse-go's batch INSERT (backticks, backslashes, parentheses, control characters and \"SETTINGS name =\" are not supported in column names); rename the column", name)
	}
	return nil
}

// NewTable builds the insert target for schema and the column set decided
// by the routes (decode.InsertColumns).
func NewTable(db, name string, schema, insert []chschema.ColumnSchema) *Table {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(chschema.QuoteIdent(db))
	b.WriteByte('.')
	b.WriteString(chschema.QuoteIdent(name))
	b.WriteString(" (")
	var unsendable error
	columns := make([]clickhouse.ColumnNameAndType, len(insert))
	for i, c := range insert {
		columns[i] = clickhouse.ColumnNameAndType{Name: c.Name, Type: c.Type}
		if i > 0 {
			b.WriteString(", ")
		}
		// Column names appear literally: clickhouse-go compares them, as
		// written, with the server's (see CheckColumnName, which keeps
		// the names that would need escaping out).
		if err := CheckColumnName(c.Name); err != nil && unsendable == nil {
			unsendable = fmt.Errorf("table %s.%s: %w", db, name, err)
		}
		b.WriteString("`" + c.Name + "`")
	}
	b.WriteByte(')')
	return &Table{Database: db, Name: name, Schema: schema, Insert: insert, query: b.String(), unsendable: unsendable, columns: columns}
}

// Project adapts block, built for an earlier layout of table db.name, to the
// table's columns now (schema, from Describe): columns dropped since are
// left out of the INSERT, with their values (the column is gone, so are
// they); columns added since are not named, so ClickHouse fills their
// defaults. A column still there keeps its values even if its type changed,
// so that the INSERT fails loudly instead of losing them. Nothing else of
// the block changes: the retry inserts the same rows.
func Project(db, name string, schema []chschema.ColumnSchema, block chschema.Block) (*Table, chschema.Block) {
	exists := make(map[string]bool, len(schema))
	for _, c := range schema {
		if c.DefaultKind == "" || c.DefaultKind == "DEFAULT" || c.DefaultKind == "EPHEMERAL" {
			exists[c.Name] = true
		}
	}
	pb := &projected{Block: block}
	for i, c := range block.Columns() {
		if exists[c.Name] {
			pb.idx = append(pb.idx, i)
			pb.cols = append(pb.cols, c)
		}
	}
	return NewTable(db, name, schema, pb.cols), pb
}

// projected is a chschema.Block seen through a subset of its columns.
type projected struct {
	chschema.Block
	idx  []int
	cols []chschema.ColumnSchema
}

func (p *projected) Columns() []chschema.ColumnSchema { return p.cols }
func (p *projected) ColumnData(i int) any             { return p.Block.ColumnData(p.idx[i]) }

// TableName names a table: the key of a sink's answer about several
// tables' parts.
type TableName struct{ Database, Name string }

// LatestQuery asks for the newest stored values of some columns of rows
// found by key: the values a change event did not carry (Debezium's
// placeholder for an unchanged TOASTed value) are the row's values before
// the change.
type LatestQuery struct {
	Keys    []string // the columns that identify a row (the source's primary key)
	Version string   // the row version column: the newest row of a key has the largest
	Deleted string   // the delete-marker column, "" for none: rows marked deleted do not count
	Cols    []string // the columns to read
	Find    [][]any  // key values, one slice per row sought, in Keys order
}

// InsertConns is how many INSERTs may hold a connection of a server's pool
// at once, for clickhouse.max_in_flight maxInFlight: the pipeline queues the
// others (without a timeout, and without counting the wait as an attempt)
// so that the driver never times out waiting for one of its own
// connections, however many tables flush together. The writer's pool has
// a few more, so the reads that run beside the INSERTs (table
// descriptions, parts) find one.
func InsertConns(maxInFlight int) int { return maxInFlight * 4 }
