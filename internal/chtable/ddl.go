package chtable

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sink/internal/chschema"
)

// Creating a route's table (schema.create: if_missing): the statements are
// built here from a TableSpec, every name quoted and every type taken from
// the decoder's inference (decode.FieldType.Column, decode.SchemaType.Column),
// never from a record; the expressions (ORDER BY, PARTITION BY) come from the
// connector's config.

// TableSpec describes a table to create.
type TableSpec struct {
	Database, Table string
	Columns         []chschema.ColumnSchema // name and type, in order
	// Replacing makes a ReplacingMergeTree versioned by Version (a
	// column); otherwise a MergeTree.
	Replacing bool
	Version   string
	OrderBy   string // the ORDER BY expression (required)
	// PartitionBy is the PARTITION BY expression, "" for none.
	PartitionBy string
	// TTL is the table's TTL expression, "" for none (ClickHouse 19.6+).
	TTL string
	// Settings are the table's SETTINGS, by name: numbers, booleans or
	// strings.
	Settings map[string]any
	// Cluster, when set, creates the table ON CLUSTER as a Replicated
	// engine named Table+LocalSuffix on every node, and Table as a
	// Distributed table over it (rows spread by rand()), which is what
	// the sink inserts into.
	Cluster string
}

// LocalSuffix names the local table behind a created Distributed table.
const LocalSuffix = "_local"

// KafkaColumns are the columns a created ReplacingMergeTree gets besides
// the records' fields: where each row came from (the decoder fills them
// from the record by their names: $topic, $partition, $offset, $timestamp),
// with _timestamp in milliseconds where the server has DateTime64 (20.1).
func KafkaColumns(srv chschema.ServerTypes) []chschema.ColumnSchema {
	ts := "DateTime"
	if srv.DateTime64 {
		ts = "DateTime64(3)"
	}
	return []chschema.ColumnSchema{
		{Name: "_topic", Type: "String"},
		{Name: "_partition", Type: "Int32"},
		{Name: "_offset", Type: "Int64"},
		{Name: "_timestamp", Type: ts},
	}
}

// CreateTableDDL returns the statements that create s, in order: one
// CREATE TABLE IF NOT EXISTS, or on a cluster the local Replicated table
// and then the Distributed one, both ON CLUSTER. It fails on a spec that
// cannot make a table (no columns, no ORDER BY, a column name the INSERT
// could not carry, a setting value of another type).
func CreateTableDDL(s TableSpec) ([]string, error) {
	if len(s.Columns) == 0 {
		return nil, fmt.Errorf("no columns to create %s.%s with", s.Database, s.Table)
	}
	if strings.TrimSpace(s.OrderBy) == "" {
		return nil, errors.New("no ORDER BY expression")
	}
	local := s.Table
	if s.Cluster != "" {
		local += LocalSuffix
	}
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(chschema.QuoteIdent(s.Database) + "." + chschema.QuoteIdent(local))
	onCluster(&b, s.Cluster)
	b.WriteString(" (")
	if err := writeColumns(&b, s.Columns); err != nil {
		return nil, err
	}
	b.WriteString(") ENGINE = ")
	writeEngine(&b, s, local)
	if s.PartitionBy != "" {
		b.WriteString(" PARTITION BY " + s.PartitionBy)
	}
	b.WriteString(" ORDER BY " + s.OrderBy)
	if s.TTL != "" {
		b.WriteString(" TTL " + s.TTL)
	}
	if err := writeSettings(&b, s.Settings); err != nil {
		return nil, err
	}
	ddl := []string{b.String()}
	if s.Cluster != "" {
		ddl = append(ddl, "CREATE TABLE IF NOT EXISTS "+chschema.QuoteIdent(s.Database)+"."+chschema.QuoteIdent(s.Table)+onClusterText(s.Cluster)+
			" AS "+chschema.QuoteIdent(s.Database)+"."+chschema.QuoteIdent(local)+
			" ENGINE = Distributed("+chschema.QuoteString(s.Cluster)+", "+chschema.QuoteString(s.Database)+", "+chschema.QuoteString(local)+", rand())")
	}
	return ddl, nil
}

// writeColumns writes the column list of a CREATE TABLE (without its
// parentheses): each name quoted, its type, its DEFAULT.
func writeColumns(b *strings.Builder, cols []chschema.ColumnSchema) error {
	for i, c := range cols {
		if err := CheckColumnName(c.Name); err != nil {
			return err
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(chschema.QuoteIdent(c.Name) + " " + c.Type)
		if c.DefaultExpr != "" {
			b.WriteString(" DEFAULT " + c.DefaultExpr) // decode.FieldDefault.Literal
		}
	}
	return nil
}

// writeEngine writes the engine of s's table (local: its name): MergeTree
// or ReplacingMergeTree with its version column, Replicated on a cluster.
func writeEngine(b *strings.Builder, s TableSpec, local string) {
	var args []string
	if s.Cluster != "" {
		b.WriteString("Replicated")
		args = append(args, chschema.QuoteString("/clickhouse/tables/{shard}/"+s.Database+"."+local), chschema.QuoteString("{replica}"))
	}
	if s.Replacing {
		b.WriteString("ReplacingMergeTree")
		if s.Version != "" {
			args = append(args, chschema.QuoteIdent(s.Version))
		}
	} else {
		b.WriteString("MergeTree")
	}
	b.WriteString("(" + strings.Join(args, ", ") + ")")
}

// writeSettings writes the SETTINGS clause of settings, by name, when
// there are any.
func writeSettings(b *strings.Builder, settings map[string]any) error {
	if len(settings) == 0 {
		return nil
	}
	names := make([]string, 0, len(settings))
	for n := range settings {
		names = append(names, n)
	}
	sort.Strings(names)
	b.WriteString(" SETTINGS ")
	for i, n := range names {
		v, err := settingValue(settings[n])
		if err != nil {
			return fmt.Errorf("setting %s: %w", n, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n + " = " + v)
	}
	return nil
}

func onCluster(b *strings.Builder, cluster string) { b.WriteString(onClusterText(cluster)) }

func onClusterText(cluster string) string {
	if cluster == "" {
		return ""
	}
	return " ON CLUSTER " + chschema.QuoteIdent(cluster)
}

// settingValue renders a table setting's value: numbers as they are,
// booleans as 1 and 0, strings quoted.
func settingValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return chschema.QuoteString(v), nil
	case bool:
		if v {
			return "1", nil
		}
		return "0", nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("%v (%T) is not a number, a boolean or a string", v, v)
}

// AddColumnDDL is the statement that adds column name of type typ to
// db.table, ON CLUSTER cluster when cluster is set, with IF NOT EXISTS when
// ifNotExists. Every name is quoted; typ comes from
// decode.FieldType.Column, never from a record.
func AddColumnDDL(db, table, cluster, name, typ string, ifNotExists bool) string {
	var b strings.Builder
	b.WriteString("ALTER TABLE ")
	b.WriteString(chschema.QuoteIdent(db))
	b.WriteByte('.')
	b.WriteString(chschema.QuoteIdent(table))
	if cluster != "" {
		b.WriteString(" ON CLUSTER ")
		b.WriteString(chschema.QuoteIdent(cluster))
	}
	b.WriteString(" ADD COLUMN ")
	if ifNotExists {
		b.WriteString("IF NOT EXISTS ")
	}
	b.WriteString(chschema.QuoteIdent(name))
	b.WriteByte(' ')
	b.WriteString(typ)
	return b.String()
}
