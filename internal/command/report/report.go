// Package report turns ClickHouse's own logs into the comparison data
// engineers make by hand when they tune a Kafka sink: INSERTs per minute into one table,
// rows per INSERT, insert latency and new parts, and, around a split moment
// (when the sink was switched on or retuned), a before/after summary with
// ratios.
//
// Reading (query.go) attributes INSERTs to the table by query_log's tables
// column where the server has it (current releases), and by parsing the
// logged statement text (InsertTarget) where it does not (18.16); part_log
// is read by database and table on both. A Distributed table's INSERTs are
// those clients sent into it or into its local table (Options.Local), so
// that a sink writing the shards' local tables (target: local) is reported
// under the route's table. QueryCluster (cluster.go) reads
// every node of a cluster over a connection of its own and sums them, with a
// per-shard split.
// Aggregate is pure: per-minute buckets, nearest-rank percentiles and the
// split summary are computed in Go from the raw log rows, which is what the
// unit tests pin. Rendering (text, CSV, JSON, SVG) is deterministic for
// golden tests. Request (request.go) is `sink report`'s command line:
// Options checks it and reads its times, Run prints the report.
//
// Concurrency: no shared state; a Report is a value.
package report

import (
	"math"
	"sort"
	"time"
)

// Insert is one finished INSERT from system.query_log.
type Insert struct {
	At         time.Time // event_time: when it finished
	Rows       uint64    // written_rows
	Bytes      uint64    // written_bytes
	DurationMS uint64    // query_duration_ms
}

// Part is one new part from system.part_log.
type Part struct {
	At   time.Time
	Rows uint64
}

// Minute is one minute of the report.
type Minute struct {
	Start         time.Time `json:"minute"`
	Inserts       int       `json:"inserts"`
	Rows          uint64    `json:"rows"`
	Bytes         uint64    `json:"bytes"`
	RowsPerInsert float64   `json:"rows_per_insert"`
	P50MS         uint64    `json:"p50_ms"`
	P99MS         uint64    `json:"p99_ms"`
	NewParts      int       `json:"new_parts"`
	// Side is "before", "after" or "mixed" (the minute holding the split)
	// when the report has a split.
	Side string `json:"side,omitempty"`
}

// Spread is a per-minute quantity over the minutes of one side: the
// smallest and largest minute, and the mean.
type Spread struct {
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Side summarises the minutes on one side of a split. Per-minute numbers
// are over the minutes that had at least one INSERT, as a GROUP BY minute
// over query_log would show them.
type Side struct {
	From          time.Time `json:"from"`
	To            time.Time `json:"to"` // end of the last minute
	Minutes       int       `json:"minutes_with_inserts"`
	Inserts       int       `json:"inserts"`
	Rows          uint64    `json:"rows"`
	Bytes         uint64    `json:"bytes"`
	NewParts      int       `json:"new_parts"`
	InsertsPerMin Spread    `json:"inserts_per_minute"`
	// RowsPerInsert: Min/Max over the minutes' averages; Mean is
	// Rows/Inserts, the side's true average.
	RowsPerInsert Spread  `json:"rows_per_insert"`
	RowsPerMin    Spread  `json:"rows_per_minute"`
	PartsPerMin   float64 `json:"new_parts_per_minute"`
	P50MS         uint64  `json:"p50_ms"`
	P99MS         uint64  `json:"p99_ms"`
}

// Change is after divided by before, per quantity; 0 when before is 0.
type Change struct {
	InsertsPerMin float64 `json:"inserts_per_minute"`
	RowsPerInsert float64 `json:"rows_per_insert"`
	RowsPerMin    float64 `json:"rows_per_minute"`
	PartsPerMin   float64 `json:"new_parts_per_minute"`
}

// Report is everything `sink report` prints.
type Report struct {
	Table   string    `json:"table"`
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	PartLog bool      `json:"part_log"` // new parts are known
	Minutes []Minute  `json:"minutes"`
	Total   Side      `json:"total"`

	Split  *time.Time `json:"split,omitempty"`
	Before *Side      `json:"before,omitempty"`
	After  *Side      `json:"after,omitempty"`
	Change *Change    `json:"change,omitempty"`
	// DeadLettered is the records meant for Table in each dead-letter
	// table of the connector, in the window (with --config).
	DeadLettered []DeadLettered `json:"dead_lettered,omitempty"`
	// Notes are one-line remarks for the reader (logs disabled, mixed
	// minute left out, nothing found).
	Notes []string `json:"notes,omitempty"`
	// MatchedBy says how INSERTs were attributed to the table:
	// MatchedByTables or MatchedByText (both, comma-separated, when the
	// nodes of a cluster differ).
	MatchedBy string `json:"matched_by,omitempty"`

	// Cluster names the cluster of a report over every node's logs
	// (QueryCluster); Shards splits it per shard.
	Cluster string        `json:"cluster,omitempty"`
	Shards  []ShardReport `json:"shards,omitempty"`

	// Server, when the connector is known, sums every table it writes on
	// the server (server.go), beside this table's view.
	Server *ServerView `json:"server,omitempty"`
}

// The ways Query attributes a logged INSERT to a table.
const (
	// MatchedByTables: query_log's tables, query_kind and current_database
	// columns (current releases; 18.16 has none of them).
	MatchedByTables = "query_log.tables"
	// MatchedByText: the statement text (InsertTarget), with
	// Target.DefaultDatabase for statements that name no database.
	MatchedByText = "statement text"
)

// Aggregate buckets inserts and parts by the minute they finished in
// (minute boundaries are the same in every time zone in use: all offsets
// are whole minutes),
// from the first minute with activity to the last, empty minutes included.
// With split set, minutes that start at or after split are "after",
// minutes that end at or before it "before", and a minute holding the
// split strictly inside is "mixed" and left out of both sides, so each side
// is made only of whole minutes of one regime.
func Aggregate(table string, since, until time.Time, ins []Insert, parts []Part, partLog bool, split *time.Time) Report {
	r := Report{Table: table, Since: since, Until: until, PartLog: partLog, Split: split}
	type acc struct {
		m   Minute
		dur []uint64
	}
	byMin := map[int64]*acc{}
	get := func(t time.Time) *acc {
		k := t.Unix() / 60
		a := byMin[k]
		if a == nil {
			a = &acc{m: Minute{Start: time.Unix(k*60, 0).UTC()}}
			byMin[k] = a
		}
		return a
	}
	for _, in := range ins {
		a := get(in.At)
		a.m.Inserts++
		a.m.Rows += in.Rows
		a.m.Bytes += in.Bytes
		a.dur = append(a.dur, in.DurationMS)
	}
	for _, p := range parts {
		get(p.At).m.NewParts++
	}
	if len(byMin) == 0 {
		if split != nil {
			r.Before, r.After, r.Change = &Side{}, &Side{}, &Change{}
		}
		return r
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for k := range byMin {
		lo, hi = min(lo, k), max(hi, k)
	}
	var beforeIdx, afterIdx, allIdx []int
	durs := map[int][]uint64{}
	for k := lo; k <= hi; k++ {
		a := byMin[k]
		if a == nil {
			a = &acc{m: Minute{Start: time.Unix(k*60, 0).UTC()}}
		}
		m := a.m
		if m.Inserts > 0 {
			m.RowsPerInsert = float64(m.Rows) / float64(m.Inserts)
			m.P50MS = Percentile(a.dur, 50)
			m.P99MS = Percentile(a.dur, 99)
		}
		i := len(r.Minutes)
		durs[i] = a.dur
		allIdx = append(allIdx, i)
		if split != nil {
			end := m.Start.Add(time.Minute)
			switch {
			case !m.Start.Before(*split):
				m.Side = "after"
				afterIdx = append(afterIdx, i)
			case !end.After(*split):
				m.Side = "before"
				beforeIdx = append(beforeIdx, i)
			default:
				m.Side = "mixed"
			}
		}
		r.Minutes = append(r.Minutes, m)
	}
	r.Total = summarize(r.Minutes, allIdx, durs)
	if split != nil {
		b, a := summarize(r.Minutes, beforeIdx, durs), summarize(r.Minutes, afterIdx, durs)
		r.Before, r.After = &b, &a
		r.Change = &Change{
			InsertsPerMin: ratio(a.InsertsPerMin.Mean, b.InsertsPerMin.Mean),
			RowsPerInsert: ratio(a.RowsPerInsert.Mean, b.RowsPerInsert.Mean),
			RowsPerMin:    ratio(a.RowsPerMin.Mean, b.RowsPerMin.Mean),
			PartsPerMin:   ratio(a.PartsPerMin, b.PartsPerMin),
		}
	}
	return r
}

func ratio(after, before float64) float64 {
	if before == 0 {
		return 0
	}
	return after / before
}

// summarize computes a Side over the minutes at idx.
func summarize(minutes []Minute, idx []int, durs map[int][]uint64) Side {
	var s Side
	if len(idx) == 0 {
		return s
	}
	s.From = minutes[idx[0]].Start
	s.To = minutes[idx[len(idx)-1]].Start.Add(time.Minute)
	var all []uint64
	first := true
	for _, i := range idx {
		m := minutes[i]
		s.NewParts += m.NewParts
		if m.Inserts == 0 {
			continue
		}
		s.Minutes++
		s.Inserts += m.Inserts
		s.Rows += m.Rows
		s.Bytes += m.Bytes
		all = append(all, durs[i]...)
		ins, rpi, rpm := float64(m.Inserts), m.RowsPerInsert, float64(m.Rows)
		if first {
			s.InsertsPerMin = Spread{Min: ins, Max: ins}
			s.RowsPerInsert = Spread{Min: rpi, Max: rpi}
			s.RowsPerMin = Spread{Min: rpm, Max: rpm}
			first = false
		}
		s.InsertsPerMin.Min, s.InsertsPerMin.Max = min(s.InsertsPerMin.Min, ins), max(s.InsertsPerMin.Max, ins)
		s.RowsPerInsert.Min, s.RowsPerInsert.Max = min(s.RowsPerInsert.Min, rpi), max(s.RowsPerInsert.Max, rpi)
		s.RowsPerMin.Min, s.RowsPerMin.Max = min(s.RowsPerMin.Min, rpm), max(s.RowsPerMin.Max, rpm)
	}
	if s.Minutes > 0 {
		n := float64(s.Minutes)
		s.InsertsPerMin.Mean = float64(s.Inserts) / n
		s.RowsPerInsert.Mean = float64(s.Rows) / float64(s.Inserts)
		s.RowsPerMin.Mean = float64(s.Rows) / n
		s.PartsPerMin = float64(s.NewParts) / n
		s.P50MS = Percentile(all, 50)
		s.P99MS = Percentile(all, 99)
	}
	return s
}

// Percentile is the nearest-rank percentile p (0 < p <= 100) of vs: the
// smallest value with at least p% of the values at or below it. It sorts
// vs in place; 0 for no values.
func Percentile(vs []uint64, p float64) uint64 {
	if len(vs) == 0 {
		return 0
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	rank := int(math.Ceil(p / 100 * float64(len(vs))))
	rank = max(1, min(rank, len(vs)))
	return vs[rank-1]
}
