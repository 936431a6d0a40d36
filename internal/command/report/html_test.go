package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

// goldenReport is the split report of the golden files, with the notes a
// reader adds.
func goldenReport() (Report, *time.Location) {
	ins, parts, split := seed004()
	r := Aggregate("shop.events", at(-1, 0), at(8, 0), ins, parts, true, &split)
	r.MatchedBy = MatchedByTables
	return r, time.FixedZone("MSK", 3*3600)
}

func renderHTML(t *testing.T, r Report, loc *time.Location, server string) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.HTML(&b, loc, server); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestGoldenHTML(t *testing.T) {
	r, loc := goldenReport()
	golden(t, "split.html", []byte(renderHTML(t, r, loc, "127.0.0.1:9000")))

	ins, _, _ := seed004()
	r2 := Aggregate("shop.events", at(-1, 0), at(8, 0), ins, nil, false, nil)
	r2.Notes = append(r2.Notes, "system.part_log does not exist on this server")
	golden(t, "nosplit.html", []byte(renderHTML(t, r2, loc, "")))

	empty := Aggregate("shop.events", at(-1, 0), at(8, 0), nil, nil, true, nil)
	page := renderHTML(t, empty, loc, "")
	if !strings.Contains(page, "no INSERTs and no new parts in this range") || strings.Contains(page, `id="minutes"`) {
		t.Fatalf("an empty report's page lacks its sentence or has a minutes table:\n%s", page)
	}
}

// Every name that comes from outside (the table, the server address, the
// notes, which quote the table) is escaped: none of them can add an
// element, an attribute or a script to the page.
func TestHTMLEscapesNames(t *testing.T) {
	ins, parts, split := seed004()
	const evil = `db.<script>alert(1)</script>"'&<img src=x onerror=alert(2)>`
	r := Aggregate(evil, at(-1, 0), at(8, 0), ins, parts, true, &split)
	r.Notes = append(r.Notes, "no finished INSERT into "+evil+" in system.query_log in this range")
	page := renderHTML(t, r, time.UTC, `host"><script>alert(3)</script>:9000`)
	for _, bad := range []string{"<script", "<img"} {
		if strings.Contains(page, bad) {
			t.Fatalf("the page holds %q unescaped:\n%s", bad, page)
		}
	}
	// The text "onerror=" may stay, escaped, as text; never inside a tag.
	if tag := regexp.MustCompile(`<[^>]*onerror`).FindString(page); tag != "" {
		t.Fatalf("the page has a tag with an event handler: %q", tag)
	}
	for _, want := range []string{
		"db.&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;&lt;img src=x onerror=alert(2)&gt;", // <title>, <h1>, note
		"host&#34;&gt;&lt;script&gt;alert(3)&lt;/script&gt;:9000",
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page lacks the escaped %q:\n%s", want, page)
		}
	}
	// The table name inside the inline SVG is escaped too.
	svg := page[strings.Index(page, "<svg"):strings.Index(page, "</svg>")]
	if !strings.Contains(svg, "db.&lt;script&gt;") {
		t.Fatalf("the chart's title is not the escaped table name:\n%s", svg)
	}
}

// The page is self-contained: no script, no stylesheet, image, font or
// frame fetched from anywhere, so it shows the same pasted into a ticket
// with no network.
func TestHTMLSelfContained(t *testing.T) {
	r, loc := goldenReport()
	page := renderHTML(t, r, loc, "127.0.0.1:9000")
	for _, re := range []string{`(?i)<script`, `(?i)\bsrc\s*=`, `(?i)<link`, `(?i)url\(`, `(?i)@import`, `(?i)<iframe`, `(?i)\bhref\s*=`} {
		if regexp.MustCompile(re).MatchString(page) {
			t.Fatalf("the page matches %s: it refers to something outside itself", re)
		}
	}
	if strings.Count(page, "<svg") != 1 || !strings.Contains(page, "<style>") {
		t.Fatalf("the page lacks its inline chart or stylesheet")
	}
}
