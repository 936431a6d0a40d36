package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// adaptiveReport is what `bench adaptive` measured.
type adaptiveReport struct {
	Date, Command, Profile string
	Target                 float64
	MaxLatency             time.Duration
	DelayAt, ThrowAt       int
	Machine                Machine
	Servers                []adServer
}

type adServer struct {
	Key, Name, Error string
	Started          time.Time
	ProducerSec      float64 // how long the producer took (the profile's length if the machine kept up)
	DurationSec      float64
	Produced         int64
	LoadAvg          [2]float64 // 1-minute load average before and after
	Notes            []string
	Variants         []adResult
	PartsSeries      []adParts
	profile          []adRate
}

type adRate struct{ From, To, Rate float64 }

type adResult struct {
	Key, Name, Table, Config, Error string
	Stopped                         bool
	Target                          float64
	Inserts                         []adInsert
	Landed                          []adLanded
	Samples                         []adSample
	TooManyParts                    int64
	FirstTooManySec                 float64
	PushbackLogs, RetryLogs         int
	Rows                            int64
	Windows                         []adWindow
}

type adInsert struct {
	T    float64 // seconds from the producer's start
	Rows int64
}

type adLanded struct {
	T          float64 // end of the landing second, from the producer's start
	Rows       int64
	MaxLatency float64
	Within     int64 // rows within max_latency
}

type adSample struct {
	T      float64
	V      map[string]float64
	Reason string
}

type adParts struct {
	T   float64
	Max map[string]int // table → active parts of its fullest partition
}

type adWindow struct {
	From, To, Rate float64
	Inserts        int
	PerMin         float64
	Rows, Within   int64
	MaxLatency     float64
	InBand         bool // within ±30% of the target
}

// analyze cuts each variant's run into the profile's minutes (and what
// came after the producer stopped).
func (s *adServer) analyze(o adaptiveOptions) {
	var at time.Duration
	for _, st := range o.profile {
		s.profile = append(s.profile, adRate{From: at.Seconds(), To: (at + st.For).Seconds(), Rate: st.Rate})
		at += st.For
	}
	end := at.Seconds()
	var bounds [][2]float64
	for t := 0.0; t+1 <= end; t += 60 {
		bounds = append(bounds, [2]float64{t, math.Min(t+60, end)})
	}
	bounds = append(bounds, [2]float64{end, s.DurationSec + 1})
	for i := range s.Variants {
		v := &s.Variants[i]
		for _, b := range bounds {
			w := adWindow{From: b[0], To: b[1], Rate: o.profile.RateAt(time.Duration((b[0] + b[1]) / 2 * float64(time.Second)))}
			for _, in := range v.Inserts {
				if in.T >= b[0] && in.T < b[1] {
					w.Inserts++
				}
			}
			for _, l := range v.Landed {
				if l.T >= b[0] && l.T < b[1] {
					w.Rows += l.Rows
					w.Within += l.Within
					w.MaxLatency = math.Max(w.MaxLatency, l.MaxLatency)
				}
			}
			w.PerMin = float64(w.Inserts) / (b[1] - b[0]) * 60
			w.InBand = v.Target > 0 && math.Abs(w.PerMin-v.Target) <= 0.3*v.Target
			v.Windows = append(v.Windows, w)
		}
	}
}

func (r adaptiveReport) write(dir string) (md, svg string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	// adaptive-<date> for both servers, adaptive-<date>-ch26 for one, so a
	// run on one server does not replace a run on both.
	name := "adaptive-" + r.Date
	if len(r.Servers) == 1 {
		name += "-ch" + r.Servers[0].Key
	}
	base := filepath.Join(dir, name)
	svg = base + ".svg"
	f, err := os.Create(svg)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	if err := r.svg(f); err != nil {
		return "", "", err
	}
	md = base + ".md"
	return md, svg, os.WriteFile(md, []byte(r.markdown(filepath.Base(svg))), 0o644)
}

