// Package eos is the exactly-once ledger: what the sink records in Kafka's
// offset-commit metadata before and after each INSERT, the deduplication
// token of a batch, the recovery plan computed from a snapshot of the
// group's committed offsets, and the I/O that recovery needs (committing
// with metadata, reading exact offset ranges, checking which offsets the
// target table already holds). docs/exactly-once.md is the design.
//
// Encoding, tokens and planning are pure functions. Concurrency: nothing in
// the package holds state between calls; a Ledger value is owned by one
// goroutine (the pipeline's owner).
package eos

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sink/internal/offsets"
)

// Marker starts every metadata string the sink writes in this mode.
const Marker = "sink-eo1"

// MaxMetadata is the broker's default offset.metadata.max.bytes: the most
// metadata one partition's commit may carry.
const MaxMetadata = 4096

// tokenHex is the length of a token: 16 bytes of SHA-256, hex.
const tokenHex = 32

// Range is one partition's records in a batch: offsets First..Last.
type Range struct {
	TP          offsets.TP
	First, Last int64
}

// Entry is a pending intent as one partition's ledger lists it: batch Token
// holds this partition's records First..Last and spans N partitions.
// Placement, when not "", is the fingerprint of how the batch's rows were
// split across the shards of a cluster (target: local; see Placement in
// package writer): a replay split another way would give a shard rows under
// a token it already holds, so recovery replays the batch only while the
// cluster places rows the same way.
type Entry struct {
	Token       string
	First, Last int64
	N           int
	Placement   string
}

// Ledger is one partition's metadata: the committed offset it was written
// with, the ID of the topic it was written for (Kafka's topic ID, base64;
// "" when unknown, as in ledgers of earlier versions), the end of a
// table-check region (0: none) and the pending intents.
//
// The topic ID tells a topic deleted and recreated under the same name
// from the one the ledger speaks of: its offsets start again at 0, so the
// ledger's offsets and the rows already in the table are not its own.
type Ledger struct {
	Offset  int64
	TopicID string
	Check   int64
	Entries []Entry
}

// Token is the deduplication token of a batch into table (db.table): a hash
// of the table and of the ranges sorted by topic and partition. It does not
// depend on the rows, so a rebuild with another schema keeps it.
func Token(table string, ranges []Range) string {
	rs := append([]Range(nil), ranges...)
	SortRanges(rs)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", Marker, table)
	for _, r := range rs {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\n", r.TP.Topic, r.TP.Partition, r.First, r.Last)
	}
	return hex.EncodeToString(h.Sum(nil))[:tokenHex]
}

// SortRanges puts ranges in the canonical order: by topic, then partition.
func SortRanges(rs []Range) {
	sort.Slice(rs, func(i, j int) bool { return LessTP(rs[i].TP, rs[j].TP) })
}

// LessTP is the canonical order of partitions: by topic, then partition.
func LessTP(a, b offsets.TP) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// Live returns the ledger to commit at offset: the entries and check region
// not yet passed by it.
func (l Ledger) Live(offset int64) Ledger {
	out := Ledger{Offset: offset, TopicID: l.TopicID}
	if l.Check > offset {
		out.Check = l.Check
	}
	for _, e := range l.Entries {
		if e.Last >= offset {
			out.Entries = append(out.Entries, e)
		}
	}
	return out
}

// ErrTooLarge is returned by Encode when the ledger does not fit in
// MaxMetadata bytes.
var ErrTooLarge = errors.New("exactly-once ledger exceeds the 4096-byte commit metadata limit")

