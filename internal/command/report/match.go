package report

import "strings"

// InsertTarget reads the target table of an INSERT statement as ClickHouse
// logs it in system.query_log.query. It returns the database ("" when the
// statement does not name one) and the table, unquoted; ok is false for
// anything that is not INSERT INTO a table (a SELECT, INSERT INTO FUNCTION,
// a truncated or garbled text).
//
// The rule, which is what `sink report` documents:
//   - leading whitespace and comments (-- … and /* … */) are skipped;
//   - keywords INSERT, INTO and the optional TABLE are case-insensitive;
//   - a name is bare ([A-Za-z_][A-Za-z0-9_]*), `backquoted` or "quoted",
//     with \x and doubled-quote escapes; whitespace may surround the dot.
//
// So `INSERT INTO `db`.`t` (a, b) VALUES`, `insert into db.t FORMAT
// JSONEachRow` and `INSERT INTO t SELECT …` all name t; the last one in
// whatever database the client was using.
func InsertTarget(q string) (db, table string, ok bool) {
	s := scanner{s: q}
	if !s.keyword("INSERT") || !s.keyword("INTO") {
		return "", "", false
	}
	save := s.i
	if s.keyword("TABLE") {
		// `INSERT INTO table VALUES` names a table called table.
		if _, isName := s.peekName(); !isName {
			s.i = save
		}
	}
	save = s.i
	if s.keyword("FUNCTION") {
		if _, isName := s.peekName(); isName {
			return "", "", false // INSERT INTO FUNCTION remote(...)
		}
		s.i = save
	}
	first, ok := s.name()
	if !ok {
		return "", "", false
	}
	s.skip()
	if s.i < len(s.s) && s.s[s.i] == '.' {
		s.i++
		s.skip()
		second, ok := s.name()
		if !ok {
			return "", "", false
		}
		return first, second, true
	}
	return "", first, true
}

// Target is the table a report is about and how unqualified INSERTs are
// attributed.
type Target struct {
	Database, Table string
	// DefaultDatabase is the database an INSERT that names no database is
	// assumed to write to. query_log on ClickHouse 18.16 does not record
	// the session's current database, so there `INSERT INTO t` counts for
	// DefaultDatabase.t. Servers whose query_log has tables and
	// current_database resolve names themselves, and this is not used.
	DefaultDatabase string
}

// Matches says whether the logged INSERT query writes into t.
func (t Target) Matches(query string) bool {
	db, table, ok := InsertTarget(query)
	if !ok || table != t.Table {
		return false
	}
	if db == "" {
		db = t.DefaultDatabase
	}
	return db == t.Database
}

// MatchesLogged decides for an INSERT that query_log already lists as using
// t (its tables column holds db.table): with nTables = 1, t is the only table
// it touched, so it wrote into t; with more, it also read other tables
// (INSERT … SELECT), and the statement text decides which one it wrote to,
// with currentDB (query_log's current_database, the client's database at
// the time) for a statement that names no database.
func (t Target) MatchesLogged(nTables int, currentDB, query string) bool {
	if nTables == 1 {
		return true
	}
	t.DefaultDatabase = currentDB
	return t.Matches(query)
}

// FullName is db.table.
func (t Target) FullName() string { return t.Database + "." + t.Table }

// LoggedNames are the spellings of the table in query_log's tables
// column: db.table, and with each name that is not a plain identifier in
// backquotes (as the server writes `ev-1`), so that such tables are found
// too.
func (t Target) LoggedNames() []string {
	quoted := backQuoteIfNeeded(t.Database) + "." + backQuoteIfNeeded(t.Table)
	if quoted == t.FullName() {
		return []string{quoted}
	}
	return []string{t.FullName(), quoted}
}

// backQuoteIfNeeded quotes name as ClickHouse writes an identifier that
// is not a plain word: in backquotes, with backslashes and backquotes
// escaped.
func backQuoteIfNeeded(name string) string {
	plain := name != "" && isIdentStart(name[0])
	for i := 0; i < len(name) && plain; i++ {
		plain = isIdent(name[i])
	}
	if plain {
		return name
	}
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(name) + "`"
}

type scanner struct {
	s string
	i int
}

// skip moves past whitespace and comments.
func (s *scanner) skip() {
	for s.i < len(s.s) {
		c := s.s[s.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			s.i++
		case strings.HasPrefix(s.s[s.i:], "--"):
			if j := strings.IndexByte(s.s[s.i:], '\n'); j >= 0 {
				s.i += j + 1
			} else {
				s.i = len(s.s)
			}
		case strings.HasPrefix(s.s[s.i:], "/*"):
			if j := strings.Index(s.s[s.i+2:], "*/"); j >= 0 {
				s.i += j + 4
			} else {
				s.i = len(s.s)
			}
		default:
			return
		}
	}
}

// keyword consumes kw (case-insensitive) when it stands as a whole word.
func (s *scanner) keyword(kw string) bool {
	s.skip()
	end := s.i + len(kw)
	if end > len(s.s) || !strings.EqualFold(s.s[s.i:end], kw) {
		return false
	}
	if end < len(s.s) && isIdent(s.s[end]) {
		return false
	}
	s.i = end
	return true
}

// peekName reports whether a name follows, without consuming it.
func (s *scanner) peekName() (string, bool) {
	save := s.i
	n, ok := s.name()
	s.i = save
	return n, ok
}

// name consumes one identifier, bare or quoted, and returns it unquoted.
func (s *scanner) name() (string, bool) {
	s.skip()
	if s.i >= len(s.s) {
		return "", false
	}
	c := s.s[s.i]
	if c == '`' || c == '"' {
		var b strings.Builder
		for j := s.i + 1; j < len(s.s); j++ {
			switch s.s[j] {
			case '\\':
				if j+1 < len(s.s) {
					j++
					b.WriteByte(s.s[j])
				}
			case c:
				if j+1 < len(s.s) && s.s[j+1] == c {
					b.WriteByte(c)
					j++
					continue
				}
				s.i = j + 1
				return b.String(), b.Len() > 0
			default:
				b.WriteByte(s.s[j])
			}
		}
		return "", false // unterminated
	}
	if !isIdentStart(c) {
		return "", false
	}
	j := s.i + 1
	for j < len(s.s) && isIdent(s.s[j]) {
		j++
	}
	n := s.s[s.i:j]
	switch strings.ToUpper(n) {
	case "VALUES", "FORMAT", "SELECT", "WITH", "SETTINGS":
		return "", false
	}
	s.i = j
	return n, true
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }
