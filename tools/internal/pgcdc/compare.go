package pgcdc

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"
)

// cell is one value as read and as compared.
type cell struct {
	raw   *string // as the database printed it; nil is NULL
	canon string
}

const nullCanon = "\x00NULL"

// row is one table row, by primary key.
type row struct {
	key   string // the key columns' canonical values
	label string // "(id=5)", "(order_id=1, line_no=2)"
	cells []cell
}

type pgQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// pgExpr is how column c is read from PostgreSQL (in a session with
// TimeZone UTC and DateStyle ISO): text that canon parses.
func pgExpr(c Column) string {
	switch {
	case isArray(c.Kind):
		return "array_to_json(" + c.Name + ")::text"
	case c.Kind == KBytes:
		return "encode(" + c.Name + ", 'hex')"
	}
	return c.Name + "::text"
}

// chExpr is how column c is read from ClickHouse: its text, Nullable so one
// scan type fits every column.
func chExpr(c Column) string {
	if c.Kind == KFloat32 || c.Kind == KFloat64 {
		return "toNullable(" + c.Name + ")" // by value: 18.16 prints Float32 with 8 digits, too few
	}
	if c.Kind == KEnum {
		// By number: 18.16 fails on toString of a NULL Nullable(Enum8).
		return "toNullable(toString(CAST(" + c.Name + " AS Nullable(Int8))))"
	}
	if isArray(c.Kind) {
		return "arrayMap(x -> toNullable(toString(x)), " + c.Name + ")"
	}
	return "toNullable(toString(" + c.Name + "))"
}

// liveColumns returns the table's columns that PostgreSQL has now (the
// added one once it is added), in the table's order.
func liveColumns(ctx context.Context, q pgQuerier, t *Table) ([]Column, error) {
	rows, err := q.Query(ctx, "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1", t.Name)
	if err != nil {
		return nil, fmt.Errorf("postgres: columns of %s: %w", t.Name, err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		have[n] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []Column
	for _, c := range t.Columns {
		if !have[c.Name] {
			return nil, fmt.Errorf("postgres: table %s has no column %s", t.Name, c.Name)
		}
		out = append(out, c)
	}
	if t.Added != nil && have[t.Added.Name] {
		out = append(out, *t.Added)
	}
	return out, nil
}

// keyOf builds a row's key and label from its cells.
func keyOf(t *Table, cols []Column, cells []cell) (string, string) {
	var key, label []string
	for i, c := range cols {
		if t.isKey(c.Name) {
			key = append(key, cells[i].canon)
			label = append(label, c.Name+"="+show(cells[i].raw))
		}
	}
	return strings.Join(key, "\x1f"), "(" + strings.Join(label, ", ") + ")"
}

// readPostgres reads every row of t.
func readPostgres(ctx context.Context, q pgQuerier, t *Table, cols []Column) (map[string]row, error) {
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = pgExpr(c)
	}
	rows, err := q.Query(ctx, "SELECT "+strings.Join(exprs, ", ")+" FROM "+t.Name)
	if err != nil {
		return nil, fmt.Errorf("postgres: read %s: %w", t.Name, err)
	}
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		raws := make([]*string, len(cols))
		dest := make([]any, len(cols))
		for i := range raws {
			dest[i] = &raws[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("postgres: read %s: %w", t.Name, err)
		}
		cells := make([]cell, len(cols))
		for i, c := range cols {
			cells[i] = cell{raw: raws[i], canon: nullCanon}
			switch {
			case raws[i] == nil:
			case isArray(c.Kind):
				els, err := pgArrayElements(*raws[i])
				if err != nil {
					cells[i].canon = invalid(err)
				} else {
					cells[i].canon = canonArray(elemKind(c.Kind), side{}, els)
				}
			default:
				cells[i].canon = canon(c.Kind, side{}, *raws[i])
			}
		}
		k, label := keyOf(t, cols, cells)
		out[k] = row{key: k, label: label, cells: cells}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read %s: %w", t.Name, err)
	}
	return out, nil
}

// readClickHouse reads the live rows of the mirror db.t: FINAL, deletes
// left out. A key seen twice is returned in dups.
func readClickHouse(ctx context.Context, ch driver.Conn, db string, d Dialect, t *Table, cols []Column) (map[string]row, []string, error) {
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = chExpr(c)
	}
	q := fmt.Sprintf("SELECT %s FROM %s.%s FINAL WHERE _deleted = 0", strings.Join(exprs, ", "), db, t.Name)
	rows, err := ch.Query(ctx, q)
	if err != nil {
		return nil, nil, fmt.Errorf("clickhouse: read %s.%s: %w", db, t.Name, err)
	}
	defer rows.Close()
	out := map[string]row{}
	var dups []string
	for rows.Next() {
		scalars := make([]*string, len(cols))
		arrays := make([][]*string, len(cols))
		f32s := make([]*float32, len(cols))
		f64s := make([]*float64, len(cols))
		dest := make([]any, len(cols))
		for i, c := range cols {
			switch {
			case isArray(c.Kind):
				dest[i] = &arrays[i]
			case c.Kind == KFloat32:
				dest[i] = &f32s[i]
			case c.Kind == KFloat64:
				dest[i] = &f64s[i]
			default:
				dest[i] = &scalars[i]
			}
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, fmt.Errorf("clickhouse: read %s.%s: %w", db, t.Name, err)
		}
		for i := range cols {
			if f32s[i] != nil {
				s := strconv.FormatFloat(float64(*f32s[i]), 'g', -1, 32)
				scalars[i] = &s
			}
			if f64s[i] != nil {
				s := strconv.FormatFloat(*f64s[i], 'g', -1, 64)
				scalars[i] = &s
			}
		}
		cells := make([]cell, len(cols))
		for i, c := range cols {
			s := side{clickhouse: true, chType: c.CHType(d)}
			switch {
			case isArray(c.Kind):
				raw := showArray(arrays[i])
				cells[i] = cell{raw: &raw, canon: canonArray(elemKind(c.Kind), s, arrays[i])}
			case scalars[i] == nil:
				cells[i] = cell{canon: nullCanon}
			case c.Kind == KEnum:
				label := enumLabel(*scalars[i])
				cells[i] = cell{raw: &label, canon: canon(c.Kind, s, label)}
			default:
				cells[i] = cell{raw: scalars[i], canon: canon(c.Kind, s, *scalars[i])}
			}
		}
		k, label := keyOf(t, cols, cells)
		if _, dup := out[k]; dup {
			dups = append(dups, label)
		}
		out[k] = row{key: k, label: label, cells: cells}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("clickhouse: read %s.%s: %w", db, t.Name, err)
	}
	return out, dups, nil
}

