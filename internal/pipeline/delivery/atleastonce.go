package delivery

import (
	"context"
	"time"

	"sink/internal/chschema"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// AtLeastOnce is delivery: at_least_once: offsets are committed once the
// batches before them are in; a restart may insert a batch again. It adds
// nothing to the shared path.
type AtLeastOnce struct{}

func (AtLeastOnce) Check(context.Context) error                        { return nil }
func (AtLeastOnce) Skip(offsets.TP, int64) bool                        { return false }
func (AtLeastOnce) CoveredRow(offsets.TP, int64) bool                  { return false }
func (AtLeastOnce) DeadLettered(offsets.TP, int64, *tables.Route) bool { return false }
func (AtLeastOnce) OnRow(uint64, offsets.TP)                           {}
func (AtLeastOnce) OnSeal(*tables.Table, *Batch)                       {}
func (AtLeastOnce) Waiting(*tables.Table) bool                         { return false }
func (AtLeastOnce) OnAck(*tables.Table, uint64)                        {}
func (AtLeastOnce) OnAssign(context.Context, []offsets.TP)             {}
func (AtLeastOnce) OnRelease([]offsets.TP)                             {}
func (AtLeastOnce) NextRetry(time.Time) (time.Duration, bool)          { return 0, false }
func (AtLeastOnce) RetryDue(context.Context)                           {}
func (AtLeastOnce) StuckOn() string                                    { return "" }

// BeforeInsert inserts b's block as it is, with the table's own settings
// (a dead-letter table on a cluster waits for every shard).
func (AtLeastOnce) BeforeInsert(ctx context.Context, ts *tables.Table, b *Batch) (context.Context, chschema.Block, bool, error) {
	return ts.InsertContext(ctx), chschema.Block(b.Data), false, nil
}

// CommitMeta commits the positions without metadata.
func (AtLeastOnce) CommitMeta(c map[offsets.TP]offsets.Commit) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, func()) {
	return c, nil, nil
}
