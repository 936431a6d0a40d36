package tables

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/backoff"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
)

// Schema drift and evolution. Every plan counts the record fields no column
// takes (decode.Plan.TakeUnmapped); when a batch of a table is sealed the
// owner moves the counts into sink_unmapped_fields_total{table,field} and
// logs each field's first sighting once, with an example value. The
// records' producers choose the names, so what is kept of them is bounded
// (decode's drift.go does the same per plan): at most
// decode.MaxUnmappedFields fields per table are tracked by name among the
// names the routes' schema.allow / schema.deny accept, as many among those
// they refuse (which so never take the slot of a field evolution may add),
// and a name past decode.MaxFieldName bytes, not UTF-8 or with control
// characters is never stored, logged or used as a label. A field no sealed
// batch has carried for DriftIdle frees its slot (and its metric series)
// when a new field needs one. The rest are counted as
// decode.OverflowField, so the metric's label values stay bounded
// whatever the records carry.
//
// No value of such a field is lost while the table gets a column for it.
// Each record is looked at as it is appended (decode.Plan.LastUnmapped
// names its unmapped fields; a record without any costs one length
// check). For a field the table may get a column for, the row is taken
// back at once (decode.Plan.Unappend) and the record is held with the
// rest of its partition (WaitFor answers a *Wait; the pipeline's intake
// holds it), before anything else — tracker,
// exactly-once row order, batch triggers — has seen it:
//
//   - A route with schema.evolve: add_columns starts an ALTER TABLE … ADD
//     COLUMN (writer.AddColumn, the type inferred from the field's values
//     in that record and in the held records, or taken from the record's
//     schema) and then re-reads the table, on a goroutine of its own. The
//     result comes back as a Result and is applied like any other change
//     of the table (apply: the open batches, which hold no record
//     carrying the field, are sealed with the old columns, and the routes
//     recompiled); then the held records are appended again, with the new
//     column. Records of other partitions that carry the field meanwhile
//     wait the same way.
//   - Any route (and one whose ALTER was refused) re-reads the table before
//     it appends the first record carrying a field no column takes: the
//     usual order of a change is "ALTER TABLE, then deploy the producer",
//     and a person's column is then filled from its first record on. This
//     happens at most once per field per clickhouse.schema_refresh (once
//     per field when the refresh is off).
//
// So the question of re-decoding or rebuilding a batch never comes up: a
// record carrying the field is never in an open batch while its column
// is on its way. The held records are raw Kafka records (no decoded copy),
// counted in batch.buffer_memory, and no fetch is requested while any are
// held, so memory stays bounded: a wait pauses fetching like a full
// buffer. In exactly-once mode a batch holds exactly the rows it would
// have held had the column existed all along, so a replay, which decodes
// its ranges again with the table as it is then, rebuilds it identically.
//
// An ALTER that is refused lets the records go on without the field (its
// values are counted in sink_unmapped_fields_total and the reason is
// logged once): the field is excluded by schema.allow / schema.deny, its
// type cannot be inferred yet (all nulls or empty arrays so far), the
// route's schema.max_new_columns_per_hour is reached (tried again when the
// hour has room), or the server refused the ALTER (a permission error or
// any other permanent error: not tried again until a restart). An ALTER
// that fails on the way (a timeout, the network) is retried, its records
// held, up to evolveAttempts times with the held records' backoff; then it
// counts as refused. Nothing is held forever.

// alterRetry paces the ALTERs of a field that failed on the way: as the
// held records waiting for it are tried again, doubling from 0.2 s up to
// 10 s.
var alterRetry = backoff.Policy{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Jitter: backoff.EqualJitter}

// evolveAttempts bounds the ALTERs (and re-reads after one) tried for a
// field whose ALTER fails with a passing error, before its records go on
// without it.
const evolveAttempts = 5

// DriftIdle is how long a field that no sealed batch of its table carried
// keeps its slot once a new field needs one: far longer than a batch's
// max_wait, so that a field of every few batches keeps its state (logged,
// its ALTER refused) and its metric series.
const DriftIdle = 10 * time.Minute

