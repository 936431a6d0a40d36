// Package pgcdc drives a real PostgreSQL with a seeded random workload for
// change data capture, gives the ClickHouse mirror of each of its tables,
// and compares the two databases key by key and value by value: the proof
// that Debezium's events, through the sink's `debezium-json` format into
// ReplacingMergeTree tables, reproduce PostgreSQL's final state.
//
// The workload (Tables) covers a wide set of types (numeric with and without
// scale, real/double with NaN and ±Infinity, boolean, date/timestamp/
// timestamptz/time before 1970 and 24:00:00, uuid, jsonb, arrays with NULL
// elements, bytea, an enum, text with every escape), a composite and a text
// primary key, REPLICA IDENTITY DEFAULT and FULL, and large TOASTed values.
// It writes snapshot rows (Setup, before the connector starts), then
// transactions (Stream) of inserts, updates, deletes, primary-key changes,
// several changes of one row, rolled-back transactions and savepoints,
// updates that leave TOASTed values unchanged, an ADD COLUMN with a DEFAULT
// and a TRUNCATE midway. The same Config gives the same statements.
//
// Concurrency: a Workload is used by one goroutine at a time; Compare may
// run while nothing writes to either database.
package pgcdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Config sizes a workload.
type Config struct {
	Seed uint64
	// SnapshotRows is the number of rows each table has before the
	// connector starts (the TOAST tables a quarter of it).
	SnapshotRows int
	// Transactions is the number of transactions Stream runs.
	Transactions int
	// Tables names the tables of Tables() the workload uses, in that
	// order (nil: every one).
	Tables []string
	// Millis: every time of day and timestamp is a whole millisecond, as
	// Kafka Connect's Time and Timestamp carry them (Debezium with
	// time.precision.mode=connect).
	Millis bool
}

// Stats counts what the workload did. Statements are counted when run,
// rolled back or not.
type Stats struct {
	SnapshotRows                                     int
	Committed, RolledBack, SavepointsRolledBack      int
	Inserts, Updates, Deletes, KeyChanges, Reinserts int
	// BigWrites are inserts and updates that wrote a TOASTed value;
	// BigKept are updates of a TOAST table that left its large values
	// unchanged.
	BigWrites, BigKept int
	// Truncated is the number of rows the TRUNCATE removed.
	Truncated int
}

// Hooks let the caller act at fixed points of Stream.
type Hooks struct {
	// BeforeAddColumn runs before PostgreSQL's ALTER TABLE … ADD COLUMN:
	// add the column to the ClickHouse mirrors there.
	BeforeAddColumn func(ctx context.Context, t *Table) error
	// AfterTransaction runs after transaction i (1-based) has ended.
	AfterTransaction func(ctx context.Context, i int) error
}

// keySet is a table's set of live keys, each as its key columns' literals.
type keySet struct {
	keys [][]string
	idx  map[string]int
}

func newKeySet() *keySet { return &keySet{idx: map[string]int{}} }

func keyID(k []string) string { return strings.Join(k, "\x1f") }

func (s *keySet) add(k []string) {
	if _, ok := s.idx[keyID(k)]; ok {
		return
	}
	s.idx[keyID(k)] = len(s.keys)
	s.keys = append(s.keys, k)
}

func (s *keySet) remove(k []string) {
	i, ok := s.idx[keyID(k)]
	if !ok {
		return
	}
	last := s.keys[len(s.keys)-1]
	s.keys[i] = last
	s.idx[keyID(last)] = i
	s.keys = s.keys[:len(s.keys)-1]
	delete(s.idx, keyID(k))
}

func (s *keySet) clone() *keySet {
	c := &keySet{keys: append([][]string(nil), s.keys...), idx: make(map[string]int, len(s.idx))}
	for k, v := range s.idx {
		c.idx[k] = v
	}
	return c
}

// tableState is what the workload knows about a table: its live keys, the
// keys it deleted (to insert again), the next fresh key.
type tableState struct {
	t     *Table
	live  *keySet
	dead  *keySet
	next  int
	added bool
}

