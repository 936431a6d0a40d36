package pipeline

import (
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
// The commits that must be done before the owner goes on (a revoke's, the
// revoke deadline's, the pause's, the shutdown's) first wait for the
// commit that is out (settle), then commit on the owner (commitNow). So
// do exactly-once's intents, whose ledgers an older commit still out must
// not overwrite, and a partition given up (forget) waits for the commit
// out before its state goes, so that a result never concerns a partition
// this member no longer tracks.
//
// Concurrency: the owner calls every method but run, which is the
// committer's goroutine and touches only jobs, results and the Source.
type committer struct {
	jobs    chan commitJob    // the one slot: empty whenever busy is false
	results chan commitResult // one result per job
	done    chan struct{}     // closed when run returns
	busy    bool              // a job was sent and its result not handled
	again   bool              // a commit was asked for while busy
}

// commitJob is one commit: positions, their metadata (delivery's
// commitMeta), and what to do once it succeeded (nil: nothing).
type commitJob struct {
	pos  map[offsets.TP]offsets.Commit
	meta map[offsets.TP]string
	done func()
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
	if p.committer.busy {
		p.committer.again = true
		return
	}
	job, ok := p.commitJob()
	if !ok {
		return
	}
	p.uncommitted = nil // in the job; a failure puts them back
	p.committer.busy = true
	p.committer.jobs <- job
}

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

// handleCommit is the committer's result, as an event of Run.
func (p *Pipeline) handleCommit(r commitResult) {
	p.committed(r.job, r.err)
	if p.committer.again {
		p.committer.again = false
		p.commit()
	}
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
	if job.pos, job.meta, job.done = p.dlv.commitMeta(c); len(job.pos) == 0 {
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
