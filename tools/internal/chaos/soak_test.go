package chaos

import (
	"encoding/xml"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

func TestSoakProfileCycles(t *testing.T) {
	for _, tc := range []struct {
		d      time.Duration
		cycles int
	}{{time.Hour, 12}, {2 * time.Minute, 2}, {47 * time.Minute, 9}} {
		ss := SoakParams(tc.d, 500, "")
		p := ss.Profile()
		if p.Duration() != tc.d {
			t.Errorf("%s: profile lasts %s", tc.d, p.Duration())
		}
		bursts := 0
		for _, st := range p {
			if st.Rate == 2500 {
				bursts++
			} else if st.Rate != 500 {
				t.Errorf("%s: step rate %v", tc.d, st.Rate)
			}
		}
		if bursts != tc.cycles {
			t.Errorf("%s: %d bursts, want %d", tc.d, bursts, tc.cycles)
		}
	}
	// A whole number of cycles averages 1.4× the rate.
	p := SoakParams(time.Hour, 500, "").Profile()
	if mean := float64(p.Events()) / p.Duration().Seconds(); math.Abs(mean-700) > 0.01 {
		t.Errorf("mean rate %v, want 700", mean)
	}
}

// The evolving records carry each field from its fraction of the run on,
// and what the check expects is what was produced.
func TestEvolvingRecords(t *testing.T) {
	e := &evolving{Evolve: Evolve{Partitions: 4, Every: 4}}
	rng := rand.New(rand.NewPCG(1, 2))
	var sawInt, sawStr, sawFloat bool
	for i := 0; i < 4000; i++ {
		progress := float64(i) / 4000
		goodBefore := e.good
		v := string(e.next(rng, 1, progress))
		if e.good == goodBefore {
			continue // a bad record
		}
		hasInt, hasStr, hasFloat := strings.Contains(v, `"f_int"`), strings.Contains(v, `"f_str"`), strings.Contains(v, `"f_float"`)
		if hasInt != (progress >= 0.25) || hasStr != (progress >= 0.5) || hasFloat != (progress >= 0.75) {
			t.Fatalf("record at %.3f: %s", progress, v)
		}
		sawInt, sawStr, sawFloat = sawInt || hasInt, sawStr || hasStr, sawFloat || hasFloat
	}
	if !sawInt || !sawStr || !sawFloat || e.bad == 0 {
		t.Fatalf("fields seen %v %v %v, %d bad", sawInt, sawStr, sawFloat, e.bad)
	}
	if e.withField[0] <= e.withField[1] || e.withField[1] <= e.withField[2] || e.withField[2] == 0 {
		t.Errorf("records with each field: %v", e.withField)
	}
	if e.sumFloat != math.Trunc(e.sumFloat*2)/2 {
		t.Errorf("sum of f_float %v is not exact in halves", e.sumFloat)
	}
}

// The results file and the plot come out of any samples: lives split by
// pid, ended by the events, and the SVG is well-formed XML.
func TestSoakReport(t *testing.T) {
	ss := SoakParams(time.Hour, 500, "")
	o := &SoakResult{Result: &Result{Scenario: "soak", Produced: 10, Landed: 10, RSSLimit: 192 << 20, MaxRSS: 40 << 20}, Spec: ss,
		Events: []SoakEvent{{15 * time.Minute, "SIGTERM"}, {42 * time.Minute, "kill -9"}}}
	for at := time.Duration(0); at < time.Hour; at += 10 * time.Second {
		pid := 1
		switch {
		case at >= 42*time.Minute:
			pid = 3
		case at >= 15*time.Minute:
			pid = 2
		}
		o.Samples = append(o.Samples, Sample{At: at, PID: pid, RSS: 40 << 20, RSSAnon: 25 << 20, RSSFile: 15 << 20, Goroutines: 30, Heap: 10 << 20, InsertsMin: 60})
	}
	lives := o.lives()
	if len(lives) != 3 || lives[0].ended != "SIGTERM" || lives[1].ended != "kill -9" || lives[2].ended != "end" {
		t.Fatalf("%d lives, ended %q %q %q", len(lives), lives[0].ended, lives[min(1, len(lives)-1)].ended, lives[len(lives)-1].ended)
	}
	o.RSSSlope = trend(o.Samples, ss.Warmup, func(s Sample) float64 { return float64(s.RSS) })
	if o.RSSSlope != 0 {
		t.Errorf("flat RSS has trend %v", o.RSSSlope)
	}
	md := o.markdown()
	for _, want := range []string{"## Soak: 1h0m0s, PASS", "load average during the run: 0.0–0.0", "| RSS trend within each sink's life", "| of which anonymous (`RssAnon`", "| of which file-backed (`RssFile`", "| 2 | 15m0s | 41m50s | kill -9 |", "`500:2m0s,2500:30s,500:2m30s` repeated over 1h0m0s"} {
		if !strings.Contains(md, want) {
			t.Errorf("soak.md lacks %q:\n%s", want, md)
		}
	}
	svg := o.svg()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("soak.svg: %v", err)
			}
			break
		}
	}
	if n := strings.Count(svg, "<path "); n != 11 {
		t.Errorf("soak.svg has %d lines, want 11 (4 memory, goroutines, 2 files, inserts, lag, GC, CPU)", n)
	}
}

