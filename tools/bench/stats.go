package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"sink/internal/consumer"
)

// Spread is a metric over the successful runs of one variant: the median
// (of an even count, the mean of the middle two) and the range.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{N: n, Median: med, Min: s[0], Max: s[n-1]}
}

// VariantStats sums up one variant's runs on one server.
type VariantStats struct {
	Key    string `json:"key"`
	Name   string `json:"name"`
	Runs   int    `json:"runs"`   // all runs
	OK     int    `json:"ok"`     // successful runs, the ones the spreads cover
	Status string `json:"status"` // "ok" when some run succeeded, else the first run's status
	Sample bool   `json:"sample"`
	// Per successful run.
	RowsPerSec     Spread `json:"rows_per_sec"`
	ClientUsPerRow Spread `json:"client_cpu_us_per_row"`
	ClientRSSMB    Spread `json:"client_max_rss_mib"`
	CHUsPerRow     Spread `json:"clickhouse_cpu_us_per_row"`
	BufferMemory   int64  `json:"buffer_memory,omitempty"`
}

// summarizeRuns groups runs by variant, in the order the variants first
// appear, into medians and spreads.
func summarizeRuns(runs []Result) []VariantStats {
	var out []VariantStats
	for _, r := range runs {
		i := slices.IndexFunc(out, func(v VariantStats) bool { return v.Key == r.Key })
		if i < 0 {
			out = append(out, VariantStats{Key: r.Key, Name: r.Name, Status: r.Status, Sample: r.Sample})
			i = len(out) - 1
		}
		out[i].Runs++
	}
	for i := range out {
		v := &out[i]
		var rps, cpu, rss, ch []float64
		for _, r := range runs {
			if r.Key != v.Key || !r.ok() {
				continue
			}
			v.OK++
			v.Status = "ok"
			v.BufferMemory = max(v.BufferMemory, r.BufferMemory)
			rps, cpu, rss, ch = append(rps, r.RowsPerSec), append(cpu, r.ClientCPUUsPerRow), append(rss, r.ClientMaxRSSMB), append(ch, r.CHCPUUsPerRow)
		}
		v.RowsPerSec, v.ClientUsPerRow, v.ClientRSSMB, v.CHUsPerRow = spreadOf(rps), spreadOf(cpu), spreadOf(rss), spreadOf(ch)
	}
	return out
}

func findStats(vs []VariantStats, key string) (VariantStats, bool) {
	for _, v := range vs {
		if v.Key == key {
			return v, v.OK > 0
		}
	}
	return VariantStats{}, false
}

// The targets: ratios of medians in one run of the benchmark, per server.
const (
	targetCPURatio    = 1.0                        // sink client CPU/row ≤ this × the pipe's
	targetPipeRatio   = 2.0                        // sink rows/s ≥ this × the pipe's
	targetEngineRatio = 5.0                        // sink rows/s ≥ this × the Kafka engine's
	targetRSSOverMiB  = consumer.RSSHeadroom >> 20 // sink peak RSS ≤ buffer_memory + this
)

