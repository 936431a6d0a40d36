package chschema

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// quotingAllowed are the functions of the module's production code that
// may put a backtick around or into a name, with the reason. Every other
// identifier in generated SQL goes through QuoteIdent: a second quoting
// function is where an escape gets forgotten (a backslash left unescaped
// lets a name end its backticks early).
var quotingAllowed = map[string]string{
	"internal/chschema/chschema.go QuoteIdent": "the quoting function",
	"internal/chtable/chtable.go NewTable": "column names go into the INSERT as written, because clickhouse-go compares them " +
		"with the server's as written; CheckColumnName refuses the names that would need an escape",
	"internal/command/report/match.go backQuoteIfNeeded": "renders a name as ClickHouse writes it in query_log, " +
		"to match the server's own text; it builds no statement",
	"internal/chtype/types.go splitElement": "unquotes a name in a type's text (Tuple(`a``b` T)): it reads " +
		"backticks and writes an escaped one back as one, never quotes",
}

// TestOneIdentifierQuoting fails when production code (cmd/, config/,
// internal/ but its test support) builds backtick quoting anywhere but in
// quotingAllowed: a backtick (or an escaped one) concatenated with +,
// written with a strings.Builder or bytes.Buffer, substituted by a
// strings.Replacer or ReplaceAll, or around a %s/%v verb of a format.
// Parsing backticks (comparisons, cases) is not quoting and passes.
func TestOneIdentifierQuoting(t *testing.T) {
	checkQuotingSites(t, buildsQuoting, quotingAllowed,
		"quotes an identifier with backticks of its own: use chschema.QuoteIdent (or, if it must differ, add it to quotingAllowed with the reason)",
		"found no quoting site at all, not even QuoteIdent: the scan is broken")
}

// stringQuotingAllowed are the functions of the module's production code
// that may quote or escape a ClickHouse string literal, with the reason.
// Every other string literal in generated SQL goes through
// chschema.QuoteString: a second quoting function is where an escape gets
// forgotten (a quote or a backslash left unescaped ends the literal early,
// and what follows is SQL).
var stringQuotingAllowed = map[string]string{
	"internal/chschema/chschema.go QuoteString": "the quoting function",
}

// TestOneStringLiteralQuoting fails when production code builds a
// single-quoted string literal around a value anywhere but in
// stringQuotingAllowed: a literal that opens or closes a quote next to a
// value it is concatenated with ("'" + v, "name = '" + v + "'"), a single
// quote written with a strings.Builder or bytes.Buffer or appended to a
// byte slice, an escaped quote (\') as the replacement of a
// strings.Replacer, Replace or ReplaceAll, or a format of Sprintf, Fprintf
// or Appendf with '%s', '%v' or '%q' (an error's text, which Kafka
// Connect's messages quote so, is no SQL). A quoted constant (", 'UTC')"), an apostrophe in text
// ("ClickHouse's") and unescaping (\' replaced by ') are not quoting and
// pass.
func TestOneStringLiteralQuoting(t *testing.T) {
	checkQuotingSites(t, buildsStringQuoting, stringQuotingAllowed,
		"quotes a string literal of its own: use chschema.QuoteString (or, if it must differ, add it to stringQuotingAllowed with the reason)",
		"found no string quoting site at all, not even QuoteString: the scan is broken")
}

// checkQuotingSites fails for each function of the production code that
// builds reports true for and allowed does not list (with what it does
// wrong), and when none at all is found (broken: the scan found nothing,
// not even the quoting function itself).
func checkQuotingSites(t *testing.T, builds func(*ast.FuncDecl) bool, allowed map[string]string, wrong, broken string) {
	t.Helper()
	root := filepath.Join("..", "..")
	var found []string
	for _, dir := range []string{"cmd", "config", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == "testenv":
				return filepath.SkipDir
			case d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go"):
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			found = append(found, quotingSites(t, p, filepath.ToSlash(rel), builds)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(found)
	var seen int
	for _, site := range found {
		if _, ok := allowed[site]; ok {
			seen++
			continue
		}
		t.Errorf("%s %s", site, wrong)
	}
	if seen == 0 {
		t.Fatal(broken)
	}
}

// quotingSites returns "file func" for each function of the Go file at path
// (rel from the module root) that builds reports true for.
func quotingSites(t *testing.T, path, rel string, builds func(*ast.FuncDecl) bool) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if ok && builds(fn) {
			out = append(out, rel+" "+fn.Name.Name)
		}
	}
	return out
}

// buildsQuoting reports whether fn puts a backtick literal into a string it
// builds (quotingUse).
func buildsQuoting(fn *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fn, func(n ast.Node) bool {
		switch e := n.(type) {
		case *ast.BinaryExpr:
			found = found || (e.Op == token.ADD && (backtick(e.X) || backtick(e.Y)))
		case *ast.CallExpr:
			found = found || quotingCall(e)
		}
		return !found
	})
	return found
}

// quotingCall reports whether call writes or substitutes a backtick
// literal, or formats a verb between backticks.
func quotingCall(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch sel.Sel.Name {
	case "WriteByte", "WriteRune", "WriteString", "ReplaceAll", "Replace", "NewReplacer":
		for _, a := range call.Args {
			if backtick(a) {
				return true
			}
		}
	case "Sprintf", "Fprintf", "Errorf", "Appendf":
		for _, a := range call.Args {
			if s, ok := literal(a); ok && (strings.Contains(s, "`%s") || strings.Contains(s, "`%v") || strings.Contains(s, "`%q")) {
				return true
			}
		}
	}
	return false
}

