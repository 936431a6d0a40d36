// Command codesize reports the size measures docs/architecture.md keeps for
// the pipeline's design: the methods and fields of one type, the functions
// longer than a number of lines, and the length of named functions.
// Test files (_test.go) are left out.
//
//	go run ./tools/codesize -type Pipeline -over 100 -func Run ./internal/pipeline
//
// It reads one directory per argument; the length of a function is the
// number of lines from its func keyword to its closing brace.
//
// Concurrency: a command; nothing is shared.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// measure is what codesize counts over the files it reads.
type measure struct {
	typ, fn                string
	over                   int
	fset                   *token.FileSet
	long                   []string
	methods, fields, chans int
}

func main() {
	m := measure{fset: token.NewFileSet()}
	flag.StringVar(&m.typ, "type", "", "count the methods and fields of this type")
	flag.IntVar(&m.over, "over", 100, "list functions longer than this many lines")
	flag.StringVar(&m.fn, "func", "", "print the length of the functions (or methods) of this name")
	flag.Parse()
	for _, dir := range flag.Args() {
		if err := m.dir(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if m.typ != "" {
		fmt.Printf("type %s: %d methods, %d fields (%d channels)\n", m.typ, m.methods, m.fields, m.chans)
	}
	sort.Strings(m.long)
	fmt.Printf("functions over %d lines: %d\n", m.over, len(m.long))
	for _, l := range m.long {
		fmt.Println(l)
	}
}

// dir measures the Go files of one directory, test files left out.
func (m *measure) dir(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(m.fset, name, nil, 0)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				m.funcDecl(d)
			case *ast.GenDecl:
				m.genDecl(d)
			}
		}
	}
	return nil
}

func (m *measure) funcDecl(d *ast.FuncDecl) {
	lines := m.fset.Position(d.End()).Line - m.fset.Position(d.Pos()).Line + 1
	label := d.Name.Name
	if d.Recv != nil && len(d.Recv.List) == 1 {
		recv := recvName(d.Recv.List[0].Type)
		label = recv + "." + label
		if recv == m.typ {
			m.methods++
		}
	}
	if lines > m.over {
		m.long = append(m.long, fmt.Sprintf("%5d %s (%s)", lines, label, m.fset.Position(d.Pos())))
	}
	if m.fn != "" && d.Name.Name == m.fn {
		fmt.Printf("func %s: %d lines\n", label, lines)
	}
}

// genDecl counts the fields, and among them the channels, of the struct
// type named m.typ.
func (m *measure) genDecl(d *ast.GenDecl) {
	for _, s := range d.Specs {
		ts, ok := s.(*ast.TypeSpec)
		if !ok || ts.Name.Name != m.typ {
			continue
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, fl := range st.Fields.List {
			n := max(len(fl.Names), 1)
			m.fields += n
			if _, ok := fl.Type.(*ast.ChanType); ok {
				m.chans += n
			}
		}
	}
}

// recvName is the type name of a receiver: T for T, *T, T[K] and *T[K].
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
