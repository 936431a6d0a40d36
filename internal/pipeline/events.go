package pipeline

import (
	"context"

	"sink/internal/tables"
)

// Every goroutine the pipeline starts hands its outcome back to the owner
// as an event, one type per kind of outcome, through one inbox: an
// INSERT's (dispatch's Inserted, Failed), a dead-letter produce's, a
// TRUNCATE TABLE's or a schema look-up's (intake's), a table read's or
// ALTER's (described), a parts read's (dispatch's PartsRead) or a
// positions read's. The owner's loop takes them in the order they came
// and applies each with its role's handler (Apply). A send after Run made
// its last commit is dropped (post), so a late goroutine never blocks.
// The committer's results have a channel of their own: a commit that must
// be answered before the owner goes on waits for its own (settle).

// event is an outcome handed back to the owner goroutine.
type event interface{ Apply(ctx context.Context) }

// post hands e to the owner, or drops it once Run has made its last
// commit.
func (p *Pipeline) post(e event) {
	select {
	case p.inbox <- e:
	case <-p.calls.stopped:
	}
}

// described is a table's description read off the owner (a refresh, an
// INSERT's schema error, an ALTER's end: internal/tables).
type described struct {
	p *Pipeline
	r tables.Result
}

func (e described) Apply(ctx context.Context) { e.p.handleTable(ctx, e.r) }
