package pipeline

import (
	"context"
	"errors"
	"time"

	"sink/internal/chschema"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// delivery is what the delivery guarantee adds to the shared path:
// at-least-once (atLeastOnce) adds nothing, exactly-once (exactly,
// exactly.go) records each batch's intent in the group's commit metadata
// before its INSERT, carries the ledgers in every commit, recovers newly
// assigned partitions and drops what can no longer be recorded when
// partitions are given up. The shared path calls these hooks and never
// asks which guarantee it runs under.
//
// Concurrency: called on the owner goroutine only.
type delivery interface {
	// check refuses, before Run starts, what the guarantee cannot work with.
	check(ctx context.Context) error
	// skip reports whether a record is already in its table (it is then
	// handled without a row).
	skip(tp offsets.TP, offset int64) bool
	// coveredRow reports whether a record that decoded into a row of its
	// route's table is already in that table; deadLettered, whether a bad
	// record meant for route rs (nil: none) is already handled. Both
	// decide after the decode what skip cannot tell before it (a
	// dead-letter table may hold the offset instead).
	coveredRow(tp offsets.TP, offset int64) bool
	deadLettered(tp offsets.TP, offset int64, rs *tables.Route) bool
	// onRow notes the row of tp just appended to a's open batch.
	onRow(a *accState, tp offsets.TP)
	// onSeal notes that a's open batch was sealed as b.
	onSeal(a *accState, b *sealedBatch)
	// waiting reports whether ts's next batch must wait before its INSERT.
	waiting(ts *tables.Table) bool
	// beforeInsert is the context and block b's INSERT uses; an error
	// means b is not inserted: errInsertLater (b is put back at the head
	// of its table's queue with dispatch.requeue, which frees the insert
	// slot b took: exactly-once's intent commit is out, or is tried again
	// later) leaves it for retryDue, any other fails it.
	beforeInsert(ctx context.Context, ts *tables.Table, b *sealedBatch) (context.Context, chschema.Block, error)
	// onAck notes that batch id of ts is inserted.
	onAck(ts *tables.Table, id uint64)
	// commitMeta is what a commit of positions c sends: the positions
	// (some may be left out), their metadata, and what to do once the
	// commit succeeded (nil: nothing).
	commitMeta(c map[offsets.TP]offsets.Commit) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, func())
	// onAssign prepares newly assigned partitions before their records
	// are handled.
	onAssign(ctx context.Context, tps []offsets.TP)
	// onRelease drops what belongs to partitions given up.
	onRelease(tps []offsets.TP)
	// nextRetry is how long until waiting work is due (ok false: none);
	// retryDue starts it once due (also after each commit's result).
	nextRetry(now time.Time) (time.Duration, bool)
	retryDue(ctx context.Context)
	// stuckOn names what the guarantee's own work waits for ("" nothing),
	// for the shutdown_timeout line.
	stuckOn() string
}

// errInsertLater is beforeInsert's answer for a batch that waits at the
// head of its table's queue and is tried again (retryDue).
var errInsertLater = errors.New("insert later")

// atLeastOnce is delivery: at_least_once: offsets are committed once the
// batches before them are in; a restart may insert a batch again.
type atLeastOnce struct{}

func (atLeastOnce) check(context.Context) error                        { return nil }
func (atLeastOnce) skip(offsets.TP, int64) bool                        { return false }
func (atLeastOnce) coveredRow(offsets.TP, int64) bool                  { return false }
func (atLeastOnce) deadLettered(offsets.TP, int64, *tables.Route) bool { return false }
func (atLeastOnce) onRow(*accState, offsets.TP)                        {}
func (atLeastOnce) onSeal(*accState, *sealedBatch)                     {}
func (atLeastOnce) waiting(*tables.Table) bool                         { return false }
func (atLeastOnce) onAck(*tables.Table, uint64)                        {}
func (atLeastOnce) onAssign(context.Context, []offsets.TP)             {}
func (atLeastOnce) onRelease([]offsets.TP)                             {}
func (atLeastOnce) nextRetry(time.Time) (time.Duration, bool)          { return 0, false }
func (atLeastOnce) retryDue(context.Context)                           {}
func (atLeastOnce) stuckOn() string                                    { return "" }

// beforeInsert inserts b's block as it is, with the table's own settings
// (a dead-letter table on a cluster waits for every shard).
func (atLeastOnce) beforeInsert(ctx context.Context, ts *tables.Table, b *sealedBatch) (context.Context, chschema.Block, error) {
	return ts.InsertContext(ctx), chschema.Block(b.Data), nil
}

// commitMeta commits the positions without metadata.
func (atLeastOnce) commitMeta(c map[offsets.TP]offsets.Commit) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, func()) {
	return c, nil, nil
}
