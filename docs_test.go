package sink_test

// README.md is the front page and docs/*.md hold the detail; these tests keep
// the two joined: every relative link in them names a file of the repository
// and, when it carries a #fragment into a Markdown page, a heading of that
// page (GitHub's anchor for it), and README keeps the two commands a newcomer
// starts with.

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// docPages are the Markdown pages whose links are checked.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md pages")
	}
	return append([]string{"README.md"}, pages...)
}

// mdLink matches an inline link or image, [text](target) or ![alt](target),
// with an optional "title" after the target.
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// codeSpan matches inline code, whose text is never a link.
var codeSpan = regexp.MustCompile("`[^`]*`")

// prose returns the page's lines outside fenced code blocks, with inline code
// removed, and a parallel slice of their line numbers.
func prose(text string) (lines []string, numbers []int) {
	fence := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		lines = append(lines, codeSpan.ReplaceAllString(line, ""))
		numbers = append(numbers, i+1)
	}
	return lines, numbers
}

// githubSlug is the anchor GitHub gives a heading: lower case, every
// character but letters, marks, digits, '_', '-' and ' ' dropped, spaces
// turned into '-'.
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown page's headings; a repeated
// heading gets -1, -2, … as on GitHub.
func anchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if title == "" || title[0] != ' ' {
			continue
		}
		slug := githubSlug(strings.TrimSpace(title))
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func TestDocsRelativeLinksResolve(t *testing.T) {
	headingCache := map[string]map[string]bool{}
	checked := 0
	for _, page := range docPages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines, numbers := prose(string(text))
		for i, line := range lines {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, fragment, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
				}
				where := page + ":" + strconv.Itoa(numbers[i])
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %s does not exist", where, target, path)
					continue
				}
				if fragment == "" || !strings.HasSuffix(path, ".md") {
					continue
				}
				if headingCache[path] == nil {
					headingCache[path] = anchors(t, path)
				}
				if !headingCache[path][fragment] {
					t.Errorf("%s: link %q: %s has no heading with anchor #%s", where, target, path, fragment)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link pattern no longer matches the pages")
	}
}

func TestGithubSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Guarantees": "guarantees",
		"Exactly-once (`delivery: exactly_once`)":               "exactly-once-delivery-exactly_once",
		"Facts relied on, and how each was checked":             "facts-relied-on-and-how-each-was-checked",
		"The ledger: what a partition's commit metadata says":   "the-ledger-what-a-partitions-commit-metadata-says",
		"Sizing: `sink advise`":                                 "sizing-sink-advise",
		"Schema registry formats (Avro, Protobuf, JSON Schema)": "schema-registry-formats-avro-protobuf-json-schema",
	} {
		if got := githubSlug(heading); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestReadmeKeepsTheTwoCommands(t *testing.T) {
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"make demo", "make test"} {
		if !strings.Contains(string(text), cmd) {
			t.Errorf("README.md does not mention %q", cmd)
		}
	}
}

// docPointer is how an error or a warning of the sink points to the docs
// section that explains it: docs/page.md#anchor.
var docPointer = regexp.MustCompile(`docs/([a-z-]+\.md)#([A-Za-z0-9_-]+)`)

// Every docs/page.md#anchor that the sink's code (errors, warnings, help)
// names is a heading of that page, so that a pointer printed to an operator
// leads somewhere.
func TestCodeDocPointersResolve(t *testing.T) {
	seen := 0
	for _, root := range []string{"config", "cmd", "internal"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range docPointer.FindAllStringSubmatch(string(b), -1) {
				seen++
				page := filepath.Join("docs", m[1])
				if _, err := os.Stat(page); err != nil {
					t.Errorf("%s: %s: no such page", path, m[0])
					continue
				}
				if !anchors(t, page)[m[2]] {
					t.Errorf("%s: %s: no heading with that anchor", path, m[0])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if seen == 0 {
		t.Fatal("found no docs pointer in the code")
	}
}
