package tables

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/registry"
	"sink/internal/route"
)

// Creating missing tables (schema.create: if_missing). Before the routes
// are resolved, Open looks up every such route's table; for one that does
// not exist it reads a sample of the newest records of the route's topic,
// decodes them with a plan that reads no field, and so gets every top-level
// field as an unmapped field typed exactly as schema evolution types a new
// field (decode.UnmappedField.Column: the registry schema's type for avro
// and protobuf, the merged inference over the values for json and
// json-schema), for the server's generation (chschema.ServerInfo.EvolveTypes:
// no DateTime64, Map, JSON or Bool on 18.16). The columns follow the order
// the fields were first seen in (a schema's own order). Then it runs the
// CREATE TABLE IF NOT EXISTS (writer.CreateTable) and the routes are
// resolved against the table as it is now: when several sinks race to
// create it, each reads back the one that won. A topic with no records yet
// is sampled again every createRetry until one arrives or the context
// ends, since there is nothing to type the columns by. All of this runs on
// the goroutine that calls Open, before the pipeline starts.

// CreateSample is how many of the newest records of a topic the columns
// of its table are inferred from.
const CreateSample = 500

// createRetry is how often a topic with no records is sampled again.
const createRetry = 2 * time.Second

// CreatePlan is what schema.create: if_missing does for one route.
type CreatePlan struct {
	Route           int // index in routes
	Topic           string
	Database, Table string
	Exists          bool // the table is there: nothing to do
	// Sampled records decoded, Bad did not; Skipped lists the fields
	// that get no column, each with the reason.
	Sampled, Bad int
	Skipped      []string
	Spec         chtable.TableSpec
	// DDL is the statements that create the table (none when Exists or
	// when no records were sampled).
	DDL []string
}

// PlanCreates works out, for every route with schema.create: if_missing,
// whether its table exists and, when not, the statements that would create
// it from a sample of its topic's records (read with s). It changes
// nothing. A route whose topic has no records yet gets a plan without DDL.
func PlanCreates(ctx context.Context, cfg *config.Config, w Creator, reg decode.Registry, s Sampler) ([]CreatePlan, error) {
	var plans []CreatePlan
	var info *chschema.ServerInfo
	for i, r := range cfg.Routes {
		if !r.Schema.CreatesTable() {
			continue
		}
		if info == nil {
			in, err := w.Features(ctx)
			if err != nil {
				return nil, err
			}
			info = &in
		}
		plan, err := planCreate(ctx, cfg, i, w, reg, s, *info)
		if err != nil {
			return nil, err
		}
		plans = append(plans, plan)
	}
	return plans, nil
}

func planCreate(ctx context.Context, cfg *config.Config, i int, w Creator, reg decode.Registry, s Sampler, info chschema.ServerInfo) (CreatePlan, error) {
	r := cfg.Routes[i]
	db, name := cfg.TableFor(r)
	plan := CreatePlan{Route: i, Topic: r.Topic, Database: db, Table: name}
	exists, err := w.TableExists(ctx, db, name)
	if err != nil {
		return plan, err
	}
	if plan.Exists = exists; exists {
		return plan, nil
	}
	if s == nil {
		return plan, fmt.Errorf("routes[%d] (schema.create for %s.%s): the table is missing and nothing was given to sample topic %s with (schema.create needs a sampler)", i, db, name, r.Topic)
	}
	recs, err := s.Sample(ctx, r.Topic, CreateSample)
	if err != nil {
		return plan, fmt.Errorf("routes[%d] (schema.create for %s.%s): sampling topic %s: %w", i, db, name, r.Topic, err)
	}
	fields, err := inferFields(ctx, r, reg, info.EvolveTypes(), recs, &plan)
	if err != nil {
		return plan, fmt.Errorf("routes[%d] (schema.create for %s.%s): %w", i, db, name, err)
	}
	if plan.Sampled == 0 {
		return plan, nil
	}
	sch := r.Schema
	plan.Spec = chtable.TableSpec{
		Database: db, Table: name, Columns: fields,
		Replacing: sch.Replacing(), OrderBy: sch.OrderBy, PartitionBy: sch.PartitionBy,
		Settings: sch.Settings, Cluster: cfg.ClickHouse.Cluster,
	}
	if sch.Replacing() {
		plan.Spec.Columns = append(plan.Spec.Columns, chtable.KafkaColumns(info.EvolveTypes())...)
		plan.Spec.Version = "_offset"
	}
	if len(fields) == 0 {
		return plan, fmt.Errorf("routes[%d] (schema.create for %s.%s): no field of the %d records sampled from %s gets a column (%v)", i, db, name, plan.Sampled, r.Topic, plan.Skipped)
	}
	if plan.DDL, err = chtable.CreateTableDDL(plan.Spec); err != nil {
		return plan, fmt.Errorf("routes[%d] (schema.create for %s.%s): %w", i, db, name, err)
	}
	return plan, nil
}

