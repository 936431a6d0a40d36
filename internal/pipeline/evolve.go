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
	"sink/internal/decode"
	"sink/internal/writer"
)

// Schema drift and evolution. Every plan counts the record fields no column
// takes (decode.Plan.TakeUnmapped); when a batch of a table is sealed the
// owner moves the counts into sink_unmapped_fields_total{table,field} and
// logs each field's first sighting once, with an example value. At most
// decode.MaxUnmappedFields fields per table are tracked by name; the rest
// are counted as decode.OverflowField, so the metric's label values stay
// bounded whatever the records carry.
//
// A route with schema.evolve: add_columns also turns a new field into a
// column: the owner starts one goroutine per field that runs
// writer.AddColumn (ALTER TABLE … ADD COLUMN with the inferred type) and
// then re-reads the table; the result comes back on p.schemas and is
// applied like any other change of the table (applySchema), so the records
// decoded after that fill the column. The records that carried the field
// before — in the batch being sealed and those decoded while the ALTER ran
// — are inserted without it (the column gets its default, or NULL): a
// sealed batch is never rebuilt.

// driftState is one table's record of unmapped fields (owner goroutine only).
type driftState struct {
	fields   map[string]*fieldDrift
	overflow bool // the overflow has been logged
}

// fieldDrift is what the owner knows of one unmapped field of a table.
type fieldDrift struct {
	logged   bool // first sighting logged
	evolving bool // an ALTER for it is running
	failed   bool // the ALTER failed: not tried again until a restart
	said     int  // the last reason (why*) it was not added, logged once each
}

// Reasons a field is not (yet) added, logged once per field and reason.
const (
	whyNone = iota
	whyDenied
	whyUnknown
	whyCap
)

// evolver is the state of schema evolution, nil when no route adds columns.
type evolver struct {
	adder  columnAdder
	info   writer.ServerInfo
	types  decode.ServerTypes
	recent map[string][]time.Time // per route (routeKey): when this process added columns
}

// columnAdder is the part of writer.Writer that schema evolution needs.
type columnAdder interface {
	AddColumn(ctx context.Context, info writer.ServerInfo, db, table, cluster, name, typ string) (ddl string, added bool, err error)
	Features(ctx context.Context) (writer.ServerInfo, error)
}

// evolveResult is the end of one ADD COLUMN, reported to the owner.
type evolveResult struct {
	rs         *routeState
	field, typ string
	ddl        string
	added      bool
	err        error
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
// metrics and the log, and starts the ALTERs of routes that add columns;
// called when a batch of ts is sealed.
//
// The first sighting of a field that is not a column of the table as last
// read also re-reads the table at once (routes without add_columns): the
// usual order of a change is "ALTER TABLE, then deploy the producer", and
// then the column exists by the time its field arrives, but the sink would
// otherwise learn of it only at the next schema_refresh.
func (p *Pipeline) flushDrift(writeCtx context.Context, ts *tableState) {
	reread := false
	for _, rs := range p.allRoutes() {
		if rs.table != ts {
			continue
		}
		rs.plan.TakeUnmapped(func(u *decode.UnmappedField) {
			if p.unmapped(ts, rs, u) && !rs.route.Schema.AddsColumns() && !hasColumn(ts.t.Schema, u.Name) {
				reread = true
			}
		}, func(n uint64) { p.unmappedOverflow(ts, n) })
	}
	if reread && p.fatal == nil {
		p.describeTable(writeCtx, ts)
	}
}

func hasColumn(cols []decode.ColumnSchema, name string) bool {
	return slices.ContainsFunc(cols, func(c decode.ColumnSchema) bool { return c.Name == name })
}

func (p *Pipeline) driftOf(ts *tableState) *driftState {
	if ts.drift == nil {
		ts.drift = &driftState{fields: map[string]*fieldDrift{}}
	}
	return ts.drift
}

// unmapped handles one field's count from one plan; it reports the
// field's first sighting in the table.
func (p *Pipeline) unmapped(ts *tableState, rs *routeState, u *decode.UnmappedField) (first bool) {
	d := p.driftOf(ts)
	fd := d.fields[u.Name]
	if fd == nil {
		if len(d.fields) >= decode.MaxUnmappedFields {
			p.unmappedOverflow(ts, u.Count)
			return false
		}
		first = true
		fd = &fieldDrift{}
		d.fields[u.Name] = fd
	}
	ts.m.Unmapped(u.Name, u.Count)
	if !fd.logged {
		fd.logged = true
		p.log.Warn().Str("table", ts.t.FullName()).Str("field", u.Name).Str("example", u.Example).Str("inferred", u.TypeName()).
			Uint64("records", u.Count).Msg("records carry a field that no column takes (counted in " + "sink_unmapped_fields_total; logged once)")
	}
	if rs.route.Schema.AddsColumns() && p.evo != nil {
		p.evolve(ts, rs, u, fd)
	}
	return first
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

// evolve starts adding u as a column of ts when the route allows it, its
// type is known, the table has no such column and the hourly cap has room.
func (p *Pipeline) evolve(ts *tableState, rs *routeState, u *decode.UnmappedField, fd *fieldDrift) {
	if fd.evolving || fd.failed || p.fatal != nil {
		return
	}
	if hasColumn(ts.t.Schema, u.Name) {
		return // a column of that name exists (its route maps something else into it, or it is not insertable)
	}
	say := func(why int, msg string) {
		if fd.said != why {
			fd.said = why
			p.log.Info().Str("table", ts.t.FullName()).Str("field", u.Name).Msg(msg)
		}
	}
	sch := rs.route.Schema
	if !sch.Permits(u.Name) {
		say(whyDenied, "field not added as a column: schema.allow / schema.deny exclude it")
		return
	}
	typ, err := u.Column(p.evo.types, sch.Nullable)
	if err != nil {
		say(whyUnknown, "field not added as a column yet: "+err.Error())
		return
	}
	key := routeKey(rs.route)
	now := p.now()
	recent := slices.DeleteFunc(p.evo.recent[key], func(t time.Time) bool { return now.Sub(t) >= time.Hour })
	p.evo.recent[key] = recent
	if len(recent) >= sch.MaxNewColumnsPerHour {
		say(whyCap, fmt.Sprintf("field not added as a column yet: schema.max_new_columns_per_hour (%d) reached; tried again when the hour has room", sch.MaxNewColumnsPerHour))
		return
	}
	p.evo.recent[key] = append(recent, now)
	fd.evolving = true
	db, name, cluster := ts.t.Database, ts.t.Name, p.cfg.ClickHouse.Cluster
	timeout := p.cfg.ClickHouse.QueryTimeout
	r := &evolveResult{rs: rs, field: u.Name, typ: typ}
	p.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r.ddl, r.added, r.err = p.evo.adder.AddColumn(ctx, p.evo.info, db, name, cluster, r.field, r.typ)
		var cols []decode.ColumnSchema
		var derr error
		if r.err == nil {
			cols, derr = p.w.Describe(ctx, db, name)
		}
		p.sendSchema(schemaResult{ts: ts, cols: cols, err: derr, evolve: r})
	})
}