func (r adaptiveReport) markdown(svgName string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Adaptive batching against fixed settings, %s\n\n", r.Date)
	w("Command: `%s` (tools/bench `adaptive`). Machine: %s, %d CPUs, Kafka %s, sink %s; shared with other work while it ran (1-minute load average per server below).\n\n",
		r.Command, r.Machine.CPUModel, r.Machine.CPUs, r.Machine.Kafka, r.Machine.Sink)
	w("One producer writes the rate profile **%s** (records/s for each duration: a 20× change up and down) to one topic; "+
		"five sinks, one consumer group each, read the same records at the same time into five tables:\n\n", r.Profile)
	w("- **fixed**: the sink's defaults (max_wait 5s, so 12 inserts/min at any rate above a trickle);\n")
	w("- **seed004**: the hand-tuned setting of the batching story (fetch_min_bytes a little above a minute of 20,000 records, fetch_max_wait 72s, one batch across partitions per poll), in real time;\n")
	w("- **adaptive**: `batch.mode: adaptive`, target %g inserts/min, max_latency %s;\n", r.Target, r.MaxLatency)
	w("- **stopped_fixed** and **stopped_adaptive** (target 12/min): tables with merges stopped (`SYSTEM STOP MERGES`) and parts_to_delay_insert %d, parts_to_throw_insert %d.\n\n",
		r.DelayAt, r.ThrowAt)
	w("Inserts come from the server's query_log; latency is per row, from the moment the producer's schedule sent its record to the end of the second the row landed in " +
		"(a `landed DateTime DEFAULT now()` column): an upper bound at 1 s resolution. The controller's decisions come from the adaptive sinks' own /metrics, read every few seconds.\n\n")
	w("![inserts per minute, latency, rows per insert and parts over time](%s)\n\n", svgName)
	for _, s := range r.Servers {
		w("## %s\n\n", orDefault(s.Name, "ClickHouse "+s.Key))
		if s.Error != "" {
			w("Failed: %s\n\n", s.Error)
			continue
		}
		w("Produced %d records in %.0f s (the profile lasts %.0f s); run %.0f s; load average %.1f before, %.1f after.\n\n",
			s.Produced, s.ProducerSec, s.profileEnd(), s.DurationSec, s.LoadAvg[0], s.LoadAvg[1])
		for _, n := range s.Notes {
			w("Note: %s\n\n", n)
		}
		main := s.Variants[:min(3, len(s.Variants))]
		w("### Inserts per minute (in band: within ±30%% of the variant's aim)\n\n| window | input rate |")
		for _, v := range main {
			w(" %s |", v.Key)
		}
		w("\n|---|---|")
		for range main {
			w("---|")
		}
		w("\n")
		for i, win := range main[0].Windows {
			label := fmt.Sprintf("%.0f–%.0f s", win.From, win.To)
			rate := fmt.Sprintf("%.0f/s", win.Rate)
			if win.Rate == 0 {
				label, rate = fmt.Sprintf("after the producer (%.0f–%.0f s)", win.From, win.To), "0"
			}
			w("| %s | %s |", label, rate)
			for _, v := range main {
				x := v.Windows[i]
				mark := ""
				if x.Rate > 0 && x.InBand {
					mark = " ✓"
				}
				w(" %.1f%s |", x.PerMin, mark)
			}
			w("\n")
		}
		w("\n### Latency, record sent → row visible\n\n| variant | aim (inserts/min) | max latency | rows within %s | inserts | rows/insert median | rows |\n|---|---|---|---|---|---|---|\n", r.MaxLatency)
		for _, v := range s.Variants {
			var maxLat float64
			var rows, within int64
			for _, l := range v.Landed {
				maxLat = math.Max(maxLat, l.MaxLatency)
				rows += l.Rows
				within += l.Within
			}
			share := 0.0
			if rows > 0 {
				share = 100 * float64(within) / float64(rows)
			}
			w("| %s | %g | %.0f s | %.1f%% | %d | %.0f | %d |\n", v.Key, v.Target, maxLat, share, len(v.Inserts), medianRows(v.Inserts), v.Rows)
		}
		w("\n### Merges stopped\n\n| variant | TOO_MANY_PARTS refusals | first refusal | parts at the end | inserts | retry log lines | \"ClickHouse pushes back\" log lines | largest wait | largest pressure |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, v := range s.Variants {
			if !v.Stopped {
				continue
			}
			first := "none"
			if v.TooManyParts > 0 {
				first = fmt.Sprintf("%.0f s", v.FirstTooManySec)
			}
			last := 0
			if n := len(s.PartsSeries); n > 0 {
				last = s.PartsSeries[n-1].Max[strings.TrimPrefix(v.Table, adaptDB+".")]
			}
			var wait, pressure float64
			for _, x := range v.Samples {
				wait = math.Max(wait, x.V["sink_batch_target_wait_seconds"])
				pressure = math.Max(pressure, x.V["sink_batch_pressure"])
			}
			w("| %s | %d | %s | %d | %d | %d | %d | %.0f s | %.1f |\n", v.Key, v.TooManyParts, first, last, len(v.Inserts), v.RetryLogs, v.PushbackLogs, wait, pressure)
		}
		w("\n<details><summary>configs</summary>\n\n")
		for _, v := range s.Variants {
			w("%s (%s):\n\n```yaml\n%s\n```\n\n", v.Key, v.Name, v.Config)
		}
		w("</details>\n\n")
	}
	return b.String()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s adServer) profileEnd() float64 {
	if n := len(s.profile); n > 0 {
		return s.profile[n-1].To
	}
	return 0
}