// evaluate checks the targets against one server's medians. The measured
// text gives both medians with their ranges and the ratio's range over
// the runs (the worst pairing to the best), so a ratio near the threshold
// shows whether the noise could carry it across.
func evaluate(stats []VariantStats) []Target {
	var ts []Target
	sink, sinkOK := findStats(stats, "sink")
	notMeasured := func(id, name, why string) Target {
		return Target{ID: id, Name: name, Measured: "—", Explanation: why}
	}
	other := func(key string) (VariantStats, string) {
		o, ok := findStats(stats, key)
		switch {
		case !sinkOK:
			return o, "the sink did not run successfully"
		case !ok && o.Status != "":
			return o, o.Status
		case !ok:
			return o, "not run"
		}
		return o, ""
	}
	// higher: the sink's value must be ≥ want × the other's (rows/s);
	// otherwise ≤ (CPU per row).
	ratio := func(id, name, key, metric string, want float64, higher bool, get func(VariantStats) Spread, format func(float64) string) {
		o, why := other(key)
		if why != "" {
			ts = append(ts, notMeasured(id, name, why))
			return
		}
		s, p := get(sink), get(o)
		x := s.Median / p.Median
		lo, hi := s.Min/p.Max, s.Max/p.Min
		met := x <= want
		if higher {
			met = x >= want
		}
		t := Target{ID: id, Name: name, Met: boolp(met), Measured: fmt.Sprintf("%.2f× (%s: sink %s vs %s %s; ratio over the runs %.2f–%.2f×)",
			x, metric, spreadText(s, format), o.Key, spreadText(p, format), lo, hi)}
		if !met && lo <= want && want <= hi {
			t.Explanation = fmt.Sprintf("within the noise: the runs' ratios span %.2f–%.2f×, across the %.1f× threshold", lo, hi, want)
		}
		ts = append(ts, t)
	}
	ratio("cpu", "sink client CPU per row ≤ 1.0× the kcat | clickhouse-client pipe's", "kcat_pipe", "µs/row", targetCPURatio, false,
		func(v VariantStats) Spread { return v.ClientUsPerRow }, f2)
	ratio("rows_pipe", "sink rows/s ≥ 2.0× the kcat | clickhouse-client pipe", "kcat_pipe", "rows/s", targetPipeRatio, true,
		func(v VariantStats) Spread { return v.RowsPerSec }, num)
	ratio("rows_engine", "sink rows/s ≥ 5× the ClickHouse Kafka engine", "kafka_engine", "rows/s", targetEngineRatio, true,
		func(v VariantStats) Spread { return v.RowsPerSec }, num)
	name := fmt.Sprintf("sink peak RSS ≤ buffer_memory + %d MiB (default config)", targetRSSOverMiB)
	if sinkOK && sink.BufferMemory > 0 {
		limit := float64(sink.BufferMemory)/(1<<20) + targetRSSOverMiB
		ts = append(ts, Target{ID: "rss", Name: name, Met: boolp(sink.ClientRSSMB.Max <= limit),
			Measured: fmt.Sprintf("%.0f MiB, the highest of %d runs (median %.0f; limit %.0f MiB with buffer_memory %s)",
				sink.ClientRSSMB.Max, sink.ClientRSSMB.N, sink.ClientRSSMB.Median, limit, mib(sink.BufferMemory))})
	} else {
		ts = append(ts, notMeasured("rss", name, "the sink did not run successfully"))
	}
	return ts
}

// spreadText is "median [min–max]", each number formatted by format.
func spreadText(s Spread, format func(float64) string) string {
	if s.N == 0 {
		return "—"
	}
	if s.N == 1 {
		return format(s.Median)
	}
	return fmt.Sprintf("%s [%s–%s]", format(s.Median), format(s.Min), format(s.Max))
}

// readExplanations reads --explain: lines "TARGET[@SERVER]: text"; blank
// lines and lines starting with # are skipped. "" reads nothing, and so
// does a missing file when optional (the default path).
func readExplanations(path string, optional bool) (map[string]string, error) {
	out := map[string]string{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path)
	if optional && errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--explain: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("--explain %s line %d: want TARGET[@SERVER]: text", path, n)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, sc.Err()
}

// explain adds the --explain texts to the missed (or unmeasured) targets
// of server key: "ID@key" before "ID".
func explain(ts []Target, key string, texts map[string]string) {
	for i := range ts {
		if ts[i].Met != nil && *ts[i].Met {
			continue
		}
		text, ok := texts[ts[i].ID+"@"+key]
		if !ok {
			text, ok = texts[ts[i].ID]
		}
		if ok {
			ts[i].Explanation = strings.TrimPrefix(ts[i].Explanation+"; "+text, "; ")
		}
	}
}

// verdict is the targets table's PASS / MISS column.
func (t Target) verdict() string {
	switch {
	case t.Met == nil:
		return "not measured"
	case *t.Met:
		return "**PASS**"
	}
	return "**MISS**"
}

// readProfileBefore loads the CPU profile of an earlier results file.
func readProfileBefore(path string) (*Profile, string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return &Profile{CPUError: err.Error()}, path
	}
	var old Results
	if err := json.Unmarshal(data, &old); err != nil {
		return &Profile{CPUError: path + ": " + err.Error()}, path
	}
	if old.Profile == nil {
		return &Profile{CPUError: path + " has no profile"}, path
	}
	return old.Profile, fmt.Sprintf("%s (%s, sink %s)", path, old.Date, old.Machine.Sink)
}
