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
	"internal/decode/types.go splitElement": "unquotes a name in a type's text (Tuple(`a``b` T)): it reads " +
		"backticks and writes an escaped one back as one, never quotes",
}

// TestOneIdentifierQuoting fails when production code (cmd/, config/,
// internal/ but its test support) builds backtick quoting anywhere but in
// quotingAllowed: a backtick (or an escaped one) concatenated with +,
// written with a strings.Builder or bytes.Buffer, substituted by a
// strings.Replacer or ReplaceAll, or around a %s/%v verb of a format.
// Parsing backticks (comparisons, cases) is not quoting and passes.
func TestOneIdentifierQuoting(t *testing.T) {
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
			found = append(found, quotingSites(t, p, filepath.ToSlash(rel))...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(found)
	var seen int
	for _, site := range found {
		if _, ok := quotingAllowed[site]; ok {
			seen++
			continue
		}
		t.Errorf("%s quotes an identifier with backticks of its own: use chschema.QuoteIdent (or, if it must differ, add it to quotingAllowed with the reason)", site)
	}
	if seen == 0 {
		t.Fatal("found no quoting site at all, not even QuoteIdent: the scan is broken")
	}
}

// quotingSites returns "file func" for each function of the Go file at path
// (rel from the module root) that builds backtick quoting.
func quotingSites(t *testing.T, path, rel string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if ok && buildsQuoting(fn) {
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
