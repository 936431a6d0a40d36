//go:build integration

package report

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sink/internal/testenv"
)

// chromium runs Debian's headless Chromium (installed by scripts/stack.sh)
// on the page at path with the extra flags, and returns its stdout.
func chromium(t *testing.T, path string, flags ...string) []byte {
	t.Helper()
	bin := testenv.Tool(t, "chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// --no-sandbox: the test may run as root (CI containers), where
	// Chromium refuses its sandbox.
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, "file://"+path)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", flags, err, stderr.String())
	}
	return out
}

var (
	tagRe   = regexp.MustCompile(`<[^>]*>`)
	rowRe   = regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`)
	cellRe  = regexp.MustCompile(`(?s)<t[dh][^>]*>(.*?)</t[dh]>`)
	tableRe = func(id string) *regexp.Regexp { return regexp.MustCompile(`(?s)<table id="` + id + `">(.*?)</table>`) }
)

// domTable returns the text of every cell of the table with id, row by
// row, from a DOM as Chromium serialised it.
func domTable(t *testing.T, dom, id string) [][]string {
	t.Helper()
	m := tableRe(id).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the rendered page has no table %q:\n%s", id, dom)
	}
	var rows [][]string
	for _, r := range rowRe.FindAllStringSubmatch(m[1], -1) {
		var cells []string
		for _, c := range cellRe.FindAllStringSubmatch(r[1], -1) {
			cells = append(cells, strings.TrimSpace(tagRe.ReplaceAllString(c[1], "")))
		}
		rows = append(rows, cells)
	}
	return rows
}

// count reads a rendered count ("20,100"), failing on anything else.
func count(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.ReplaceAll(s, ",", ""), 10, 64)
	if err != nil {
		t.Fatalf("rendered %q is not a count", s)
	}
	return n
}

// A real browser loads the HTML report from a file: the numbers it shows
// in the per-minute and before/after tables are the report's, the chart is
// drawn (its bar colour is on the screenshot), and the page needs nothing
// from the network. The screenshot is kept in $SINK_ARTIFACTS when set.
func TestHTMLReportInChromium(t *testing.T) {
	r, loc := goldenReport()
	dir := t.TempDir()
	if a := os.Getenv("SINK_ARTIFACTS"); a != "" {
		dir = a
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, []byte(renderHTML(t, r, loc, "127.0.0.1:9000")), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(chromium(t, page, "--dump-dom"))

	minutes := domTable(t, dom, "minutes")
	if len(minutes) != 1+len(r.Minutes) {
		t.Fatalf("the browser shows %d rows in the minutes table, want a head and %d minutes", len(minutes), len(r.Minutes))
	}
	for i, m := range r.Minutes {
		row := minutes[i+1]
		if len(row) != 9 || row[0] != m.Start.In(loc).Format("2006-01-02 15:04") {
			t.Fatalf("minute %d renders as %q", i, row)
		}
		if count(t, row[1]) != uint64(m.Inserts) || count(t, row[2]) != m.Rows || row[8] != m.Side {
			t.Fatalf("minute %s renders as %q, want %d inserts, %d rows, side %s", row[0], row, m.Inserts, m.Rows, m.Side)
		}
		if m.Inserts > 0 && (count(t, row[5]) != m.P50MS || count(t, row[6]) != m.P99MS) {
			t.Fatalf("minute %s renders p50/p99 %s/%s, want %d/%d", row[0], row[5], row[6], m.P50MS, m.P99MS)
		}
		if r.PartLog && count(t, row[7]) != uint64(m.NewParts) {
			t.Fatalf("minute %s renders %s new parts, want %d", row[0], row[7], m.NewParts)
		}
	}

	summary := map[string][]string{}
	for _, row := range domTable(t, dom, "summary")[1:] {
		summary[row[0]] = row[1:]
	}
	ir := summary["inserts, rows"]
	if len(ir) < 2 || ir[0] != strconv.Itoa(r.Before.Inserts)+", "+strconv.FormatUint(r.Before.Rows, 10) ||
		strings.ReplaceAll(ir[1], ",", "") != strconv.Itoa(r.After.Inserts)+" "+strconv.FormatUint(r.After.Rows, 10) {
		t.Fatalf("inserts, rows render as %q; want before %d, %d and after %d, %d", ir, r.Before.Inserts, r.Before.Rows, r.After.Inserts, r.After.Rows)
	}
	rpi := summary["rows/insert"]
	if len(rpi) != 3 || !strings.HasSuffix(rpi[2], "x more") ||
		count(t, strings.TrimSuffix(rpi[2], "x more")) != uint64(r.Change.RowsPerInsert+0.5) {
		t.Fatalf("the rows/insert change renders as %q, want %.0fx more", rpi, r.Change.RowsPerInsert)
	}
	if !strings.Contains(dom, `<span id="table">shop.events</span>`) || strings.Count(dom, "<svg") != 1 {
		t.Fatalf("the rendered page lacks its table name or its chart:\n%s", dom)
	}

	shot := filepath.Join(dir, "report.png")
	chromium(t, page, "--window-size=1000,1500", "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	if n := pixels(img, 0x48, 0x78, 0xa8); n < 1000 {
		t.Fatalf("the screenshot %s has %d pixels of the bar colour: the chart was not drawn", shot, n)
	}
	t.Logf("screenshot: %s", shot)
}

// pixels counts the pixels of img of one colour.
func pixels(img image.Image, r, g, b uint8) int {
	n := 0
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if uint8(pr>>8) == r && uint8(pg>>8) == g && uint8(pb>>8) == b {
				n++
			}
		}
	}
	return n
}