// backtick reports whether e is a string or rune literal holding an odd
// number of backticks: one that opens or closes a quote around what is
// joined to it. A literal whose backticks pair up within it (a usage text
// naming `sink check`) quotes nothing that comes from elsewhere.
func backtick(e ast.Expr) bool {
	s, ok := literal(e)
	return ok && strings.Count(s, "`")%2 == 1
}

// literal is the value of a string or rune literal.
func literal(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok {
		return "", false
	}
	switch lit.Kind {
	case token.STRING:
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	case token.CHAR:
		r, _, _, err := strconv.UnquoteChar(lit.Value[1:len(lit.Value)-1], '\'')
		return string(r), err == nil
	}
	return "", false
}

// buildsStringQuoting reports whether fn builds a single-quoted string
// literal around a value (TestOneStringLiteralQuoting says how).
func buildsStringQuoting(fn *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fn, func(n ast.Node) bool {
		switch e := n.(type) {
		case *ast.BinaryExpr:
			if e.Op == token.ADD && quotesOperand(concatOperands(e, nil)) {
				found = true
			}
		case *ast.CallExpr:
			found = found || stringQuotingCall(e)
		}
		return !found
	})
	return found
}

// concatOperands flattens a chain of + (and parentheses) into its
// operands, in order.
func concatOperands(e ast.Expr, out []ast.Expr) []ast.Expr {
	switch x := e.(type) {
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			return concatOperands(x.Y, concatOperands(x.X, out))
		}
	case *ast.ParenExpr:
		return concatOperands(x.X, out)
	}
	return append(out, e)
}

// quotesOperand reports whether a literal of ops ends with a quote right
// before an operand that is not a literal, or starts with one right after
// such an operand: a quote opened or closed around a value.
func quotesOperand(ops []ast.Expr) bool {
	isLit := func(i int) bool {
		_, ok := literal(ops[i])
		return ok
	}
	for i := range ops {
		s, ok := literal(ops[i])
		if !ok || s == "" {
			continue
		}
		if s[len(s)-1] == '\'' && i+1 < len(ops) && !isLit(i+1) || s[0] == '\'' && i > 0 && !isLit(i-1) {
			return true
		}
	}
	return false
}

// stringQuotingCall reports whether call writes or appends a quote that
// opens or closes a literal, escapes quotes as a replacement, or formats
// a verb between quotes.
func stringQuotingCall(call *ast.CallExpr) bool {
	name := ""
	switch f := call.Fun.(type) {
	case *ast.SelectorExpr:
		name = f.Sel.Name
	case *ast.Ident:
		name = f.Name // append
	}
	switch name {
	case "WriteByte", "WriteRune", "WriteString", "append":
		for _, a := range call.Args {
			if s, ok := literal(a); ok && s != "" && (s[0] == '\'' || s[len(s)-1] == '\'') {
				return true
			}
		}
	case "NewReplacer":
		for i := 1; i < len(call.Args); i += 2 { // the replacements
			if s, ok := literal(call.Args[i]); ok && strings.Contains(s, `\'`) {
				return true
			}
		}
	case "Replace", "ReplaceAll":
		if len(call.Args) >= 3 {
			s, ok := literal(call.Args[2]) // the replacement
			return ok && strings.Contains(s, `\'`)
		}
	case "Sprintf", "Fprintf", "Appendf": // text that may be SQL; an error's is not
		for _, a := range call.Args {
			if s, ok := literal(a); ok && (strings.Contains(s, "'%s'") || strings.Contains(s, "'%v'") || strings.Contains(s, "'%q'")) {
				return true
			}
		}
	}
	return false
}

// TestStringQuotingDetector: the rules of TestOneStringLiteralQuoting on
// small functions, each side of the line.
func TestStringQuotingDetector(t *testing.T) {
	for src, want := range map[string]bool{
		`return "'" + v + "'"`:                                 true,
		`return "WHERE name = '" + v`:                          true,
		`return v + "' AND x"`:                                 true,
		`b.WriteByte('\'')`:                                    true,
		`b.WriteString("', ")`:                                 true,
		`return append(d, '\'')`:                               true,
		`return strings.ReplaceAll(v, "'", "\\'")`:             true,
		`return strings.NewReplacer("\\", "\\\\", "'", "\\'")`: true,
		`return fmt.Sprintf("x = '%s'", v)`:                    true,
		`return "toDateTime64(" + v + ", 'UTC')"`:              false,
		`return "ClickHouse's " + v`:                           false,
		`return "'" + "x" + "'"`:                               false,
		`return strings.ReplaceAll(v, "\\'", "'")`:             false,
		`return fmt.Sprintf("x = %s", QuoteString(v))`:         false,
		`b.WriteString("it's")`:                                false,
		`return fmt.Errorf("value: '%s'", v)`:                  false,
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package x\nfunc f() {\n"+src+"\n}\n", 0)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := buildsStringQuoting(f.Decls[0].(*ast.FuncDecl)); got != want {
			t.Errorf("%s: quoting %v, want %v", src, got, want)
		}
	}
}
