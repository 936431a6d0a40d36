// Package chschema is the ClickHouse vocabulary that the stages of the sink
// share: a table column as system.columns describes it (ColumnSchema), the
// shape of an insertable block (Block), what a server offers (Version,
// ServerInfo, ServerTypes), how a table deduplicates repeated INSERT blocks
// (TableDedup, ViewDedup), the native forms of composite columns that a
// block hands to the driver without a copy (NullableNative, ArrayNative,
// MapNative, LowCardinalityNative, MapRow), and identifier quoting
// (QuoteIdent).
//
// decode builds blocks in these terms, writer inserts them and describes
// tables and servers in them, and eos checks exactly-once's requirements
// against them, so none of those packages imports another for a type: the
// imports follow the data flow (decode → writer → eos, docs/architecture.md).
// chschema does no I/O and imports no package of the sink.
//
// Concurrency: the types are plain values with no shared state. A MapRow is
// an iterator and belongs to one goroutine at a time; the native forms alias
// the buffers of the block they came from and are read-only while that block
// is not changed.
package chschema

import "strings"

// ColumnSchema describes one table column as read from system.columns.
type ColumnSchema struct {
	Name        string
	Type        string // ClickHouse type as the server prints it, e.g. "Nullable(String)"
	DefaultKind string // "", "DEFAULT", "MATERIALIZED" or "ALIAS"
	DefaultExpr string // the column's default expression as the server prints it ("" for none)
	// Default is, for a DEFAULT column, the value of DefaultExpr that the
	// server computed once (writer.Describe), as JSON text that decode
	// reads as if a record had carried it: what a record without the
	// field (or with null, for a column that is not Nullable) inserts.
	// "" when the expression cannot be computed once; DefaultWhy says why
	// (another column, a function that is not deterministic, a type the
	// sink does not read back).
	Default    string
	DefaultWhy string
}

// QuoteIdent quotes a ClickHouse identifier with backticks so that no name,
// whatever it contains, can end the identifier early or be misread by
// clickhouse-go, which parses INSERT statements with regular expressions
// that do not know about quoting: backticks and backslashes are escaped
// with a backslash, and parentheses, spaces and control characters are
// written as \xHH escapes, which ClickHouse (18.16 too) decodes inside
// backticks. Use it for database and table names.
func QuoteIdent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('`')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '`', c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '(', c == ')', c <= ' ', c == 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('`')
	return b.String()
}

// QuoteString quotes s as a ClickHouse string literal: backslashes and
// single quotes are escaped with a backslash. Use it for every value
// written into a statement's text.
func QuoteString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}

// Block is what an insert sends (decode.Block is one): its rows, its
// columns, and each column's values as a slice of one value per row.
type Block interface {
	Rows() int
	Columns() []ColumnSchema
	ColumnData(i int) any
}