// driftState is one table's record of unmapped fields (owner goroutine only).
type driftState struct {
	fields map[string]*fieldDrift
	// tracked counts the fields per kind (accepted by the routes'
	// policy, refused: slotKind); scanAt[kind] is when a full kind may
	// next have a field to free (freeSlot).
	tracked  [2]int
	scanAt   [2]time.Time
	overflow bool // the overflow has been logged
	// epoch changes whenever a field may have started to make records
	// wait (an ALTER or a re-read begun, a retry set, the table changed):
	// a route's settledFields of another epoch is stale.
	epoch uint64
}

// settledFields is what schemaWaitFor found last for a route's records:
// with the same unmapped fields (the same *UnmappedField of the same
// plan, as the steady state of a producer with fields no column takes
// hands them out), before until and in the same epoch, a record has
// nothing to wait for, without a look up per field.
type settledFields struct {
	fields []*decode.UnmappedField
	until  time.Time
	epoch  uint64
}

// holds reports whether a record with unmapped fields fields, seen at
// now, is known to have nothing to wait for.
func (s *settledFields) holds(now time.Time, epoch uint64, fields []*decode.UnmappedField) bool {
	if s.epoch != epoch || len(s.fields) != len(fields) || !now.Before(s.until) {
		return false
	}
	for i, u := range fields {
		if s.fields[i] != u {
			return false
		}
	}
	return true
}

// fieldDrift is what the owner knows of one unmapped field of a table.
type fieldDrift struct {
	logged   bool // first sighting logged
	evolving bool // an ALTER for it is queued or running: its records wait
	failed   bool // the ALTER was refused: its records go on without it until a restart
	counted  bool // an ALTER for it was counted against the hourly cap (a retry is not counted again)
	attempts int  // ALTERs (or the re-read after one) that failed with a passing error
	// retryAt: after a passing failure its records wait until then.
	retryAt time.Time
	// column: the table has a column of that name (that the routes do
	// not fill from it); known says column is up to date (reset when the
	// table changes).
	column, known bool
	// rereading: a re-read of the table was started for it and its
	// records wait for the result; rereadAt is when the last one started.
	rereading bool
	rereadAt  time.Time
	said      int // the last reason (why*) it was not added, logged once each
	// refused: its route's policy refuses the name
	// (decode.UnmappedField.Refused); seen: when a sealed batch last
	// carried it (or it was made). They decide its slot (freeSlot).
	refused bool
	seen    time.Time
}

// Reasons a field is not (yet) added, logged once per field and reason.
const (
	whyNone = iota
	whyDenied
	whyUnknown
	whyCap
)

// forever is a time no clock reaches.
var forever = time.Unix(1<<62, 0)

// Evolution is the fields no column takes, per table (counted, logged,
// waited for while the table is re-read), and the columns added for them
// (schema.evolve: add_columns). Owned by the owner goroutine, like the
// catalog whose tables it follows.
type Evolution struct {
	c *Catalog
	// adder adds the columns; nil when no route adds columns (the fields
	// are then counted and logged, and a table is re-read for them).
	adder  ColumnAdder
	info   chschema.ServerInfo
	types  chschema.ServerTypes
	recent map[string][]time.Time // per route (routeKey): when this process added columns
	// queue is the ALTERs decided while records were decoded, started by
	// LaunchAlters once the records are held (their values refine the
	// inferred type).
	queue []evolveStart
}

// evolveStart is an ALTER decided and not yet started.
type evolveStart struct {
	rs  *Route
	u   decode.UnmappedField // the field as its first record left it
	typ string
}

// evolveResult is the end of one ADD COLUMN, reported to the owner.
type evolveResult struct {
	rs         *Route
	field, typ string
	ddl        string
	added      bool
	err        error
}

// Wait is why a record is held for its table: a column is being added for
// Field, or the table is being re-read (Reread) because a person may have
// added one.
type Wait struct {
	Table, Field string
	Reread       bool
}

func (w *Wait) Error() string {
	if w.Reread {
		return fmt.Sprintf("table %s is being re-read: the record carries field %q that no column takes yet", w.Table, w.Field)
	}
	return fmt.Sprintf("a column for field %q is being added to table %s", w.Field, w.Table)
}

// open probes the server when some route adds columns: the inferred
// types depend on what it has (Bool, DateTime64, JSON).
func (e *Evolution) open(ctx context.Context) error {
	if !slices.ContainsFunc(e.c.cfg.Routes, func(r config.Route) bool { return r.Schema.AddsColumns() }) {
		return nil
	}
	adder, ok := e.c.sink.(ColumnAdder)
	if !ok {
		return errors.New("schema.evolve add_columns needs a sink that can run ALTER TABLE")
	}
	info, err := adder.Features(ctx)
	if err != nil {
		return err
	}
	e.adder, e.info, e.types, e.recent = adder, info, info.EvolveTypes(), map[string][]time.Time{}
	return nil
}

// routeKey names a route for the per-route cap: its topic (or regex) and
// table, which Validate makes unique per route.
func routeKey(r config.Route) string { return r.Topic + "\x00" + r.TopicRegex + "\x00" + r.Table }

// FlushDrift moves the unmapped-field counts of ts's plans into the
// metrics and the log; called when a batch of ts is sealed. (ALTERs and
// re-reads are decided per record, by WaitFor.)
func (e *Evolution) FlushDrift(ts *Table) {
	e.c.eachRouteInto(ts, func(rs *Route) {
		rs.plan.TakeUnmapped(func(u *decode.UnmappedField) { e.unmapped(ts, u) },
			func(n uint64) { e.unmappedOverflow(ts, n) })
	})
}

func hasColumn(cols []chschema.ColumnSchema, name string) bool {
	return slices.ContainsFunc(cols, func(c chschema.ColumnSchema) bool { return c.Name == name })
}

func (e *Evolution) driftOf(ts *Table) *driftState {
	if ts.drift == nil {
		ts.drift = &driftState{fields: map[string]*fieldDrift{}}
	}
	return ts.drift
}

// slotKind indexes driftState.tracked by whether a field's name is refused.
func slotKind(refused bool) int {
	if refused {
		return 1
	}
	return 0
}

// fieldOf is ts's record of field u, made on first sight; nil when its
// kind has decode.MaxUnmappedFields fields and none is free (freeSlot):
// such a field is only counted, as overflow.
func (e *Evolution) fieldOf(ts *Table, u *decode.UnmappedField) *fieldDrift {
	d := e.driftOf(ts)
	if fd := d.fields[u.Name]; fd != nil {
		return fd
	}
	c := slotKind(u.Refused)
	if d.tracked[c] >= decode.MaxUnmappedFields && !e.freeSlot(ts, c) {
		return nil
	}
	fd := &fieldDrift{refused: u.Refused, seen: e.c.now()}
	d.fields[u.Name] = fd
	d.tracked[c]++
	return fd
}

