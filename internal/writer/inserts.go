package writer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sink/internal/budget"
)

// InsertCount is a server's count of INSERT queries since it started, as
// system.events' InsertQuery counts them: every INSERT query the server
// was sent (VALUES, SELECT, native blocks; failed ones too), whatever the
// table, and not the parts a replica fetches from another. The budget of
// INSERTs per server is shared across connectors from it
// (internal/budget).
type InsertCount struct {
	// Count is the cumulative InsertQuery count (on a cluster's shard, the
	// sum over its replicas).
	Count uint64
	// Uptime is how long the server has run (on a shard, its
	// shortest-running replica's): a restart shows as a shorter one.
	Uptime time.Duration
}

// insertCountSQL reads InsertQuery and uptime in one query. sumIf gives 0
// where 18.16 lists no row for an event that has not happened yet.
const insertCountSQL = "SELECT sumIf(value, event = 'InsertQuery'), uptime() FROM system.events"

// InsertQueries reads the server's InsertQuery count. With several
// clickhouse.addrs it is the count of whichever the pool reaches (the
// first that answers), so a switch to another shows as a reset. Safe for
// concurrent use.
func (w *Writer) InsertQueries(ctx context.Context) (InsertCount, error) {
	var (
		n  uint64
		up uint32
	)
	if err := w.conn.QueryRow(ctx, insertCountSQL).Scan(&n, &up); err != nil {
		return InsertCount{}, fmt.Errorf("clickhouse: reading system.events: %w", err)
	}
	return InsertCount{Count: n, Uptime: time.Duration(up) * time.Second}, nil
}

// ServerName is the name a single server's INSERT budget goes by: its
// configured addresses, joined with commas.
func ServerName(addrs []string) string { return strings.Join(addrs, ",") }

// ShardName is the name a cluster's shard's INSERT budget goes by.
func ShardName(num int) string { return "shard " + strconv.Itoa(num) }

// InsertCounts is the server's count by ServerName of clickhouse.addrs,
// the name the pipeline's budget knows it by.
func (w *Writer) InsertCounts(ctx context.Context) (map[string]InsertCount, error) {
	n, err := w.InsertQueries(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]InsertCount{ServerName(w.cfg.Addrs): n}, nil
}

// InsertCounts reads the InsertQuery count of each shard, by ShardName
// (the names Servers gives): the sum over the shard's replicas, since the
// connector's INSERTs to a shard go to any of them
// (clickhouse.replica_order) and a replica's fetches of another's parts do
// not count; and, by ServerName, the count of the server clickhouse.addrs
// reach, which the tables without a cluster target are counted against. A
// shard with a replica that cannot be read is left out (a partial sum
// would look like a reset) and its error joined into the error returned
// with the others.
func (c *Cluster) InsertCounts(ctx context.Context) (map[string]InsertCount, error) {
	lay := c.lay.Load()
	out := make(map[string]InsertCount, len(lay.shards)+1)
	var errs []error
	if n, err := c.Writer.InsertQueries(ctx); err != nil {
		errs = append(errs, err)
	} else {
		out[ServerName(c.cfg.Addrs)] = n
	}
	for si, reps := range lay.shards {
		shard := lay.topo.Shards[si]
		var sum InsertCount
		ok := true
		for ri, w := range reps {
			n, err := w.InsertQueries(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %d replica %s: %w", shard.Num, shard.Replicas[ri].Addr, err))
				ok = false
				break
			}
			sum.Count += n.Count
			if ri == 0 || n.Uptime < sum.Uptime {
				sum.Uptime = n.Uptime
			}
		}
		if ok {
			out[ShardName(shard.Num)] = sum
		}
	}
	return out, errors.Join(errs...)
}

// InsertCounter is a Writer or a Cluster: what ShareReader reads.
type InsertCounter interface {
	InsertCounts(ctx context.Context) (map[string]InsertCount, error)
}

// ShareReader is the Reader of a shared budget (internal/budget) over s,
// each read bounded by timeout (clickhouse.query_timeout).
func ShareReader(s InsertCounter, timeout time.Duration) budget.Reader {
	return func(ctx context.Context) (map[string]budget.Reading, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		counts, err := s.InsertCounts(ctx)
		out := make(map[string]budget.Reading, len(counts))
		for k, v := range counts {
			out[k] = budget.Reading(v)
		}
		return out, err
	}
}