func medianRows(ins []adInsert) float64 {
	if len(ins) == 0 {
		return 0
	}
	r := make([]int64, len(ins))
	for i, x := range ins {
		r[i] = x.Rows
	}
	slices.Sort(r)
	return float64(r[len(r)/2])
}

// The chart: one column of panels per server, sharing the time axis.

type svgSeries struct {
	name, color string
	pts         [][2]float64
	dash, dots  bool
}

type svgLine struct {
	y     float64
	label string
}

type svgPanel struct {
	title  string
	log    bool
	series []svgSeries
	hlines []svgLine
	band   [2]float64 // shaded y range (0,0: none)
	vlines []svgLine  // at x = y field
}

var variantColor = map[string]string{"fixed": "#888888", "seed004": "#d2691e", "adaptive": "#2a6fdb", "stopped_fixed": "#888888", "stopped_adaptive": "#2a6fdb"}

func (r adaptiveReport) svg(w io.Writer) error {
	var cols [][]svgPanel
	var titles []string
	var xmax float64
	for _, s := range r.Servers {
		if s.Error != "" || len(s.Variants) < 5 {
			continue
		}
		titles = append(titles, s.Name)
		xmax = math.Max(xmax, s.DurationSec)
		cols = append(cols, s.panels(r))
	}
	return renderSVG(w, "Adaptive batching vs fixed settings, rate profile "+r.Profile, titles, xmax, cols)
}

