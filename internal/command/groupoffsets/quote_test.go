package groupoffsets

import "testing"

// TestQuotedNames: the table names of --reload's statements are quoted by
// the shared function, so a backslash or a backtick in a name cannot end
// its quoting early (a trailing backslash used to escape the closing
// backtick).
func TestQuotedNames(t *testing.T) {
	for _, c := range []struct{ db, table, want string }{
		{"db", "t", "`db`.`t`"},
		{"db", `t\`, "`db`.`t\\\\`"},
		{"d`b", "t`x", "`d\\`b`.`t\\`x`"},
		{"db", "t (x)", "`db`.`t\\x20\\x28x\\x29`"},
	} {
		if got := quoted(c.db, c.table); got != c.want {
			t.Errorf("quoted(%q, %q) = %s, want %s", c.db, c.table, got, c.want)
		}
	}
}