// Encode writes the ledger as metadata:
// "sink-eo1 @offset [tTOPICID] [cEND] [token:first-last/n[~placement] ...]".
func (l Ledger) Encode() (string, error) {
	var b strings.Builder
	b.WriteString(Marker)
	b.WriteString(" @")
	b.WriteString(strconv.FormatInt(l.Offset, 10))
	if l.TopicID != "" {
		if strings.ContainsAny(l.TopicID, " :\t\n") {
			return "", fmt.Errorf("invalid topic ID %q in a ledger", l.TopicID)
		}
		b.WriteString(" t")
		b.WriteString(l.TopicID)
	}
	if l.Check > 0 {
		b.WriteString(" c")
		b.WriteString(strconv.FormatInt(l.Check, 10))
	}
	for _, e := range l.Entries {
		if len(e.Token) != tokenHex || e.First < 0 || e.Last < e.First || e.N < 1 || !placementOK(e.Placement) {
			return "", fmt.Errorf("invalid ledger entry %+v", e)
		}
		b.WriteByte(' ')
		b.WriteString(e.Token)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(e.First, 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatInt(e.Last, 10))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(e.N))
		if e.Placement != "" {
			b.WriteByte('~')
			b.WriteString(e.Placement)
		}
	}
	if b.Len() > MaxMetadata {
		return "", ErrTooLarge
	}
	return b.String(), nil
}

// Decode reads metadata written by Encode. ok is false when the metadata is
// not ours (empty, a member id, another tool's text); err is set when it
// starts with the marker but is malformed.
func Decode(s string) (l Ledger, ok bool, err error) {
	fields := strings.Fields(s)
	if len(fields) == 0 || fields[0] != Marker {
		return Ledger{}, false, nil
	}
	l, rest, why := decodeHead(fields[1:])
	for i := 0; i < len(rest) && why == ""; i++ {
		e, ok := decodeEntry(rest[i])
		if !ok {
			why = "bad entry " + truncate(rest[i], 60)
		}
		l.Entries = append(l.Entries, e)
	}
	if why != "" {
		return Ledger{}, false, fmt.Errorf("exactly-once ledger %q: %s", truncate(s, 80), why)
	}
	return l, true, nil
}

// decodeHead reads the fields after the marker up to the entries:
// "@offset", then "t<id>" (the topic ID) and "c<end>" (the check region)
// when present. It returns the ledger without entries, the entries' fields,
// and why the head is malformed ("" when it is not).
func decodeHead(fields []string) (l Ledger, rest []string, why string) {
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "@") {
		return l, nil, "no @offset"
	}
	var err error
	if l.Offset, err = strconv.ParseInt(fields[0][1:], 10, 64); err != nil || l.Offset < 0 {
		return l, nil, "bad @offset"
	}
	rest = fields[1:]
	// "t<id>" is the topic ID (an entry always has a colon, an ID never).
	if len(rest) > 0 && strings.HasPrefix(rest[0], "t") && !strings.Contains(rest[0], ":") {
		if l.TopicID = rest[0][1:]; l.TopicID == "" {
			return l, nil, "empty topic ID"
		}
		rest = rest[1:]
	}
	// "c<end>" is the check region; an entry's token may start with c too,
	// but an entry always has a colon.
	if len(rest) > 0 && strings.HasPrefix(rest[0], "c") && !strings.Contains(rest[0], ":") {
		if l.Check, err = strconv.ParseInt(rest[0][1:], 10, 64); err != nil || l.Check <= 0 {
			return l, nil, "bad check region"
		}
		rest = rest[1:]
	}
	return l, rest, ""
}

// decodeEntry reads one entry, "token:first-last/n[~placement]"; ok is
// false when f is not one.
func decodeEntry(f string) (e Entry, ok bool) {
	tok, span, found := strings.Cut(f, ":")
	if !found || len(tok) != tokenHex || !isHex(tok) {
		return e, false
	}
	rng, n, found := strings.Cut(span, "/")
	first, last, found2 := strings.Cut(rng, "-")
	if !found || !found2 {
		return e, false
	}
	e.Token = tok
	if n, e.Placement, _ = strings.Cut(n, "~"); strings.Contains(span, "~") && (e.Placement == "" || !placementOK(e.Placement)) {
		return e, false
	}
	var err1, err2, err3 error
	e.First, err1 = strconv.ParseInt(first, 10, 64)
	e.Last, err2 = strconv.ParseInt(last, 10, 64)
	e.N, err3 = strconv.Atoi(n)
	if err1 != nil || err2 != nil || err3 != nil || e.First < 0 || e.Last < e.First || e.N < 1 {
		return e, false
	}
	return e, true
}

// placementOK says whether p may stand in a ledger as a placement
// fingerprint: "" or up to 16 lowercase hex digits.
func placementOK(p string) bool { return len(p) <= 16 && isHex(p) }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
