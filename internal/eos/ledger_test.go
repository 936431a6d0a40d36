package eos

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sink/internal/offsets"
)

func tp(topic string, p int32) offsets.TP { return offsets.TP{Topic: topic, Partition: p} }

var tokA = Token("db.t", []Range{{TP: tp("a", 0), First: 0, Last: 9}})

func TestLedgerEncodeDecode(t *testing.T) {
	// f encodes l, checks the text, and decodes it back to l.
	f := func(l Ledger, want string) {
		t.Helper()
		got, err := l.Encode()
		if err != nil {
			t.Fatalf("%+v: %v", l, err)
		}
		if got != want {
			t.Fatalf("%+v: encoded %q, want %q", l, got, want)
		}
		back, ok, err := Decode(got)
		if err != nil || !ok || !reflect.DeepEqual(back, l) {
			t.Fatalf("%q decoded to %+v,%v,%v; want %+v", got, back, ok, err, l)
		}
	}
	f(Ledger{Offset: 0}, "sink-eo1 @0")
	f(Ledger{Offset: 42, Check: 100}, "sink-eo1 @42 c100")
	f(Ledger{Offset: 5, Entries: []Entry{{Token: tokA, First: 5, Last: 9, N: 3}}}, "sink-eo1 @5 "+tokA+":5-9/3")
	f(Ledger{Offset: 5, Check: 7, Entries: []Entry{{Token: tokA, First: 5, Last: 9, N: 1}, {Token: tokA, First: 10, Last: 10, N: 2}}},
		"sink-eo1 @5 c7 "+tokA+":5-9/1 "+tokA+":10-10/2")
	// A token that starts with c (one in sixteen) is an entry, not a check
	// region, with or without a check region before it.
	const tokC = "c411df0a7aad1621a5a52cd1c9b85390"
	f(Ledger{Offset: 0, Entries: []Entry{{Token: tokC, First: 0, Last: 14452, N: 2}}}, "sink-eo1 @0 "+tokC+":0-14452/2")
	f(Ledger{Offset: 3, Check: 9, Entries: []Entry{{Token: tokC, First: 3, Last: 4, N: 1}}}, "sink-eo1 @3 c9 "+tokC+":3-4/1")
	// A batch split across shards carries its placement's fingerprint.
	f(Ledger{Offset: 5, Entries: []Entry{{Token: tokA, First: 5, Last: 9, N: 2, Placement: "00ff3a9c1e2d4b5f"}, {Token: tokC, First: 10, Last: 11, N: 1}}},
		"sink-eo1 @5 "+tokA+":5-9/2~00ff3a9c1e2d4b5f "+tokC+":10-11/1")
	if _, err := (Ledger{Entries: []Entry{{Token: tokA, First: 0, Last: 1, N: 1, Placement: "not hex"}}}).Encode(); err == nil {
		t.Fatal("a placement that is not hex was encoded")
	}
}

func TestLedgerDecodeNotOursOrBad(t *testing.T) {
	// f decodes s and checks whether it is ours and whether it is an error.
	f := func(s string, ours, bad bool) {
		t.Helper()
		_, ok, err := Decode(s)
		if ok != ours || (err != nil) != bad {
			t.Fatalf("Decode(%q) = ours %v, err %v; want ours %v, bad %v", s, ok, err, ours, bad)
		}
	}
	f("", false, false)
	f("member-1-abc", false, false) // franz-go's default metadata
	f("sink-eo2 @1", false, false)
	f("sink-eo1", false, true)
	f("sink-eo1 @", false, true)
	f("sink-eo1 @-1", false, true)
	f("sink-eo1 @x", false, true)
	f("sink-eo1 @1 c0", false, true)
	f("sink-eo1 @1 "+tokA, false, true)
	f("sink-eo1 @1 "+tokA+":5-4/1", false, true)
	f("sink-eo1 @1 "+tokA+":5-9/0", false, true)
	f("sink-eo1 @1 "+strings.ToUpper(tokA)+":5-9/1", false, true)
	f("sink-eo1 @1 abc:5-9/1", false, true)
	f("sink-eo1 @1 "+tokA+":5-9/1", true, false)
	f("sink-eo1 @1 "+tokA+":5-9/1~0a1b", true, false)
	f("sink-eo1 @1 "+tokA+":5-9/1~", false, true)
	f("sink-eo1 @1 "+tokA+":5-9/1~XYZ", false, true)
	f("sink-eo1 @1 "+tokA+":5-9/1~0123456789abcdef0", false, true)
}

