package gen

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Step is one stage of a rate profile: Rate events per second for For.
type Step struct {
	Rate float64
	For  time.Duration
}

// Profile is a paced workload whose rate changes in steps, e.g. 500/s for a
// minute, then 10,000/s, then 500/s again.
type Profile []Step

// ParseProfile reads "RATE:DURATION,RATE:DURATION,…" (events per second
// and a Go duration), e.g. "500:60s,10000:60s,500:60s".
func ParseProfile(s string) (Profile, error) {
	var p Profile
	for _, part := range strings.Split(s, ",") {
		rate, dur, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("rate profile %q: step %q is not RATE:DURATION", s, part)
		}
		r, err := strconv.ParseFloat(rate, 64)
		if err != nil || r <= 0 || math.IsInf(r, 0) {
			return nil, fmt.Errorf("rate profile %q: rate %q is not a positive number of events per second", s, rate)
		}
		d, err := time.ParseDuration(dur)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("rate profile %q: duration %q is not a positive duration like 60s", s, dur)
		}
		p = append(p, Step{Rate: r, For: d})
	}
	return p, nil
}

// Events is how many events the whole profile produces.
func (p Profile) Events() int {
	n := 0
	for _, s := range p {
		n += s.events()
	}
	return n
}

// Duration is the profile's length.
func (p Profile) Duration() time.Duration {
	var d time.Duration
	for _, s := range p {
		d += s.For
	}
	return d
}

func (s Step) events() int { return int(math.Round(s.Rate * s.For.Seconds())) }

// At is when event i is due, from the start; ok is false past the end.
func (p Profile) At(i int) (at time.Duration, ok bool) {
	var start time.Duration
	for _, s := range p {
		if n := s.events(); i < n {
			return start + time.Duration(float64(i)/s.Rate*float64(time.Second)), true
		} else {
			i -= n
		}
		start += s.For
	}
	return start, false
}

// RateAt is the profile's rate at t from the start (0 past the end).
func (p Profile) RateAt(t time.Duration) float64 {
	for _, s := range p {
		if t < s.For {
			return s.Rate
		}
		t -= s.For
	}
	return 0
}