// freeSlot forgets one field of kind c of ts that no sealed batch has
// carried for DriftIdle and that nothing waits for (no ALTER or re-read
// under way, no retry pending), with its metric series; it reports
// whether it found one.
func (e *Evolution) freeSlot(ts *Table, c int) bool {
	d, now := ts.drift, e.c.now()
	if now.Before(d.scanAt[c]) {
		return false
	}
	next := forever
	for name, fd := range d.fields {
		if slotKind(fd.refused) != c {
			continue
		}
		idle := fd.seen.Add(DriftIdle)
		busy := fd.evolving || fd.rereading || now.Before(fd.retryAt)
		if !busy && !now.Before(idle) {
			delete(d.fields, name)
			d.tracked[c]--
			d.epoch++ // a route's settledFields may name it
			ts.m.ForgetUnmapped(name)
			return true
		}
		if busy {
			idle = now.Add(time.Second) // look again once it may be done
		}
		next = minTime(next, idle)
	}
	d.scanAt[c] = next
	return false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// unmapped handles one field's count from one plan of ts.
func (e *Evolution) unmapped(ts *Table, u *decode.UnmappedField) {
	fd := e.fieldOf(ts, u)
	if fd == nil {
		e.unmappedOverflow(ts, u.Count)
		return
	}
	fd.seen = e.c.now()
	ts.m.Unmapped(u.Name, u.Count)
	if !fd.logged {
		fd.logged = true
		e.c.log.Warn().Str("table", ts.t.FullName()).Str("field", u.Name).Str("example", u.Example).Str("inferred", u.TypeName()).
			Uint64("records", u.Count).Msg("records carry a field that no column takes (counted in " + "sink_unmapped_fields_total; logged once)")
	}
}

func (e *Evolution) unmappedOverflow(ts *Table, n uint64) {
	d := e.driftOf(ts)
	ts.m.Unmapped(decode.OverflowField, n)
	if !d.overflow {
		d.overflow = true
		e.c.log.Warn().Str("table", ts.t.FullName()).Int("tracked", decode.MaxUnmappedFields).
			Msg("more fields without a column than are tracked by name; the rest are counted as field=\"" + decode.OverflowField + "\" (logged once)")
	}
}

// WaitFor decides about the record rs's plan just appended, whose
// unmapped fields are fields: a *Wait when it must be held (a
// column for one of them is on its way, or the table is being re-read for
// one), else nil (append it as it is). It starts what the record waits for.
func (e *Evolution) WaitFor(ctx context.Context, now time.Time, rs *Route, fields []*decode.UnmappedField) error {
	d := e.driftOf(rs.table)
	if rs.settled.holds(now, d.epoch, fields) {
		return nil
	}
	var wait error
	until := forever // when the answer "nothing to wait for" may change
	for _, u := range fields {
		if u == nil {
			continue // beyond MaxUnmappedFields: only counted
		}
		fd := e.fieldOf(rs.table, u)
		if fd == nil {
			continue
		}
		w, again := e.fieldWait(ctx, now, rs, u, fd)
		if w != nil && wait == nil {
			wait = w
		}
		if again.Before(until) {
			until = again
		}
	}
	if wait == nil && until.After(now) {
		rs.settled = settledFields{fields: append(rs.settled.fields[:0], fields...), until: until, epoch: d.epoch}
	}
	return wait
}

// fieldWait is WaitFor for one field of a record of rs: the wait, or
// nil and until when that answer holds for rs's records (zero: the next
// record must look again).
func (e *Evolution) fieldWait(ctx context.Context, now time.Time, rs *Route, u *decode.UnmappedField, fd *fieldDrift) (_ error, until time.Time) {
	ts := rs.table
	switch {
	case fd.evolving || now.Before(fd.retryAt):
		return &Wait{Table: ts.name, Field: u.Name}, time.Time{}
	case fd.rereading:
		return &Wait{Table: ts.name, Field: u.Name, Reread: true}, time.Time{}
	case e.c.own.Stopping():
		return nil, time.Time{}
	}
	if !fd.known {
		fd.column, fd.known = hasColumn(ts.t.Schema, u.Name), true
	}
	if fd.column {
		// A column of that name exists that the route does not fill from
		// it (DEFAULT, MATERIALIZED, ALIAS, or mapped from elsewhere).
		return nil, forever
	}
	until = forever
	if rs.cfg.Schema.AddsColumns() && e.adder != nil && !fd.failed {
		retry, queued := e.evolve(rs, u, fd)
		if queued {
			ts.drift.epoch++
			return &Wait{Table: ts.name, Field: u.Name}, time.Time{}
		}
		until = retry
	}
	return e.reread(ctx, now, ts, u, fd, until)
}

// reread is fieldWait for a field this route does not add: a person may
// have added a column for it since the table was read last, so the table
// is read again, at most once per schema_refresh, and the record waits for
// it; otherwise nil, and until when that answer holds (until at the
// latest).
func (e *Evolution) reread(ctx context.Context, now time.Time, ts *Table, u *decode.UnmappedField, fd *fieldDrift, until time.Time) (error, time.Time) {
	refresh := e.c.cfg.ClickHouse.SchemaRefresh
	if fd.rereadAt.IsZero() || (refresh > 0 && now.Sub(fd.rereadAt) >= refresh) {
		fd.rereadAt, fd.rereading = now, true
		ts.drift.epoch++
		e.c.describe(ctx, ts)
		return &Wait{Table: ts.name, Field: u.Name, Reread: true}, time.Time{}
	}
	if next := fd.rereadAt.Add(refresh); refresh > 0 && next.Before(until) {
		until = next
	}
	return nil, until
}

// evolve decides an ALTER adding u as a column of rs's table when the
// route allows it, its type is known and the hourly cap has room, and
// queues it (launchEvolves starts it): queued. Otherwise retry is when
// to look again: forever (excluded), at the next record (zero) for a type
// not known yet, or when the cap has room. It is asked again on each
// record whose route has not settled the field (settledFields), so that
// routes with other lists or caps into one table decide for themselves.
func (e *Evolution) evolve(rs *Route, u *decode.UnmappedField, fd *fieldDrift) (retry time.Time, queued bool) {
	ts := rs.table
	say := func(why int, msg string) {
		if fd.said != why {
			fd.said = why
			e.c.log.Info().Str("table", ts.t.FullName()).Str("field", u.Name).Msg(msg)
		}
	}
	sch := rs.cfg.Schema
	if !sch.Permits(u.Name) {
		say(whyDenied, "field not added as a column: schema.allow / schema.deny exclude it; its records go on without it")
		return forever, false
	}
	typ, err := u.Column(e.types, sch.Nullable)
	if err != nil {
		say(whyUnknown, "field not added as a column yet: "+err.Error()+"; its records go on without it until a value tells its type")
		return time.Time{}, false
	}
	if !fd.counted {
		key := routeKey(rs.cfg)
		now := e.c.now()
		recent := slices.DeleteFunc(e.recent[key], func(t time.Time) bool { return now.Sub(t) >= time.Hour })
		e.recent[key] = recent
		if len(recent) >= sch.MaxNewColumnsPerHour {
			say(whyCap, fmt.Sprintf("field not added as a column yet: schema.max_new_columns_per_hour (%d) reached; its records go on without it, and it is tried again when the hour has room", sch.MaxNewColumnsPerHour))
			return recent[0].Add(time.Hour), false
		}
		e.recent[key] = append(recent, now)
		fd.counted = true
	}
	fd.evolving = true
	e.queue = append(e.queue, evolveStart{rs: rs, u: *u, typ: typ})
	return time.Time{}, true
}

// LaunchAlters starts the queued ALTERs, each on its own goroutine, once
// the records that asked for them are held: a field typed by its values
// gets the type of those values in the held records of its table too (up
// to evolveSample records; held yields those waiting for a table), not of
// one record alone.
func (e *Evolution) LaunchAlters(held func(table string) iter.Seq[*kgo.Record]) {
	if e.adder == nil || len(e.queue) == 0 {
		return
	}
	for _, s := range e.queue {
		typ := s.typ
		if s.u.Schema == nil {
			if t, ok := e.sampleType(s, held(s.rs.table.name)); ok {
				typ = t
			}
		}
		e.startAlter(s.rs, s.u.Name, e.withDefault(s.rs.table, &s.u, typ))
	}
	clear(e.queue)
	e.queue = e.queue[:0]
}

// withDefault is typ with the DEFAULT clause of the default u's schema
// declares (the source column's default), so that the rows written before
// the column existed, and those the source never sends again, read it; typ
// alone when u declares none or one that cannot be written exactly for
// typ (logged).
func (e *Evolution) withDefault(ts *Table, u *decode.UnmappedField, typ string) string {
	withDefault, err := columnType(u, typ)
	if err != nil {
		e.c.log.Warn().Str("table", ts.t.FullName()).Str("field", u.Name).Str("type", typ).Str("default", u.Default.JSON).Err(err).
			Msg("the field's schema declares a default that the new column cannot carry exactly: the column is added without it (rows without the field read the type's zero)")
	}
	return withDefault
}

// columnType is typ, with the DEFAULT clause of the default u's schema
// declares when it can be written exactly for typ (decode.FieldDefault.Literal);
// otherwise typ alone and the reason the declared default is left out.
func columnType(u *decode.UnmappedField, typ string) (string, error) {
	if u.Default == nil {
		return typ, nil
	}
	lit, err := u.Default.Literal(typ)
	if err != nil {
		return typ, err
	}
	return typ + " DEFAULT " + lit, nil
}

// evolveSample bounds the held records LaunchAlters infers a type from.
const evolveSample = 1000

// sampleType infers s's field's type from held, the held records that
// wait for its table, decoded with a plan of their own (into a block
// thrown away), merged with the type its first record gave.
func (e *Evolution) sampleType(s evolveStart, held iter.Seq[*kgo.Record]) (string, bool) {
	ts := s.rs.table
	plan, err := e.c.Compile(s.rs.cfg, ts.t.Insert)
	if err != nil {
		return "", false
	}
	blk := plan.NewBlock()
	n := 0
	for r := range held {
		if n >= evolveSample {
			break
		}
		n++
		_ = plan.Append(blk, r) // a record that fails here is handled when it is appended for real
	}
	ft := s.u.Type
	plan.TakeUnmapped(func(u *decode.UnmappedField) {
		if u.Name == s.u.Name && u.Schema == nil {
			ft = decode.MergeFieldTypes(ft, u.Type)
		}
	}, nil)
	typ, err := ft.Column(e.types, s.rs.cfg.Schema.Nullable)
	return typ, err == nil
}

// startAlter runs the ALTER adding field as a column of type typ to rs's
// table, then re-reads the table; the result comes back as a Result.
func (e *Evolution) startAlter(rs *Route, field, typ string) {
	ts := rs.table
	db, name, cluster := ts.t.Database, ts.t.Name, e.c.cfg.ClickHouse.Cluster
	timeout := e.c.cfg.ClickHouse.QueryTimeout
	r := &evolveResult{rs: rs, field: field, typ: typ}
	e.c.own.Spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r.ddl, r.added, r.err = e.adder.AddColumn(ctx, e.info, db, name, cluster, r.field, r.typ)
		var cols []chschema.ColumnSchema
		var derr error
		if r.err == nil {
			cols, derr = e.c.sink.Describe(ctx, db, name)
		}
		e.c.own.Described(Result{ts: ts, cols: cols, err: derr, evolve: r})
	})
}

