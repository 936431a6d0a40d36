package pipeline

import "sink/internal/status"

// Backpressure. The poller polls only when the owner asks (requestPoll),
// and the owner decodes polled records only while the buffer budget has
// room (decodable): what the open and unacknowledged batches, the bad
// records on their way to the dead-letter topic and the held records take
// (memUsed) stays within batch.buffer_memory. Not polling is the
// backpressure: franz-go keeps at most one unpolled fetch per broker, so
// fetching stops too.

// closedChan is always ready: decodable's "go on".
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// decodable is ready (a closed channel) when pending records may be
// decoded now, and nil (never ready in a select) when there are none, the
// buffer budget is used up, a revoke is being handled, the loop is
// stopping or the connector is paused.
func (p *Pipeline) decodable() <-chan struct{} {
	if !p.in.HasPending() || p.fatal != nil || p.revoke != nil || p.view.state == status.Paused || p.memUsed() >= int(p.cfg.Batch.BufferMemory) {
		return nil
	}
	return closedChan
}

// requestPoll asks for more records unless the buffer budget is used up,
// a revoke is being handled, records wait for the schema registry or a
// new column (held) or polled records are not decoded yet.
func (p *Pipeline) requestPoll() {
	if p.polling || p.revoke != nil || p.in.Held().Holding() {
		return
	}
	used, budget := p.memUsed(), int(p.cfg.Batch.BufferMemory)
	if used >= budget {
		if !p.paused {
			p.paused = true
			p.log.Info().Int("buffered_bytes", used).Int("buffer_memory", budget).
				Msg("buffer full: fetching paused until inserts free space")
		}
		p.m.SetBuffer(used, budget, true)
		return
	}
	p.m.SetBuffer(used, budget, false)
	if p.paused {
		p.paused = false
		p.log.Info().Int("buffered_bytes", used).Msg("fetching resumed")
	}
	if p.in.HasPending() {
		return
	}
	if _, ok := p.cons.(pauseSource); p.pausing() && !ok {
		return // a Source that cannot pause its fetching: stop polling instead
	}
	p.polling = true
	p.want <- struct{}{}
}

// memUsed is the bytes held by open and unacknowledged batches, by bad
// records waiting for the dead-letter topic and by records waiting for the
// schema registry: what batch.buffer_memory bounds.
func (p *Pipeline) memUsed() int { return p.in.Bytes() + p.disp.Bytes() }
