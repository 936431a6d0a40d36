package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/metrics"
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
// a commit of its own (inOrder), queued in the order asked and sent
// before the latest positions, and each is built only when its turn comes,
// from the ledgers as the results before it left them. So no commit built
// before an intent lands after it (which would overwrite the intent's
// ledgers with older ones), and an intent never overwrites another's
// entry. The batch waits at the head of its table's queue until its
// intent's result is in (exactly's BeforeInsert); other tables go on.
//
// The commits that must be done before the owner goes on (a revoke's and
// the revoke deadline's, whose callback may return only once the revoked
// partitions' offsets are answered; the pause's, which is complete only
// once committed; the shutdown's, after which nothing is left to do) first
// wait for the commit that is out (settle), then commit on the owner
// (commitNow). Before Run starts and after it ended, every commit is made
// on the owner at once. A partition given up (the pipeline's forget)
// settles the commit out before its state goes, so that a result never
// concerns a partition this member no longer tracks, and so that an
// intent out when its partition is given up is known recorded or failed.
//
// The committer owns what is committed: the offsets tracker (the
// contiguous prefix of handled records per partition, which the decode
// path adds to and the acks mark handled), the positions of a commit that
// failed (kept for the next one), and the commits themselves.
//
// Concurrency: the owner calls every method; run is the committer's
// goroutine while Run runs, and touches only jobs, results and the
// Source.
type committer struct {
	tracker     *offsets.Tracker
	src         func() Source // the consumer (Attach gives it after New)
	dlv         func() guarantee
	uncommitted map[offsets.TP]offsets.Commit // positions of a failed commit, retried
	timeout     time.Duration                 // kafka.request_timeout
	log         zerolog.Logger
	m           *metrics.Metrics
	now         func() time.Time
	// idle reports that nothing handled can be uncommitted beyond the
	// tracker (no batch or dead-letter produce unacknowledged, no open
	// batch); seen is told each successful commit's positions (the
	// status's view).
	idle func() bool
	seen func(map[offsets.TP]offsets.Commit)

	// While Run runs (running): the goroutine's mailbox.
	running bool
	jobs    chan commitJob    // the one slot: empty whenever busy is false
	results chan commitResult // one result per job
	done    chan struct{}     // closed when run returns
	busy    bool              // a job was sent and its result not handled
	again   bool              // a commit of the latest positions was asked for while busy
	// ordered are the commits asked for with inOrder, oldest first, not
	// built yet; each builds its job when sent (ok false: nothing to send
	// any more).
	ordered []func() (commitJob, bool)
}

// commitJob is one commit: positions, their metadata (delivery's
// CommitMeta), and what to do once it succeeded (nil: nothing). A job of
// inOrder has answer instead, which handles its result whatever it is:
// its positions are not kept for the next commit when it fails.
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

// start starts the committer's goroutine: from now on commit and inOrder
// send their commits through it.
func (c *committer) start() {
	c.jobs, c.results, c.done = make(chan commitJob, 1), make(chan commitResult, 1), make(chan struct{})
	c.running = true
	go c.run()
}

// run commits each job and reports its result, until jobs is closed.
func (c *committer) run() {
	defer close(c.done)
	for job := range c.jobs {
		c.results <- commitResult{job: job, err: c.send(job.pos, job.meta)}
	}
}

// stop waits for the commit still out, if any, and ends the committer's
// goroutine; later commits are made on the owner.
func (c *committer) stop() {
	c.settle()
	close(c.jobs)
	<-c.done
	c.running = false
}

// answers is where the commits' results come back while Run runs: nil (a
// channel never ready) otherwise.
func (c *committer) answers() <-chan commitResult {
	if !c.running {
		return nil
	}
	return c.results
}

// send commits pos (with meta, the exactly-once ledgers), waiting at most
// kafka.request_timeout: a coordinator that does not answer fails the
// commit, which the next one retries (an intent commit's failure is
// retried by its own backoff).
func (c *committer) send(pos map[offsets.TP]offsets.Commit, meta map[offsets.TP]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	return c.src().Commit(ctx, pos, meta)
}

// commit sends every position that became safe since the last commit,
// through the committer's goroutine; a failed commit is retried with the
// next one.
func (c *committer) commit() {
	if !c.running {
		c.commitNow() // not running: nothing can answer later
		return
	}
	c.again = true
	c.sendNext()
}

