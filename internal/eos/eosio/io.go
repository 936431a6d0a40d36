// Package eosio is the I/O of exactly-once delivery on Kafka (kadm,
// franz-go) and ClickHouse (clickhouse-go): the production
// pipeline.ExactlyOnce. Package eos holds the ledger, the tokens and the
// recovery plan it serves; this package is apart so that eos imports
// neither writer nor consumer.
package eosio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/consumer"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/writer"
)

// IO is the I/O of exactly-once delivery beyond the pipeline's Source and
// Sink ports (pipeline.ExactlyOnce): the group's committed ledgers and the
// topics' state read with a Kafka client of its own that joins no group,
// records read back with a client per replay, and the server's and
// tables' deduplication and held offsets read on the sink's ClickHouse
// connection.
//
// Concurrency: safe for concurrent use; the pipeline calls it from its
// owner goroutine. Close it after the pipeline's Run returned.
type IO struct {
	group   string
	opts    []kgo.Opt // every client's: brokers, client id, TLS, SASL
	timeout time.Duration
	conn    driver.Conn

	// shards, when set, is the cluster whose shards hold the tables'
	// rows (OnCluster).
	shards Shards
	// check and present replace the per-server reads in tests.
	check   func(ctx context.Context, conn driver.Conn, where string, tables []*writer.Table) ([]eos.Window, error)
	present func(ctx context.Context, conn driver.Conn, addr, table string, tp offsets.TP, from, to int64) ([]eos.Span, error)

	mu  sync.Mutex
	adm *kadm.Client
	cl  *kgo.Client
}

// NewIO prepares the I/O of cfg's group on conn. It dials nothing: the
// Kafka client connects on its first request. It fails only when a TLS or
// password file cannot be read (config.Validate read them once already).
func NewIO(cfg *config.Config, conn driver.Conn) (*IO, error) {
	opts, err := consumer.ClientOptions(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	return &IO{group: cfg.Kafka.Group, opts: opts, timeout: cfg.Kafka.RequestTimeout, conn: conn}, nil
}

// admin returns the Kafka admin client, made on first use. Its requests
// are given the consumer's request timeout on top of franz-go's own, as
// the consumer's client's are.
func (io *IO) admin() (*kadm.Client, error) {
	io.mu.Lock()
	defer io.mu.Unlock()
	if io.adm != nil {
		return io.adm, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), io.opts...), kgo.RequestTimeoutOverhead(io.timeout))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	io.cl, io.adm = cl, kadm.NewClient(cl)
	return io.adm, nil
}

// Close closes the Kafka client, if one was made.
func (io *IO) Close() {
	io.mu.Lock()
	defer io.mu.Unlock()
	if io.cl != nil {
		io.cl.Close()
		io.cl, io.adm = nil, nil
	}
}

// Snapshot reads every committed offset of the group with its metadata.
func (io *IO) Snapshot(ctx context.Context) (eos.Snapshot, error) {
	adm, err := io.admin()
	if err != nil {
		return nil, err
	}
	return eos.FetchSnapshot(ctx, adm, io.group)
}

// TopicState reads the topic ID of every topic of tps (absent when the
// broker gives none) and the log end offset of each of their partitions.
func (io *IO) TopicState(ctx context.Context, tps []offsets.TP) (map[string]string, map[offsets.TP]int64, error) {
	adm, err := io.admin()
	if err != nil {
		return nil, nil, err
	}
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("exactly-once: reading the topics' IDs: %w", err)
	}
	ids := map[string]string{}
	for t, d := range details {
		if d.Err == nil && d.ID != (kadm.TopicID{}) {
			ids[t] = d.ID.String()
		}
	}
	listed, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("exactly-once: reading the partitions' log end offsets: %w", err)
	}
	ends := map[offsets.TP]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			ends[offsets.TP{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	})
	return ids, ends, nil
}