// showArray prints ClickHouse array elements for a message.
func showArray(els []*string) string {
	parts := make([]string, len(els))
	for i, e := range els {
		parts[i] = show(e)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// CompareOptions shape the comparison.
type CompareOptions struct {
	// TruncateApplied: the sink applies TRUNCATE (the truncated table must
	// equal PostgreSQL's). Otherwise the rows the table held when it was
	// truncated stay in ClickHouse, and are expected there besides
	// PostgreSQL's rows (the workload never touches their keys again).
	TruncateApplied bool
	// Examples is how many differences each table lists (0: 5).
	Examples int
}

// TableReport is one table's comparison.
type TableReport struct {
	Table    string
	Identity string // REPLICA IDENTITY: DEFAULT or FULL
	// Postgres is the number of rows expected (PostgreSQL's, plus the rows
	// kept from before a TRUNCATE the sink does not apply); ClickHouse the
	// number of live rows in the mirror.
	Postgres, ClickHouse int
	// Missing: keys only PostgreSQL has; Extra: keys only ClickHouse has;
	// Differing: keys in both whose values differ; Duplicates: keys FINAL
	// returned more than once.
	Missing, Extra, Differing, Duplicates int
	// Columns counts the differing values by column.
	Columns map[string]int
	// Examples are the first differences, one line each: the key, the
	// column, both values.
	Examples []string
}

// Differences is the number of keys of the table that are not equal.
func (r TableReport) Differences() int { return r.Missing + r.Extra + r.Differing + r.Duplicates }

// Report is the comparison of every table.
type Report struct {
	Tables []TableReport
}

// Differences is the number of keys that are not equal, over every table.
func (r *Report) Differences() int {
	n := 0
	for _, t := range r.Tables {
		n += t.Differences()
	}
	return n
}

// String prints a table per line and then the examples.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-11s %-8s %8s %10s %7s %5s %9s  %s\n", "table", "identity", "postgres", "clickhouse", "missing", "extra", "differing", "by column")
	for _, t := range r.Tables {
		var cols []string
		for c, n := range t.Columns {
			cols = append(cols, fmt.Sprintf("%s:%d", c, n))
		}
		sort.Strings(cols)
		extra := fmt.Sprint(t.Extra)
		if t.Duplicates > 0 {
			extra += fmt.Sprintf("+%d dup", t.Duplicates)
		}
		fmt.Fprintf(&b, "%-11s %-8s %8d %10d %7d %5s %9d  %s\n", t.Table, t.Identity, t.Postgres, t.ClickHouse, t.Missing, extra, t.Differing, strings.Join(cols, " "))
	}
	fmt.Fprintf(&b, "differences: %d\n", r.Differences())
	for _, t := range r.Tables {
		for _, e := range t.Examples {
			b.WriteString("  " + e + "\n")
		}
	}
	return b.String()
}

// Compare reads every table of the workload from PostgreSQL (one
// consistent snapshot) and from the ClickHouse mirrors in db (FINAL,
// `_deleted = 0`) and compares them key by key and column by column.
func Compare(ctx context.Context, pg *pgx.Conn, ch driver.Conn, db string, d Dialect, w *Workload, o CompareOptions) (*Report, error) {
	if o.Examples == 0 {
		o.Examples = 5
	}
	tx, err := pg.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("postgres: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := setReadSession(ctx, tx); err != nil {
		return nil, err
	}
	rep := &Report{}
	for _, t := range w.Tables {
		cols, err := liveColumns(ctx, tx, t)
		if err != nil {
			return nil, err
		}
		want, err := readPostgres(ctx, tx, t, cols)
		if err != nil {
			return nil, err
		}
		if t.Truncated && !o.TruncateApplied {
			for k, r := range w.truncated[t.Name] {
				if len(r.cells) != len(cols) {
					return nil, fmt.Errorf("%s: the rows kept at its TRUNCATE have %d columns, the table now %d", t.Name, len(r.cells), len(cols))
				}
				if _, again := want[k]; !again {
					want[k] = r
				}
			}
		}
		got, dups, err := readClickHouse(ctx, ch, db, d, t, cols)
		if err != nil {
			return nil, err
		}
		rep.Tables = append(rep.Tables, compareTable(t, cols, want, got, dups, o.Examples))
	}
	return rep, nil
}

// setReadSession makes PostgreSQL print values the way canon reads them.
func setReadSession(ctx context.Context, tx pgx.Tx) error {
	for _, s := range []string{"SET LOCAL TimeZone = 'UTC'", "SET LOCAL DateStyle = 'ISO, YMD'", "SET LOCAL extra_float_digits = 1"} {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("postgres: %s: %w", s, err)
		}
	}
	return nil
}