// inOrder asks for a commit that is made as build makes it when its turn
// comes, after the ones asked for before it and never merged with another
// (an exactly-once intent). Its job's answer gets the result, as an event
// of Run. Not running, it commits at once and reports false.
func (c *committer) inOrder(build func() (commitJob, bool)) bool {
	if !c.running {
		if job, ok := build(); ok {
			c.committed(job, c.send(job.pos, job.meta))
		}
		return false
	}
	c.ordered = append(c.ordered, build)
	c.sendNext()
	return true
}

// sendNext sends the next commit unless one is out: the oldest of
// inOrder, else the latest positions if a commit was asked for.
func (c *committer) sendNext() {
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
	job, ok := c.job()
	if !ok {
		return
	}
	c.uncommitted = nil // in the job; a failure puts them back
	c.busy = true
	c.jobs <- job
}

// stalled reports whether commits of inOrder wait while none is out (left
// so by settle or commitNow): sendNext sends them.
func (c *committer) stalled() bool { return c.running && !c.busy && len(c.ordered) > 0 }

// commitNow commits on the owner and returns once the commit is answered:
// first the commit that is out, then the latest positions. It reports
// whether every position is committed (false: the commit failed and is
// retried by the next one).
func (c *committer) commitNow() bool {
	c.settle()
	job, ok := c.job()
	if !ok {
		return true
	}
	c.uncommitted = nil
	c.committed(job, c.send(job.pos, job.meta))
	return len(c.uncommitted) == 0
}

// settle waits for the commit that is out, if any, and handles its result.
func (c *committer) settle() {
	if !c.running || !c.busy {
		return
	}
	r := <-c.results
	c.again = false // the caller commits next
	c.committed(r.job, r.err)
}

// handle is the committer's result, as an event of Run: the next commit
// goes out.
func (c *committer) handle(r commitResult) {
	c.committed(r.job, r.err)
	c.sendNext()
}

// job is what a commit sends now: the positions that became safe, the
// failed commit's positions, and with exactly-once the ledgers; ok is
// false when there is nothing to send.
func (c *committer) job() (commitJob, bool) {
	pos := c.tracker.Committable()
	for tp, at := range c.uncommitted {
		if _, newer := pos[tp]; !newer {
			if pos == nil {
				pos = map[offsets.TP]offsets.Commit{}
			}
			pos[tp] = at
		}
	}
	if len(pos) == 0 {
		if c.idle() {
			// Nothing handled is uncommitted: as good as a fresh commit,
			// so an idle topic does not look like a stuck commit.
			c.m.Committed(c.now())
		}
		return commitJob{}, false
	}
	var job commitJob
	if job.pos, job.meta, job.done = c.dlv().CommitMeta(pos); len(job.pos) == 0 {
		return commitJob{}, false
	}
	return job, true
}

// committed handles the answer to job: a failure keeps its positions for
// the next commit. No partition is given up while a job is out (forget
// settles it first), so they are all still this member's.
func (c *committer) committed(job commitJob, err error) {
	c.busy = false
	if job.answer != nil {
		job.answer(err)
		return
	}
	if err != nil {
		c.log.Warn().Err(err).Int("partitions", len(job.pos)).Msg("offset commit failed; will retry")
		for tp, pos := range job.pos {
			if _, newer := c.uncommitted[tp]; !newer {
				if c.uncommitted == nil {
					c.uncommitted = map[offsets.TP]offsets.Commit{}
				}
				c.uncommitted[tp] = pos
			}
		}
		return
	}
	c.seen(job.pos)
	if job.done != nil {
		job.done()
	}
	c.m.Committed(c.now())
	c.log.Debug().Int("partitions", len(job.pos)).Msg("committed")
}

// forget drops tps: their commits are over (the commit that was out is
// answered: settle).
func (c *committer) forget(tps []offsets.TP) {
	for _, tp := range tps {
		c.tracker.Forget(tp)
		delete(c.uncommitted, tp)
	}
}

// summary lists the committed position of every partition this member
// tracks ("t[0] up to offset 150, t[1] up to offset 7", or "nothing new").
func (c *committer) summary() string {
	tps := c.tracker.Partitions()
	slices.SortFunc(tps, func(a, b offsets.TP) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	var parts []string
	for _, tp := range tps {
		if at, ok := c.tracker.Position(tp); ok {
			parts = append(parts, fmt.Sprintf("%s[%d] up to offset %d", tp.Topic, tp.Partition, at.Offset))
		}
	}
	if len(parts) == 0 {
		return "nothing new"
	}
	return strings.Join(parts, ", ")
}