// ReadRanges reads exactly the records of ranges back (eos.ReadRanges, with
// read_committed isolation), giving up after three request timeouts.
func (io *IO) ReadRanges(ctx context.Context, ranges []eos.Range) (map[offsets.TP][]*kgo.Record, error) {
	opts := append(append([]kgo.Opt(nil), io.opts...), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	return eos.ReadRanges(ctx, opts, ranges, 3*io.timeout)
}

// Shards is where a cluster keeps the rows of a table the sink writes shard
// by shard (writer.Cluster.Local): for a target: local route's table, its
// local table on every replica of every shard.
type Shards interface {
	Local(ctx context.Context, db, table string) (writer.LocalSet, bool, error)
}

// OnCluster makes the table checks of exactly-once read every shard of a
// cluster for the tables s writes shard by shard: the deduplication
// windows (Windows) and the offsets held after a rewind (Present). Call it
// before the pipeline starts.
func (io *IO) OnCluster(s Shards) { io.shards = s }

// local is where t's rows are kept on a cluster; ok false when t is
// written on the sink's own server (or through the Distributed engine).
func (io *IO) local(ctx context.Context, t *writer.Table) (writer.LocalSet, bool, error) {
	if io.shards == nil {
		return writer.LocalSet{}, false, nil
	}
	return io.shards.Local(ctx, t.Database, t.Name)
}

// Present returns the offsets of tp in from..to-1 (to -1: no end) that t
// holds (eos.Present). For a table written shard by shard it asks every
// replica of every shard and returns the union: each shard holds its own
// rows, and a row a replica acknowledged may not have reached the shard's
// other replicas yet. A replica that cannot answer fails the check, naming
// it, rather than let a rewind insert again rows only it holds.
func (io *IO) Present(ctx context.Context, t *writer.Table, tp offsets.TP, from, to int64) ([]eos.Span, error) {
	set, ok, err := io.local(ctx, t)
	if err != nil {
		return nil, err
	}
	if !ok {
		return io.presentOn(ctx, io.conn, "", quotedName(t.Database, t.Name), tp, from, to)
	}
	table := quotedName(set.Database, set.Name)
	var lists [][]eos.Span
	for _, reps := range set.Shards {
		for _, r := range reps {
			spans, err := io.presentOn(ctx, r.Conn, r.Addr, table, tp, from, to)
			if err != nil {
				return nil, fmt.Errorf("exactly-once: shard %d replica %s: %w (every replica is asked which offsets it holds; asked again at the next assignment)",
					r.Shard, r.Addr, err)
			}
			lists = append(lists, spans)
		}
	}
	return eos.Union(lists...), nil
}

func quotedName(db, table string) string {
	return chschema.QuoteIdent(db) + "." + chschema.QuoteIdent(table)
}

// presentOn is eos.Present on conn, the server at addr ("" for the sink's
// own); a field replaces it in tests, which have no server.
func (io *IO) presentOn(ctx context.Context, conn driver.Conn, addr, table string, tp offsets.TP, from, to int64) ([]eos.Span, error) {
	if io.present != nil {
		return io.present(ctx, conn, addr, table, tp, from, to)
	}
	return eos.Present(ctx, conn, table, tp, from, to)
}

// Windows refuses, in one line, a server, a table or a materialized view
// downstream of one that exactly-once delivery cannot work with (Require,
// RequireViews of package eos); otherwise it returns each table's
// deduplication setting and window, in the order of tables.
//
// A table written shard by shard (OnCluster) is checked on every replica of
// every shard, in its local table: the replicas of a shard need not agree
// (a table's own SETTINGS travel with its replicated ALTERs, but a server's
// merge_tree default does not, and any replica may clean up old blocks by
// its own), so each is read and the smallest window counts; a refusal
// names the shard and replica. A replica that cannot be reached is passed
// over, and named in the window's Unchecked, when another replica of its
// shard answered; a shard none of whose replicas answers is refused.
func (io *IO) Windows(ctx context.Context, tables []*writer.Table) ([]eos.Window, error) {
	seed, reps, shardsOf, err := io.windowServers(ctx, tables)
	if err != nil {
		return nil, err
	}
	wr := windowsRead{out: make([]eos.Window, len(tables)), read: make([]bool, len(tables)), answered: map[[2]int]bool{}}
	if len(seed.tables) > 0 {
		ws, err := io.checkOn(ctx, seed.conn, "", seed.tables)
		if err != nil {
			return nil, err
		}
		wr.merge(seed, ws)
	}
	var unreached []error
	for _, s := range reps {
		ws, err := io.checkOn(ctx, s.conn, s.where, s.tables)
		var nr *notReached
		switch {
		case err == nil:
			wr.merge(s, ws)
		case errors.As(err, &nr):
			unreached = append(unreached, err)
			for _, i := range s.idx {
				wr.out[i].Unchecked = append(wr.out[i].Unchecked, s.where)
			}
		default:
			return nil, err
		}
	}
	for i, shards := range shardsOf {
		for _, n := range shards {
			if !wr.answered[[2]int{i, n}] {
				return nil, fmt.Errorf("delivery exactly_once: no replica of shard %d could be reached to check the deduplication window of %s's local table, so a replayed batch might not be dropped there: %w",
					n, tables[i].FullName(), errors.Join(unreached...))
			}
		}
	}
	return wr.out, nil
}

// windowServer is one server Windows checks, with the tables it reads
// there.
type windowServer struct {
	conn   driver.Conn
	where  string
	shard  int
	tables []*writer.Table
	idx    []int // the position of each of tables in the caller's
}

// windowServers sorts tables by the server that checks them: seed, the
// sink's own server, for a table written as one; every replica of every
// shard (reps, each once) for the local table of one written shard by
// shard, whose shard numbers shardsOf gives by the table's position.
func (io *IO) windowServers(ctx context.Context, tables []*writer.Table) (seed *windowServer, reps []*windowServer, shardsOf [][]int, err error) {
	seed = &windowServer{conn: io.conn}
	byAddr := map[string]*windowServer{}
	shardsOf = make([][]int, len(tables))
	for i, t := range tables {
		set, ok, err := io.local(ctx, t)
		if err != nil {
			return nil, nil, nil, err
		}
		if !ok {
			seed.tables, seed.idx = append(seed.tables, t), append(seed.idx, i)
			continue
		}
		lt := chtable.NewTable(set.Database, set.Name, t.Schema, t.Insert)
		for _, shard := range set.Shards {
			for _, r := range shard {
				s := byAddr[r.Addr]
				if s == nil {
					s = &windowServer{conn: r.Conn, where: fmt.Sprintf("shard %d replica %s", r.Shard, r.Addr), shard: r.Shard}
					byAddr[r.Addr] = s
					reps = append(reps, s)
				}
				s.tables, s.idx = append(s.tables, lt), append(s.idx, i)
			}
			if len(shard) > 0 && !slices.Contains(shardsOf[i], shard[0].Shard) {
				shardsOf[i] = append(shardsOf[i], shard[0].Shard)
			}
		}
	}
	return seed, reps, shardsOf, nil
}

// windowsRead gathers what the servers answered: each table's window (the
// smallest of its servers'), whether any server read it, and which of its
// shards answered.
type windowsRead struct {
	out      []eos.Window
	read     []bool
	answered map[[2]int]bool // table, shard
}

// merge takes the windows ws that server s gave for its tables.
func (wr *windowsRead) merge(s *windowServer, ws []eos.Window) {
	for j, i := range s.idx {
		if j >= len(ws) {
			break
		}
		if w := ws[j]; !wr.read[i] || w.Size < wr.out[i].Size {
			wr.out[i].Setting, wr.out[i].Size = w.Setting, w.Size
		}
		wr.read[i] = true
		wr.answered[[2]int{i, s.shard}] = true
	}
}

// notReached is a server Windows could not read (its connection or
// query failed on the way), as opposed to one that answered and refused.
type notReached struct {
	where string
	err   error
}

func (e *notReached) Error() string { return e.where + ": not reached: " + e.err.Error() }
func (e *notReached) Unwrap() error { return e.err }

// checkOn runs the checks of Windows on one server (a field in tests).
func (io *IO) checkOn(ctx context.Context, conn driver.Conn, where string, tables []*writer.Table) ([]eos.Window, error) {
	if io.check != nil {
		return io.check(ctx, conn, where, tables)
	}
	return check(ctx, conn, where, tables)
}

// check is Windows on one server: where names it ("" for the sink's own).
func check(ctx context.Context, conn driver.Conn, where string, tables []*writer.Table) ([]eos.Window, error) {
	info, err := writer.Probe(ctx, conn)
	if err != nil {
		if where != "" && chtable.Classify(ctx, err) == writer.Retriable {
			return nil, &notReached{where: where, err: err}
		}
		return nil, named(where, err)
	}
	dedups, err := writer.DedupWindows(ctx, conn, tables)
	if err != nil {
		return nil, named(where, err)
	}
	targets := make([]eos.Target, len(tables))
	for i, t := range tables {
		targets[i] = eos.Target{Database: t.Database, Name: t.Name, Insert: t.Insert, Where: where}
	}
	if err := eos.Require(info, targets, dedups); err != nil {
		return nil, err
	}
	views, err := writer.ViewDedups(ctx, conn, tables)
	if err != nil {
		return nil, named(where, err)
	}
	if err := eos.RequireViews(views, writer.CanSetDependentDedup(ctx, conn)); err != nil {
		return nil, named(where, err)
	}
	out := make([]eos.Window, len(tables))
	for i := range tables {
		if i < len(dedups) {
			out[i].Setting = dedups[i].Setting
			out[i].Size, _ = strconv.ParseInt(dedups[i].Value, 10, 64)
		}
	}
	return out, nil
}

// named prefixes err with the cluster server it came from, if any.
func named(where string, err error) error {
	if where == "" {
		return err
	}
	return fmt.Errorf("%s: %w", where, err)
}
