//go:build integration

package pgcdc

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"sink/internal/testenv"
)

// chLiteral renders a cell read from PostgreSQL as a ClickHouse literal
// for the mirror column, mostly from its canonical text, so that what is
// tested is the comparator's reading of each server's output. (A literal,
// not a clickhouse-go value: the driver carries DateTime64 as nanoseconds
// in an int64, which ends in 2262.)
func chLiteral(c Column, d Dialect, v cell) (string, error) {
	if v.raw == nil {
		return "NULL", nil
	}
	cn := v.canon
	switch c.Kind {
	case KInt16, KInt32, KInt64, KDecimal:
		return cn, nil
	case KFloat32, KFloat64:
		// By its bits: 18.16 parses float text to within an ulp only.
		bits := 64
		if c.Kind == KFloat32 {
			bits = 32
		}
		f, err := strconv.ParseFloat(cn, bits)
		b := make([]byte, 8)
		binary.LittleEndian.PutUint64(b, math.Float64bits(f))
		if bits == 32 {
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(f)))
			b = b[:4]
		}
		return fmt.Sprintf("reinterpretAsFloat%d(unhex('%x'))", bits, b), err
	case KBool:
		if d.Modern {
			return cn, nil
		}
		return map[string]string{"true": "1", "false": "0"}[cn], nil
	case KDate:
		return chString(cn), nil
	case KTimestamp, KTimestampTZ:
		if d.Modern {
			return chString(strings.TrimSuffix(cn, "Z")), nil
		}
		return chString(*v.raw), nil
	case KTime:
		if d.Modern {
			us, err := parseTimeOfDay(cn, false)
			return strconv.FormatInt(us, 10), err
		}
		return chString(*v.raw), nil
	case KUUID:
		return chString(cn), nil
	case KBytes:
		b, err := hex.DecodeString(cn)
		var out strings.Builder
		out.WriteByte('\'')
		for _, x := range b {
			fmt.Fprintf(&out, "\\x%02x", x)
		}
		out.WriteByte('\'')
		return out.String(), err
	case KIntArray, KTextArray:
		els, err := pgArrayElements(*v.raw)
		if err != nil {
			return "", err
		}
		parts := make([]string, len(els))
		for i, e := range els {
			switch {
			case e == nil:
				parts[i] = "NULL"
			case c.Kind == KIntArray:
				parts[i] = *e
			default:
				parts[i] = chString(*e)
			}
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	}
	return chString(*v.raw), nil // numeric, jsonb, enum, text: PostgreSQL's text
}

// load copies PostgreSQL's rows of every table into the mirrors in db, at
// version 1, through mutate (which may change a row's cells or drop it by
// returning false).
func load(t *testing.T, pg *pgx.Conn, httpAddr string, db string, d Dialect, w *Workload, mutate func(table string, cols []Column, r *row) bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := pg.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := setReadSession(ctx, tx); err != nil {
		t.Fatal(err)
	}
	for _, tb := range w.Tables {
		cols, err := liveColumns(ctx, tx, tb)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := readPostgres(ctx, tx, tb, cols)
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = c.Name
		}
		var values []string
		for _, r := range rows {
			if mutate != nil && !mutate(tb.Name, cols, &r) {
				continue
			}
			lits := make([]string, 0, len(cols)+2)
			for i, c := range cols {
				l, err := chLiteral(c, d, r.cells[i])
				if err != nil {
					t.Fatalf("%s %s %s: %v", tb.Name, r.label, c.Name, err)
				}
				lits = append(lits, l)
			}
			values = append(values, "("+strings.Join(append(lits, "1", "0"), ", ")+")")
		}
		if len(values) == 0 {
			continue
		}
		insertHTTP(t, httpAddr, fmt.Sprintf("INSERT INTO %s.%s (%s, _version, _deleted) VALUES %s", db, tb.Name, strings.Join(names, ", "), strings.Join(values, ", ")))
	}
}

// insertHTTP runs an INSERT with its VALUES in the query over HTTP: 18.16
// waits for data blocks after such an INSERT on the native protocol.
func insertHTTP(t *testing.T, httpAddr, q string) {
	t.Helper()
	resp, err := http.Post("http://"+httpAddr+"/", "text/plain", strings.NewReader(q))
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("insert: %s: %s\nin: %.300s", resp.Status, body, q)
	}
}

