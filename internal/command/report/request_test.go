package report

import (
	"strings"
	"testing"
	"time"
)

// requestCases are Request.Options' table, read at parseTimeNow in
// parseTimeLoc: the request, then the range it gives (since, until, split
// as offsets from now; split -1 for none) or a part of its error.
var requestCases = []struct {
	table, since, until, split, format string
	since0, until0, split0             time.Duration
	err                                string
}{
	{"db.t", "2h", "now", "", "text", -2 * time.Hour, 0, -1, ""},
	{"t", "3h", "1h", "2h", "csv", -3 * time.Hour, -time.Hour, -2 * time.Hour, ""},
	{"db.t", "2h", "now", "2h", "json", -2 * time.Hour, 0, -2 * time.Hour, ""},
	{"", "2h", "now", "", "text", 0, 0, 0, "--table DB.TABLE is required"},
	{"db.t", "2h", "now", "", "xml", 0, 0, 0, `--format "xml": want text, csv or json`},
	{"db.t", "0", "now", "", "text", 0, 0, 0, `--since "0" is ambiguous`},
	{"db.t", "2h", "later", "", "text", 0, 0, 0, `--until "later" is not a time`},
	{"db.t", "1h", "2h", "", "text", 0, 0, 0, "--since 2025-04-18T15:30:00Z is not before --until 2025-04-18T14:30:00Z"},
	{"db.t", "2h", "now", "3h", "text", 0, 0, 0, "--split 2025-04-18T13:30:00Z is outside the range"},
	{"db.t", "2h", "1h", "30m", "text", 0, 0, 0, "is outside the range"},
	{"db.t", "2h", "now", "x", "text", 0, 0, 0, `--split "x" is not a time`},
	{".t", "2h", "now", "", "text", 0, 0, 0, `--table ".t": want DB.TABLE or TABLE`},
	{"db.", "2h", "now", "", "text", 0, 0, 0, `--table "db.": want DB.TABLE or TABLE`},
}

func TestRequestOptions(t *testing.T) {
	for _, c := range requestCases {
		r := Request{Table: c.table, Database: "default", Since: c.since, Until: c.until, Split: c.split, Format: c.format, Loc: time.UTC}
		o, err := r.Options(parseTimeNow)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%+v: Options = %+v, %v; want error containing %q", r, o, err, c.err)
			}
			continue
		}
		if err != nil || !o.Since.Equal(parseTimeNow.Add(c.since0)) || !o.Until.Equal(parseTimeNow.Add(c.until0)) ||
			(c.split0 == -1) != (o.Split == nil) || (o.Split != nil && !o.Split.Equal(parseTimeNow.Add(c.split0))) || !o.Flush {
			t.Fatalf("%+v: Options = %+v, %v; want since %s until %s split %s", r, o, err, c.since0, c.until0, c.split0)
		}
		wantDB, wantTable, ok := strings.Cut(c.table, ".")
		if !ok {
			wantDB, wantTable = "default", c.table
		}
		if o.Target != (Target{Database: wantDB, Table: wantTable, DefaultDatabase: "default"}) {
			t.Fatalf("%+v: target %+v", r, o.Target)
		}
	}
}

// query_log's tables column writes a name that is not a plain word in
// backquotes; the report looks for both spellings.
func TestLoggedNames(t *testing.T) {
	for _, c := range []struct {
		t    Target
		want []string
	}{
		{Target{Database: "shop", Table: "events_1"}, []string{"shop.events_1"}},
		{Target{Database: "shop", Table: "ev<b>"}, []string{"shop.ev<b>", "shop.`ev<b>`"}},
		{Target{Database: "my-db", Table: "a`b\\c"}, []string{"my-db.a`b\\c", "`my-db`.`a\\`b\\\\c`"}},
		{Target{Database: "shop", Table: "1st"}, []string{"shop.1st", "shop.`1st`"}},
	} {
		if got := c.t.LoggedNames(); strings.Join(got, " | ") != strings.Join(c.want, " | ") {
			t.Errorf("%+v: %q, want %q", c.t, got, c.want)
		}
	}
}
