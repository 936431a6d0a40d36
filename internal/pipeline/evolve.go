package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
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
// batch has carried for driftIdle frees its slot (and its metric series)
// when a new field needs one. The rest are counted as
// decode.OverflowField, so the metric's label values stay bounded
// whatever the records carry.
//
// No value of such a field is lost while the table gets a column for it.
// Each record is looked at as it is appended (decode.Plan.LastUnmapped
// names its unmapped fields; a record without any costs one length
// check). For a field the table may get a column for, the row is taken
// back at once (decode.Plan.Unappend) and the record is held with the
// rest of its partition (held.go), before anything else — tracker,
// exactly-once row order, batch triggers — has seen it:
//
//   - A route with schema.evolve: add_columns starts an ALTER TABLE … ADD
//     COLUMN (writer.AddColumn, the type inferred from the field's values
//     in that record and in the held records, or taken from the record's
//     schema) and then re-reads the table, on a goroutine of its own. The
//     result comes back on p.schemas and is applied like any other change
//     of the table (applySchema: the open batches, which hold no record
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

// evolveAttempts bounds the ALTERs (and re-reads after one) tried for a
// field whose ALTER fails with a passing error, before its records go on
// without it.
const evolveAttempts = 5

// driftIdle is how long a field that no sealed batch of its table carried
// keeps its slot once a new field needs one: far longer than a batch's
// max_wait, so that a field of every few batches keeps its state (logged,
// its ALTER refused) and its metric series.
const driftIdle = 10 * time.Minute

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

// evolver is the state of schema evolution, nil when no route adds columns.
type evolver struct {
	adder  columnAdder
	info   chschema.ServerInfo
	types  chschema.ServerTypes
	recent map[string][]time.Time // per route (routeKey): when this process added columns
	// queue is the ALTERs decided while records were decoded, started by
	// launchEvolves once the records are held (their values refine the
	// inferred type).
	queue []evolveStart
}

// evolveStart is an ALTER decided and not yet started.
type evolveStart struct {
	rs  *routeState
	u   decode.UnmappedField // the field as its first record left it
	typ string
}

// evolveResult is the end of one ADD COLUMN, reported to the owner.
type evolveResult struct {
	rs         *routeState
	field, typ string
	ddl        string
	added      bool
	err        error
}

// schemaWait is why a record is held for its table (held.go): a column is
// being added for field, or the table is being re-read (reread) because
// a person may have added one.
type schemaWait struct {
	table, field string
	reread       bool
}

func (w *schemaWait) Error() string {
	if w.reread {
		return fmt.Sprintf("table %s is being re-read: the record carries field %q that no column takes yet", w.table, w.field)
	}
	return fmt.Sprintf("a column for field %q is being added to table %s", w.field, w.table)
}

// initEvolve probes the server when some route adds columns: the inferred
// types depend on what it has (Bool, DateTime64, JSON).
func (p *Pipeline) initEvolve(ctx context.Context) error {
	if !slices.ContainsFunc(p.cfg.Routes, func(r config.Route) bool { return r.Schema.AddsColumns() }) {
		return nil
	}
	adder, ok := p.w.(columnAdder)
	if !ok {
		return errors.New("schema.evolve add_columns needs a sink that can run ALTER TABLE")
	}
	info, err := adder.Features(ctx)
	if err != nil {
		return err
	}
	p.evo = &evolver{adder: adder, info: info, types: info.EvolveTypes(), recent: map[string][]time.Time{}}
	return nil
}

// routeKey names a route for the per-route cap: its topic (or regex) and
// table, which Validate makes unique per route.
func routeKey(r config.Route) string { return r.Topic + "\x00" + r.TopicRegex + "\x00" + r.Table }

// flushDrift moves the unmapped-field counts of ts's plans into the
// metrics and the log; called when a batch of ts is sealed. (ALTERs and
// re-reads are decided per record, by schemaWaitFor.)
func (p *Pipeline) flushDrift(_ context.Context, ts *tableState) {
	for _, rs := range p.rt.allRoutes() {
		if rs.table != ts {
			continue
		}
		rs.plan.TakeUnmapped(func(u *decode.UnmappedField) { p.unmapped(ts, u) },
			func(n uint64) { p.unmappedOverflow(ts, n) })
	}
}

