package pipeline

import (
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
// are resolved, New looks up every such route's table; for one that does
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
// the goroutine that calls New, before the pipeline starts.

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
func PlanCreates(ctx context.Context, cfg *config.Config, w TableCreator, reg decode.Registry, s Sampler) ([]CreatePlan, error) {
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

func planCreate(ctx context.Context, cfg *config.Config, i int, w TableCreator, reg decode.Registry, s Sampler, info chschema.ServerInfo) (CreatePlan, error) {
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
		return plan, fmt.Errorf("routes[%d] (schema.create for %s.%s): the table is missing and nothing was given to sample topic %s with (pipeline.WithSampler)", i, db, name, r.Topic)
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
	blk := dp.NewBlock()
	var firstErr error
	newest := -1 // the highest schema id of a decoded json-schema record
	for _, rec := range recs {
		if err := dp.Append(blk, rec); err != nil {
			if !errors.Is(err, decode.ErrSkip) {
				plan.Bad++
				if firstErr == nil {
					firstErr = err
				}
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
		return nil, fmt.Errorf("none of the %d records sampled from %s decoded: %w", plan.Bad, r.Topic, firstErr)
	}
	var seen []decode.UnmappedField
	dp.TakeUnmapped(func(u *decode.UnmappedField) { seen = append(seen, *u) }, nil)
	sort.Slice(seen, func(a, b int) bool { return seen[a].Order < seen[b].Order })

	var cols []chschema.ColumnSchema
	add := func(name string, typ string, err error) {
		switch {
		case !r.Schema.Permits(name):
			plan.Skipped = append(plan.Skipped, name+": schema.allow / schema.deny exclude it")
		case err != nil:
			plan.Skipped = append(plan.Skipped, name+": "+err.Error())
		default:
			cols = append(cols, chschema.ColumnSchema{Name: name, Type: typ})
		}
	}
	declared := map[string]bool{}
	if newest >= 0 {
		sch, err := reg.Schema(ctx, newest)
		if err != nil {
			return nil, fmt.Errorf("reading JSON Schema %d: %w", newest, err)
		}
		fields, err := decode.JSONSchemaFields(sch.Text)
		if err != nil {
			return nil, fmt.Errorf("schema id %d: %w", newest, err)
		}
		for _, f := range fields {
			declared[f.Name] = true
			typ, err := f.Type.Column(srv, r.Schema.Nullable || f.Null)
			add(f.Name, typ, err)
		}
	}
	for _, u := range seen {
		if !declared[u.Name] {
			typ, err := u.Column(srv, r.Schema.Nullable)
			add(u.Name, typ, err)
			if err == nil && u.Default != nil && len(cols) > 0 && cols[len(cols)-1].Name == u.Name {
				// The source column's default (see Pipeline.withDefault).
				if lit, lerr := u.Default.Literal(typ); lerr == nil {
					cols[len(cols)-1].DefaultExpr = lit
				} else {
					plan.Skipped = append(plan.Skipped, u.Name+": created without its default: "+lerr.Error())
				}
			}
		}
	}
	return cols, nil
}

// createTables creates the missing tables of the routes with
// schema.create: if_missing (see the top of this file).
func (p *Pipeline) createTables(ctx context.Context) error {
	if p.noCreate || !hasCreate(p.cfg) {
		return nil
	}
	tc, ok := p.w.(TableCreator)
	if !ok {
		return errors.New("schema.create: if_missing needs a sink that can run CREATE TABLE")
	}
	info, err := tc.Features(ctx)
	if err != nil {
		return err
	}
	for i, r := range p.cfg.Routes {
		if !r.Schema.CreatesTable() {
			continue
		}
		waited := false
		for {
			plan, err := planCreate(ctx, p.cfg, i, tc, p.reg, p.sampler, info)
			if err != nil {
				return err
			}
			if plan.Exists {
				break
			}
			if len(plan.DDL) == 0 {
				if !waited {
					waited = true
					p.log.Info().Str("table", plan.Database+"."+plan.Table).Str("topic", plan.Topic).
						Msg("schema.create: the table does not exist and its topic has no records to infer its columns from yet; waiting for the first records")
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("routes[%d]: waiting for records of %s to create %s.%s: %w", i, plan.Topic, plan.Database, plan.Table, ctx.Err())
				case <-time.After(createRetry):
				}
				continue
			}
			logCreate(p.log, plan)
			ddl, created, err := tc.CreateTable(ctx, plan.Spec)
			if err != nil {
				return fmt.Errorf("routes[%d] (schema.create): %w", i, err)
			}
			ev := p.log.Info().Str("table", plan.Database+"."+plan.Table)
			if created {
				ev.Strs("ddl", ddl).Msg("schema.create: created the table")
			} else {
				ev.Msg("schema.create: the table exists now (created by another instance): using it")
			}
			break
		}
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

// WithSampler gives schema.create: if_missing s to read the records that
// type a missing table's columns. Without it, New fails on a route with
// schema.create: if_missing whose table is missing.
func WithSampler(s Sampler) Option { return func(p *Pipeline) { p.sampler = s } }

// WithoutCreate makes New leave missing tables missing, whatever
// schema.create says (sink check, which only prints PlanCreates).
func WithoutCreate() Option { return func(p *Pipeline) { p.noCreate = true } }
