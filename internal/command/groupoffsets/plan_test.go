package groupoffsets

import (
	"slices"
	"strings"
	"testing"
	"time"

	"sink/internal/eos"
	"sink/internal/offsets"
)

func TestParseTo(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want Target
		err  string
	}{
		{"earliest", Target{Earliest: true}, ""},
		{"latest", Target{Latest: true}, ""},
		{"2026-12-01T10:00:00Z", Target{Timed: true, AtMilli: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixMilli()}, ""},
		{"2026-12-01T10:00:00+01:00", Target{Timed: true, AtMilli: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).UnixMilli()}, ""},
		{"-2h", Target{Timed: true, AtMilli: now.Add(-2 * time.Hour).UnixMilli()}, ""},
		{"-1h30m", Target{Timed: true, AtMilli: now.Add(-90 * time.Minute).UnixMilli()}, ""},
		{"-0s", Target{}, "duration back"},
		{"-x", Target{}, "duration back"},
		{"2h", Target{}, "want earliest"},
		{"2026-12-01", Target{}, "want earliest"},
		{"", Target{}, "want earliest"},
	} {
		got, err := ParseTo(c.in, now)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseTo(%q): error %v, want one containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got.Earliest != c.want.Earliest || got.Latest != c.want.Latest || got.Timed != c.want.Timed || got.AtMilli != c.want.AtMilli {
			t.Errorf("ParseTo(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParseExplicit(t *testing.T) {
	got, err := ParseExplicit([]string{"orders:0=1200", "a:b:3=0"})
	if err != nil || len(got) != 2 || got[offsets.TP{Topic: "orders", Partition: 0}] != 1200 || got[offsets.TP{Topic: "a:b", Partition: 3}] != 0 {
		t.Fatalf("ParseExplicit = %v, %v", got, err)
	}
	for _, bad := range [][]string{{"orders=1"}, {":0=1"}, {"orders:x=1"}, {"orders:0=-1"}, {"orders:-1=1"}, {"orders:0"}, {"orders:0=1", "orders:0=2"}} {
		if _, err := ParseExplicit(bad); err == nil {
			t.Errorf("ParseExplicit(%q): no error", bad)
		}
	}
}

func parts() []Partition {
	return []Partition{
		{TP: offsets.TP{Topic: "b", Partition: 0}, Committed: 500, Start: 100, End: 900, AtMilli: 300},
		{TP: offsets.TP{Topic: "a", Partition: 1}, Committed: -1, Start: 0, End: 50, AtMilli: 50},
		{TP: offsets.TP{Topic: "a", Partition: 0}, Committed: 40, Start: 0, End: 40, AtMilli: -1},
	}
}

func TestSelect(t *testing.T) {
	tos := func(ms []Move) []int64 {
		var out []int64
		for _, m := range ms {
			out = append(out, m.To)
		}
		return out
	}
	f := func(target Target, topic string, partition int32, want []int64, wantErr string) {
		t.Helper()
		ms, err := Select(parts(), target, topic, partition)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("Select: error %v, want one containing %q", err, wantErr)
			}
			return
		}
		if err != nil || !slices.Equal(tos(ms), want) {
			t.Fatalf("Select = %v, %v; want %v", tos(ms), err, want)
		}
	}
	// Sorted a[0], a[1], b[0].
	f(Target{Earliest: true}, "", -1, []int64{0, 0, 100}, "")
	f(Target{Latest: true}, "", -1, []int64{40, 50, 900}, "")
	f(Target{Latest: true}, "a", -1, []int64{40, 50}, "")
	f(Target{Latest: true}, "a", 1, []int64{50}, "")
	f(Target{Latest: true}, "c", -1, nil, "no partition selected")
	f(Target{Timed: true}, "b", -1, []int64{300}, "")
	f(Target{Timed: true}, "a", 0, nil, "could not be read")
	f(Target{Explicit: map[offsets.TP]int64{{Topic: "b", Partition: 0}: 700}}, "", -1, []int64{700}, "")
	f(Target{Explicit: map[offsets.TP]int64{{Topic: "z", Partition: 0}: 1}}, "", -1, nil, "z[0]: not a partition the connector consumes")

	ms, _ := Select(parts(), Target{Explicit: map[offsets.TP]int64{{Topic: "b", Partition: 0}: 5, {Topic: "a", Partition: 0}: 99}}, "", -1)
	if ms[0].To != 40 || !strings.Contains(ms[0].Clamped, "past the log end") || ms[1].To != 100 || !strings.Contains(ms[1].Clamped, "before the log start") {
		t.Fatalf("clamping: %+v", ms)
	}
	if ms[0].Forward() || !(Move{Partition: parts()[0], To: 501}).Forward() || (Move{Partition: parts()[1], To: 10}).Forward() {
		t.Fatal("Forward: only a move past a committed offset is forward")
	}
}