// The comparator on both servers, against a real PostgreSQL after a
// workload: mirrors loaded with PostgreSQL's values compare equal, every
// type included; and each kind of difference put in on purpose is found,
// counted and named (table, key, column, both values), while values that
// are equal but printed differently are not.
func TestCompareFindsWhatDiffers(t *testing.T) {
	pg := testenv.Postgres(t).Conn(t)
	ctx := context.Background()
	w := New(Config{Seed: 11, SnapshotRows: 30, Transactions: 150})
	if err := w.Setup(ctx, pg); err != nil {
		t.Fatal(err)
	}
	if err := w.Stream(ctx, pg, Hooks{}); err != nil {
		t.Fatal(err)
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, d := s.Conn(t), DialectFor(s.Major, s.Minor)
		create := func() string {
			db := s.NewDatabase(t)
			for _, tb := range w.Tables {
				testenv.Exec(t, ch, tb.ClickHouseDDL(db, d, MirrorOptions{}))
				if tb.Added != nil {
					testenv.Exec(t, ch, tb.AddColumnClickHouse(db, d))
				}
			}
			return db
		}

		db := create()
		load(t, pg, s.HTTPAddr, db, d, w, nil)
		rep, err := Compare(ctx, pg, ch, db, d, w, CompareOptions{TruncateApplied: true})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Differences() != 0 {
			t.Fatalf("a faithful copy differs:\n%s", rep)
		}
		rows := 0
		for _, tr := range rep.Tables {
			rows += tr.Postgres
		}
		if rows < 150 {
			t.Fatalf("only %d rows compared", rows)
		}
		// Without TRUNCATE applied, the truncated table's old rows are
		// expected too: the copy lacks them.
		rep, err = Compare(ctx, pg, ch, db, d, w, CompareOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rep.Differences(), w.Stats.Truncated; got != want || want == 0 {
			t.Fatalf("with TRUNCATE not applied: %d differences, want the %d truncated rows missing\n%s", got, want, rep)
		}

		db = create()
		var dropped, changed string
		load(t, pg, s.HTTPAddr, db, d, w, func(table string, cols []Column, r *row) bool {
			switch {
			case table == "lines" && dropped == "":
				dropped = r.label
				return false
			case table == "items" && changed == "":
				for i, c := range cols {
					switch c.Name {
					case "note":
						s := "changed"
						r.cells[i] = cell{raw: &s, canon: s}
						changed = r.label
					case "ratio", "price":
						// Equal values printed with more zeros stay equal.
						if r.cells[i].raw != nil && !strings.Contains(*r.cells[i].raw, "NaN") {
							s := *r.cells[i].raw
							if !strings.Contains(s, ".") {
								s += "."
							}
							s += "000"
							if c.Name == "ratio" {
								r.cells[i] = cell{raw: &s, canon: r.cells[i].canon}
							}
						}
					}
				}
			}
			return true
		})
		insertHTTP(t, s.HTTPAddr, fmt.Sprintf("INSERT INTO %s.accounts (code, balance, opened, mood, _version, _deleted) VALUES ('extra''s', '1', '2000-01-01', 'ok', 1, 0)", db))
		rep, err = Compare(ctx, pg, ch, db, d, w, CompareOptions{TruncateApplied: true, Examples: 10})
		if err != nil {
			t.Fatal(err)
		}
		text := rep.String()
		byName := map[string]TableReport{}
		for _, tr := range rep.Tables {
			byName[tr.Table] = tr
		}
		if tr := byName["lines"]; tr.Missing != 1 || tr.Differences() != 1 || !strings.Contains(text, "lines "+dropped+": in postgres, not in clickhouse") {
			t.Errorf("lines: missing %d, differences %d; want the one dropped row %s named\n%s", tr.Missing, tr.Differences(), dropped, text)
		}
		if tr := byName["items"]; tr.Differing != 1 || tr.Differences() != 1 || tr.Columns["note"] != 1 || len(tr.Columns) != 1 ||
			!strings.Contains(text, "items "+changed+" column note (text): postgres ") || !strings.Contains(text, `clickhouse "changed"`) {
			t.Errorf("items: %+v; want one differing row %s, in column note only, with both values\n%s", tr, changed, text)
		}
		if tr := byName["accounts"]; tr.Extra != 1 || tr.Differences() != 1 || !strings.Contains(text, `accounts (code="extra's"): in clickhouse, not in postgres`) {
			t.Errorf("accounts: %+v; want the extra row named\n%s", tr, text)
		}
		if rep.Differences() != 3 {
			t.Errorf("%d differences; want 3\n%s", rep.Differences(), text)
		}
		t.Logf("the report of three differences:\n%s", text)
	})
}