func (s adServer) panels(r adaptiveReport) []svgPanel {
	var rate svgSeries
	rate = svgSeries{name: "input records/s", color: "#444444"}
	for _, p := range s.profile {
		rate.pts = append(rate.pts, [2]float64{p.From, p.Rate}, [2]float64{p.To, p.Rate})
	}
	perMin := svgPanel{title: "inserts per minute (sliding 60 s)", band: [2]float64{0.7 * r.Target, 1.3 * r.Target},
		hlines: []svgLine{{r.Target, fmt.Sprintf("adaptive target %g ±30%%", r.Target)}}}
	latency := svgPanel{title: "latency, record sent → row visible (s, max per landing second)", log: true,
		hlines: []svgLine{{r.MaxLatency.Seconds(), "max_latency"}}}
	size := svgPanel{title: "rows per insert (dots) and adaptive's rows ceiling (dashed)", log: true}
	for _, v := range s.Variants[:3] {
		c := variantColor[v.Key]
		sl := svgSeries{name: v.Key, color: c}
		for t := 60.0; t <= s.DurationSec; t += 5 {
			n := 0
			for _, in := range v.Inserts {
				if in.T > t-60 && in.T <= t {
					n++
				}
			}
			sl.pts = append(sl.pts, [2]float64{t, float64(n)})
		}
		perMin.series = append(perMin.series, sl)
		ls := svgSeries{name: v.Key, color: c, dots: true}
		for _, l := range v.Landed {
			ls.pts = append(ls.pts, [2]float64{l.T, math.Max(l.MaxLatency, 0.5)})
		}
		latency.series = append(latency.series, ls)
		rs := svgSeries{name: v.Key, color: c, dots: true}
		for _, in := range v.Inserts {
			rs.pts = append(rs.pts, [2]float64{in.T, float64(in.Rows)})
		}
		size.series = append(size.series, rs)
		if v.Key == "adaptive" {
			ts := svgSeries{name: "adaptive rows ceiling", color: c, dash: true}
			for _, x := range v.Samples {
				if n, ok := x.V["sink_batch_target_rows"]; ok && n < 1e8 {
					ts.pts = append(ts.pts, [2]float64{x.T, n})
				}
			}
			size.series = append(size.series, ts)
		}
	}
	parts := svgPanel{title: "merges stopped: active parts of the fullest partition",
		hlines: []svgLine{{float64(r.DelayAt), "parts_to_delay_insert"}, {float64(r.ThrowAt), "parts_to_throw_insert"}}}
	wait := svgPanel{title: "merges stopped: adaptive wait (s) and pressure", log: true}
	for _, v := range s.Variants[3:] {
		c := variantColor[v.Key]
		ps := svgSeries{name: v.Key, color: c}
		table := strings.TrimPrefix(v.Table, adaptDB+".")
		for _, p := range s.PartsSeries {
			ps.pts = append(ps.pts, [2]float64{p.T, float64(p.Max[table])})
		}
		parts.series = append(parts.series, ps)
		if v.TooManyParts > 0 {
			parts.vlines = append(parts.vlines, svgLine{v.FirstTooManySec, v.Key + ": first TOO_MANY_PARTS"})
		}
		if v.Key == "stopped_adaptive" {
			ws := svgSeries{name: "wait (s)", color: c}
			pr := svgSeries{name: "pressure", color: "#b22222", dash: true}
			for _, x := range v.Samples {
				ws.pts = append(ws.pts, [2]float64{x.T, math.Max(x.V["sink_batch_target_wait_seconds"], 0.1)})
				pr.pts = append(pr.pts, [2]float64{x.T, math.Max(x.V["sink_batch_pressure"], 0.1)})
			}
			wait.series = append(wait.series, ws, pr)
		}
	}
	return []svgPanel{{title: "input rate (records/s)", series: []svgSeries{rate}}, perMin, latency, size, parts, wait}
}

// Chart geometry.
const (
	chartPanelH = 150
	chartGap    = 58
	chartColW   = 620
	chartPadL   = 64
	chartPadR   = 20
	chartTop    = 64
)