func (s *tableState) clone() *tableState {
	c := *s
	c.live, c.dead = s.live.clone(), s.dead.clone()
	return &c
}

// Workload is one seeded run.
type Workload struct {
	// Tables are the workload's tables (the same for every Config).
	Tables []*Table
	Stats  Stats
	cfg    Config
	g      gen
	st     []*tableState
	// truncated holds, per truncated table, the rows it had when it was
	// truncated (for a sink that does not apply TRUNCATE).
	truncated map[string]map[string]row
}

// New returns the workload for cfg.
func New(cfg Config) *Workload {
	w := &Workload{Tables: Tables(), cfg: cfg, g: gen{rnd: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), millis: cfg.Millis},
		truncated: map[string]map[string]row{}}
	if cfg.Tables != nil {
		w.Tables = slices.DeleteFunc(w.Tables, func(t *Table) bool { return !slices.Contains(cfg.Tables, t.Name) })
	}
	for _, t := range w.Tables {
		w.st = append(w.st, &tableState{t: t, live: newKeySet(), dead: newKeySet(), next: 1})
	}
	return w
}

// TableNames lists the workload's tables, for a connector's table list
// and the sink's topic pattern.
func (w *Workload) TableNames() []string {
	var out []string
	for _, t := range w.Tables {
		out = append(out, t.Name)
	}
	return out
}

func pgExec(ctx context.Context, pg *pgx.Conn, sql string) error {
	if _, err := pg.Exec(ctx, sql); err != nil {
		if len(sql) > 300 {
			sql = sql[:300] + "…"
		}
		return fmt.Errorf("postgres: %w\nin: %s", err, sql)
	}
	return nil
}

