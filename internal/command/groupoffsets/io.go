package groupoffsets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/consumer"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/writer"
)

// Group is the connector's consumer group on Kafka, read and moved with an
// admin client that joins no group.
type Group struct {
	cfg *config.Config
	cl  *kgo.Client
	adm *kadm.Client
}

// OpenGroup makes the admin client of cfg's group (it dials on first use).
func OpenGroup(cfg *config.Config) (*Group, error) {
	opts, err := consumer.ClientOptions(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.RequestTimeoutOverhead(cfg.Kafka.RequestTimeout))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return &Group{cfg: cfg, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close closes the client.
func (g *Group) Close() { g.cl.Close() }

// Members returns the group's state and its active members, one
// "client-id on host" each (none: no sink of the group is running).
func (g *Group) Members(ctx context.Context) (state string, members []string, err error) {
	ds, err := g.adm.DescribeGroups(ctx, g.cfg.Kafka.Group)
	if err != nil {
		return "", nil, fmt.Errorf("kafka: describing group %q: %w", g.cfg.Kafka.Group, err)
	}
	d := ds[g.cfg.Kafka.Group]
	if errors.Is(d.Err, kerr.GroupIDNotFound) {
		// Nothing ever joined or committed under this name (or its
		// offsets expired): no member, nothing committed.
		return "no such group yet", nil, nil
	}
	if d.Err != nil {
		return "", nil, fmt.Errorf("kafka: describing group %q: %w", g.cfg.Kafka.Group, d.Err)
	}
	for _, m := range d.Members {
		members = append(members, fmt.Sprintf("%s on %s (member %s)", m.ClientID, strings.TrimPrefix(m.ClientHost, "/"), m.MemberID))
	}
	return d.State, members, nil
}

// topics lists the topics the connector consumes: kafka.topics, and the
// existing topics kafka.topic_regex matches.
func (g *Group) topics(ctx context.Context) ([]string, error) {
	set := map[string]bool{}
	for _, t := range g.cfg.Kafka.Topics {
		set[t] = true
	}
	if g.cfg.Kafka.TopicRegex != "" {
		all, err := g.adm.ListTopics(ctx)
		if err != nil {
			return nil, fmt.Errorf("kafka: listing topics: %w", err)
		}
		for t := range all {
			if g.cfg.Consumes(t) {
				set[t] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

// Partitions reads every partition of the connector's topics: committed
// offset and metadata, log start and end, topic ID and, when atMilli is
// not nil, the first offset at or after that time.
func (g *Group) Partitions(ctx context.Context, atMilli *int64) ([]Partition, error) {
	topics, err := g.topics(ctx)
	if err != nil {
		return nil, err
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("kafka: none of the connector's topics exists")
	}
	parts, err := g.partitionsOf(ctx, topics)
	if err != nil {
		return nil, err
	}
	if err := g.logOffsets(ctx, topics, atMilli, parts); err != nil {
		return nil, err
	}
	if err := g.committed(ctx, topics, parts); err != nil {
		return nil, err
	}
	out := make([]Partition, 0, len(parts))
	for _, p := range parts {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return eos.LessTP(out[i].TP, out[j].TP) })
	return out, nil
}

// partitionsOf describes the topics: each partition, with nothing read yet
// (-1) but its topic's ID.
func (g *Group) partitionsOf(ctx context.Context, topics []string) (map[offsets.TP]*Partition, error) {
	details, err := g.adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("kafka: describing topics: %w", err)
	}
	parts := map[offsets.TP]*Partition{}
	for _, t := range topics {
		d, ok := details[t]
		if !ok || d.Err != nil {
			return nil, fmt.Errorf("kafka: topic %q: %v", t, d.Err)
		}
		for p := range d.Partitions {
			tp := offsets.TP{Topic: t, Partition: p}
			parts[tp] = &Partition{TP: tp, Committed: -1, Start: -1, End: -1, AtMilli: -1}
			if d.ID != (kadm.TopicID{}) {
				parts[tp].TopicID = d.ID.String()
			}
		}
	}
	return parts, nil
}

// offsetList is one listing of the partitions' offsets and where each
// offset goes in a Partition.
type offsetList struct {
	what string
	list func() (kadm.ListedOffsets, error)
	set  func(*Partition, int64)
}

// logOffsets reads each partition's log start and end and, when atMilli
// is not nil, its first offset at or after that time.
func (g *Group) logOffsets(ctx context.Context, topics []string, atMilli *int64, parts map[offsets.TP]*Partition) error {
	lists := []offsetList{
		{"start", func() (kadm.ListedOffsets, error) { return g.adm.ListStartOffsets(ctx, topics...) }, func(p *Partition, o int64) { p.Start = o }},
		{"end", func() (kadm.ListedOffsets, error) { return g.adm.ListEndOffsets(ctx, topics...) }, func(p *Partition, o int64) { p.End = o }},
	}
	if atMilli != nil {
		lists = append(lists, offsetList{"timestamp",
			func() (kadm.ListedOffsets, error) { return g.adm.ListOffsetsAfterMilli(ctx, *atMilli, topics...) },
			func(p *Partition, o int64) { p.AtMilli = o }})
	}
	for _, l := range lists {
		listed, err := l.list()
		if err != nil {
			return fmt.Errorf("kafka: listing %s offsets: %w", l.what, err)
		}
		listed.Each(func(o kadm.ListedOffset) {
			if p := parts[offsets.TP{Topic: o.Topic, Partition: o.Partition}]; p != nil && o.Err == nil {
				l.set(p, o.Offset)
			}
		})
	}
	return nil
}

// committed reads the group's committed offset and metadata of each
// partition.
func (g *Group) committed(ctx context.Context, topics []string, parts map[offsets.TP]*Partition) error {
	committed, err := g.adm.FetchOffsetsForTopics(ctx, g.cfg.Kafka.Group, topics...)
	if err != nil {
		return fmt.Errorf("kafka: fetching the committed offsets of group %q: %w", g.cfg.Kafka.Group, err)
	}
	var ferr error
	committed.Each(func(o kadm.OffsetResponse) {
		p := parts[offsets.TP{Topic: o.Topic, Partition: o.Partition}]
		switch {
		case p == nil:
		case o.Err != nil:
			ferr = fmt.Errorf("kafka: committed offset of %s[%d]: %w", o.Topic, o.Partition, o.Err)
		default:
			p.Committed, p.Metadata = o.At, o.Metadata
		}
	})
	return ferr
}

// Committed returns every offset the group has committed, sorted by
// topic and partition, as Kafka Connect's GET /connectors/NAME/offsets
// lists a sink connector's: whatever topic it is of (none: the group has
// no offsets, or no such group exists). Only Committed and Metadata are
// read; the log offsets are -1 (unknown).
func (g *Group) Committed(ctx context.Context) ([]Partition, error) {
	resp, err := g.adm.FetchOffsets(ctx, g.cfg.Kafka.Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: fetching the committed offsets of group %q: %w", g.cfg.Kafka.Group, err)
	}
	var out []Partition
	var ferr error
	resp.Each(func(o kadm.OffsetResponse) {
		switch {
		case o.Err != nil:
			ferr = fmt.Errorf("kafka: committed offset of %s[%d]: %w", o.Topic, o.Partition, o.Err)
		case o.At >= 0:
			out = append(out, Partition{TP: offsets.TP{Topic: o.Topic, Partition: o.Partition}, Committed: o.At,
				Metadata: o.Metadata, Start: -1, End: -1, AtMilli: -1})
		}
	})
	sort.Slice(out, func(i, j int) bool { return eos.LessTP(out[i].TP, out[j].TP) })
	return out, ferr
}

// Commit commits each move's offset with its metadata, in one request.
// Kafka accepts it only while the group has no member.
func (g *Group) Commit(ctx context.Context, moves []Move, metadata []string) error {
	var os kadm.Offsets
	for i, m := range moves {
		os.Add(kadm.Offset{Topic: m.TP.Topic, Partition: m.TP.Partition, At: m.To, LeaderEpoch: -1, Metadata: metadata[i]})
	}
	resp, err := g.adm.CommitOffsets(ctx, g.cfg.Kafka.Group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka: committing the new offsets of group %q: %w", g.cfg.Kafka.Group, err)
	}
	return nil
}

// Tables returns the tables (db, table) the connector's routes send
// topic's records to, each once, in route order (config.Validate refuses a
// route that can never take a record, so every matching route may).
func Tables(cfg *config.Config, topic string) ([][2]string, error) {
	var out [][2]string
	for _, i := range cfg.RoutesFor(topic) {
		db, t, err := cfg.TableForTopic(cfg.Routes[i], topic)
		if err != nil {
			return nil, err
		}
		if !contains(out, [2]string{db, t}) {
			out = append(out, [2]string{db, t})
		}
	}
	return out, nil
}

func contains(l [][2]string, x [2]string) bool {
	for _, y := range l {
		if y == x {
			return true
		}
	}
	return false
}

// quoted is db.table for a statement, each name through the one quoting
// function of generated SQL.
func quoted(db, table string) string {
	return chschema.QuoteIdent(db) + "." + chschema.QuoteIdent(table)
}

// HeldIn reads what db.table holds of tp's records at offsets from..to-1
// (to -1: no end). A table without the _topic, _partition and _offset
// columns answers NoSourceColumns.
func HeldIn(ctx context.Context, conn driver.Conn, db, table string, tp offsets.TP, from, to int64) (Held, error) {
	h := Held{Table: db + "." + table, DB: db, Name: table, From: from, To: to, MaxOffset: -1}
	var n uint64
	var engine string
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name IN ('_topic', '_partition', '_offset')", db, table).Scan(&n); err != nil {
		return h, fmt.Errorf("clickhouse: reading the columns of %s: %w", h.Table, err)
	}
	if err := conn.QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&engine); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return h, fmt.Errorf("clickhouse: table %s does not exist", h.Table)
		}
		return h, fmt.Errorf("clickhouse: table %s: %w", h.Table, err)
	}
	h.Replicated = strings.HasPrefix(engine, "Replicated")
	h.Other = !strings.HasSuffix(engine, "MergeTree")
	if n < 3 {
		h.NoSourceColumns = true
		return h, nil
	}
	q := "SELECT count(), uniqExact(_offset), toInt64(max(_offset)) FROM " + quoted(db, table) +
		" WHERE _topic = ? AND _partition = ? AND _offset >= ?"
	args := []any{tp.Topic, tp.Partition, from}
	if to >= 0 {
		q += " AND _offset < ?"
		args = append(args, to)
	}
	if err := conn.QueryRow(ctx, q, args...).Scan(&h.Rows, &h.Distinct, &h.MaxOffset); err != nil {
		return h, fmt.Errorf("clickhouse: counting the rows of %s[%d] in %s: %w", tp.Topic, tp.Partition, h.Table, err)
	}
	if h.Distinct == 0 {
		h.MaxOffset = -1
	}
	return h, nil
}