func renderSVG(w io.Writer, title string, colTitles []string, xmax float64, cols [][]svgPanel) error {
	rows := 0
	for _, c := range cols {
		rows = max(rows, len(c))
	}
	width := max(len(cols), 1) * (chartPadL + chartColW + chartPadR)
	height := chartTop + rows*(chartPanelH+chartGap) + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", chartPadL, html.EscapeString(title))
	if xmax <= 0 {
		xmax = 1
	}
	for ci, col := range cols {
		x0 := float64(ci*(chartPadL+chartColW+chartPadR) + chartPadL)
		fmt.Fprintf(&b, `<text x="%.0f" y="42" font-size="13" font-weight="bold">%s</text>`+"\n", x0, html.EscapeString(colTitles[ci]))
		for pi, p := range col {
			y0 := float64(chartTop + pi*(chartPanelH+chartGap))
			drawPanel(&b, p, x0, y0, xmax)
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func drawPanel(b *strings.Builder, p svgPanel, x0, y0, xmax float64) {
	w, h := float64(chartColW), float64(chartPanelH)
	lo, hi := math.Inf(1), 0.0
	for _, s := range p.series {
		for _, pt := range s.pts {
			if !p.log || pt[1] > 0 {
				lo, hi = math.Min(lo, pt[1]), math.Max(hi, pt[1])
			}
		}
	}
	for _, l := range p.hlines {
		lo, hi = math.Min(lo, l.y), math.Max(hi, l.y)
	}
	hi = math.Max(hi, p.band[1])
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
	}
	if p.log {
		lo = math.Pow(10, math.Floor(math.Log10(math.Max(lo, 1e-3))))
		hi = math.Pow(10, math.Ceil(math.Log10(math.Max(hi, lo*10))))
	} else {
		lo, hi = 0, niceCeil(hi*1.1)
	}
	ymap := func(v float64) float64 {
		if p.log {
			v = math.Max(v, lo)
			return y0 + h - (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*h
		}
		return y0 + h - (v-lo)/(hi-lo)*h
	}
	xmap := func(t float64) float64 { return x0 + t/xmax*w }
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", x0, y0-8, html.EscapeString(p.title))
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#ccc"/>`+"\n", x0, y0, w, h)
	if p.band[1] > 0 {
		fmt.Fprintf(b, `<rect x="%.0f" y="%.1f" width="%.0f" height="%.1f" fill="#2a6fdb" fill-opacity="0.1"/>`+"\n",
			x0, ymap(p.band[1]), w, ymap(p.band[0])-ymap(p.band[1]))
	}
	// y ticks
	var ticks []float64
	if p.log {
		for v := lo; v <= hi*1.0001; v *= 10 {
			ticks = append(ticks, v)
		}
	} else {
		for i := 0; i <= 4; i++ {
			ticks = append(ticks, lo+(hi-lo)*float64(i)/4)
		}
	}
	for _, v := range ticks {
		y := ymap(v)
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			x0, x0+w, y, y, x0-4, y+4, tickLabel(v))
	}
	// x ticks every minute
	for t := 0.0; t <= xmax; t += 60 {
		x := xmap(t)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#eee"/><text x="%.1f" y="%.0f" text-anchor="middle">%.0f s</text>`+"\n",
			x, x, y0, y0+h, x, y0+h+13, t)
	}
	for _, l := range p.hlines {
		y := ymap(l.y)
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#333" stroke-dasharray="4 3"/><text x="%.0f" y="%.1f" text-anchor="end" fill="#333">%s</text>`+"\n",
			x0, x0+w, y, y, x0+w-4, y-3, html.EscapeString(l.label))
	}
	for _, l := range p.vlines {
		x := xmap(l.y)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#b22222" stroke-dasharray="2 2"/><text x="%.1f" y="%.0f" fill="#b22222">%s</text>`+"\n",
			x, x, y0, y0+h, x+3, y0+h-6, html.EscapeString(l.label))
	}
	for si, s := range p.series {
		if s.dots {
			for _, pt := range s.pts {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="1.8" fill="%s" fill-opacity="0.7"/>`+"\n", xmap(pt[0]), ymap(pt[1]), s.color)
			}
		} else if len(s.pts) > 0 {
			var path strings.Builder
			for i, pt := range s.pts {
				cmd := "L"
				if i == 0 {
					cmd = "M"
				}
				fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, xmap(pt[0]), ymap(pt[1]))
			}
			dash := ""
			if s.dash {
				dash = ` stroke-dasharray="5 3"`
			}
			fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.6"%s/>`+"\n", strings.TrimSpace(path.String()), s.color, dash)
		}
		// legend, top left inside the panel
		lx, ly := x0+8+float64(si)*150, y0+12
		fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="10" height="4" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", lx, ly-4, s.color, lx+14, ly, html.EscapeString(s.name))
	}
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func tickLabel(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", math.Round(v*100)/100)
}
