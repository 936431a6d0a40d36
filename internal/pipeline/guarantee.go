package pipeline

import (
	"context"
	"math/rand/v2"
	"time"

	"sink/internal/offsets"
	"sink/internal/pipeline/delivery"
	"sink/internal/pipeline/dispatch"
	"sink/internal/pipeline/intake"
)

// guarantee is what the delivery guarantee adds to the shared path
// (internal/pipeline/delivery): at-least-once adds nothing, exactly-once
// records each batch's intent in the group's commit metadata before its
// INSERT, carries the ledgers in every commit, recovers newly assigned
// partitions and drops what can no longer be recorded when partitions are
// given up. The shared path calls these hooks (intake's and dispatch's
// around a record and a batch, the pipeline's own around the run and its
// commits) and never asks which guarantee it runs under.
//
// Concurrency: called on the owner goroutine only.
type guarantee interface {
	intake.Delivery
	dispatch.Delivery
	// Check refuses, before Run starts, what the guarantee cannot work with.
	Check(ctx context.Context) error
	// CommitMeta is what a commit of positions c sends: the positions
	// (some may be left out), their metadata, and what to do once the
	// commit succeeded (nil: nothing).
	CommitMeta(c map[offsets.TP]offsets.Commit) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, func())
	// OnAssign prepares newly assigned partitions before their records
	// are handled.
	OnAssign(ctx context.Context, tps []offsets.TP)
	// OnRelease drops what belongs to partitions given up.
	OnRelease(tps []offsets.TP)
	// NextRetry is how long until waiting work is due (ok false: none);
	// RetryDue starts it once due (also after each commit's result).
	NextRetry(now time.Time) (time.Duration, bool)
	RetryDue(ctx context.Context)
	// StuckOn names what the guarantee's own work waits for ("" nothing),
	// for the shutdown_timeout line.
	StuckOn() string
}

// WithExactlyOnce gives the pipeline the I/O of delivery: exactly_once
// (eosio.IO in production). Without it an exactly-once pipeline refuses to
// run.
func WithExactlyOnce(x delivery.IO) Option { return func(p *Pipeline) { p.opts.eoIO = x } }

// initDelivery sets the delivery hooks: at-least-once, or exactly-once
// with its state, which reaches the rest of the pipeline through eoHost.
func (p *Pipeline) initDelivery(tracker delivery.Tracker) {
	p.dlv = delivery.AtLeastOnce{}
	if !p.cfg.ExactlyOnce() {
		return
	}
	h := eoHost{p}
	p.eo = delivery.New(p.cfg, delivery.Deps{IO: p.opts.eoIO, Sink: p.w, Catalog: p.cat,
		Batches: eoBatches{p.disp, p}, Commits: h, Tracker: tracker, Owner: h, Metrics: p.m, Log: p.log,
		Now: func() time.Time { return p.now() }, Jitter: func(n int64) int64 { return p.draw(n) }})
	p.dlv = p.eo
}

// draw is the random part of exactly-once's retry waits: p.jitter when a
// test fixed it, else what backoff draws.
func (p *Pipeline) draw(n int64) int64 {
	if p.jitter != nil {
		return p.jitter(n)
	}
	return rand.Int64N(n)
}

// CheckExactlyOnce refuses, in one line, a server or table that
// exactly-once delivery cannot work with (ExactlyOnce.Windows; on a
// cluster, every shard's). Under exactly_once it also remembers each
// table's window for the margin metric; Run checks the tables resolved
// later. Call it before Run.
func (p *Pipeline) CheckExactlyOnce(ctx context.Context) error {
	if p.eo != nil {
		return p.eo.Windows(ctx)
	}
	_, _, err := delivery.Windows(ctx, p.opts.eoIO, p.cat, p.log)
	return err
}
