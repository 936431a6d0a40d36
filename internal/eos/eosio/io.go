// Package eosio is the I/O of exactly-once delivery on Kafka (kadm,
// franz-go) and ClickHouse (clickhouse-go): the production
// pipeline.ExactlyOnce. Package eos holds the ledger, the tokens and the
// recovery plan it serves; this package is apart so that eos imports
// neither writer nor consumer.
package eosio

import (
	"context"
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

// Present returns the offsets of tp in from..to-1 (to -1: no end) that t
// holds (eos.Present).
func (io *IO) Present(ctx context.Context, t *writer.Table, tp offsets.TP, from, to int64) ([]eos.Span, error) {
	return eos.Present(ctx, io.conn, chschema.QuoteIdent(t.Database)+"."+chschema.QuoteIdent(t.Name), tp, from, to)
}

// Windows refuses, in one line, a server, a table or a materialized view
// downstream of one that exactly-once delivery cannot work with (Require,
// RequireViews of package eos); otherwise it returns each table's deduplication setting
// and window, in the order of tables.
func (io *IO) Windows(ctx context.Context, tables []*writer.Table) ([]eos.Window, error) {
	info, err := writer.Probe(ctx, io.conn)
	if err != nil {
		return nil, err
	}
	dedups, err := writer.DedupWindows(ctx, io.conn, tables)
	if err != nil {
		return nil, err
	}
	targets := make([]eos.Target, len(tables))
	for i, t := range tables {
		targets[i] = eos.Target{Database: t.Database, Name: t.Name, Insert: t.Insert}
	}
	if err := eos.Require(info, targets, dedups); err != nil {
		return nil, err
	}
	views, err := writer.ViewDedups(ctx, io.conn, tables)
	if err != nil {
		return nil, err
	}
	if err := eos.RequireViews(views, writer.CanSetDependentDedup(ctx, io.conn)); err != nil {
		return nil, err
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
