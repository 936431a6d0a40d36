package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var htmlSource string

// htmlPage is parsed once; html/template escapes every value it inserts
// (table, server, notes) for the place it lands in, so no name from a
// server or a command line can add markup to the page.
var htmlPage = template.Must(template.New("report").Parse(htmlSource))

// htmlData is what the template sees: everything already formatted as the
// text report formats it, so the two agree to the digit.
type htmlData struct {
	Title, Table, Server, Range string
	MatchedBy                   string
	Empty                       bool
	Head                        []string
	Minutes                     [][]string
	Total                       string
	SplitHeading                string
	Summary                     [][4]string
	Chart                       template.HTML
	Notes                       []string
	// The per-server view (Report.Server), formatted as the text has it.
	PerServer *htmlServer
}

type htmlServer struct {
	Heading, Total string
	Empty          bool
	SplitHeading   string
	Summary        [][4]string
	Head           []string
	Tables         [][]string
}

// HTML writes the report as one self-contained HTML page, for pasting
// into a ticket or attaching to one: the before/after summary, the chart
// (the SVG of SVG, inline) and the per-minute table, styled by an inline
// stylesheet, with no script and no external resource. server names the
// ClickHouse the logs were read from ("" leaves it out). The output is
// deterministic for golden tests: nothing in it depends on the clock.
func (r Report) HTML(w io.Writer, loc *time.Location, server string) error {
	zone := r.Since.In(loc).Format("MST")
	d := htmlData{
		Title:     "INSERTs into " + r.Table,
		Table:     r.Table,
		Server:    server,
		Range:     r.Since.In(loc).Format("2006-01-02 15:04:05") + " to " + r.Until.In(loc).Format("2006-01-02 15:04:05") + " " + zone,
		MatchedBy: r.MatchedBy,
		Empty:     len(r.Minutes) == 0,
		Notes:     r.Notes,
	}
	if !d.Empty {
		d.Head = []string{"minute (" + zone + ")", "inserts", "rows", "rows/insert", "MiB", "p50 ms", "p99 ms", "new parts"}
		if r.Split != nil {
			d.Head = append(d.Head, "side")
		}
		for _, m := range r.Minutes {
			c := r.minuteCells(m, loc)
			d.Minutes = append(d.Minutes, c[:len(d.Head)])
		}
		d.Total = r.totalLine()
	}
	if r.Split != nil {
		d.SplitHeading = r.splitHeading(loc)
		d.Summary = r.summaryRows(loc)
	}
	if v := r.Server; v != nil {
		s := v.Summed
		d.PerServer = &htmlServer{Heading: "Per server: every table connector " + v.Connector + " writes", Empty: len(s.Minutes) == 0}
		if !d.PerServer.Empty {
			d.PerServer.Total = fmt.Sprintf("%s, %s tables, %s new parts/min", s.totalLine(), group(uint64(len(v.Tables))), serverParts(s, s.Total.PartsPerMin))
			d.PerServer.Head = []string{"table", "inserts", "rows", "rows/insert", "inserts/min", "new parts", "new parts/min"}
			if s.Split != nil {
				d.PerServer.SplitHeading = s.splitHeading(loc)
				d.PerServer.Summary = s.summaryRows(loc)
				d.PerServer.Head = append(d.PerServer.Head, "inserts/min before", "after")
			}
			d.PerServer.Tables = v.tableCells()
		}
	}
	var svg strings.Builder
	if err := r.SVG(&svg, loc); err != nil {
		return err
	}
	// SVG escapes the one name it draws (the table); the rest of it is
	// numbers and times formatted here.
	d.Chart = template.HTML(svg.String())
	var b bytes.Buffer
	if err := htmlPage.Execute(&b, d); err != nil {
		return fmt.Errorf("rendering the HTML report: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}
