package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/offsets"
	"sink/internal/pipeline/delivery"
	"sink/internal/pipeline/dispatch"
	"sink/internal/pipeline/intake"
	"sink/internal/tables"
)

// The wiring: New builds the parts and ties each to the others through
// the interfaces it declares. A part never holds the Pipeline: each
// adapter below is one part's view of the rest, a few methods that route
// to the part that does the work.

// New resolves every route's table and compiles its decode plan. It fails
// with one line naming the problem: a missing table, a column the mapping
// cannot fill, an unknown source.
func New(ctx context.Context, cfg *config.Config, log zerolog.Logger, w Sink, opts ...Option) (*Pipeline, error) {
	p := &Pipeline{
		cfg:     cfg,
		log:     log,
		w:       w,
		inbox:   make(chan event, 64),
		events:  make(chan groupEvent),
		fetches: make(chan kgo.Fetches),
		want:    make(chan struct{}, 1),
		calls:   goroutines{grace: cancelGrace, stopped: make(chan struct{})},
		view:    newView(),
		now:     time.Now,
		recycle: (*kgo.Record).Recycle,
	}
	for _, o := range opts {
		o(p)
	}
	if p.opts.reg == nil && cfg.SchemaRegistry.Enabled() {
		return nil, errors.New("schema_registry is configured but the pipeline was given no registry client (pipeline.WithRegistry)")
	}
	p.view.stateSince = p.now()
	p.m.SetMaxWait(cfg.Batch.MaxWait)
	if err := p.wire(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// wire builds the parts and ties each to the others through the
// interfaces it declares: the committer, dispatch and intake first, then
// the catalog (which tells dispatch of each table it opens and compiles
// its plans with intake's schema look-ups), then the delivery guarantee
// over them all.
func (p *Pipeline) wire(ctx context.Context) error {
	cfg, log := p.cfg, p.log
	now := func() time.Time { return p.now() }
	tracker := offsets.New()
	p.committer = &committer{tracker: tracker, src: func() Source { return p.cons }, dlv: func() guarantee { return p.dlv },
		timeout: cfg.Kafka.RequestTimeout, log: log, m: p.m, now: now,
		idle: func() bool { return p.unacked() == 0 && p.disp.OpenBatches() == 0 }, seen: p.view.committed}
	p.disp = dispatch.New(cfg, dispatch.Deps{Sink: p.w, Owner: dispatchOwner{p}, Tracker: tracker,
		Allowance: p.opts.allow, Metrics: p.m, Log: log, Now: now})
	p.in = intake.New(cfg, intake.Deps{Batches: p.disp, Tracker: tracker, Owner: intakeOwner{p},
		Source: func() intake.Producer { return p.cons }, Target: p.w, Registry: p.opts.reg,
		Recycle: func(r *kgo.Record) { p.recycle(r) }, Metrics: p.m, Log: log, Now: now})
	cat, err := tables.Open(ctx, cfg, tables.Options{Sink: p.w, Registry: p.opts.reg, Lookups: p.in.Lookups(),
		Sampler: p.opts.sampler, NoCreate: p.opts.noCreate, Metrics: p.m, Log: log, Now: now, Owner: tablesOwner{p}})
	if err != nil {
		return err
	}
	p.cat = cat
	p.disp.Catalog = cat
	p.in.SetCatalog(cat)
	p.initDelivery(tracker)
	p.disp.Delivery = p.dlv
	p.in.SetDelivery(p.dlv)
	return nil
}

// tablesOwner is what the catalog asks of the rest of the pipeline.
type tablesOwner struct{ p *Pipeline }

func (o tablesOwner) Spawn(f func())            { o.p.calls.spawn(f) }
func (o tablesOwner) Described(r tables.Result) { o.p.post(described{p: o.p, r: r}) }
func (o tablesOwner) Stopping() bool            { return o.p.fatal != nil }

func (o tablesOwner) TableAdded(t *tables.Table)   { o.p.disp.TableAdded(t) }
func (o tablesOwner) TableBounded(t *tables.Table) { o.p.disp.Rebound(t) }
func (o tablesOwner) Reshape(ctx context.Context, t *tables.Table) {
	o.p.disp.Reshape(ctx, t)
}

// dispatchOwner is what dispatch asks of the rest of the pipeline.
type dispatchOwner struct{ p *Pipeline }

func (o dispatchOwner) Spawn(f func())                 { o.p.calls.spawn(f) }
func (o dispatchOwner) Post(e dispatch.Event)          { o.p.post(e) }
func (o dispatchOwner) NewID() uint64                  { return o.p.newID() }
func (o dispatchOwner) Blocked(b *dispatch.Batch) bool { return o.p.in.DeadLetters().Blocks(b) }

// Landed is the rest of the one path after an INSERT succeeds: a TRUNCATE
// that waited for the table's earlier rows goes on, the offsets are
// committed at once (inserts are few by design, so one commit round trip
// per insert is cheap, and it shrinks what a crash replays to the batches
// still in flight; commit_interval still covers dead letters and skips),
// and a revoke waiting for the batch is told.
func (o dispatchOwner) Landed(ctx context.Context, t *tables.Table, id uint64) {
	p := o.p
	p.in.Landed(ctx, t)
	if p.revoke == nil {
		p.committer.commit()
	}
	p.revokeDone(id)
}

// Failed: the batch stays unacknowledged in the tracker, so its offsets
// (and everything after them) are never committed, and the connector
// stops (err nil: canceled at shutdown).
func (o dispatchOwner) Failed(id uint64, err error) {
	o.p.failIf(err)
	o.p.revokeDone(id)
}

// intakeOwner is what intake asks of the rest of the pipeline.
type intakeOwner struct{ p *Pipeline }

func (o intakeOwner) Fail(err error)      { o.p.failIf(err) }
func (o intakeOwner) Failed() bool        { return o.p.fatal != nil }
func (o intakeOwner) NewID() uint64       { return o.p.newID() }
func (o intakeOwner) Spawn(f func())      { o.p.calls.spawn(f) }
func (o intakeOwner) Post(e intake.Event) { o.p.post(e) }
func (o intakeOwner) Settled(id uint64)   { o.p.revokeDone(id) }
func (o intakeOwner) Fetched(tp offsets.TP, hwm, lag int64, last time.Time) {
	o.p.view.fetched(tp, hwm, lag, last)
}

// eoHost is what exactly-once asks of the rest of the pipeline: the
// batches on their way, the committer, the connector itself.
type eoHost struct{ p *Pipeline }

func (h eoHost) InOrder(build func() (delivery.Intent, bool)) bool {
	return h.p.committer.inOrder(func() (commitJob, bool) {
		in, ok := build()
		return commitJob{pos: in.Pos, meta: in.Meta, answer: in.Answer}, ok
	})
}
func (h eoHost) Stalled() bool  { return h.p.committer.stalled() }
func (h eoHost) SendStalled()   { h.p.committer.sendNext() }
func (h eoHost) Fail(err error) { h.p.failIf(err) }

// eoBatches is dispatch's batches, as exactly-once asks for them: a
// batch withdrawn is one a revoke waits for no more.
type eoBatches struct {
	*dispatch.Dispatch
	p *Pipeline
}

func (b eoBatches) Withdraw(id uint64) (*tables.Table, int, int) {
	if b.p.revoke != nil {
		delete(b.p.revoke.waiting, id)
	}
	return b.Dispatch.Withdraw(id)
}

// Seek consumes the kept partitions of pos again from their offsets.
// Records of them that were fetched but not decoded yet, or wait for the
// schema registry, lie past the seek point: they are consumed again from
// there, so these copies go.
func (h eoHost) Seek(pos map[offsets.TP]int64) error {
	p := h.p
	sought := make([]offsets.TP, 0, len(pos))
	for tp := range pos {
		sought = append(sought, tp)
	}
	p.in.Drop(sought)
	s, ok := p.cons.(seekSource)
	if !ok {
		return errors.New("exactly-once: batches holding partitions given up were dropped, and the source cannot consume the partitions kept again; stopping so that the group consumes them again from the recorded offsets")
	}
	s.Seek(pos)
	return nil
}

func (h eoHost) SyncLookups(f func()) { h.p.in.SyncLookups(f) }
