package eos

import (
	"fmt"
	"slices"
	"sort"

	"sink/internal/offsets"
)

// Committed is one partition's committed offset and metadata as the group
// coordinator returns them; Offset is -1 when nothing was committed.
type Committed struct {
	Offset   int64
	Metadata string
}

// Snapshot is every committed partition of the group (owned or not).
type Snapshot map[offsets.TP]Committed

// Intent is a complete pending batch: its token, table and every range,
// and the placement fingerprint its rows were split across shards by (""
// when the table is not written shard by shard).
type Intent struct {
	Token     string
	Table     string
	Ranges    []Range // canonical order
	Placement string
}

// Recovery is what an assigned partition needs before its records are
// handled.
type Recovery struct {
	TP offsets.TP
	// Offset is the committed offset (-1: none, consumption starts at the
	// reset offset).
	Offset int64
	// Ledger is what the partition's next commits carry: the entries of
	// complete intents that are replayed, and the check region.
	Ledger Ledger
	// CheckFrom..CheckTo (CheckTo -1: no end) is the region of offsets to
	// look up in the table; Check is false when there is none.
	Check              bool
	CheckFrom, CheckTo int64
	// Why says, for the log, why the partition is checked ("unmarked", …).
	Why string
	// TopicID is the topic ID the partition's committed ledger was
	// written for ("" when none is recorded); see Incarnation.
	TopicID string
}

// Plan is the recovery of a set of assigned partitions.
type Plan struct {
	Parts []Recovery
	// Replays are the complete intents touching an assigned partition, each
	// once, ordered by token; they are rebuilt and inserted with their token.
	Replays []Intent
	// Notes are things worth a log line (malformed metadata).
	Notes []string
}

// PlanRecovery decides, from the group's committed offsets, what each
// assigned partition needs (docs/exactly-once.md, "Recovery on assignment").
// tablesOf names the tables (db.table) a topic's records may go to: its
// route's table, and its dead-letter table when its bad records get rows;
// none for a topic the sink does not write. An intent is complete when
// every partition it names has its entry and the token recomputed for one
// table every one of their topics may go to is the intent's token: the
// token says which of the tables the batch was for.
func PlanRecovery(snap Snapshot, assigned []offsets.TP, tablesOf func(topic string) []string) *Plan {
	plan := &Plan{}
	rp := recoveryPlanner{plan: plan, tablesOf: tablesOf, complete: map[string]*Intent{}, replay: map[string]bool{}}
	rp.ledgers, plan.Notes = liveLedgers(snap)
	rp.byToken = entriesByToken(rp.ledgers)

	sorted := append([]offsets.TP(nil), assigned...)
	sort.Slice(sorted, func(i, j int) bool { return LessTP(sorted[i], sorted[j]) })
	for _, tp := range sorted {
		c, has := snap[tp]
		if !has {
			c = Committed{Offset: -1}
		}
		if l, marked := rp.ledgers[tp]; marked {
			plan.Parts = append(plan.Parts, rp.recoverMarked(tp, c, l))
		} else {
			plan.Parts = append(plan.Parts, recoverUnmarked(tp, c))
		}
	}
	sort.Slice(plan.Replays, func(i, j int) bool { return plan.Replays[i].Token < plan.Replays[j].Token })
	return plan
}

// liveLedgers is every valid ledger of the group (committed at the offset
// it names), cut to its live entries, for gathering the entries of a
// token; and a note for each malformed one.
func liveLedgers(snap Snapshot) (map[offsets.TP]Ledger, []string) {
	ledgers := map[offsets.TP]Ledger{}
	var notes []string
	for tp, c := range snap {
		l, ok, err := Decode(c.Metadata)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s[%d]: %v (treated as unmarked)", tp.Topic, tp.Partition, err))
			continue
		}
		if ok && l.Offset == c.Offset {
			ledgers[tp] = l.Live(c.Offset)
		}
	}
	return ledgers, notes
}

// foundEntry is a ledger entry and the partition whose ledger holds it.
type foundEntry struct {
	tp offsets.TP
	e  Entry
}

// entriesByToken gathers the entries of ledgers by token.
func entriesByToken(ledgers map[offsets.TP]Ledger) map[string][]foundEntry {
	byToken := map[string][]foundEntry{}
	for tp, l := range ledgers {
		for _, e := range l.Entries {
			byToken[e.Token] = append(byToken[e.Token], foundEntry{tp, e})
		}
	}
	return byToken
}