func hasColumn(cols []chschema.ColumnSchema, name string) bool {
	return slices.ContainsFunc(cols, func(c chschema.ColumnSchema) bool { return c.Name == name })
}

func (p *Pipeline) driftOf(ts *tableState) *driftState {
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
func (p *Pipeline) fieldOf(ts *tableState, u *decode.UnmappedField) *fieldDrift {
	d := p.driftOf(ts)
	if fd := d.fields[u.Name]; fd != nil {
		return fd
	}
	c := slotKind(u.Refused)
	if d.tracked[c] >= decode.MaxUnmappedFields && !p.freeSlot(ts, c) {
		return nil
	}
	fd := &fieldDrift{refused: u.Refused, seen: p.now()}
	d.fields[u.Name] = fd
	d.tracked[c]++
	return fd
}

// freeSlot forgets one field of kind c of ts that no sealed batch has
// carried for driftIdle and that nothing waits for (no ALTER or re-read
// under way, no retry pending), with its metric series; it reports
// whether it found one.
func (p *Pipeline) freeSlot(ts *tableState, c int) bool {
	d, now := ts.drift, p.now()
	if now.Before(d.scanAt[c]) {
		return false
	}
	next := forever
	for name, fd := range d.fields {
		if slotKind(fd.refused) != c {
			continue
		}
		idle := fd.seen.Add(driftIdle)
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
func (p *Pipeline) unmapped(ts *tableState, u *decode.UnmappedField) {
	fd := p.fieldOf(ts, u)
	if fd == nil {
		p.unmappedOverflow(ts, u.Count)
		return
	}
	fd.seen = p.now()
	ts.m.Unmapped(u.Name, u.Count)
	if !fd.logged {
		fd.logged = true
		p.log.Warn().Str("table", ts.t.FullName()).Str("field", u.Name).Str("example", u.Example).Str("inferred", u.TypeName()).
			Uint64("records", u.Count).Msg("records carry a field that no column takes (counted in " + "sink_unmapped_fields_total; logged once)")
	}
}

func (p *Pipeline) unmappedOverflow(ts *tableState, n uint64) {
	d := p.driftOf(ts)
	ts.m.Unmapped(decode.OverflowField, n)
	if !d.overflow {
		d.overflow = true
		p.log.Warn().Str("table", ts.t.FullName()).Int("tracked", decode.MaxUnmappedFields).
			Msg("more fields without a column than are tracked by name; the rest are counted as field=\"" + decode.OverflowField + "\" (logged once)")
	}
}

// schemaWaitFor decides about the record rs.plan just appended, whose
// unmapped fields are fields: a *schemaWait when it must be held (a
// column for one of them is on its way, or the table is being re-read for
// one), else nil (append it as it is). It starts what the record waits for.
func (p *Pipeline) schemaWaitFor(ctx context.Context, now time.Time, rs *routeState, fields []*decode.UnmappedField) error {
	d := p.driftOf(rs.table)
	if rs.settled.holds(now, d.epoch, fields) {
		return nil
	}
	var wait error
	until := forever // when the answer "nothing to wait for" may change
	for _, u := range fields {
		if u == nil {
			continue // beyond MaxUnmappedFields: only counted
		}
		fd := p.fieldOf(rs.table, u)
		if fd == nil {
			continue
		}
		w, again := p.fieldWait(ctx, now, rs, u, fd)
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

// fieldWait is schemaWaitFor for one field of a record of rs: the wait, or
// nil and until when that answer holds for rs's records (zero: the next
// record must look again).
func (p *Pipeline) fieldWait(ctx context.Context, now time.Time, rs *routeState, u *decode.UnmappedField, fd *fieldDrift) (_ error, until time.Time) {
	ts := rs.table
	switch {
	case fd.evolving || now.Before(fd.retryAt):
		return &schemaWait{table: ts.t.FullName(), field: u.Name}, time.Time{}
	case fd.rereading:
		return &schemaWait{table: ts.t.FullName(), field: u.Name, reread: true}, time.Time{}
	case p.fatal != nil:
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
	if rs.route.Schema.AddsColumns() && p.evo != nil && !fd.failed {
		retry, queued := p.evolve(rs, u, fd)
		if queued {
			ts.drift.epoch++
			return &schemaWait{table: ts.t.FullName(), field: u.Name}, time.Time{}
		}
		until = retry
	}
	// Not added by this route: a person may have added it since the table
	// was read last. Re-read it, at most once per schema_refresh.
	refresh := p.cfg.ClickHouse.SchemaRefresh
	if fd.rereadAt.IsZero() || (refresh > 0 && now.Sub(fd.rereadAt) >= refresh) {
		fd.rereadAt, fd.rereading = now, true
		ts.drift.epoch++
		p.describeTable(ctx, ts)
		return &schemaWait{table: ts.t.FullName(), field: u.Name, reread: true}, time.Time{}
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
func (p *Pipeline) evolve(rs *routeState, u *decode.UnmappedField, fd *fieldDrift) (retry time.Time, queued bool) {
	ts := rs.table
	say := func(why int, msg string) {
		if fd.said != why {
			fd.said = why
			p.log.Info().Str("table", ts.t.FullName()).Str("field", u.Name).Msg(msg)
		}
	}
	sch := rs.route.Schema
	if !sch.Permits(u.Name) {
		say(whyDenied, "field not added as a column: schema.allow / schema.deny exclude it; its records go on without it")
		return forever, false
	}
	typ, err := u.Column(p.evo.types, sch.Nullable)
	if err != nil {
		say(whyUnknown, "field not added as a column yet: "+err.Error()+"; its records go on without it until a value tells its type")
		return time.Time{}, false
	}
	if !fd.counted {
		key := routeKey(rs.route)
		now := p.now()
		recent := slices.DeleteFunc(p.evo.recent[key], func(t time.Time) bool { return now.Sub(t) >= time.Hour })
		p.evo.recent[key] = recent
		if len(recent) >= sch.MaxNewColumnsPerHour {
			say(whyCap, fmt.Sprintf("field not added as a column yet: schema.max_new_columns_per_hour (%d) reached; its records go on without it, and it is tried again when the hour has room", sch.MaxNewColumnsPerHour))
			return recent[0].Add(time.Hour), false
		}
		p.evo.recent[key] = append(recent, now)
		fd.counted = true
	}
	fd.evolving = true
	p.evo.queue = append(p.evo.queue, evolveStart{rs: rs, u: *u, typ: typ})
	return time.Time{}, true
}

// launchEvolves starts the queued ALTERs, each on its own goroutine, once
// the records that asked for them are held: a field typed by its values
// gets the type of those values in the held records of its table too (up
// to evolveSample records), not of one record alone.
func (p *Pipeline) launchEvolves() {
	if p.evo == nil || len(p.evo.queue) == 0 {
		return
	}
	for _, s := range p.evo.queue {
		typ := s.typ
		if s.u.Schema == nil {
			if t, ok := p.sampleType(s); ok {
				typ = t
			}
		}
		p.startAlter(s.rs, s.u.Name, p.withDefault(s.rs.table, &s.u, typ))
	}
	clear(p.evo.queue)
	p.evo.queue = p.evo.queue[:0]
}

// withDefault is typ with the DEFAULT clause of the default u's schema
// declares (the source column's default), so that the rows written before
// the column existed, and those the source never sends again, read it; typ
// alone when u declares none or one that cannot be written exactly for
// typ (logged).
func (p *Pipeline) withDefault(ts *tableState, u *decode.UnmappedField, typ string) string {
	withDefault, err := columnType(u, typ)
	if err != nil {
		p.log.Warn().Str("table", ts.t.FullName()).Str("field", u.Name).Str("type", typ).Str("default", u.Default.JSON).Err(err).
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

// evolveSample bounds the held records launchEvolves infers a type from.
const evolveSample = 1000

// sampleType infers s's field's type from the held records that wait for
// its table, decoded with a plan of their own (into a block thrown away),
// merged with the type its first record gave.
func (p *Pipeline) sampleType(s evolveStart) (string, bool) {
	ts := s.rs.table
	plan, err := p.compile(s.rs.route, ts.t.Insert)
	if err != nil {
		return "", false
	}
	blk := plan.NewBlock()
	n := 0
	for r := range p.held.waitingFor(ts.t.FullName()) {
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
	typ, err := ft.Column(p.evo.types, s.rs.route.Schema.Nullable)
	return typ, err == nil
}

// startAlter runs the ALTER adding field as a column of type typ to rs's
// table, then re-reads the table; the result comes back on p.schemas.
func (p *Pipeline) startAlter(rs *routeState, field, typ string) {
	ts := rs.table
	db, name, cluster := ts.t.Database, ts.t.Name, p.cfg.ClickHouse.Cluster
	timeout := p.cfg.ClickHouse.QueryTimeout
	r := &evolveResult{rs: rs, field: field, typ: typ}
	p.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r.ddl, r.added, r.err = p.evo.adder.AddColumn(ctx, p.evo.info, db, name, cluster, r.field, r.typ)
		var cols []chschema.ColumnSchema
		var derr error
		if r.err == nil {
			cols, derr = p.w.Describe(ctx, db, name)
		}
		p.sendSchema(schemaResult{ts: ts, cols: cols, err: derr, evolve: r})
	})
}

// evolved applies the end of an ADD COLUMN on the owner goroutine, and
// lets the records that waited for it go on.
func (p *Pipeline) evolved(writeCtx context.Context, r schemaResult) {
	defer p.kickHeld()
	e := r.evolve
	fd := p.driftOf(r.ts).fields[e.field]
	if fd == nil {
		fd = &fieldDrift{} // not reached: the field was recorded when its ALTER was decided
	}
	fd.evolving = false
	table := r.ts.t.FullName()
	failed := e.err
	if failed == nil {
		failed = r.err
	}
	if failed != nil && chtable.Classify(nil, failed) == chtable.Retriable && fd.attempts+1 < evolveAttempts {
		fd.attempts++
		fd.retryAt = p.now().Add(heldRetry.Wait(fd.attempts))
		p.driftOf(r.ts).epoch++
		p.log.Warn().Err(failed).Str("table", table).Str("field", e.field).Str("type", e.typ).Int("attempt", fd.attempts).
			Msg("adding a column for a new field (or re-reading the table after it) failed on the way; its records stay held and it is tried again")
		return
	}
	switch {
	case e.err != nil:
		fd.failed = true
		p.log.Error().Err(e.err).Str("table", table).Str("field", e.field).Str("type", e.typ).
			Msg("adding a column for a new field failed; its records go on without it (counted in sink_unmapped_fields_total; not tried again until a restart)")
		return
	case r.err != nil:
		fd.failed = true
		p.log.Error().Err(r.err).Str("table", table).Str("field", e.field).
			Msg("re-reading the table after adding a column failed; its records go on without the field until the next schema refresh finds the column")
		return
	case e.added:
		p.log.Info().Str("table", table).Str("field", e.field).Str("type", e.typ).Str("ddl", e.ddl).
			Msg("column added for a new field: the records that carry it fill it")
	default:
		p.log.Info().Str("table", table).Str("field", e.field).
			Msg("column for a new field already exists (another instance or a person added it): the records that carry it fill it")
	}
	fd.attempts = 0
	p.applySchema(writeCtx, r.ts, r.cols)
}

// DriftReport is what `sink check` prints for one topic: the fields of its
// sampled records that no column of its table takes.
type DriftReport struct {
	Topic, Table string
	Sampled      int // records decoded
	Bad          int // records that did not decode (they would be bad records)
	Fields       []FieldReport
	// Evolve: the route has schema.evolve: add_columns.
	Evolve bool
}

// FieldReport is one unmapped field of a DriftReport.
type FieldReport struct {
	Name    string
	Records uint64 // sampled records that carried it
	Example string // the first value seen ("" for a field typed by the schema)
	// Schema is the field's type as the records' schema (avro, protobuf)
	// names it; "" for a field whose type is inferred from its values.
	Schema string
	Type   string // the inferred column type, "" when not known (Why says)
	// DDL is the statement add_columns would run for it ("" when it would
	// not add it: Why says why).
	DDL, Why string
	// DefaultLeftOut says why DDL leaves out the default the field's
	// schema declares ("": it carries it, or none is declared).
	DefaultLeftOut string
}

// SampleDrift decodes recs (grouped by topic) the way the connector would,
// into throwaway blocks with plans of their own, and reports per topic the
// fields no column takes and the ALTER TABLE statements add_columns would
// run for them, for a server with info. Records of topics no route takes
// are ignored. Call it before Run, never during.
func (p *Pipeline) SampleDrift(ctx context.Context, recs []*kgo.Record, info chschema.ServerInfo) ([]DriftReport, error) {
	type acc struct {
		rep  *DriftReport
		rs   *routeState
		plan *decode.Plan
		blk  *decode.Block
	}
	var order []string
	byTopic := map[string]*acc{}
	for _, r := range recs {
		a := byTopic[r.Topic]
		if a == nil {
			rs, err := p.routeFor(ctx, r.Topic)
			if err != nil {
				return nil, err
			}
			if rs == nil {
				continue
			}
			plan, err := p.compile(rs.route, rs.table.t.Insert)
			if err != nil {
				return nil, err
			}
			a = &acc{rep: &DriftReport{Topic: r.Topic, Table: rs.table.t.FullName(), Evolve: rs.route.Schema.AddsColumns()}, rs: rs, plan: plan, blk: plan.NewBlock()}
			byTopic[r.Topic] = a
			order = append(order, r.Topic)
		}
		if err := a.plan.Append(a.blk, r); err != nil {
			if !errors.Is(err, decode.ErrSkip) {
				a.rep.Bad++
			}
			continue
		}
		a.rep.Sampled++
		if a.blk.Rows() >= 10_000 {
			a.blk.Reset()
		}
	}
	sort.Strings(order)
	out := make([]DriftReport, 0, len(order))
	for _, topic := range order {
		a := byTopic[topic]
		sch, t := a.rs.route.Schema, a.rs.table.t
		a.plan.TakeUnmapped(func(u *decode.UnmappedField) {
			f := FieldReport{Name: u.Name, Records: u.Count, Example: u.Example}
			if u.Schema != nil {
				f.Example, f.Schema = "", u.Schema.String()
			}
			typ, err := u.Column(info.EvolveTypes(), sch.Nullable)
			switch {
			case hasColumn(t.Schema, u.Name):
				f.Why = "the table has a column of that name that the route does not fill from it (DEFAULT with an expression the server computes per row, MATERIALIZED or ALIAS, or mapped from another source)"
			case err != nil:
				f.Why = err.Error()
			case a.rep.Evolve && !sch.Permits(u.Name):
				f.Type, f.Why = typ, "schema.allow / schema.deny exclude it"
			default:
				f.Type = typ
				full, derr := columnType(u, typ)
				if derr != nil {
					f.DefaultLeftOut = derr.Error()
				}
				f.DDL = chtable.AddColumnDDL(t.Database, t.Name, p.cfg.ClickHouse.Cluster, u.Name, full, info.AddIfNotExists())
			}
			a.rep.Fields = append(a.rep.Fields, f)
		}, nil)
		sort.Slice(a.rep.Fields, func(i, j int) bool { return a.rep.Fields[i].Name < a.rep.Fields[j].Name })
		out = append(out, *a.rep)
	}
	return out, nil
}
