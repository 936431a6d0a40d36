package sink

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The error texts a user can meet, and where troubleshooting.md must list
// them: every problem config validation reports (problems.add in config/),
// every error config loading writes (config/load.go, config/deprecated.go,
// config/keystore.go), and the errors check and run stop on or log that
// are whole sentences (an fmt.Errorf or errors.New text that does not end
// by wrapping another error) in the packages that reach Kafka, ClickHouse
// and the registry, check the tables and run the pipeline.
var (
	troubleshootingDirs = []string{
		"internal/consumer", "internal/writer", "internal/tables", "internal/chtable", "internal/command/check",
		"internal/pipeline", "internal/pipeline/intake", "internal/pipeline/delivery", "internal/registry",
	}
	configLoadFiles = []string{"config/load.go", "config/deprecated.go", "config/keystore.go"}
)

// verbRE is a fmt verb; the page writes each as "…".
var verbRE = regexp.MustCompile(`%[-+# 0-9.*]*[a-zA-Z]`)

// normalize is a message's format string as the page writes it.
func normalize(format string) string {
	return strings.TrimSpace(verbRE.ReplaceAllString(strings.ReplaceAll(format, "%%", "%"), "…"))
}

// userMessage reports whether a normalized format is a message of its own
// (not a bare prefix for a wrapped error, not all placeholders).
func userMessage(m string) bool {
	letters := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return -1
	}, m)
	return len(letters) >= 8 && strings.Contains(m, " ")
}

// codeMessages returns the normalized user-visible messages, each with
// the file it is in.
func codeMessages(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(path, format string) {
		if m := normalize(format); userMessage(m) {
			out[m] = path
		}
	}
	configFiles, _ := filepath.Glob("config/*.go")
	for _, path := range configFiles {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		eachCall(t, path, func(fn string, format string) {
			if fn == "add" || (contains(configLoadFiles, path) && (fn == "Errorf" || fn == "New") && !strings.HasSuffix(format, "%w")) {
				add(path, format)
			}
		})
	}
	for _, dir := range troubleshootingDirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			eachCall(t, path, func(fn string, format string) {
				if (fn == "Errorf" || fn == "New") && !strings.HasSuffix(format, "%w") && !strings.HasPrefix(format, "%") {
					add(path, format)
				}
			})
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// eachCall calls fn with the name and first string-literal argument of
// every call of add, Errorf or New in the file.
func eachCall(t *testing.T, path string, fn func(name, format string)) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "add" && sel.Sel.Name != "Errorf" && sel.Sel.Name != "New") {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && sel.Sel.Name != "add" && x.Name != "fmt" && x.Name != "errors" {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err == nil {
			fn(sel.Sel.Name, s)
		}
		return true
	})
}

// pageMessages returns the messages docs/troubleshooting.md lists: the
// code span of every line "- `MESSAGE`" under a "Messages:" paragraph.
func pageMessages(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^- `(.+)`$").FindAllStringSubmatch(string(b), -1) {
		out[strings.ReplaceAll(m[1], "``", "`")] = true
	}
	return out
}

// TestTroubleshootingCoversEveryError: every error text a user can meet
// (codeMessages) is listed in docs/troubleshooting.md under an entry that
// gives its cause and fix, and every message the page lists is one the
// code still has.
func TestTroubleshootingCoversEveryError(t *testing.T) {
	code := codeMessages(t)
	page := pageMessages(t)
	var missing, gone []string
	for m, path := range code {
		if !page[m] {
			missing = append(missing, path+": "+m)
		}
	}
	for m := range page {
		if _, ok := code[m]; !ok {
			gone = append(gone, m)
		}
	}
	sort.Strings(missing)
	sort.Strings(gone)
	if len(code) < 150 {
		t.Errorf("found only %d messages in the code; the scan is broken", len(code))
	}
	for _, m := range missing {
		t.Errorf("no entry in docs/troubleshooting.md lists %s", m)
	}
	for _, m := range gone {
		t.Errorf("docs/troubleshooting.md lists %q, which the code no longer has", m)
	}
}