// evolved applies the end of an ADD COLUMN on the owner goroutine.
func (p *Pipeline) evolved(writeCtx context.Context, r schemaResult) {
	e := r.evolve
	fd := p.driftOf(r.ts).fields[e.field]
	if fd != nil {
		fd.evolving = false
	}
	table := r.ts.t.FullName()
	switch {
	case e.err != nil:
		if fd != nil {
			fd.failed = true
		}
		p.log.Error().Err(e.err).Str("table", table).Str("field", e.field).Str("type", e.typ).
			Msg("adding a column for a new field failed; its records go on without it (not tried again until a restart)")
		return
	case e.added:
		p.log.Info().Str("table", table).Str("field", e.field).Str("type", e.typ).Str("ddl", e.ddl).
			Msg("column added for a new field: records decoded from now on fill it")
	default:
		p.log.Info().Str("table", table).Str("field", e.field).
			Msg("column for a new field already exists (another instance or a person added it): records decoded from now on fill it")
	}
	if r.err != nil {
		p.log.Warn().Err(r.err).Str("table", table).Msg("re-reading the table after adding a column failed; the next schema refresh picks it up")
		return
	}
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
}

// SampleDrift decodes recs (grouped by topic) the way the connector would,
// into throwaway blocks with plans of their own, and reports per topic the
// fields no column takes and the ALTER TABLE statements add_columns would
// run for them, for a server with info. Records of topics no route takes
// are ignored. Call it before Run, never during.
func (p *Pipeline) SampleDrift(ctx context.Context, recs []*kgo.Record, info writer.ServerInfo) ([]DriftReport, error) {
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
				f.Why = "the table has a column of that name that the route does not fill from it (DEFAULT, MATERIALIZED or ALIAS, or mapped from another source)"
			case err != nil:
				f.Why = err.Error()
			case a.rep.Evolve && !sch.Permits(u.Name):
				f.Type, f.Why = typ, "schema.allow / schema.deny exclude it"
			default:
				f.Type = typ
				f.DDL = writer.AddColumnDDL(t.Database, t.Name, p.cfg.ClickHouse.Cluster, u.Name, typ, info.AddIfNotExists())
			}
			a.rep.Fields = append(a.rep.Fields, f)
		}, nil)
		sort.Slice(a.rep.Fields, func(i, j int) bool { return a.rep.Fields[i].Name < a.rep.Fields[j].Name })
		out = append(out, *a.rep)
	}
	return out, nil
}