func TestLedgerTooLarge(t *testing.T) {
	l := Ledger{Offset: 1 << 40}
	for len(l.Entries) < 200 {
		l.Entries = append(l.Entries, Entry{Token: tokA, First: 1 << 40, Last: 1<<40 + 100000, N: 100})
	}
	if _, err := l.Encode(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("200 entries: %v, want ErrTooLarge", err)
	}
	// what fits: max_in_flight-sized ledgers with 19-digit offsets
	l.Entries = l.Entries[:50]
	s, err := l.Encode()
	if err != nil || len(s) > MaxMetadata {
		t.Fatalf("50 entries: %d bytes, %v", len(s), err)
	}
}

func TestLedgerLive(t *testing.T) {
	l := Ledger{Offset: 0, Check: 20, Entries: []Entry{{Token: tokA, First: 0, Last: 9, N: 1}, {Token: tokA, First: 10, Last: 19, N: 1}, {Token: tokA, First: 20, Last: 29, N: 2}}}
	f := func(at int64, want Ledger) {
		t.Helper()
		if got := l.Live(at); !reflect.DeepEqual(got, want) {
			t.Fatalf("Live(%d) = %+v, want %+v", at, got, want)
		}
	}
	f(0, l)
	f(10, Ledger{Offset: 10, Check: 20, Entries: []Entry{{Token: tokA, First: 10, Last: 19, N: 1}, {Token: tokA, First: 20, Last: 29, N: 2}}})
	f(20, Ledger{Offset: 20, Entries: []Entry{{Token: tokA, First: 20, Last: 29, N: 2}}})
	f(30, Ledger{Offset: 30})
}

func TestToken(t *testing.T) {
	r1 := Range{TP: tp("a", 0), First: 0, Last: 9}
	r2 := Range{TP: tp("a", 1), First: 5, Last: 7}
	r3 := Range{TP: tp("b", 0), First: 5, Last: 7}
	base := Token("db.t", []Range{r1, r2, r3})
	if len(base) != tokenHex || !isHex(base) {
		t.Fatalf("token %q", base)
	}
	// f checks whether a variation gives the same token as base
	f := func(table string, rs []Range, same bool) {
		t.Helper()
		if got := Token(table, rs) == base; got != same {
			t.Fatalf("Token(%s, %v) same=%v, want %v", table, rs, got, same)
		}
	}
	f("db.t", []Range{r3, r1, r2}, true) // order of ranges does not matter
	f("db.u", []Range{r1, r2, r3}, false)
	f("db.t", []Range{r1, r2}, false)
	f("db.t", []Range{r1, r2, {TP: tp("b", 0), First: 5, Last: 8}}, false)
	f("db.t", []Range{r1, r2, {TP: tp("b", 1), First: 5, Last: 7}}, false)
	// names cannot run into each other
	if Token("db.t", []Range{{TP: tp("a1", 0)}}) == Token("db.t", []Range{{TP: tp("a", 10)}}) {
		t.Fatal("a1[0] and a[10] share a token")
	}
}

func FuzzLedgerDecode(f *testing.F) {
	f.Add("sink-eo1 @5 c7 " + tokA + ":5-9/1")
	f.Add("sink-eo1 @1")
	f.Add("member-id")
	f.Add("sink-eo1 @99999999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		l, ok, err := Decode(s)
		if !ok || err != nil {
			return
		}
		// what decodes re-encodes to an equivalent ledger
		enc, err := l.Encode()
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				return
			}
			t.Fatalf("%q decoded to %+v, which does not encode: %v", s, l, err)
		}
		back, ok, err := Decode(enc)
		if !ok || err != nil || !reflect.DeepEqual(back, l) {
			t.Fatalf("%q → %+v → %q → %+v", s, l, enc, back)
		}
	})
}

// TestUnion: spans of several servers fold into one ordered list, runs that
// overlap or touch joined.
func TestUnion(t *testing.T) {
	got := Union([]Span{{0, 1}, {6, 6}}, nil, []Span{{2, 4}, {5, 5}, {9, 12}}, []Span{{10, 11}, {20, 20}})
	want := []Span{{0, 6}, {9, 12}, {20, 20}}
	if !slices.Equal(got, want) {
		t.Fatalf("Union = %v, want %v", got, want)
	}
	if got := Union(); got != nil {
		t.Fatalf("Union() = %v, want nil", got)
	}
}
