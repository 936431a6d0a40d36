package pipeline

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// cancelGrace is how long Run waits, once it canceled them, for the
// goroutines that use the Sink to return: a canceled INSERT or query ends
// as soon as the driver has told the server and closed its connection.
const cancelGrace = 5 * time.Second

// goroutines are the goroutines that use the Sink (INSERTs, table
// re-reads, parts reads, ADD COLUMNs, TRUNCATEs), started with spawn; Run
// joins them, for at most grace after canceling them, before it returns,
// so that the caller may close the ClickHouse pool. live counts them for
// the error that names the ones still running. stopped is closed (stop)
// once Run's last commit is made: from then on every event sent to the
// owner (post) is dropped instead of waiting for a loop that has ended,
// and group callbacks no longer wait for it.
type goroutines struct {
	wg      sync.WaitGroup
	live    atomic.Int64
	grace   time.Duration
	stopped chan struct{}
	once    sync.Once
}

// spawn runs f on a goroutine that Run joins before it returns (f uses
// the Sink, which the caller closes after Run).
func (g *goroutines) spawn(f func()) {
	g.wg.Add(1)
	g.live.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.live.Add(-1)
		f()
	}()
}

// stop closes stopped.
func (g *goroutines) stop() { g.once.Do(func() { close(g.stopped) }) }

// join waits until every goroutine started with spawn has returned, for at
// most grace; the caller has canceled them. It reports the ones still
// running when the grace passed.
func (g *goroutines) join() error {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	t := time.NewTimer(g.grace)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("%d ClickHouse calls (INSERTs or queries) still running %s after they were canceled; the connection pool is closed under them",
			g.live.Load(), g.grace)
	}
}
