package eos

import (
	"reflect"
	"strings"
	"testing"

	"sink/internal/offsets"
)

// Kafka's topic IDs are 16 bytes in base64: 24 characters, which may hold
// '+', '/', '=' and start with 'c' or 't'.
const (
	idOld = "c2lua3Rlc3RvcGljaWQxAA=="
	idNew = "t+/NewTopicIdOfSixteen=="
)

func TestLedgerTopicID(t *testing.T) {
	for _, tc := range []struct {
		l    Ledger
		want string
	}{
		{Ledger{Offset: 7, TopicID: idOld}, "sink-eo1 @7 t" + idOld},
		{Ledger{Offset: 7, TopicID: idNew, Check: 9}, "sink-eo1 @7 t" + idNew + " c9"},
		{Ledger{Offset: 5, TopicID: idOld, Check: 7, Entries: []Entry{{Token: tokA, First: 5, Last: 9, N: 1}}},
			"sink-eo1 @5 t" + idOld + " c7 " + tokA + ":5-9/1"},
	} {
		got, err := tc.l.Encode()
		if err != nil || got != tc.want {
			t.Fatalf("%+v: encoded %q, %v; want %q", tc.l, got, err, tc.want)
		}
		back, ok, err := Decode(got)
		if err != nil || !ok || !reflect.DeepEqual(back, tc.l) {
			t.Fatalf("%q decoded to %+v,%v,%v; want %+v", got, back, ok, err, tc.l)
		}
	}
	// A ledger of an earlier version has no ID: it decodes with none.
	if l, ok, err := Decode("sink-eo1 @3 c8"); err != nil || !ok || l.TopicID != "" || l.Check != 8 {
		t.Fatalf("old ledger: %+v,%v,%v", l, ok, err)
	}
	if _, _, err := Decode("sink-eo1 @3 t"); err == nil {
		t.Fatal("an empty topic ID decoded")
	}
	if _, err := (Ledger{Offset: 1, TopicID: "a b"}).Encode(); err == nil {
		t.Fatal("a topic ID with a space encoded")
	}
	// Moving the ledger forward keeps the ID.
	if l := (Ledger{Offset: 1, TopicID: idOld, Check: 5}).Live(10); l.TopicID != idOld || l.Offset != 10 || l.Check != 0 {
		t.Fatalf("Live: %+v", l)
	}
}

func TestIncarnation(t *testing.T) {
	for _, tc := range []struct {
		name                string
		recorded, current   string
		lastPresent, logEnd int64
		recreated           bool
		why                 string
	}{
		{"same ID, rows below the end", idOld, idOld, 99, 100, false, ""},
		{"another ID", idOld, idNew, -1, -1, true, "topic ID " + idOld},
		{"another ID, rows fine", idOld, idNew, 10, 100, true, "is now " + idNew},
		{"no ID recorded (older ledger, or none)", "", idNew, 50, 100, false, ""},
		{"broker gives no ID", idOld, "", 50, 100, false, ""},
		{"a row at the log end", "", idNew, 100, 100, true, "row of offset 100"},
		{"a row past the log end of an empty topic", "", "", 4999, 0, true, "log ends at 0"},
		{"no rows", "", idNew, -1, 0, false, ""},
		{"log end unknown", "", idNew, 4999, -1, false, ""},
	} {
		why, got := Incarnation(tc.recorded, tc.current, tc.lastPresent, tc.logEnd)
		if got != tc.recreated || !strings.Contains(why, tc.why) || (got && why == "") {
			t.Errorf("%s: %q,%v; want recreated %v, why containing %q", tc.name, why, got, tc.recreated, tc.why)
		}
	}
}

// PlanRecovery hands on the topic ID of each partition's committed ledger.
func TestPlanRecoveryCarriesTopicID(t *testing.T) {
	a0, a1 := tp("a", 0), tp("a", 1)
	snap := Snapshot{
		a0: {Offset: 10, Metadata: meta(t, Ledger{Offset: 10, TopicID: idOld})},
		a1: {Offset: 4, Metadata: meta(t, Ledger{Offset: 4})},
	}
	plan := PlanRecovery(snap, []offsets.TP{a0, a1}, func(string) []string { return []string{"db.t"} })
	got := map[string]string{}
	for _, r := range plan.Parts {
		got[r.TP.Topic+string(rune('0'+r.TP.Partition))] = r.TopicID
	}
	if got["a0"] != idOld || got["a1"] != "" {
		t.Fatalf("topic IDs %v; want a0 %s, a1 none", got, idOld)
	}
}
