// Package groupoffsets is `sink offsets show|reset`: the connector's
// consumer-group offsets as Kafka Connect's offsets API shows and moves
// them, with what a move means for the target tables under the
// connector's delivery mode.
//
// plan.go is pure: parsing the reset target, deciding each partition's new
// offset and what it means (records skipped, loaded again, never inserted)
// from facts read beforehand, and the commit metadata to write. io.go reads
// those facts from Kafka (kadm) and ClickHouse and carries a plan out.
// command.go is the two commands over them: Show, and Reset.Run (the
// preview, the actions in order, and with --execute carrying them out);
// cmd/sink only parses their flags.
//
// Concurrency: nothing here holds state between calls; every function is
// called from one goroutine (the command's).
package groupoffsets

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"sink/internal/eos"
	"sink/internal/offsets"
)

// Target is where `reset` moves the selected partitions: exactly one of
// Earliest, Latest, AtMilli (a timestamp) or Explicit is set.
type Target struct {
	Earliest, Latest bool
	// AtMilli, when Timed, is a Unix time in milliseconds: each partition
	// moves to its first record at or after it (its log end when none).
	Timed   bool
	AtMilli int64
	// Explicit is an offset per partition (topic:partition=offset).
	Explicit map[offsets.TP]int64
}

// String says the target for the preview's first line.
func (t Target) String() string {
	switch {
	case t.Earliest:
		return "earliest (each partition's log start)"
	case t.Latest:
		return "latest (each partition's log end)"
	case t.Timed:
		return "the first record at or after " + time.UnixMilli(t.AtMilli).UTC().Format(time.RFC3339Nano)
	}
	return "explicit offsets"
}

// ParseTo reads --to: earliest, latest, an RFC 3339 time
// (2026-12-01T10:00:00Z) or a duration back from now (-2h, -90m).
func ParseTo(s string, now time.Time) (Target, error) {
	switch s {
	case "earliest":
		return Target{Earliest: true}, nil
	case "latest":
		return Target{Latest: true}, nil
	}
	if strings.HasPrefix(s, "-") {
		d, err := time.ParseDuration(s[1:])
		if err != nil || d <= 0 {
			return Target{}, fmt.Errorf("--to %q: a duration back from now is written -2h, -30m or -1h30m", s)
		}
		return Target{Timed: true, AtMilli: now.Add(-d).UnixMilli()}, nil
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Target{}, fmt.Errorf("--to %q: want earliest, latest, a time such as 2026-12-01T10:00:00Z, or a duration back such as -2h", s)
	}
	return Target{Timed: true, AtMilli: ts.UnixMilli()}, nil
}

// ParseExplicit reads topic:partition=offset arguments. A topic name may
// hold colons; the last one separates the partition.
func ParseExplicit(args []string) (map[offsets.TP]int64, error) {
	out := map[offsets.TP]int64{}
	for _, a := range args {
		lhs, off, ok := strings.Cut(a, "=")
		i := strings.LastIndexByte(lhs, ':')
		if !ok || i <= 0 {
			return nil, fmt.Errorf("%q: want topic:partition=offset, e.g. orders:0=1200", a)
		}
		p, err1 := strconv.ParseInt(lhs[i+1:], 10, 32)
		o, err2 := strconv.ParseInt(off, 10, 64)
		if err1 != nil || err2 != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("%q: want topic:partition=offset with a partition and an offset of 0 or more", a)
		}
		tp := offsets.TP{Topic: lhs[:i], Partition: int32(p)}
		if _, dup := out[tp]; dup {
			return nil, fmt.Errorf("%s[%d] is given twice", tp.Topic, tp.Partition)
		}
		out[tp] = o
	}
	return out, nil
}

// Partition is what Kafka says of one partition the connector consumes.
type Partition struct {
	TP offsets.TP
	// Committed is the group's committed offset (-1: none) and Metadata
	// the metadata it was committed with.
	Committed int64
	Metadata  string
	// Start and End are the log start and end offsets (-1: unknown).
	Start, End int64
	// TopicID is the topic's ID ("" when the broker gives none).
	TopicID string
	// AtMilli is the offset of the first record at or after the target's
	// time (set only for a timed target; -1 when unknown).
	AtMilli int64
}

// Lag is how many records the group has still to consume (-1: unknown).
func (p Partition) Lag() int64 {
	if p.End < 0 {
		return -1
	}
	c := p.Committed
	if c < 0 {
		c = max(p.Start, 0)
	}
	return max(p.End-c, 0)
}