func compareTable(t *Table, cols []Column, want, got map[string]row, dups []string, examples int) TableReport {
	r := TableReport{Table: t.Name, Identity: "DEFAULT", Postgres: len(want), ClickHouse: len(got), Columns: map[string]int{}, Duplicates: len(dups)}
	if t.Full {
		r.Identity = "FULL"
	}
	note := func(format string, args ...any) {
		if len(r.Examples) < examples {
			r.Examples = append(r.Examples, t.Name+" "+fmt.Sprintf(format, args...))
		}
	}
	for _, label := range dups {
		note("%s: twice in FINAL", label)
	}
	keys := make([]string, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, inPG := want[k]
		g, inCH := got[k]
		switch {
		case !inCH:
			r.Missing++
			note("%s: in postgres, not in clickhouse", w.label)
		case !inPG:
			r.Extra++
			note("%s: in clickhouse, not in postgres", g.label)
		default:
			differs := false
			for i, c := range cols {
				if w.cells[i].canon == g.cells[i].canon {
					continue
				}
				differs = true
				r.Columns[c.Name]++
				note("%s column %s (%s): postgres %s, clickhouse %s%s", w.label, c.Name, c.Kind, show(w.cells[i].raw), show(g.cells[i].raw),
					why(w.cells[i].canon, g.cells[i].canon))
			}
			if differs {
				r.Differing++
			}
		}
	}
	return r
}

// why adds the reason when a value did not parse, or the canonical forms
// when both raw texts are cut short or equal.
func why(pg, ch string) string {
	for _, c := range []struct{ who, v string }{{"postgres", pg}, {"clickhouse", ch}} {
		if strings.HasPrefix(c.v, "\x00invalid: ") {
			return " (" + c.who + "'s is " + strings.TrimPrefix(c.v, "\x00invalid: ") + ")"
		}
	}
	return ""
}

// enumLabel is the mood label of the Enum8 number n (1-based), or the number
// itself when it is none (canon then reports it).
func enumLabel(n string) string {
	i, err := strconv.Atoi(n)
	if err != nil || i < 1 || i > len(Moods) {
		return n
	}
	return Moods[i-1]
}
