package tables

import (
	"context"
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
)

// DriftReport is what `sink check` prints for one topic: the fields of its
// sampled records that no column of its table takes.
type DriftReport struct {
	Topic, Table string
	Sampled      int // records decoded
	Bad          int // records that did not decode (they would be bad records)
	Fields       []FieldReport
	// Unfilled are the columns that some sampled records gave no value,
	// by column name.
	Unfilled []UnfilledColumn
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

// driftSample is SampleDrift's decode of one topic's records.
type driftSample struct {
	rep  *DriftReport
	rs   *Route
	plan *decode.Plan
	blk  *decode.Block
}

// SampleDrift decodes recs (grouped by topic) the way the connector would,
// into throwaway blocks with plans of their own, and reports per topic the
// fields no column takes and the ALTER TABLE statements add_columns would
// run for them, for a server with info. Records of topics no route takes
// are ignored. Call it before Run, never during.
func (c *Catalog) SampleDrift(ctx context.Context, recs []*kgo.Record, info chschema.ServerInfo) ([]DriftReport, error) {
	var order []string
	byTopic := map[string]*driftSample{}
	for _, r := range recs {
		a, seen := byTopic[r.Topic]
		if !seen {
			var err error
			if a, err = c.driftSample(ctx, r.Topic); err != nil {
				return nil, err
			}
			byTopic[r.Topic] = a
			if a != nil {
				order = append(order, r.Topic)
			}
		}
		if a != nil {
			a.add(r)
		}
	}
	sort.Strings(order)
	out := make([]DriftReport, 0, len(order))
	for _, topic := range order {
		out = append(out, c.driftReport(byTopic[topic], info))
	}
	return out, nil
}

// driftSample starts the sample of topic's records: its route's plan, with
// a block of its own (nil when no route takes the topic).
func (c *Catalog) driftSample(ctx context.Context, topic string) (*driftSample, error) {
	rs, err := c.RouteFor(ctx, topic)
	if err != nil || rs == nil {
		return nil, err
	}
	plan, err := c.Compile(rs.cfg, rs.table.t.Insert)
	if err != nil {
		return nil, err
	}
	rep := &DriftReport{Topic: topic, Table: rs.table.name, Evolve: rs.cfg.Schema.AddsColumns()}
	return &driftSample{rep: rep, rs: rs, plan: plan, blk: plan.NewBlock()}, nil
}

// add decodes r into the sample.
func (a *driftSample) add(r *kgo.Record) {
	if err := a.plan.Append(a.blk, r); err != nil {
		if !errors.Is(err, decode.ErrSkip) {
			a.rep.Bad++
		}
		return
	}
	a.rep.Sampled++
	if a.blk.Rows() >= 10_000 {
		a.blk.Reset()
	}
}

// driftReport is a's report: every unmapped field, by name.
func (c *Catalog) driftReport(a *driftSample, info chschema.ServerInfo) DriftReport {
	a.plan.TakeUnmapped(func(u *decode.UnmappedField) {
		a.rep.Fields = append(a.rep.Fields, c.fieldReport(a, u, info))
	}, nil)
	sort.Slice(a.rep.Fields, func(i, j int) bool { return a.rep.Fields[i].Name < a.rep.Fields[j].Name })
	a.rep.Unfilled = unfilledColumns(a.plan, a.rep.Fields)
	return *a.rep
}

// fieldReport says what add_columns would do with u, a field of a's
// records, on a server with info.
func (c *Catalog) fieldReport(a *driftSample, u *decode.UnmappedField, info chschema.ServerInfo) FieldReport {
	sch, t := a.rs.cfg.Schema, a.rs.table.t
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
		f.DDL = chtable.AddColumnDDL(t.Database, t.Name, c.cfg.ClickHouse.Cluster, u.Name, full, info.AddIfNotExists())
	}
	return f
}