// inferFields decodes recs with a plan that reads only the Kafka columns
// and returns a column per unmapped field, in the order the fields were
// first seen, counting the records in plan. For json-schema, the
// properties the newest sampled schema declares come first, in its order
// and typed by it (decode.JSONSchemaFields); the fields it does not type
// follow, typed by their values.
func inferFields(ctx context.Context, r config.Route, reg decode.Registry, srv chschema.ServerTypes, recs []*kgo.Record, plan *CreatePlan) ([]chschema.ColumnSchema, error) {
	dp, err := decode.Compile(r.Format, chtable.KafkaColumns(srv), nil, decode.WithRegistry(reg), decode.WithMessage(r.Message))
	if err != nil {
		return nil, err
	}
	newest, err := decodeSample(dp, r, recs, plan)
	if err != nil {
		return nil, err
	}
	var seen []decode.UnmappedField
	dp.TakeUnmapped(func(u *decode.UnmappedField) { seen = append(seen, *u) }, nil)
	sort.Slice(seen, func(a, b int) bool { return seen[a].Order < seen[b].Order })

	cs := &createColumns{r: r, srv: srv, plan: plan, declared: map[string]bool{}}
	if newest >= 0 {
		if err := cs.addDeclared(ctx, reg, newest); err != nil {
			return nil, err
		}
	}
	for _, u := range seen {
		if !cs.declared[u.Name] {
			cs.addSeen(u)
		}
	}
	return cs.cols, nil
}

// decodeSample decodes recs with dp, counting them in plan, and returns
// the highest schema id of a decoded json-schema record (-1: none). It
// fails when none of them decoded.
func decodeSample(dp *decode.Plan, r config.Route, recs []*kgo.Record, plan *CreatePlan) (newest int, err error) {
	blk := dp.NewBlock()
	var firstErr error
	newest = -1
	for _, rec := range recs {
		if err := dp.Append(blk, rec); err != nil {
			if !errors.Is(err, decode.ErrSkip) {
				plan.Bad++
				firstErr = cmp.Or(firstErr, err)
			}
			continue
		}
		plan.Sampled++
		if r.Format == route.JSONSchema {
			if id, _, err := registry.ParseFrame(rec.Value); err == nil && id > newest {
				newest = id
			}
		}
	}
	if plan.Sampled == 0 && plan.Bad > 0 {
		return -1, fmt.Errorf("none of the %d records sampled from %s decoded: %w", plan.Bad, r.Topic, firstErr)
	}
	return newest, nil
}

// createColumns is the columns a created table gets, in order, with the
// fields that get none in plan.Skipped.
type createColumns struct {
	r        config.Route
	srv      chschema.ServerTypes
	plan     *CreatePlan
	cols     []chschema.ColumnSchema
	declared map[string]bool // the fields the newest json-schema declares
}

// add adds a column of type typ for field name, or says in plan.Skipped
// why it gets none; it reports whether it added one.
func (cs *createColumns) add(name string, typ string, err error) bool {
	switch {
	case !cs.r.Schema.Permits(name):
		cs.plan.Skipped = append(cs.plan.Skipped, name+": schema.allow / schema.deny exclude it")
	case err != nil:
		cs.plan.Skipped = append(cs.plan.Skipped, name+": "+err.Error())
	default:
		cs.cols = append(cs.cols, chschema.ColumnSchema{Name: name, Type: typ})
		return true
	}
	return false
}