// Ledger reads the exactly-once ledger in the partition's commit metadata:
// ok when it is one written at the committed offset (what recovery trusts),
// else why not, in words.
func (p Partition) Ledger() (l eos.Ledger, ok bool, why string) {
	l, ours, err := eos.Decode(p.Metadata)
	switch {
	case err != nil:
		return eos.Ledger{}, false, "malformed ledger (recovery checks the table from the committed offset on)"
	case !ours && p.Committed < 0:
		return eos.Ledger{}, false, "nothing committed"
	case !ours:
		return eos.Ledger{}, false, "no ledger (recovery checks the table from the committed offset on)"
	case l.Offset != p.Committed:
		return eos.Ledger{}, false, fmt.Sprintf("ledger written at %d, offset moved since (recovery checks the table from the committed offset on)", l.Offset)
	}
	return l.Live(p.Committed), true, ""
}

// Pending describes, for `show`, what the partition's ledger says is not
// settled yet: the batches recorded as intents and the table-check region.
func (p Partition) Pending() string {
	l, ok, why := p.Ledger()
	if !ok {
		return why
	}
	var parts []string
	for _, e := range l.Entries {
		parts = append(parts, fmt.Sprintf("batch %s… offsets %d-%d (%d partition%s)", e.Token[:8], e.First, e.Last, e.N, plural(e.N)))
	}
	if l.Check > 0 {
		parts = append(parts, fmt.Sprintf("offsets %d-%d checked against the table before insert", p.Committed, l.Check-1))
	}
	if len(parts) == 0 {
		return "nothing pending"
	}
	return strings.Join(parts, "; ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Held is what one target table holds of one partition's records in an
// offset range: Rows rows over Distinct offsets, the highest MaxOffset.
type Held struct {
	Table             string // db.table
	DB, Name          string
	Rows, Distinct    uint64
	MaxOffset         int64 // -1 when Distinct is 0
	NoSourceColumns   bool  // the table has no _topic/_partition/_offset: nothing is known
	From, To          int64 // the range asked: From..To-1 (To -1: no end)
	Replicated, Other bool  // engine kind, for --reload's deduplication step
}

// Move is one partition's reset: from its committed offset to To, and what
// that means for the tables.
type Move struct {
	Partition
	To int64
	// Clamped says why To is not what was asked ("" when it is).
	Clamped string
	// Ahead is what the tables hold at or after To (skipped under
	// exactly-once, inserted again under at-least-once, deleted first
	// with --reload); Skipped is what they hold of From..To-1 on a
	// forward move (those offsets are never consumed).
	Ahead, Skipped []Held
}

// Select picks the partitions a reset moves and their new offsets. topic
// and partition (-1: all) filter them; an explicit target names its own
// partitions, which must be ones the connector consumes. A target outside
// a partition's log is moved to its nearest end (Clamped says so).
func Select(parts []Partition, t Target, topic string, partition int32) ([]Move, error) {
	var out []Move
	known := map[offsets.TP]bool{}
	for _, p := range parts {
		known[p.TP] = true
		if topic != "" && p.TP.Topic != topic || partition >= 0 && p.TP.Partition != partition {
			continue
		}
		m, ok := t.moveOf(p)
		if !ok {
			continue
		}
		if m.To < 0 {
			return nil, fmt.Errorf("%s[%d]: its offsets could not be read from Kafka", p.TP.Topic, p.TP.Partition)
		}
		m.clamp()
		out = append(out, m)
	}
	if err := unknownPartitions(t.Explicit, known); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no partition selected (check --topic and --partition)")
	}
	sort.Slice(out, func(i, j int) bool { return eos.LessTP(out[i].TP, out[j].TP) })
	return out, nil
}

// moveOf is p's move to t, not yet clamped to its log; !ok when t is
// explicit and does not name p.
func (t Target) moveOf(p Partition) (Move, bool) {
	m := Move{Partition: p}
	switch {
	case t.Earliest:
		m.To = p.Start
	case t.Latest:
		m.To = p.End
	case t.Timed:
		m.To = p.AtMilli
	default:
		o, ok := t.Explicit[p.TP]
		if !ok {
			return m, false
		}
		m.To = o
	}
	return m, true
}

// clamp moves To into the partition's log, saying why in Clamped.
func (m *Move) clamp() {
	switch {
	case m.Start >= 0 && m.To < m.Start:
		m.Clamped = fmt.Sprintf("%d is before the log start; moved to the log start", m.To)
		m.To = m.Start
	case m.End >= 0 && m.To > m.End:
		m.Clamped = fmt.Sprintf("%d is past the log end; moved to the log end", m.To)
		m.To = m.End
	}
}

// unknownPartitions refuses explicit offsets of partitions the connector
// does not consume.
func unknownPartitions(explicit map[offsets.TP]int64, known map[offsets.TP]bool) error {
	var unknown []string
	for tp := range explicit {
		if !known[tp] {
			unknown = append(unknown, fmt.Sprintf("%s[%d]", tp.Topic, tp.Partition))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("%s: %w (kafka.topics / topic_regex)", strings.Join(unknown, ", "), ErrNotConsumed)
}

// ErrNotConsumed is an explicit offset for a partition the connector does
// not consume (wrapped, with the partitions named).
var ErrNotConsumed = errors.New("not a partition the connector consumes")

// Forward reports whether the move skips records: the committed offset is
// passed over without consuming them.
func (m Move) Forward() bool { return m.Committed >= 0 && m.To > m.Committed }

// Metadata is the commit metadata to write with the new offset. Under
// exactly-once it is a ledger recovery trusts: written at the new offset,
// for the topic's ID, with no pending batch (a reset abandons them: their
// rows are either in the table, and then checked, or never inserted) and a
// check region up to just past the highest offset a table still holds at
// or after the new offset, so that recovery skips those records (none
// after --reload deleted them). At-least-once commits no metadata.
func (m Move) Metadata(exactlyOnce, reload bool) (string, error) {
	if !exactlyOnce {
		return "", nil
	}
	l := eos.Ledger{Offset: m.To, TopicID: m.TopicID}
	if !reload {
		for _, h := range m.Ahead {
			if h.Distinct > 0 && h.MaxOffset+1 > m.To {
				l.Check = max(l.Check, h.MaxOffset+1)
			}
		}
	}
	return l.Encode()
}

// Describe is the preview of one move, in lines: the offsets and what the
// move means for the tables under the delivery mode.
func (m Move) Describe(exactlyOnce, reload bool) []string {
	lines := []string{m.headline()}
	if m.Forward() {
		for _, h := range m.Skipped {
			lines = append(lines, "  "+m.skippedLine(h))
		}
	}
	for _, h := range m.Ahead {
		if l := m.aheadLine(h, exactlyOnce, reload); l != "" {
			lines = append(lines, "  "+l)
		}
	}
	return lines
}

// headline is the move's first line: partition, offsets, direction.
func (m Move) headline() string {
	from := "nothing committed"
	if m.Committed >= 0 {
		from = strconv.FormatInt(m.Committed, 10)
	}
	head := fmt.Sprintf("%s[%d]: %s -> %d", m.TP.Topic, m.TP.Partition, from, m.To)
	switch {
	case m.Committed < 0:
		head += " (first commit)"
	case m.To < m.Committed:
		head += fmt.Sprintf(" (rewind %d offsets)", m.Committed-m.To)
	case m.To > m.Committed:
		head += fmt.Sprintf(" (forward %d offsets)", m.To-m.Committed)
	default:
		head += " (unchanged)"
	}
	if m.Clamped != "" {
		head += "; " + m.Clamped
	}
	return head
}

// skippedLine says what a forward move passes over in h's table.
func (m Move) skippedLine(h Held) string {
	if h.NoSourceColumns {
		return fmt.Sprintf("up to %d records (offsets %d-%d) will never be inserted into %s", m.To-m.Committed, m.Committed, m.To-1, h.Table)
	}
	return fmt.Sprintf("up to %d records (offsets %d-%d) will never be inserted into %s (%d of those offsets are already there)",
		m.To-m.Committed-int64(min(h.Distinct, uint64(m.To-m.Committed))), m.Committed, m.To-1, h.Table, h.Distinct)
}

// aheadLine says what becomes of the rows h's table holds at or after
// the new offset ("" when there is nothing to say).
func (m Move) aheadLine(h Held, exactlyOnce, reload bool) string {
	switch {
	case h.NoSourceColumns:
		return m.unknownRowsLine(h, exactlyOnce, reload)
	case h.Distinct == 0:
		if m.Committed > m.To || m.Committed < 0 {
			return fmt.Sprintf("%s holds no row at offset %d or later: every record from %d on is inserted once", h.Table, m.To, m.To)
		}
		return ""
	case reload:
		return fmt.Sprintf("%s holds %d rows (%d offsets, up to %d) at offset %d or later: deleted first, then loaded again once", h.Table, h.Rows, h.Distinct, h.MaxOffset, m.To)
	case exactlyOnce:
		return fmt.Sprintf("%d records (offsets up to %d) are already in %s: recognised by _offset and skipped, not inserted again (--reload deletes them first and loads them again once)", h.Distinct, h.MaxOffset, h.Table)
	}
	return fmt.Sprintf("%s holds %d rows (%d offsets, up to %d) at offset %d or later: at-least-once inserts them again, so they will be there twice unless the table is a ReplacingMergeTree (collapsed on merge or with FINAL); --reload deletes them first", h.Table, h.Rows, h.Distinct, h.MaxOffset, m.To)
}

// unknownRowsLine is aheadLine for a table without the source columns:
// what it holds is unknown.
func (m Move) unknownRowsLine(h Held, exactlyOnce, reload bool) string {
	switch {
	case reload:
		return fmt.Sprintf("%s has no _topic, _partition, _offset columns: --reload cannot find the rows to delete", h.Table)
	case !exactlyOnce && m.Committed > m.To:
		return fmt.Sprintf("%d records (offsets %d-%d) will be inserted into %s again: duplicates unless it is a ReplacingMergeTree (which collapses them on merge or with FINAL)", m.Committed-m.To, m.To, m.Committed-1, h.Table)
	}
	return ""
}
