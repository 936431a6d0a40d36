package main

import (
	"strings"
	"testing"
	"time"

	"sink/tools/gen"
)

// TestScheduleSQL: the record with id i was due when gen.Profile.At says;
// the SQL expression encodes the same steps.
func TestScheduleSQL(t *testing.T) {
	p := gen.Profile{{Rate: 10, For: time.Second}, {Rate: 100, For: 2 * time.Second}}
	want := "multiIf(id < 10, 0 + (id - 0) / 10, id < 210, 1 + (id - 10) / 100, 3)"
	if got := scheduleSQL(p); got != want {
		t.Errorf("scheduleSQL = %s\nwant          %s", got, want)
	}
	// The same arithmetic as At for an id in the second step.
	if at, _ := p.At(60); at != 1500*time.Millisecond {
		t.Errorf("At(60) = %s, want 1.5s", at)
	}
}

// TestAdaptiveWindows: inserts and landed rows are counted per minute of
// the profile and after it, and a minute is in band within ±30% of the aim.
func TestAdaptiveWindows(t *testing.T) {
	o := adaptiveOptions{profile: gen.Profile{{Rate: 100, For: time.Minute}, {Rate: 2000, For: time.Minute}}, maxLatency: 30 * time.Second}
	s := adServer{DurationSec: 150, Variants: []adResult{{Key: "adaptive", Target: 6}}}
	v := &s.Variants[0]
	for _, at := range []float64{10, 20, 30, 40, 50, 70, 80, 130} {
		v.Inserts = append(v.Inserts, adInsert{T: at, Rows: 1000})
	}
	v.Landed = []adLanded{{T: 11, Rows: 1000, MaxLatency: 11, Within: 1000}, {T: 81, Rows: 500, MaxLatency: 40, Within: 100}}
	s.analyze(o)
	got := v.Windows
	if len(got) != 3 {
		t.Fatalf("%d windows, want 2 minutes and the drain", len(got))
	}
	if got[0].Inserts != 5 || got[0].PerMin != 5 || !got[0].InBand || got[0].Rate != 100 || got[0].MaxLatency != 11 {
		t.Errorf("minute 0: %+v", got[0])
	}
	if got[1].Inserts != 2 || got[1].InBand || got[1].Rate != 2000 || got[1].Rows != 500 || got[1].Within != 100 {
		t.Errorf("minute 1: %+v", got[1])
	}
	if got[2].From != 120 || got[2].Inserts != 1 || got[2].Rate != 0 {
		t.Errorf("drain: %+v", got[2])
	}
	md := adaptiveReport{Target: 6, MaxLatency: 30 * time.Second, Servers: []adServer{s}}.markdown("x.svg")
	if !strings.Contains(md, "| 0–60 s | 100/s | 5.0 ✓ |") {
		t.Errorf("markdown lacks the first minute:\n%s", md)
	}
}
