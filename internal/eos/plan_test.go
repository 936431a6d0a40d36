package eos

import (
	"reflect"
	"sort"
	"testing"

	"sink/internal/chschema"
	"sink/internal/offsets"
)

func meta(t *testing.T, l Ledger) string {
	t.Helper()
	s, err := l.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPlanRecovery(t *testing.T) {
	tables := func(topic string) []string {
		switch topic {
		case "a", "b":
			return []string{"db.t"}
		}
		return nil
	}
	a0, a1, b0 := tp("a", 0), tp("a", 1), tp("b", 0)
	// B spans a0 10..19, a1 5..8, b0 0..3.
	bRanges := []Range{{a0, 10, 19}, {a1, 5, 8}, {b0, 0, 3}}
	tokB := Token("db.t", bRanges)
	eB := func(r Range) Entry { return Entry{Token: tokB, First: r.First, Last: r.Last, N: 3} }
	full := Snapshot{
		a0: {Offset: 10, Metadata: meta(t, Ledger{Offset: 10, Entries: []Entry{eB(bRanges[0])}})},
		a1: {Offset: 5, Metadata: meta(t, Ledger{Offset: 5, Entries: []Entry{eB(bRanges[1])}})},
		b0: {Offset: 0, Metadata: meta(t, Ledger{Offset: 0, Entries: []Entry{eB(bRanges[2])}})},
	}
	intentB := Intent{Token: tokB, Table: "db.t", Ranges: bRanges}

	// f plans snap for the assigned partitions and compares the result.
	f := func(name string, snap Snapshot, assigned []offsets.TP, wantParts []Recovery, wantReplays []Intent) {
		t.Helper()
		p := PlanRecovery(snap, assigned, tables)
		if !reflect.DeepEqual(p.Parts, wantParts) {
			t.Fatalf("%s: parts\n got %+v\nwant %+v", name, p.Parts, wantParts)
		}
		if !reflect.DeepEqual(p.Replays, wantReplays) {
			t.Fatalf("%s: replays\n got %+v\nwant %+v", name, p.Replays, wantReplays)
		}
	}
	keepB := func(tp offsets.TP, off int64, r Range) Recovery {
		return Recovery{TP: tp, Offset: off, Ledger: Ledger{Offset: off, Entries: []Entry{eB(r)}}}
	}

	f("complete intent, one partition assigned: replay all of B",
		full, []offsets.TP{a0}, []Recovery{keepB(a0, 10, bRanges[0])}, []Intent{intentB})
	f("complete intent, all assigned: one replay",
		full, []offsets.TP{b0, a1, a0},
		[]Recovery{keepB(a0, 10, bRanges[0]), keepB(a1, 5, bRanges[1]), keepB(b0, 0, bRanges[2])}, []Intent{intentB})

	// b0's owner already moved past B: B is incomplete from a0's view,
	// which checks its range in the table.
	moved := Snapshot{a0: full[a0], a1: full[a1], b0: {Offset: 4, Metadata: meta(t, Ledger{Offset: 4})}}
	f("incomplete intent: table check of the range",
		moved, []offsets.TP{a0},
		[]Recovery{{TP: a0, Offset: 10, Ledger: Ledger{Offset: 10, Check: 20}, Check: true, CheckFrom: 10, CheckTo: 20, Why: "incomplete intents or an unfinished check"}}, nil)
	f("nothing pending",
		moved, []offsets.TP{b0}, []Recovery{{TP: b0, Offset: 4, Ledger: Ledger{Offset: 4}}}, nil)

	// An operator reset a1 (empty metadata): B is incomplete for a0, and a1
	// is unmarked.
	reset := Snapshot{a0: full[a0], a1: {Offset: 0}, b0: full[b0]}
	f("reset partition is unmarked",
		reset, []offsets.TP{a1},
		[]Recovery{{TP: a1, Offset: 0, Check: true, CheckFrom: 0, CheckTo: -1, Why: "committed without metadata (a reset, or another client)"}}, nil)
	// A tool that kept our metadata but moved the offset: @ differs.
	kept := Snapshot{a0: full[a0], a1: {Offset: 2, Metadata: full[a1].Metadata}, b0: full[b0]}
	f("moved offset with our old metadata is unmarked",
		kept, []offsets.TP{a1},
		[]Recovery{{TP: a1, Offset: 2, Check: true, CheckFrom: 2, CheckTo: -1, Why: "metadata not written by this mode at this offset"}}, nil)
	f("and B is incomplete for the others",
		kept, []offsets.TP{b0},
		[]Recovery{{TP: b0, Offset: 0, Ledger: Ledger{Offset: 0, Check: 4}, Check: true, CheckFrom: 0, CheckTo: 4, Why: "incomplete intents or an unfinished check"}}, nil)
	f("no committed offset",
		Snapshot{}, []offsets.TP{a0},
		[]Recovery{{TP: a0, Offset: -1, Check: true, CheckFrom: 0, CheckTo: -1, Why: "no committed offset"}}, nil)
	f("franz-go default metadata",
		Snapshot{a0: {Offset: 7, Metadata: "member-1"}}, []offsets.TP{a0},
		[]Recovery{{TP: a0, Offset: 7, Check: true, CheckFrom: 7, CheckTo: -1, Why: "metadata not written by this mode at this offset"}}, nil)
	// An unfinished table check is carried until passed.
	f("check region carried",
		Snapshot{a0: {Offset: 7, Metadata: meta(t, Ledger{Offset: 7, Check: 12})}}, []offsets.TP{a0},
		[]Recovery{{TP: a0, Offset: 7, Ledger: Ledger{Offset: 7, Check: 12}, Check: true, CheckFrom: 7, CheckTo: 12, Why: "incomplete intents or an unfinished check"}}, nil)

	// Entries that claim the wrong count or a forged token are incomplete.
	forged := Snapshot{a0: {Offset: 10, Metadata: meta(t, Ledger{Offset: 10, Entries: []Entry{{Token: tokB, First: 10, Last: 19, N: 1}}})}}
	f("token does not match its ranges",
		forged, []offsets.TP{a0},
		[]Recovery{{TP: a0, Offset: 10, Ledger: Ledger{Offset: 10, Check: 20}, Check: true, CheckFrom: 10, CheckTo: 20, Why: "incomplete intents or an unfinished check"}}, nil)
	// A topic the sink does not route cannot be rebuilt.
	other := Snapshot{tp("z", 0): {Offset: 0, Metadata: meta(t, Ledger{Offset: 0, Entries: []Entry{{Token: Token("", []Range{{tp("z", 0), 0, 1}}), First: 0, Last: 1, N: 1}}})}}
	f("unrouted topic",
		other, []offsets.TP{tp("z", 0)},
		[]Recovery{{TP: tp("z", 0), Offset: 0, Ledger: Ledger{Offset: 0, Check: 2}, Check: true, CheckFrom: 0, CheckTo: 2, Why: "incomplete intents or an unfinished check"}}, nil)
}

func TestPlanMalformedIsNoted(t *testing.T) {
	p := PlanRecovery(Snapshot{tp("a", 0): {Offset: 3, Metadata: "sink-eo1 @3 garbage"}}, []offsets.TP{tp("a", 0)},
		func(string) []string { return []string{"db.t"} })
	if len(p.Notes) != 1 || !p.Parts[0].Check || p.Parts[0].CheckTo != -1 {
		t.Fatalf("%+v", p)
	}
}

func TestCanonicalOrder(t *testing.T) {
	f := func(rowPart []int32, parts int, want []int) {
		t.Helper()
		if got := Canonical(rowPart, parts); !reflect.DeepEqual(got, want) {
			t.Fatalf("Canonical(%v) = %v, want %v", rowPart, got, want)
		}
	}
	f(nil, 0, nil)
	f([]int32{0, 0, 1, 1, 2}, 3, nil)
	f([]int32{1, 0, 1, 0}, 2, []int{1, 3, 0, 2})
	f([]int32{2, 1, 0, 2, 1, 0}, 3, []int{2, 5, 1, 4, 0, 3})
}

func TestOrderedBlock(t *testing.T) {
	b := fakeBlock{s: []string{"x", "y", "z"}, n: []int8{1, 2, 3}, p: []*int64{nil, new(int64), nil}}
	o := Ordered(b, []int{2, 0, 1})
	if got := o.ColumnData(0); !reflect.DeepEqual(got, []string{"z", "x", "y"}) {
		t.Fatalf("strings: %v", got)
	}
	if got := o.ColumnData(1); !reflect.DeepEqual(got, []int8{3, 1, 2}) {
		t.Fatalf("int8 (reflect path): %v", got)
	}
	if got := o.ColumnData(2).([]*int64); got[2] != b.p[1] || got[0] != nil {
		t.Fatalf("pointers: %v", got)
	}
	if _, same := Ordered(b, nil).(fakeBlock); !same {
		t.Fatal("nil permutation must be the block itself")
	}
}

func TestCovers(t *testing.T) {
	var c Covers
	c = c.Add(Span{10, 19})
	c = c.Add(Span{0, 3})
	c = c.Add(Span{30, 30})
	for _, x := range []struct {
		off int64
		in  bool
	}{{0, true}, {3, true}, {4, false}, {10, true}, {19, true}, {20, false}, {30, true}, {31, false}} {
		if got := c.Contains(x.off); got != x.in {
			t.Fatalf("Contains(%d) = %v, want %v", x.off, got, x.in)
		}
	}
	if got := c.From(4); len(got) != 2 || got[0].First != 10 {
		t.Fatalf("From(4) = %v, want the spans from 10 on", got)
	}
	if got := c.From(31); len(got) != 0 {
		t.Fatalf("From(31) = %v, want none", got)
	}
}

type fakeBlock struct {
	s []string
	n []int8
	p []*int64
}

func (b fakeBlock) Rows() int { return len(b.s) }
func (b fakeBlock) Columns() []chschema.ColumnSchema {
	return []chschema.ColumnSchema{{Name: "s"}, {Name: "n"}, {Name: "p"}}
}
func (b fakeBlock) ColumnData(i int) any { return []any{b.s, b.n, b.p}[i] }

// TestPlanRecoveryPlacement: a complete intent carries the placement its
// entries recorded; entries of one token that disagree on it are not one
// batch, so the intent is incomplete and its regions are checked.
func TestPlanRecoveryPlacement(t *testing.T) {
	tables := func(string) []string { return []string{"db.t"} }
	a0, a1 := tp("a", 0), tp("a", 1)
	rs := []Range{{a0, 0, 4}, {a1, 0, 2}}
	tok := Token("db.t", rs)
	snap := func(p0, p1 string) Snapshot {
		return Snapshot{
			a0: {Offset: 0, Metadata: meta(t, Ledger{Offset: 0, Entries: []Entry{{Token: tok, First: 0, Last: 4, N: 2, Placement: p0}}})},
			a1: {Offset: 0, Metadata: meta(t, Ledger{Offset: 0, Entries: []Entry{{Token: tok, First: 0, Last: 2, N: 2, Placement: p1}}})},
		}
	}
	p := PlanRecovery(snap("ab12", "ab12"), []offsets.TP{a0, a1}, tables)
	if len(p.Replays) != 1 || p.Replays[0].Placement != "ab12" {
		t.Fatalf("replays %+v; want the batch with placement ab12", p.Replays)
	}
	p = PlanRecovery(snap("ab12", "cd34"), []offsets.TP{a0, a1}, tables)
	if len(p.Replays) != 0 || !p.Parts[0].Check || p.Parts[0].CheckTo != 5 || !p.Parts[1].Check || p.Parts[1].CheckTo != 3 {
		t.Fatalf("plan %+v; want no replay and both regions checked", p)
	}
}

// TestPlanRecoveryDeadLetterTable: a partition's records go to its route's
// table and, the bad ones, to a dead-letter table that several routes (and
// records no route takes) share. A batch of either is complete when its
// token is the one of a table every topic it spans may go to; its intent
// names that table.
func TestPlanRecoveryDeadLetterTable(t *testing.T) {
	tables := func(topic string) []string {
		switch topic {
		case "a":
			return []string{"db.t", "db.dlq"}
		case "b":
			return []string{"db.u", "db.dlq"}
		case "z": // no route: its records go to the dead-letter table
			return []string{"db.dlq"}
		}
		return nil
	}
	a0, b0, z0 := tp("a", 0), tp("b", 0), tp("z", 0)
	entries := func(tok string, rs []Range) map[offsets.TP]Entry {
		m := map[offsets.TP]Entry{}
		for _, r := range rs {
			m[r.TP] = Entry{Token: tok, First: r.First, Last: r.Last, N: len(rs)}
		}
		return m
	}
	// snap commits each partition at off with the entries given, in order.
	snap := func(off int64, es ...map[offsets.TP]Entry) Snapshot {
		s := Snapshot{}
		for _, p := range []offsets.TP{a0, b0, z0} {
			l := Ledger{Offset: off}
			for _, m := range es {
				if e, ok := m[p]; ok {
					l.Entries = append(l.Entries, e)
				}
			}
			s[p] = Committed{Offset: off, Metadata: meta(t, l)}
		}
		return s
	}
	dRanges := []Range{{a0, 3, 40}, {b0, 7, 7}}
	tRanges := []Range{{a0, 0, 50}}
	zRanges := []Range{{a0, 41, 41}, {z0, 0, 9}}
	dTok, tTok, zTok := Token("db.dlq", dRanges), Token("db.t", tRanges), Token("db.dlq", zRanges)
	for _, tc := range []struct {
		name    string
		snap    Snapshot
		replays []Intent
		check   bool // a0 gets a check region
	}{
		{"dead-letter batch over two routes' topics", snap(0, entries(dTok, dRanges)),
			[]Intent{{Token: dTok, Table: "db.dlq", Ranges: dRanges}}, false},
		{"target and dead-letter batches over the same offsets", snap(0, entries(tTok, tRanges), entries(dTok, dRanges)),
			sortedIntents(Intent{Token: tTok, Table: "db.t", Ranges: tRanges}, Intent{Token: dTok, Table: "db.dlq", Ranges: dRanges}), false},
		{"dead-letter batch with a topic no route takes", snap(0, entries(zTok, zRanges)),
			[]Intent{{Token: zTok, Table: "db.dlq", Ranges: zRanges}}, false},
		// The token of a's route table over a topic whose route writes
		// another table: no table fits both, so it is checked.
		{"token of a table one topic does not go to", snap(0, entries(Token("db.t", dRanges), dRanges)), nil, true},
		{"token of a table no topic goes to", snap(0, entries(Token("db.x", dRanges), dRanges)), nil, true},
	} {
		p := PlanRecovery(tc.snap, []offsets.TP{a0}, tables)
		if !reflect.DeepEqual(p.Replays, tc.replays) {
			t.Errorf("%s: replays\n got %+v\nwant %+v", tc.name, p.Replays, tc.replays)
		}
		if len(p.Parts) != 1 || p.Parts[0].Check != tc.check {
			t.Errorf("%s: parts %+v, want check %v", tc.name, p.Parts, tc.check)
		}
	}
}

// sortedIntents orders intents by token, as PlanRecovery does.
func sortedIntents(in ...Intent) []Intent {
	sort.Slice(in, func(i, j int) bool { return in[i].Token < in[j].Token })
	return in
}
