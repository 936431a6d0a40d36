package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// Chart geometry, in SVG user units.
const (
	svgW, svgH       = 900, 470
	padL, padR       = 70, 24
	topY, topH       = 50, 160  // inserts/min panel
	botY, botH       = 260, 160 // rows/insert panel
	maxXLabels       = 10
	barFill, lineCol = "#4878a8", "#d2691e"
)

// SVG draws inserts per minute (bars) and rows per insert (line) over time,
// each on a log scale since the point of the chart is a change of orders of
// magnitude, with the split marked. Hand-written SVG: no dependency, and the
// output is byte-for-byte deterministic.
func (r Report) SVG(w io.Writer, loc *time.Location) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">INSERTs into %s, per minute (%s)</text>`+"\n",
		padL, html.EscapeString(r.Table), r.Since.In(loc).Format("MST"))
	n := len(r.Minutes)
	if n == 0 {
		b.WriteString(`<text x="70" y="120">no INSERTs in this range</text>` + "\n</svg>\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	plotW := float64(svgW - padL - padR)
	step := plotW / float64(n)
	x := func(i int) float64 { return padL + (float64(i)+0.5)*step }

	var maxIns, maxRPI float64
	for _, m := range r.Minutes {
		maxIns = math.Max(maxIns, float64(m.Inserts))
		maxRPI = math.Max(maxRPI, m.RowsPerInsert)
	}
	// The inserts axis starts a decade below 1 so that a minute with one
	// INSERT, the state a tuned sink aims for, still shows a bar.
	const insLo, rpiLo = 0.1, 1
	insTop := logAxis(&b, "inserts/min", topY, topH, insLo, maxIns)
	rpiTop := logAxis(&b, "rows/insert", botY, botH, rpiLo, maxRPI)

	bw := math.Max(step*0.7, 1)
	for i, m := range r.Minutes {
		if m.Inserts == 0 {
			continue
		}
		y := logY(float64(m.Inserts), topY, topH, insLo, insTop)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %d inserts</title></rect>`+"\n",
			x(i)-bw/2, y, bw, float64(topY+topH)-y, barFill, m.Start.In(loc).Format("15:04"), m.Inserts)
	}
	// One polyline per run of minutes with inserts: an empty minute is a gap.
	var run []string
	flush := func() {
		if len(run) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", lineCol, strings.Join(run, " "))
		}
		run = run[:0]
	}
	for i, m := range r.Minutes {
		if m.Inserts == 0 {
			flush()
			continue
		}
		y := logY(m.RowsPerInsert, botY, botH, rpiLo, rpiTop)
		run = append(run, fmt.Sprintf("%.1f,%.1f", x(i), y))
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s rows/insert</title></circle>`+"\n",
			x(i), y, lineCol, m.Start.In(loc).Format("15:04"), num(m.RowsPerInsert))
	}
	flush()

	every := (n + maxXLabels - 1) / maxXLabels
	for i := 0; i < n; i += every {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(i), botY+botH+18, r.Minutes[i].Start.In(loc).Format("15:04"))
	}
	if r.Split != nil {
		start := r.Minutes[0].Start
		sx := padL + r.Split.Sub(start).Minutes()*step
		sx = math.Max(padL, math.Min(sx, float64(svgW-padR)))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c0392b" stroke-width="1.5" stroke-dasharray="6,4"/>`+"\n",
			sx, topY-12, sx, botY+botH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#c0392b" text-anchor="middle">split %s</text>`+"\n",
			sx, topY-16, r.Split.In(loc).Format("15:04:05"))
		if r.Change != nil && r.Before.Minutes > 0 && r.After.Minutes > 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%d">before: %s inserts/min, %s rows/insert; after: %s inserts/min, %s rows/insert</text>`+"\n",
				padL, svgH-12, num(r.Before.InsertsPerMin.Mean), num(r.Before.RowsPerInsert.Mean),
				num(r.After.InsertsPerMin.Mean), num(r.After.RowsPerInsert.Mean))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// logAxis draws a panel's frame, title and a grid line per power of ten
// from 1 up, for an axis from lo to the decade above maxV, which it returns.
func logAxis(b *strings.Builder, title string, y0, h int, lo, maxV float64) float64 {
	top := math.Pow(10, math.Ceil(math.Log10(math.Max(maxV, 1))))
	if top < 10 {
		top = 10
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s (log scale)</text>`+"\n", padL, y0-4, title)
	for v := 1.0; v <= top; v *= 10 {
		y := logY(v, y0, h, lo, top)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>`+"\n", padL, y, svgW-padR, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y+4, short(v))
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888888"/>`+"\n", padL, y0, svgW-padL-padR, h)
	return top
}

// logY maps v to a y coordinate on a log axis from lo to top; values
// below lo sit on the axis.
func logY(v float64, y0, h int, lo, top float64) float64 {
	f := 0.0
	if v > lo {
		f = math.Log10(v/lo) / math.Log10(top/lo)
	}
	return float64(y0+h) - f*float64(h)
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}