// addDeclared adds a column for every property json-schema id declares,
// typed by it.
func (cs *createColumns) addDeclared(ctx context.Context, reg decode.Registry, id int) error {
	sch, err := reg.Schema(ctx, id)
	if err != nil {
		return fmt.Errorf("reading JSON Schema %d: %w", id, err)
	}
	fields, err := decode.JSONSchemaFields(sch.Text)
	if err != nil {
		return fmt.Errorf("schema id %d: %w", id, err)
	}
	for _, f := range fields {
		cs.declared[f.Name] = true
		typ, err := f.Type.Column(cs.srv, cs.r.Schema.Nullable || f.Null)
		cs.add(f.Name, typ, err)
	}
	return nil
}

// addSeen adds a column for u, a field of the sampled records, typed by
// its values or its schema, with the default its schema declares (the
// source column's, see Catalog.withDefault) when it can be written.
func (cs *createColumns) addSeen(u decode.UnmappedField) {
	typ, err := u.Column(cs.srv, cs.r.Schema.Nullable)
	if !cs.add(u.Name, typ, err) || u.Default == nil {
		return
	}
	if lit, lerr := u.Default.Literal(typ); lerr == nil {
		cs.cols[len(cs.cols)-1].DefaultExpr = lit
	} else {
		cs.plan.Skipped = append(cs.plan.Skipped, u.Name+": created without its default: "+lerr.Error())
	}
}

// create creates the missing tables of the routes with schema.create:
// if_missing (see the top of this file), sampling with s and reg.
func (c *Catalog) create(ctx context.Context, reg decode.Registry, s Sampler) error {
	if !hasCreate(c.cfg) {
		return nil
	}
	tc, ok := c.sink.(Creator)
	if !ok {
		return errors.New("schema.create: if_missing needs a sink that can run CREATE TABLE")
	}
	info, err := tc.Features(ctx)
	if err != nil {
		return err
	}
	for i, r := range c.cfg.Routes {
		if r.Schema.CreatesTable() {
			if err := c.createFor(ctx, i, tc, reg, s, info); err != nil {
				return err
			}
		}
	}
	return nil
}

// createFor creates route i's table if it is missing, waiting for the
// first records of its topic when it has none yet.
func (c *Catalog) createFor(ctx context.Context, i int, tc Creator, reg decode.Registry, s Sampler, info chschema.ServerInfo) error {
	waited := false
	for {
		plan, err := planCreate(ctx, c.cfg, i, tc, reg, s, info)
		if err != nil || plan.Exists {
			return err
		}
		if len(plan.DDL) > 0 {
			return c.createTable(ctx, i, tc, plan)
		}
		if !waited {
			waited = true
			c.log.Info().Str("table", plan.Database+"."+plan.Table).Str("topic", plan.Topic).
				Msg("schema.create: the table does not exist and its topic has no records to infer its columns from yet; waiting for the first records")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("routes[%d]: waiting for records of %s to create %s.%s: %w", i, plan.Topic, plan.Database, plan.Table, ctx.Err())
		case <-time.After(createRetry):
		}
	}
}

// createTable runs plan's CREATE TABLE for route i.
func (c *Catalog) createTable(ctx context.Context, i int, tc Creator, plan CreatePlan) error {
	logCreate(c.log, plan)
	ddl, created, err := tc.CreateTable(ctx, plan.Spec)
	if err != nil {
		return fmt.Errorf("routes[%d] (schema.create): %w", i, err)
	}
	ev := c.log.Info().Str("table", plan.Database+"."+plan.Table)
	if created {
		ev.Strs("ddl", ddl).Msg("schema.create: created the table")
	} else {
		ev.Msg("schema.create: the table exists now (created by another instance): using it")
	}
	return nil
}

func logCreate(log zerolog.Logger, plan CreatePlan) {
	for _, s := range plan.Skipped {
		log.Warn().Str("table", plan.Database+"."+plan.Table).Str("field", s).Msg("schema.create: field gets no column")
	}
}

func hasCreate(cfg *config.Config) bool {
	for _, r := range cfg.Routes {
		if r.Schema.CreatesTable() {
			return true
		}
	}
	return false
}