// evolved applies the end of an ADD COLUMN on the owner goroutine; the
// records that waited for it go on (the caller tries them again).
func (e *Evolution) evolved(writeCtx context.Context, r Result) error {
	ev := r.evolve
	fd := e.driftOf(r.ts).fields[ev.field]
	if fd == nil {
		fd = &fieldDrift{} // not reached: the field was recorded when its ALTER was decided
	}
	fd.evolving = false
	table := r.ts.t.FullName()
	failed := ev.err
	if failed == nil {
		failed = r.err
	}
	if failed != nil && chtable.Classify(nil, failed) == chtable.Retriable && fd.attempts+1 < evolveAttempts {
		fd.attempts++
		fd.retryAt = e.c.now().Add(alterRetry.Wait(fd.attempts))
		e.driftOf(r.ts).epoch++
		e.c.log.Warn().Err(failed).Str("table", table).Str("field", ev.field).Str("type", ev.typ).Int("attempt", fd.attempts).
			Msg("adding a column for a new field (or re-reading the table after it) failed on the way; its records stay held and it is tried again")
		return nil
	}
	switch {
	case ev.err != nil:
		fd.failed = true
		e.c.log.Error().Err(ev.err).Str("table", table).Str("field", ev.field).Str("type", ev.typ).
			Msg("adding a column for a new field failed; its records go on without it (counted in sink_unmapped_fields_total; not tried again until a restart)")
		return nil
	case r.err != nil:
		fd.failed = true
		e.c.log.Error().Err(r.err).Str("table", table).Str("field", ev.field).
			Msg("re-reading the table after adding a column failed; its records go on without the field until the next schema refresh finds the column")
		return nil
	case ev.added:
		e.c.log.Info().Str("table", table).Str("field", ev.field).Str("type", ev.typ).Str("ddl", ev.ddl).
			Msg("column added for a new field: the records that carry it fill it")
	default:
		e.c.log.Info().Str("table", table).Str("field", ev.field).
			Msg("column for a new field already exists (another instance or a person added it): the records that carry it fill it")
	}
	fd.attempts = 0
	return e.c.apply(writeCtx, r.ts, r.cols)
}
