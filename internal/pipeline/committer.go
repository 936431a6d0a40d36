package pipeline

import (
	"context"

	"sink/internal/offsets"
)

// committer sends offset commits off the owner goroutine: the owner puts
// the latest positions in a one-slot mailbox and goes on; the committer's
// goroutine commits them (at most kafka.request_timeout) and hands the
// result back as an event, which the owner handles like an ack (settled).
// One commit is out at a time, so commits reach the broker in the order
// the owner made them and positions only move forward; a commit asked for
// while one is out is made when its result is in, from the positions of
// that moment (the latest ones, so nothing queues).
//
// Exactly-once's intents take the same path but are never merged: each is
// a commit of its own (commitInOrder), queued in the order asked and sent
// before the latest positions, and each is built only when its turn comes,
// from the ledgers as the results before it left them. So no commit built
// before an intent lands after it (which would overwrite the intent's
// ledgers with older ones), and an intent never overwrites another's
// entry. The batch waits at the head of its table's queue until its
// intent's result is in (exactly.beforeInsert); other tables go on.
//
// The commits that must be done before the owner goes on (a revoke's and
// the revoke deadline's, whose callback may return only once the revoked
// partitions' offsets are answered; the pause's, which is complete only
// once committed; the shutdown's, after which nothing is left to do) first
// wait for the commit that is out (settle), then commit on the owner
// (commitNow). A partition given up (forget) waits for the commit out
// before its state goes, so that a result never concerns a partition this
// member no longer tracks, and so that an intent out when its partition is
// given up is known recorded or failed.
//
// Concurrency: the owner calls every method but run, which is the
// committer's goroutine and touches only jobs, results and the Source.
type committer struct {
	jobs    chan commitJob    // the one slot: empty whenever busy is false
	results chan commitResult // one result per job
	done    chan struct{}     // closed when run returns
	busy    bool              // a job was sent and its result not handled
	again   bool              // a commit of the latest positions was asked for while busy
	// ordered are the commits asked for with commitInOrder, oldest first,
	// not built yet; each builds its job when sent (ok false: nothing to
	// send any more).
	ordered []func() (commitJob, bool)
}

// commitJob is one commit: positions, their metadata (delivery's
// commitMeta), and what to do once it succeeded (nil: nothing). A job of
// commitInOrder has answer instead, which handles its result whatever it
// is: its positions are not kept for the next commit when it fails.
type commitJob struct {
	pos    map[offsets.TP]offsets.Commit
	meta   map[offsets.TP]string
	done   func()
	answer func(error)
}

type commitResult struct {
	job commitJob
	err error
}

func newCommitter() *committer {
	return &committer{jobs: make(chan commitJob, 1), results: make(chan commitResult, 1),
		done: make(chan struct{})}
}

// run commits each job and reports its result, until jobs is closed.
func (c *committer) run(commit func(map[offsets.TP]offsets.Commit, map[offsets.TP]string) error) {
	defer close(c.done)
	for job := range c.jobs {
		c.results <- commitResult{job: job, err: commit(job.pos, job.meta)}
	}
}

// commit sends every position that became safe since the last commit,
// through the committer; a failed commit is retried with the next one.
func (p *Pipeline) commit() {
	if p.committer == nil {
		p.commitNow() // not running: nothing can answer later
		return
	}
	p.committer.again = true
	p.sendNext()
}

// commitInOrder asks for a commit that is made as build makes it when its
// turn comes, after the ones asked for before it and never merged with
// another (an exactly-once intent). Its job's answer gets the result, as
// an event of Run. Not running, it commits at once and reports false.
func (p *Pipeline) commitInOrder(build func() (commitJob, bool)) bool {
	if p.committer == nil {
		if job, ok := build(); ok {
			p.committed(job, p.commitOffsets(job.pos, job.meta))
		}
		return false
	}
	p.committer.ordered = append(p.committer.ordered, build)
	p.sendNext()
	return true
}

// sendNext sends the next commit unless one is out: the oldest of
// commitInOrder, else the latest positions if a commit was asked for.
func (p *Pipeline) sendNext() {
	c := p.committer
	for !c.busy && len(c.ordered) > 0 {
		build := c.ordered[0]
		c.ordered[0] = nil
		c.ordered = c.ordered[1:]
		if job, ok := build(); ok {
			c.busy = true
			c.jobs <- job
		}
	}
	if c.busy || !c.again {
		return
	}
	c.again = false
	job, ok := p.commitJob()
	if !ok {
		return
	}
	p.uncommitted = nil // in the job; a failure puts them back
	c.busy = true
	c.jobs <- job
}

// stalled reports whether commits of commitInOrder wait while none is out
// (left so by settle or commitNow): sendNext sends them.
func (c *committer) stalled() bool { return c != nil && !c.busy && len(c.ordered) > 0 }

// commitNow commits on the owner and returns once the commit is answered:
// first the commit that is out, then the latest positions.
func (p *Pipeline) commitNow() {
	p.settle()
	job, ok := p.commitJob()
	if !ok {
		return
	}
	p.uncommitted = nil
	p.committed(job, p.commitOffsets(job.pos, job.meta))
}

// settle waits for the commit that is out, if any, and handles its result.
func (p *Pipeline) settle() {
	if p.committer == nil || !p.committer.busy {
		return
	}
	r := <-p.committer.results
	p.committer.again = false // the caller commits next
	p.committed(r.job, r.err)
}

// handleCommit is the committer's result, as an event of Run: the next
// commit goes out, and the delivery takes up what waited for the result
// (an exactly-once batch whose intent is answered).
func (p *Pipeline) handleCommit(writeCtx context.Context, r commitResult) {
	p.committed(r.job, r.err)
	p.sendNext()
	p.dlv.RetryDue(writeCtx)
}

// commitJob is what a commit sends now: the positions that became safe,
// the failed commit's positions, and with exactly-once the ledgers;
// ok is false when there is nothing to send.
func (p *Pipeline) commitJob() (commitJob, bool) {
	c := p.tracker.Committable()
	for tp, pos := range p.uncommitted {
		if _, newer := c[tp]; !newer {
			if c == nil {
				c = map[offsets.TP]offsets.Commit{}
			}
			c[tp] = pos
		}
	}
	if len(c) == 0 {
		if p.unacked() == 0 && p.disp.openBatches() == 0 {
			// Nothing handled is uncommitted: as good as a fresh commit,
			// so an idle topic does not look like a stuck commit.
			p.m.Committed(p.now())
		}
		return commitJob{}, false
	}
	var job commitJob
	if job.pos, job.meta, job.done = p.dlv.CommitMeta(c); len(job.pos) == 0 {
		return commitJob{}, false
	}
	return job, true
}

// committed handles the answer to job: a failure keeps its positions for
// the next commit. No partition is given up while a job is out (forget
// settles it first), so they are all still this member's.
func (p *Pipeline) committed(job commitJob, err error) {
	if p.committer != nil {
		p.committer.busy = false
	}
	if job.answer != nil {
		job.answer(err)
		return
	}
	if err != nil {
		p.log.Warn().Err(err).Int("partitions", len(job.pos)).Msg("offset commit failed; will retry")
		for tp, pos := range job.pos {
			if _, newer := p.uncommitted[tp]; !newer {
				if p.uncommitted == nil {
					p.uncommitted = map[offsets.TP]offsets.Commit{}
				}
				p.uncommitted[tp] = pos
			}
		}
		return
	}
	p.committedSeen(job.pos)
	if job.done != nil {
		job.done()
	}
	p.m.Committed(p.now())
	p.log.Debug().Int("partitions", len(job.pos)).Msg("committed")
}
