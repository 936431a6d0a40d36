package pgcdc

import (
	"fmt"
	"strings"
)

// Kind is how a column's values are generated, rendered and compared. Each
// kind is one PostgreSQL type family; its ClickHouse mirror depends on the
// server (Dialect).
type Kind int

// The kinds, one per PostgreSQL type family the workload writes.
const (
	KInt16       Kind = iota // smallint
	KInt32                   // integer
	KInt64                   // bigint
	KDecimal                 // numeric(12,2): Decimal(12, 2)
	KNumeric                 // numeric without precision or scale: String
	KFloat32                 // real, with NaN and ±Infinity
	KFloat64                 // double precision, with NaN and ±Infinity
	KBool                    // boolean
	KDate                    // date, 1900..2299
	KTimestamp               // timestamp (without time zone), µs
	KTimestampTZ             // timestamptz, µs
	KTime                    // time, µs, up to 24:00:00
	KUUID                    // uuid
	KJSON                    // jsonb: String, compared as parsed JSON
	KIntArray                // integer[] with NULL elements
	KTextArray               // text[] with NULL elements
	KBytes                   // bytea: String, byte for byte
	KEnum                    // the mood enum: Enum8
	KText                    // text with every escape
)

var kindNames = [...]string{"int16", "int32", "int64", "decimal", "numeric", "float32", "float64", "bool", "date",
	"timestamp", "timestamptz", "time", "uuid", "jsonb", "int[]", "text[]", "bytea", "enum", "text"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Moods are the labels of the PostgreSQL enum type mood, in its order. The
// ClickHouse Enum8 numbers them 1.. in the same order; the label with a
// quote is the highest-valued one, the only place clickhouse-go accepts it.
var Moods = []string{"sad", "ok", "happy", "très bien", "it's fine"}

// Column is one column of a workload table.
type Column struct {
	Name string
	Kind Kind
	// Nullable: the PostgreSQL column accepts NULL (and the ClickHouse
	// mirror is Nullable). Arrays are never NULL themselves (ClickHouse has
	// no Nullable(Array)); their elements may be.
	Nullable bool
	// Big: the values are large and incompressible (> 8 KB), stored out of
	// line (TOAST, STORAGE EXTERNAL), and most updates leave them unchanged.
	Big bool
	// Default is the column's DEFAULT in both databases ("" for none).
	Default string
	// CH is the ClickHouse type instead of the kind's on every server
	// (without Nullable, which Nullable adds); "" for the kind's.
	CH string
}

// PGType is the column's PostgreSQL type.
func (c Column) PGType() string {
	switch c.Kind {
	case KInt16:
		return "smallint"
	case KInt32:
		return "integer"
	case KInt64:
		return "bigint"
	case KDecimal:
		return "numeric(12,2)"
	case KNumeric:
		return "numeric"
	case KFloat32:
		return "real"
	case KFloat64:
		return "double precision"
	case KBool:
		return "boolean"
	case KDate:
		return "date"
	case KTimestamp:
		return "timestamp"
	case KTimestampTZ:
		return "timestamptz"
	case KTime:
		return "time"
	case KUUID:
		return "uuid"
	case KJSON:
		return "jsonb"
	case KIntArray:
		return "integer[]"
	case KTextArray:
		return "text[]"
	case KBytes:
		return "bytea"
	case KEnum:
		return "mood"
	}
	return "text"
}

// Dialect is what a ClickHouse server offers for the mirror tables.
type Dialect struct {
	// Modern: DateTime64, Date32 and Bool exist (ClickHouse 21.12 and later).
	Modern bool
}

// DialectFor returns the dialect of a ClickHouse server by its version.
func DialectFor(major, minor int) Dialect {
	return Dialect{Modern: major > 21 || (major == 21 && minor >= 12)}
}

// CHType is the column's ClickHouse type on a server of dialect d.
//
// The choices, for both servers unless said otherwise:
//   - numeric(12,2) is Decimal(12, 2): same precision and scale, exact.
//   - numeric without a scale is String: PostgreSQL keeps any precision and
//     scale (up to 131072 digits before the point and 16383 after), which no
//     Decimal holds; a Decimal(38, 10) would make every value with an 11th
//     decimal place or a 29th integer digit a bad record. The comparison
//     reads the text back as a number (1.5000 = 1.5).
//   - real and double precision are Float32 and Float64 (NaN and ±Infinity
//     included).
//   - boolean is Bool on 26.9, UInt8 on 18.16.
//   - date is Date32 on 26.9 (Date stops at 1970 and 2149); 18.16 has no
//     type for dates before 1970, so String (2024-05-17).
//   - timestamp and timestamptz are DateTime64(6, 'UTC') on 26.9 (µs, like
//     PostgreSQL, and 1900..2299); 18.16 has no DateTime64, so String (the
//     text Debezium's value becomes: 2024-05-17 12:34:56.789012, or RFC 3339
//     for timestamptz), compared as the instant it names.
//   - time is Int64 µs since midnight on 26.9 (ClickHouse's Time64 is not
//     generally available and the sink does not fill it; an integer keeps
//     24:00:00 as 86400000000) and String (12:34:56.789) on 18.16, so both
//     of Debezium's renderings are checked.
//   - uuid is UUID; the enum is Enum8 with the same labels; jsonb is String
//     (compared as parsed JSON); bytea is String (byte for byte); arrays are
//     Array(Nullable(T)).
func (c Column) CHType(d Dialect) string {
	t := c.CH
	switch {
	case t != "":
	case isArray(c.Kind):
		return c.kindType(d)
	default:
		t = c.kindType(d)
	}
	if c.Nullable {
		t = "Nullable(" + t + ")"
	}
	return t
}

// kindType is the ClickHouse type of the column's kind on a server of
// dialect d, without Nullable (CHType says why each is what it is).
func (c Column) kindType(d Dialect) string {
	var t string
	switch c.Kind {
	case KInt16:
		t = "Int16"
	case KInt32:
		t = "Int32"
	case KInt64:
		t = "Int64"
	case KDecimal:
		t = "Decimal(12, 2)"
	case KFloat32:
		t = "Float32"
	case KFloat64:
		t = "Float64"
	case KBool:
		t = "UInt8"
		if d.Modern {
			t = "Bool"
		}
	case KDate:
		t = "String"
		if d.Modern {
			t = "Date32"
		}
	case KTimestamp, KTimestampTZ:
		t = "String"
		if d.Modern {
			t = "DateTime64(6, 'UTC')"
		}
	case KTime:
		t = "String"
		if d.Modern {
			t = "Int64"
		}
	case KUUID:
		t = "UUID"
	case KIntArray:
		return "Array(Nullable(Int32))"
	case KTextArray:
		return "Array(Nullable(String))"
	case KEnum:
		var b strings.Builder
		b.WriteString("Enum8(")
		for i, m := range Moods {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s = %d", chString(m), i+1)
		}
		b.WriteString(")")
		t = b.String()
	default: // numeric, jsonb, bytea, text
		t = "String"
	}
	return t
}

// chString quotes s as a ClickHouse string literal.
func chString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// Table is one table of the workload, in PostgreSQL and in ClickHouse.
type Table struct {
	Name    string
	Columns []Column
	// Key names the primary key's columns, in order.
	Key []string
	// Full: REPLICA IDENTITY FULL (the old row image in every update and
	// delete); else DEFAULT (deletes carry the key only, and unchanged
	// TOASTed values are not sent).
	Full bool
	// KeyChanges: the workload also updates the primary key.
	KeyChanges bool
	// Added is the column the workload adds mid-stream (ALTER TABLE … ADD
	// COLUMN), or nil. It is not in Columns until then.
	Added *Column
	// Truncated: the workload truncates the table once, mid-stream, and
	// afterwards only touches keys it never used before.
	Truncated bool
}

// Column returns the column named name (the added one included).
func (t *Table) Column(name string) (Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	if t.Added != nil && t.Added.Name == name {
		return *t.Added, true
	}
	return Column{}, false
}

// isKey reports whether the column is part of the primary key.
func (t *Table) isKey(name string) bool {
	for _, k := range t.Key {
		if k == name {
			return true
		}
	}
	return false
}

// PostgresDDL returns the statements that create the table (the enum type
// mood must exist).
func (t *Table) PostgresDDL() []string {
	var cols []string
	for _, c := range t.Columns {
		def := c.Name + " " + c.PGType()
		if !c.Nullable {
			def += " NOT NULL"
		}
		if c.Default != "" {
			def += " DEFAULT " + c.Default
		}
		cols = append(cols, def)
	}
	cols = append(cols, "PRIMARY KEY ("+strings.Join(t.Key, ", ")+")")
	out := []string{"CREATE TABLE " + t.Name + " (\n  " + strings.Join(cols, ",\n  ") + "\n)"}
	for _, c := range t.Columns {
		if c.Big {
			// Out of line and uncompressed: each value is TOASTed whole.
			out = append(out, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET STORAGE EXTERNAL", t.Name, c.Name))
		}
	}
	identity := "DEFAULT"
	if t.Full {
		identity = "FULL"
	}
	return append(out, "ALTER TABLE "+t.Name+" REPLICA IDENTITY "+identity)
}

// AddColumnPostgres is the ALTER that adds t.Added in PostgreSQL.
func (t *Table) AddColumnPostgres() string {
	c := *t.Added
	s := fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", t.Name, c.Name, c.PGType())
	if !c.Nullable {
		s += " NOT NULL"
	}
	if c.Default != "" {
		s += " DEFAULT " + c.Default
	}
	return s
}

// AddColumnClickHouse is the ALTER that adds t.Added to the mirror table
// db.t, to run before PostgreSQL's (so the sink has the column when the
// first change carrying it arrives).
func (t *Table) AddColumnClickHouse(db string, d Dialect) string {
	c := *t.Added
	s := fmt.Sprintf("ALTER TABLE %s.%s ADD COLUMN %s %s", db, t.Name, c.Name, c.CHType(d))
	if c.Default != "" {
		s += " DEFAULT " + c.Default
	}
	return s
}

// MirrorOptions shape the ClickHouse mirror tables.
type MirrorOptions struct {
	// Meta are the definitions of the version and delete-marker columns
	// (and of what they are computed from); nil: `_version UInt64` and
	// `_deleted UInt8`, which debezium-json fills.
	Meta []string
	// ExactlyOnce adds the columns and the deduplication window that
	// `delivery: exactly_once` requires (_topic, _partition, _offset,
	// non_replicated_deduplication_window); ClickHouse 22.2 and later.
	ExactlyOnce bool
}

// ClickHouseDDL returns the CREATE TABLE of the mirror db.t: the columns it
// has at the start (not Added), `_version UInt64` and `_deleted UInt8`, a
// ReplacingMergeTree(_version) ordered by the primary key, read with
// `FINAL WHERE _deleted = 0`.
func (t *Table) ClickHouseDDL(db string, d Dialect, o MirrorOptions) string {
	var cols []string
	for _, c := range t.Columns {
		def := c.Name + " " + c.CHType(d)
		if c.Default != "" {
			def += " DEFAULT " + c.Default
		}
		cols = append(cols, def)
	}
	meta := o.Meta
	if meta == nil {
		meta = []string{"_version UInt64", "_deleted UInt8"}
	}
	cols = append(cols, meta...)
	settings := ""
	if o.ExactlyOnce {
		cols = append(cols, "_topic LowCardinality(String)", "_partition Int32", "_offset Int64",
			"INDEX off _offset TYPE minmax GRANULARITY 1")
		settings = " SETTINGS non_replicated_deduplication_window = 1000"
	}
	return fmt.Sprintf("CREATE TABLE %s.%s (\n  %s\n) ENGINE = ReplacingMergeTree(_version) ORDER BY (%s)%s",
		db, t.Name, strings.Join(cols, ",\n  "), strings.Join(t.Key, ", "), settings)
}

// wide is the column set of the tables that carry every type.
func wide() []Column {
	return []Column{
		{Name: "id", Kind: KInt64},
		{Name: "qty", Kind: KInt32},
		{Name: "small", Kind: KInt16, Nullable: true},
		{Name: "price", Kind: KDecimal, Nullable: true},
		{Name: "ratio", Kind: KNumeric, Nullable: true},
		{Name: "r", Kind: KFloat32, Nullable: true},
		{Name: "d", Kind: KFloat64, Nullable: true},
		{Name: "flag", Kind: KBool, Nullable: true},
		{Name: "day", Kind: KDate, Nullable: true},
		{Name: "at", Kind: KTimestamp, Nullable: true},
		{Name: "atz", Kind: KTimestampTZ, Nullable: true},
		{Name: "t", Kind: KTime, Nullable: true},
		{Name: "u", Kind: KUUID, Nullable: true},
		{Name: "doc", Kind: KJSON, Nullable: true},
		{Name: "ints", Kind: KIntArray},
		{Name: "tags", Kind: KTextArray},
		{Name: "raw", Kind: KBytes, Nullable: true},
		{Name: "mood", Kind: KEnum, Nullable: true},
		{Name: "note", Kind: KText, Nullable: true},
	}
}

// toasted is the column set of the tables with large values.
func toasted() []Column {
	return []Column{
		{Name: "id", Kind: KInt32},
		{Name: "title", Kind: KText},
		{Name: "rev", Kind: KInt32},
		{Name: "body", Kind: KText, Nullable: true, Big: true},
		{Name: "blob", Kind: KBytes, Nullable: true, Big: true},
	}
}

// Tables returns the workload's tables:
//   - items, items_full: every type, REPLICA IDENTITY DEFAULT and FULL;
//     items gains `tier integer NOT NULL DEFAULT 7` mid-stream.
//   - docs, docs_full: TOASTed text and bytea (> 8 KB, incompressible),
//     DEFAULT and FULL.
//   - lines: a composite primary key (order_id, line_no), with key changes.
//   - accounts: a text primary key with escapes and Unicode, with key
//     changes, and a NOT NULL column of every kind (REPLICA IDENTITY DEFAULT).
//   - events: truncated once mid-stream.
func Tables() []*Table {
	return []*Table{
		{Name: "items", Columns: wide(), Key: []string{"id"}, KeyChanges: true,
			Added: &Column{Name: "tier", Kind: KInt32, Default: "7"}},
		{Name: "items_full", Columns: wide(), Key: []string{"id"}, Full: true, KeyChanges: true},
		{Name: "docs", Columns: toasted(), Key: []string{"id"}},
		{Name: "docs_full", Columns: toasted(), Key: []string{"id"}, Full: true},
		{Name: "lines", Key: []string{"order_id", "line_no"}, KeyChanges: true, Columns: []Column{
			{Name: "order_id", Kind: KInt32}, {Name: "line_no", Kind: KInt16},
			{Name: "sku", Kind: KText}, {Name: "qty", Kind: KInt32}, {Name: "price", Kind: KDecimal},
			{Name: "shipped", Kind: KTimestampTZ, Nullable: true}}},
		// Every NOT NULL kind under REPLICA IDENTITY DEFAULT: a delete's
		// before image fills them with Debezium's placeholders.
		{Name: "accounts", Key: []string{"code"}, KeyChanges: true, Columns: []Column{
			{Name: "code", Kind: KText}, {Name: "owner", Kind: KText, Nullable: true},
			{Name: "balance", Kind: KNumeric}, {Name: "limit_", Kind: KDecimal}, {Name: "opened", Kind: KDate},
			{Name: "mood", Kind: KEnum}, {Name: "ref", Kind: KUUID}, {Name: "prefs", Kind: KJSON},
			{Name: "since", Kind: KTimestampTZ}, {Name: "seen", Kind: KTimestamp}, {Name: "cutoff", Kind: KTime},
			{Name: "active", Kind: KBool}, {Name: "score", Kind: KFloat64}, {Name: "weight", Kind: KFloat32},
			{Name: "pin", Kind: KBytes}, {Name: "flags", Kind: KIntArray}, {Name: "aliases", Kind: KTextArray}}},
		{Name: "events", Key: []string{"id"}, Truncated: true, Columns: []Column{
			{Name: "id", Kind: KInt64}, {Name: "kind", Kind: KText}, {Name: "at", Kind: KTimestamp},
			{Name: "payload", Kind: KJSON, Nullable: true}}},
	}
}