func TestMetadata(t *testing.T) {
	m := Move{Partition: Partition{TP: offsets.TP{Topic: "a"}, Committed: 500, TopicID: "AbC="}, To: 100,
		Ahead: []Held{{Distinct: 400, MaxOffset: 499}, {Distinct: 0, MaxOffset: -1}, {NoSourceColumns: true, MaxOffset: -1}}}
	f := func(eo, reload bool, want string) {
		t.Helper()
		got, err := m.Metadata(eo, reload)
		if err != nil || got != want {
			t.Fatalf("Metadata(%v, %v) = %q, %v; want %q", eo, reload, got, err, want)
		}
		if want == "" {
			return
		}
		// What recovery reads back: a ledger at the committed offset.
		l, ok, err := eos.Decode(got)
		if !ok || err != nil || l.Offset != m.To || len(l.Entries) != 0 {
			t.Fatalf("Decode(%q) = %+v, %v, %v", got, l, ok, err)
		}
	}
	f(false, false, "")
	f(false, true, "")
	f(true, false, "sink-eo1 @100 tAbC= c500")
	f(true, true, "sink-eo1 @100 tAbC=")
	m.Ahead = nil
	f(true, false, "sink-eo1 @100 tAbC=")
}

func TestLedgerAndPending(t *testing.T) {
	tok := strings.Repeat("ab", 16)
	for _, c := range []struct {
		p    Partition
		want string
	}{
		{Partition{Committed: -1}, "nothing committed"},
		{Partition{Committed: 10}, "no ledger"},
		{Partition{Committed: 10, Metadata: "sink-eo1 @9"}, "ledger written at 9, offset moved since"},
		{Partition{Committed: 10, Metadata: "sink-eo1 x"}, "malformed ledger"},
		{Partition{Committed: 10, Metadata: "sink-eo1 @10 tID"}, "nothing pending"},
		{Partition{Committed: 10, Metadata: "sink-eo1 @10 c20"}, "offsets 10-19 checked against the table before insert"},
		{Partition{Committed: 10, Metadata: "sink-eo1 @10 " + tok + ":10-19/2 " + tok + ":3-9/1"}, "batch abababab… offsets 10-19 (2 partitions)"},
	} {
		if got := c.p.Pending(); !strings.Contains(got, c.want) {
			t.Errorf("Pending of %+v = %q, want it to contain %q", c.p, got, c.want)
		}
	}
	// An entry the committed offset has passed is no longer pending.
	if got := (Partition{Committed: 10, Metadata: "sink-eo1 @10 " + tok + ":3-9/1"}).Pending(); got != "nothing pending" {
		t.Errorf("passed entry: Pending = %q", got)
	}
	if (Partition{Committed: -1, Start: 5, End: 20}).Lag() != 15 || (Partition{Committed: 30, End: 20}).Lag() != 0 || (Partition{End: -1}).Lag() != -1 {
		t.Error("Lag")
	}
}

func TestDescribe(t *testing.T) {
	p := Partition{TP: offsets.TP{Topic: "t", Partition: 2}, Committed: 500}
	f := func(m Move, eo, reload bool, want ...string) {
		t.Helper()
		got := strings.Join(m.Describe(eo, reload), "\n")
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Fatalf("Describe(%v, %v):\n%s\nwant it to contain %q", eo, reload, got, w)
			}
		}
	}
	held := []Held{{Table: "db.t", Rows: 450, Distinct: 400, MaxOffset: 499}}
	f(Move{Partition: p, To: 100, Ahead: held}, true, false, "t[2]: 500 -> 100 (rewind 400 offsets)", "400 records (offsets up to 499) are already in db.t: recognised by _offset and skipped")
	f(Move{Partition: p, To: 100, Ahead: held}, true, true, "db.t holds 450 rows (400 offsets, up to 499) at offset 100 or later: deleted first, then loaded again once")
	f(Move{Partition: p, To: 100, Ahead: held}, false, false, "at-least-once inserts them again", "ReplacingMergeTree")
	f(Move{Partition: p, To: 100, Ahead: []Held{{Table: "db.t", NoSourceColumns: true}}}, false, false, "400 records (offsets 100-499) will be inserted into db.t again")
	f(Move{Partition: p, To: 800, Skipped: []Held{{Table: "db.t", Distinct: 20, MaxOffset: 519}}}, true, false, "(forward 300 offsets)", "up to 280 records (offsets 500-799) will never be inserted into db.t (20 of those offsets are already there)")
	f(Move{Partition: Partition{TP: p.TP, Committed: -1}, To: 0, Ahead: []Held{{Table: "db.t", MaxOffset: -1}}}, true, false, "nothing committed -> 0 (first commit)", "db.t holds no row at offset 0 or later")
}