// Two heap profiles of one life give the results file the top of their
// difference, with what was allocated in between named.
func TestSoakHeapGrowth(t *testing.T) {
	dir := t.TempDir()
	ss := SoakParams(time.Hour, 500, dir)
	if err := os.MkdirAll(filepath.Join(dir, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string) {
		f, err := os.Create(filepath.Join(dir, "profiles", name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		runtime.GC()
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
	}
	write("heap-7-0300.pb.gz")
	kept = growHeapForTest()
	write("heap-7-0900.pb.gz")
	o := &SoakResult{Result: &Result{Scenario: "soak"}, Spec: ss,
		Samples: []Sample{{At: 0, PID: 7}, {At: 5 * time.Minute, PID: 7}, {At: 15 * time.Minute, PID: 7}}}
	got := o.heapGrowth(ss)
	for _, want := range []string{"pid 7, heap-7-0300.pb.gz → heap-7-0900.pb.gz", "growHeapForTest"} {
		if !strings.Contains(got, want) {
			t.Errorf("heap growth lacks %q:\n%s", want, got)
		}
	}
}

// kept holds what growHeapForTest allocated, so the second profile has it
// in use.
var kept [][]byte

func growHeapForTest() [][]byte {
	out := make([][]byte, 64)
	for i := range out {
		out[i] = make([]byte, 64<<10)
	}
	return out
}

// A leak shows as its slope across restarts, whose drops do not count;
// noise alone gives a slope within its standard error of 0.
func TestTrendFit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	leak := func(perTenMin float64) []Sample {
		var ss []Sample
		for at := time.Duration(0); at < time.Hour; at += 10 * time.Second {
			pid := 1 + int(at/(15*time.Minute))
			born := time.Duration(pid-1) * 15 * time.Minute
			mib := 40 + perTenMin*(at-born).Minutes()/10 + rng.NormFloat64()
			ss = append(ss, Sample{At: at, PID: pid, RSS: int64(mib * (1 << 20))})
		}
		return ss
	}
	rss := func(s Sample) float64 { return float64(s.RSS) / (1 << 20) }
	slope, se := trendFit(leak(2), 5*time.Minute, rss)
	if math.Abs(slope-2) > 3*se || se > 0.3 {
		t.Errorf("a 2 MiB/10 min leak: slope %.2f ± %.2f", slope, se)
	}
	slope, se = trendFit(leak(0), 5*time.Minute, rss)
	if math.Abs(slope) > 3*se {
		t.Errorf("no leak: slope %.2f ± %.2f", slope, se)
	}
	if s, _ := trendFit(leak(0)[:20], 5*time.Minute, rss); !math.IsNaN(s) {
		t.Errorf("3 minutes of samples gave a trend %v", s)
	}
}