// DeleteFrom deletes db.table's rows of tp at offset from or later and
// waits for the mutation to finish (polling system.mutations, which both
// old and new servers have). It returns the statement it ran.
func DeleteFrom(ctx context.Context, conn driver.Conn, db, table string, tp offsets.TP, from int64) (string, error) {
	stmt := fmt.Sprintf("ALTER TABLE %s DELETE WHERE _topic = %s AND _partition = %d AND _offset >= %d",
		quoted(db, table), chschema.QuoteString(tp.Topic), tp.Partition, from)
	if err := conn.Exec(ctx, stmt); err != nil {
		return stmt, fmt.Errorf("clickhouse: %s: %w", stmt, err)
	}
	for {
		var pending uint64
		var reason string
		err := conn.QueryRow(ctx, "SELECT count(), any(latest_fail_reason) FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0", db, table).Scan(&pending, &reason)
		if err != nil {
			// 18.16 has no latest_fail_reason.
			reason = ""
			err = conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0", db, table).Scan(&pending)
		}
		if err != nil {
			return stmt, fmt.Errorf("clickhouse: waiting for the delete in %s: %w", db+"."+table, err)
		}
		if pending == 0 {
			return stmt, nil
		}
		if reason != "" {
			return stmt, fmt.Errorf("clickhouse: the delete in %s fails: %s", db+"."+table, reason)
		}
		select {
		case <-ctx.Done():
			return stmt, fmt.Errorf("clickhouse: waiting for the delete in %s: %w", db+"."+table, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Window reads how db.table deduplicates repeated INSERT blocks, and
// refuses (for --reload) a Replicated table with a window: its blocks are
// kept in Keeper, which ForgetTokens does not clear.
func Window(ctx context.Context, conn driver.Conn, db, table string) (chschema.TableDedup, error) {
	ds, err := writer.DedupWindows(ctx, conn, []*writer.Table{{Database: db, Name: table}})
	if err != nil {
		return chschema.TableDedup{}, err
	}
	d := ds[0]
	if d.Setting == "replicated_deduplication_window" && d.Value != "0" {
		return d, fmt.Errorf("--reload: %s is %s, whose deduplication blocks in Keeper cannot be forgotten; rewind without --reload (docs/operations.md#offsets)", d.Table, d.Engine)
	}
	return d, nil
}

// Forgets reports whether ForgetTokens has anything to do for d: a plain
// MergeTree-family table with a window.
func Forgets(d chschema.TableDedup) bool {
	return d.Setting == "non_replicated_deduplication_window" && d.Value != "" && d.Value != "0"
}

// ForgetTokens makes a plain MergeTree table (d, read by Window) forget
// the deduplication tokens (and block hashes) of its earlier INSERTs: its
// non_replicated_deduplication_window set to 0 and back. Without it, a
// reloaded batch cut at the same offsets as an earlier one would carry
// that batch's token and be dropped as a repeat. It returns the
// statements it ran (none when the table deduplicates nothing).
func ForgetTokens(ctx context.Context, conn driver.Conn, db, table string, d chschema.TableDedup) ([]string, error) {
	if !Forgets(d) {
		return nil, nil
	}
	var ran []string
	for _, v := range []string{"0", d.Value} {
		stmt := "ALTER TABLE " + quoted(db, table) + " MODIFY SETTING non_replicated_deduplication_window = " + v
		ran = append(ran, stmt)
		if err := conn.Exec(ctx, stmt); err != nil {
			return ran, fmt.Errorf("clickhouse: %s: %w", stmt, err)
		}
	}
	return ran, nil
}