// recoveryPlanner is PlanRecovery's state while it walks the assigned
// partitions: the group's ledgers, their entries by token, which tokens
// are complete intents, and which intents the plan replays already.
type recoveryPlanner struct {
	plan     *Plan
	tablesOf func(topic string) []string
	ledgers  map[offsets.TP]Ledger
	byToken  map[string][]foundEntry
	complete map[string]*Intent // token → its intent, nil when incomplete
	replay   map[string]bool
}

// intent is the complete intent of token, nil when it is not complete.
func (rp *recoveryPlanner) intent(token string) *Intent {
	if in, ok := rp.complete[token]; ok {
		return in
	}
	fs := rp.byToken[token]
	var in *Intent
	if len(fs) > 0 && len(fs) == fs[0].e.N {
		rs := make([]Range, len(fs))
		same := true
		for i, f := range fs {
			rs[i] = Range{TP: f.tp, First: f.e.First, Last: f.e.Last}
			if f.e.N != fs[0].e.N || f.e.Placement != fs[0].e.Placement {
				same = false
			}
		}
		if table, ok := intentTable(fs[0].tp.Topic, rs, token, rp.tablesOf); same && ok {
			SortRanges(rs)
			in = &Intent{Token: token, Table: table, Ranges: rs, Placement: fs[0].e.Placement}
		}
	}
	rp.complete[token] = in
	return in
}

// recoverUnmarked is the recovery of a partition without a ledger of this
// mode at its committed offset c: check from the committed offset on.
func recoverUnmarked(tp offsets.TP, c Committed) Recovery {
	r := Recovery{TP: tp, Offset: c.Offset}
	r.Check, r.CheckFrom, r.CheckTo = true, max(c.Offset, 0), -1
	switch {
	case c.Offset < 0:
		r.Why = "no committed offset"
	case c.Metadata == "":
		r.Why = "committed without metadata (a reset, or another client)"
	default:
		r.Why = "metadata not written by this mode at this offset"
	}
	return r
}

// recoverMarked is the recovery of a partition whose ledger l is committed
// at c: its complete intents are replayed (each once in the plan), and the
// region of its incomplete ones and of an unfinished check is checked.
func (rp *recoveryPlanner) recoverMarked(tp offsets.TP, c Committed, l Ledger) Recovery {
	r := Recovery{TP: tp, Offset: c.Offset, TopicID: l.TopicID}
	r.Ledger = Ledger{Offset: c.Offset, TopicID: l.TopicID}
	end := l.Check
	for _, e := range l.Entries {
		in := rp.intent(e.Token)
		if in == nil {
			end = max(end, e.Last+1)
			continue
		}
		r.Ledger.Entries = append(r.Ledger.Entries, e)
		if !rp.replay[e.Token] {
			rp.replay[e.Token] = true
			rp.plan.Replays = append(rp.plan.Replays, *in)
		}
	}
	if end > c.Offset {
		r.Check, r.CheckFrom, r.CheckTo = true, c.Offset, end
		r.Ledger.Check = end
		r.Why = "incomplete intents or an unfinished check"
	}
	return r
}

// intentTable is the table of the batch with token over rs: the one among
// the tables of topic (a topic of rs) whose token over rs is token, and
// which every topic of rs may go to.
func intentTable(topic string, rs []Range, token string, tablesOf func(string) []string) (string, bool) {
	for _, t := range tablesOf(topic) {
		if Token(t, rs) != token {
			continue
		}
		for _, r := range rs {
			if !slices.Contains(tablesOf(r.TP.Topic), t) {
				return "", false
			}
		}
		return t, true
	}
	return "", false
}

// Incarnation says whether a partition's topic is not the one the group's
// ledger and the table's rows were written from: the topic was deleted and
// recreated under the same name, and its offsets started again at 0.
// recorded is the topic ID of the partition's committed ledger ("" when
// none is recorded), current the topic's ID now ("" when the broker gives
// none); lastPresent is the highest offset of the partition the table
// holds (-1: none) and logEnd the partition's log end offset now. Either
// proof is enough: another ID, or a row at an offset the topic has never
// reached (a partition's log end never goes back while the topic lives).
// why names the proof.
func Incarnation(recorded, current string, lastPresent, logEnd int64) (why string, recreated bool) {
	if recorded != "" && current != "" && recorded != current {
		return fmt.Sprintf("the group's ledger was written for topic ID %s, the topic's ID is now %s", recorded, current), true
	}
	if lastPresent >= 0 && logEnd >= 0 && lastPresent >= logEnd {
		return fmt.Sprintf("the table holds a row of offset %d, and the partition's log ends at %d", lastPresent, logEnd), true
	}
	return "", false
}