// Setup creates the enum type and the tables in pg's database (which must
// not have them) and writes the snapshot rows.
func (w *Workload) Setup(ctx context.Context, pg *pgx.Conn) error {
	labels := make([]string, len(Moods))
	for i, m := range Moods {
		labels[i] = pgString(m)
	}
	stmts := []string{"CREATE TYPE mood AS ENUM (" + strings.Join(labels, ", ") + ")"}
	for _, t := range w.Tables {
		stmts = append(stmts, t.PostgresDDL()...)
	}
	for _, s := range stmts {
		if err := pgExec(ctx, pg, s); err != nil {
			return err
		}
	}
	for _, s := range w.st {
		n := w.cfg.SnapshotRows
		if hasBig(s.t) {
			n = n/4 + 1
		}
		stmts := []string{"BEGIN"}
		for range n {
			stmts = append(stmts, w.insert(s, s.fresh()))
			w.Stats.SnapshotRows++
		}
		for _, q := range append(stmts, "COMMIT") {
			if err := pgExec(ctx, pg, q); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasBig(t *Table) bool {
	for _, c := range t.Columns {
		if c.Big {
			return true
		}
	}
	return false
}

// fresh returns a key the table never had.
func (s *tableState) fresh() []string {
	n := s.next
	s.next++
	switch s.t.Name {
	case "lines":
		return []string{strconv.Itoa(1 + n/3), strconv.Itoa(1 + n%3)}
	case "accounts":
		// Escapes and Unicode in the key, made unique by the number.
		return []string{pgString([]string{"acct", "Ünï", "o'brien", `back\slash`, "tab\t", "line\nbreak", "😀", " "}[n%8] + "#" + strconv.Itoa(n))}
	case "items", "items_full":
		if n%5 == 0 {
			return []string{strconv.Itoa(-n)}
		}
	}
	return []string{strconv.Itoa(n)}
}

// columns returns the table's columns now (the added one once added).
func (s *tableState) columns() []Column {
	cols := s.t.Columns
	if s.added {
		cols = append(append([]Column(nil), cols...), *s.t.Added)
	}
	return cols
}

func (s *tableState) where(key []string) string {
	parts := make([]string, len(key))
	for i, k := range s.t.Key {
		parts[i] = k + " = " + key[i]
	}
	return strings.Join(parts, " AND ")
}

// insert returns an INSERT of a new row with key; the added column is left
// to its DEFAULT now and then.
func (w *Workload) insert(s *tableState, key []string) string {
	var names, vals []string
	ki := 0
	for _, c := range s.columns() {
		switch {
		case s.t.isKey(c.Name):
			names, vals = append(names, c.Name), append(vals, key[ki])
			ki++
		case s.t.Added != nil && c.Name == s.t.Added.Name && w.g.rnd.IntN(3) == 0:
		default:
			if c.Big {
				w.Stats.BigWrites++
			}
			names, vals = append(names, c.Name), append(vals, w.g.literal(c))
		}
	}
	s.live.add(key)
	s.dead.remove(key)
	w.Stats.Inserts++
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", s.t.Name, strings.Join(names, ", "), strings.Join(vals, ", "))
}

// update returns an UPDATE of one to three columns of key's row; a TOAST
// table's large values are left unchanged five times out of six.
func (w *Workload) update(s *tableState, key []string) string {
	var small, big []Column
	for _, c := range s.columns() {
		switch {
		case s.t.isKey(c.Name):
		case c.Big:
			big = append(big, c)
		default:
			small = append(small, c)
		}
	}
	var sets []string
	perm := w.g.rnd.Perm(len(small))
	for _, i := range perm[:min(len(perm), 1+w.g.rnd.IntN(3))] {
		sets = append(sets, small[i].Name+" = "+w.g.literal(small[i]))
	}
	if len(big) > 0 {
		if w.g.rnd.IntN(6) == 0 {
			c := big[w.g.rnd.IntN(len(big))]
			sets = append(sets, c.Name+" = "+w.g.literal(c))
			w.Stats.BigWrites++
		} else {
			w.Stats.BigKept++
		}
	}
	w.Stats.Updates++
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s", s.t.Name, strings.Join(sets, ", "), s.where(key))
}

func (w *Workload) delete(s *tableState, key []string) string {
	s.live.remove(key)
	s.dead.add(key)
	w.Stats.Deletes++
	return fmt.Sprintf("DELETE FROM %s WHERE %s", s.t.Name, s.where(key))
}

// changeKey moves key's row to a fresh key, now and then changing another
// column in the same statement.
func (w *Workload) changeKey(s *tableState, key []string) string {
	to := s.fresh()
	var sets []string
	for i, k := range s.t.Key {
		if to[i] != key[i] {
			sets = append(sets, k+" = "+to[i])
		}
	}
	if w.g.rnd.IntN(2) == 0 {
		for _, c := range s.columns() {
			if !s.t.isKey(c.Name) && !c.Big {
				sets = append(sets, c.Name+" = "+w.g.literal(c))
				break
			}
		}
	}
	s.live.remove(key)
	s.dead.add(key)
	s.live.add(to)
	w.Stats.KeyChanges++
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s", s.t.Name, strings.Join(sets, ", "), s.where(key))
}

// ops returns the statements of one random operation.
func (w *Workload) ops() []string {
	s := w.st[w.g.rnd.IntN(len(w.st))]
	r := w.g.rnd.IntN(100)
	if len(s.live.keys) == 0 {
		r = 0
	}
	pick := func() []string { return s.live.keys[w.g.rnd.IntN(len(s.live.keys))] }
	switch {
	case r < 25:
		key := s.fresh()
		if len(s.dead.keys) > 0 && w.g.rnd.IntN(3) == 0 {
			key = s.dead.keys[w.g.rnd.IntN(len(s.dead.keys))] // a deleted key again
			w.Stats.Reinserts++
		}
		return []string{w.insert(s, key)}
	case r < 58:
		return []string{w.update(s, pick())}
	case r < 70:
		return []string{w.delete(s, pick())}
	case r < 78 && s.t.KeyChanges:
		return []string{w.changeKey(s, pick())}
	case r < 90:
		// Several changes of one new row in one transaction, sometimes
		// ending in its delete.
		key := s.fresh()
		out := []string{w.insert(s, key), w.update(s, key), w.update(s, key)}
		if w.g.rnd.IntN(3) == 0 {
			out = append(out, w.delete(s, key))
		}
		return out
	default:
		key := pick()
		return []string{w.update(s, key), w.update(s, key)}
	}
}

func (w *Workload) snapshotState() []*tableState {
	out := make([]*tableState, len(w.st))
	for i, s := range w.st {
		out[i] = s.clone()
	}
	return out
}

// Stream runs cfg.Transactions transactions. Halfway it adds the column of
// the table that has one (Hooks.BeforeAddColumn first); at two thirds it
// truncates the table marked Truncated, remembering its rows.
func (w *Workload) Stream(ctx context.Context, pg *pgx.Conn, h Hooks) error {
	addAt, truncAt := w.cfg.Transactions/2, w.cfg.Transactions*2/3
	for i := 1; i <= w.cfg.Transactions; i++ {
		if i == addAt {
			if err := w.addColumns(ctx, pg, h); err != nil {
				return err
			}
		}
		if i == truncAt {
			if err := w.truncate(ctx, pg); err != nil {
				return err
			}
		}
		if err := w.transaction(ctx, pg); err != nil {
			return err
		}
		if h.AfterTransaction != nil {
			if err := h.AfterTransaction(ctx, i); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *Workload) transaction(ctx context.Context, pg *pgx.Conn) error {
	start := w.snapshotState()
	stmts := []string{"BEGIN"}
	for n := 1 + w.g.rnd.IntN(4); n > 0; n-- {
		stmts = append(stmts, w.ops()...)
	}
	if w.g.rnd.IntN(4) == 0 {
		mark := w.snapshotState()
		stmts = append(stmts, "SAVEPOINT sp")
		for n := 1 + w.g.rnd.IntN(3); n > 0; n-- {
			stmts = append(stmts, w.ops()...)
		}
		if w.g.rnd.IntN(2) == 0 {
			stmts = append(stmts, "ROLLBACK TO SAVEPOINT sp")
			w.st = mark
			w.Stats.SavepointsRolledBack++
		} else {
			stmts = append(stmts, "RELEASE SAVEPOINT sp")
		}
		stmts = append(stmts, w.ops()...)
	}
	if w.g.rnd.IntN(8) == 0 {
		stmts = append(stmts, "ROLLBACK")
		w.st = start
		w.Stats.RolledBack++
	} else {
		stmts = append(stmts, "COMMIT")
		w.Stats.Committed++
	}
	for _, q := range stmts {
		if err := pgExec(ctx, pg, q); err != nil {
			_, _ = pg.Exec(ctx, "ROLLBACK")
			return err
		}
	}
	return nil
}

func (w *Workload) addColumns(ctx context.Context, pg *pgx.Conn, h Hooks) error {
	for _, s := range w.st {
		if s.t.Added == nil {
			continue
		}
		if h.BeforeAddColumn != nil {
			if err := h.BeforeAddColumn(ctx, s.t); err != nil {
				return fmt.Errorf("before adding %s.%s: %w", s.t.Name, s.t.Added.Name, err)
			}
		}
		if err := pgExec(ctx, pg, s.t.AddColumnPostgres()); err != nil {
			return err
		}
		s.added = true
	}
	return nil
}

// truncate reads the rows of each table marked Truncated and truncates it;
// afterwards the workload only uses keys the table never had.
func (w *Workload) truncate(ctx context.Context, pg *pgx.Conn) error {
	for _, s := range w.st {
		if !s.t.Truncated {
			continue
		}
		tx, err := pg.Begin(ctx)
		if err != nil {
			return err
		}
		rows, err := func() (map[string]row, error) {
			if err := setReadSession(ctx, tx); err != nil {
				return nil, err
			}
			cols, err := liveColumns(ctx, tx, s.t)
			if err != nil {
				return nil, err
			}
			return readPostgres(ctx, tx, s.t, cols)
		}()
		if err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		if _, err := tx.Exec(ctx, "TRUNCATE "+s.t.Name); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("postgres: TRUNCATE %s: %w", s.t.Name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		w.truncated[s.t.Name] = rows
		w.Stats.Truncated += len(rows)
		s.live, s.dead = newKeySet(), newKeySet()
	}
	return nil
}
