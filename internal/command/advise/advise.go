// Package advise turns measured topic rates into fetch and batch settings,
// with the arithmetic written out the way an engineer does it by hand: message
// size × messages per minute → bytes per minute → fetch_min_bytes slightly
// above what arrives in one fetch_max_wait; fetch_max_wait bounded by the
// tolerable delay; the request timeout above fetch_max_wait.
//
// In this sink the batch, not the fetch, sets the insert rate: a table's
// accumulator seals at its wait (batch.max_latency less fetch_max_wait)
// whatever the input rate, so a wait of 60s / (inserts per minute) is the
// main lever; max_rows and
// max_bytes are caps sized with headroom so they only fire when the rate
// grows or a backlog is replayed (when large inserts are what you want).
//
// Recommend is pure arithmetic: no I/O, no clock. Measure reads the rates
// from Kafka (through the same client options as `sink run`: TLS, SASL),
// Routed names each topic's table, Print writes the advice for `sink
// advise`; Run (command.go) is that command over them. Concurrency: no
// shared state; each call is independent.
package advise

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"sink/config"
	"sink/internal/consumer"
)

// Tuning constants, each a rule the printed arithmetic names.
const (
	// Headroom multiplies the steady batch size for max_rows/max_bytes, so
	// the wait trigger seals at today's rate and the caps fire only if
	// the rate more than doubles.
	Headroom = 2.0
	// FetchSlack puts fetch_min_bytes "slightly above" what arrives in one
	// fetch_max_wait (e.g. 2.08 MB/min → 2.5 MB), so at today's rate
	// the broker answers at fetch_max_wait with everything that came.
	FetchSlack = 1.2
	// FetchShare: fetch_max_wait is this share of the insert interval, so
	// waiting for fetches adds at most a tenth to the latency.
	FetchShare = 10
	// MinFetchMaxWait and MaxFetchMaxWait bound fetch_max_wait: shorter
	// only multiplies empty fetches, longer only delays rows that the
	// batch would hold anyway.
	MinFetchMaxWait = 100 * time.Millisecond
	MaxFetchMaxWait = 10 * time.Second
	// MinInterval: ClickHouse's guidance is at most about one INSERT per
	// second per table; no target makes batches seal faster.
	MinInterval = time.Second
	// FloorRows and FloorBytes are the caps' floors (the config defaults):
	// a replayed backlog fills batches to the caps, and then an insert of
	// 100,000 rows is better than one of a few hundred.
	FloorRows  = 100_000
	FloorBytes = 32 * config.MiB
	// RequestTimeoutMargin is added to fetch_max_wait when the configured
	// request_timeout does not exceed it (e.g. a 72s wait with a 100s timeout).
	RequestTimeoutMargin = 30 * time.Second
)

// Topic is one measured topic.
type Topic struct {
	Name       string
	Table      string // db.table its route writes to
	Partitions int
	Window     time.Duration // how long the end offsets were watched
	Records    int64         // end offsets' growth over Window
	// Sampled records and their key+value bytes, from the newest records.
	Sampled      int
	SampledBytes int64
}

// RecordsPerSec is the measured rate.
func (t Topic) RecordsPerSec() float64 {
	if t.Window <= 0 {
		return 0
	}
	return float64(t.Records) / t.Window.Seconds()
}

// AvgBytes is the sample's average record size (key + value), 0 without a
// sample.
func (t Topic) AvgBytes() float64 {
	if t.Sampled == 0 {
		return 0
	}
	return float64(t.SampledBytes) / float64(t.Sampled)
}

// Target is what the user asks for.
type Target struct {
	InsertsPerMinute float64       // per table; > 0
	MaxLatency       time.Duration // 0: no bound beyond the insert interval
}

// Table is the expectation for one table.
type Table struct {
	Name             string
	RecordsPerSec    float64
	BytesPerSec      float64
	Partitions       int
	RowsPerInsert    float64
	InsertsPerMinute float64
}

// Advice is the recommendation and how it was reached.
type Advice struct {
	FetchMinBytes  config.ByteSize
	FetchMaxWait   time.Duration
	RequestTimeout time.Duration
	MaxRows        int
	MaxBytes       config.ByteSize
	MaxWait        time.Duration
	Tables         []Table
	// Latency is the worst case from produce to INSERT start:
	// fetch_max_wait + the batch's wait, the batch.max_latency advised
	// (the INSERT's own time comes on top).
	Latency time.Duration
	// Steps is the arithmetic, one line each, in the order it was done.
	Steps []string
	// Warnings are things the numbers cannot fix.
	Warnings []string
}

// Recommend computes settings for topics under cur (the running config)
// to reach tgt, in the numbered steps its arithmetic is written out in.
func Recommend(topics []Topic, cur *config.Config, tgt Target) Advice {
	r := &recommender{cur: cur, tgt: tgt, byTable: map[string]*Table{}}
	r.incoming(topics)
	r.fetchWait()
	r.maxWait()
	r.fetchMinBytes()
	r.requestTimeout()
	r.caps()
	r.expect()
	return r.a
}

// recommender is one Recommend: the advice as it grows and what the
// steps pass on to the next.
type recommender struct {
	a          Advice
	cur        *config.Config
	tgt        Target
	byTable    map[string]*Table
	names      []string // of byTable, in order
	totalBytes float64  // bytes/s of all topics
	interval   time.Duration
}

func (r *recommender) step(format string, args ...any) {
	r.a.Steps = append(r.a.Steps, fmt.Sprintf(format, args...))
}

func (r *recommender) warn(format string, args ...any) {
	r.a.Warnings = append(r.a.Warnings, fmt.Sprintf(format, args...))
}

// incoming is step 1: what comes in, per topic and per table.
func (r *recommender) incoming(topics []Topic) {
	for _, t := range topics {
		rps, avg := t.RecordsPerSec(), t.AvgBytes()
		bps := rps * avg
		r.totalBytes += bps
		r.step("topic %s: end offsets +%s in %s → %s records/s (%s/min); sample of %s records: avg %s bytes → %s/s (%s/min)",
			t.Name, count(float64(t.Records)), t.Window.Round(time.Millisecond), num(rps), count(rps*60), count(float64(t.Sampled)), num(avg),
			bytes(bps), bytes(bps*60))
		if t.Sampled == 0 && t.Records > 0 {
			r.warn("topic %s: no record could be sampled, so its size is unknown and bytes/s count as 0", t.Name)
		}
		tb := r.byTable[t.Table]
		if tb == nil {
			tb = &Table{Name: t.Table}
			r.byTable[t.Table] = tb
		}
		tb.RecordsPerSec += rps
		tb.BytesPerSec += bps
		tb.Partitions += t.Partitions
	}
	if r.totalBytes == 0 {
		r.warn("no bytes arrived during the window: measure while the topics carry their usual traffic")
	}
	r.names = slices.Sorted(maps.Keys(r.byTable))
}

// fetchWait is steps 2 and 3: the insert interval, and fetch_max_wait a
// tenth of it, within bounds.
func (r *recommender) fetchWait() {
	n := r.tgt.InsertsPerMinute
	if n <= 0 {
		n = 1
	}
	r.interval = time.Duration(float64(time.Minute) / n)
	r.step("target %s inserts/min per table → insert interval T = 60s / %s = %s", num(n), num(n), r.interval)
	r.a.FetchMaxWait = clampDur((r.interval / FetchShare).Round(100*time.Millisecond), MinFetchMaxWait, MaxFetchMaxWait)
	r.step("fetch_max_wait = T / %d = %s, kept within %s..%s → %s (the longest a fetch may hold records back)",
		FetchShare, r.interval/FetchShare, MinFetchMaxWait, MaxFetchMaxWait, r.a.FetchMaxWait)
}

// maxWait is step 4: a batch's wait is the interval, unless the latency bound
// needs less (and fetch_max_wait with it).
func (r *recommender) maxWait() {
	m, w := r.interval, r.a.FetchMaxWait
	if lat := r.tgt.MaxLatency; lat > 0 {
		if lw := clampDur((lat / FetchShare).Round(10*time.Millisecond), 10*time.Millisecond, MaxFetchMaxWait); lw < w {
			w = lw
			r.step("--max-latency %s: fetch_max_wait = %s / %d = %s", lat, lat, FetchShare, w)
		}
		if m+w > lat {
			m = lat - w
			r.step("--max-latency %s: a batch's wait = %s - fetch_max_wait %s = %s, below T, so inserts/min rise to 60s / %s = %s",
				lat, lat, w, m, m, num(60/m.Seconds()))
		}
	}
	if m < MinInterval {
		r.warn("a batch's wait of %s would mean more than one INSERT per second per table; held at %s (ClickHouse advises at most about one per second)", m, MinInterval)
		m = MinInterval
	}
	m = m.Round(100 * time.Millisecond)
	r.a.MaxWait, r.a.FetchMaxWait = m, w
	r.step("a batch's wait = %s: every table's open batch is inserted at least this often, whatever the input rate (batch.max_latency = the wait + fetch_max_wait)", m)
}

// fetchMinBytes is step 5: what arrives in one fetch_max_wait, slightly
// above, and never more than a fetch holds.
func (r *recommender) fetchMinBytes() {
	w := r.a.FetchMaxWait
	perFetch := r.totalBytes * w.Seconds()
	minBytes := max(roundSize(FetchSlack*perFetch), 1)
	if fmb := config.ByteSize(consumer.FetchLimitsFor(r.cur).MaxBytes); minBytes > fmb {
		r.warn("fetch_min_bytes %s would exceed the fetch size %s derived from batch.buffer_memory; capped there (a larger buffer_memory fetches more per request)", minBytes, fmb)
		minBytes = fmb
	}
	r.a.FetchMinBytes = minBytes
	r.step("fetch_min_bytes = %.1f × %s/s (all topics) × %s = %s → %s: at today's rate the broker answers at fetch_max_wait with everything that came",
		FetchSlack, bytes(r.totalBytes), w, bytes(FetchSlack*perFetch), minBytes)
}

// requestTimeout is step 6: the request timeout must exceed
// fetch_max_wait.
func (r *recommender) requestTimeout() {
	cur, w := r.cur.Kafka.RequestTimeout, r.a.FetchMaxWait
	r.a.RequestTimeout = cur
	if cur > w {
		r.step("kafka.request_timeout %s exceeds fetch_max_wait %s: keep it (the client also adds it on top of fetch_max_wait for fetches)", cur, w)
		return
	}
	r.a.RequestTimeout = w + RequestTimeoutMargin
	r.step("kafka.request_timeout %s does not exceed fetch_max_wait %s → %s (e.g. a 72s wait needs about a 100s timeout)", cur, w, r.a.RequestTimeout)
}

// caps is step 7: max_rows and max_bytes from the busiest table, with
// headroom and floors, and whether buffer_memory holds them.
func (r *recommender) caps() {
	m := r.a.MaxWait
	var maxRows, maxBPS float64
	busiest := ""
	for _, name := range r.names {
		tb := r.byTable[name]
		if rows := tb.RecordsPerSec * m.Seconds(); rows >= maxRows {
			maxRows, busiest = rows, name
		}
		maxBPS = math.Max(maxBPS, tb.BytesPerSec)
	}
	maxBytes := maxBPS * m.Seconds()
	r.a.MaxRows = int(roundUp2(Headroom * maxRows))
	if busiest != "" {
		r.step("batch.max_rows = %.0f × %s records/s × %s (busiest table %s) = %s → %s",
			Headroom, num(r.byTable[busiest].RecordsPerSec), m, busiest, count(Headroom*maxRows), count(float64(r.a.MaxRows)))
	}
	if r.a.MaxRows < FloorRows {
		r.step("batch.max_rows raised to the floor %s: a replayed backlog fills batches to this cap, and then big inserts are what you want", count(FloorRows))
		r.a.MaxRows = FloorRows
	}
	r.a.MaxBytes = roundMiB(Headroom * maxBytes)
	r.step("batch.max_bytes = %.0f × %s/s × %s = %s → %s (raw record bytes; decoded columns are usually smaller, so this errs large)",
		Headroom, bytes(maxBPS), m, bytes(Headroom*maxBytes), r.a.MaxBytes)
	if r.a.MaxBytes < FloorBytes {
		r.step("batch.max_bytes raised to the floor %s", FloorBytes)
		r.a.MaxBytes = FloorBytes
	}
	cur := r.cur
	if need := config.ByteSize(len(r.names)*(1+cur.ClickHouse.MaxInFlight)) * r.a.MaxBytes; cur.Batch.BufferMemory < need {
		r.warn("batch.buffer_memory %s is below %d table(s) × (1 open + %d in flight) × max_bytes %s = %s: fetching will pause before batches fill",
			cur.Batch.BufferMemory, len(r.names), cur.ClickHouse.MaxInFlight, r.a.MaxBytes, need)
	}
}

// expect is step 8: what to expect per table, and the latency.
func (r *recommender) expect() {
	m := r.a.MaxWait
	for _, name := range r.names {
		tb := r.byTable[name]
		rows := tb.RecordsPerSec * m.Seconds()
		perMin := 60 / m.Seconds()
		if recPerMin := tb.RecordsPerSec * 60; recPerMin < perMin {
			perMin = recPerMin // fewer records than seals: a batch holds one record at most
		}
		if !r.cur.Batch.IgnorePartitions && tb.Partitions > 1 {
			perMin *= float64(tb.Partitions)
			rows /= float64(tb.Partitions)
			r.warn("batch.ignore_partitions is false: table %s gets one insert per partition (%d), %s inserts/min instead of %s; set it to true",
				name, tb.Partitions, num(perMin), num(perMin/float64(tb.Partitions)))
		}
		tb.RowsPerInsert, tb.InsertsPerMinute = rows, perMin
		r.a.Tables = append(r.a.Tables, *tb)
		r.step("table %s: %s records/s × %s = %s rows/insert, %s inserts/min", name, num(tb.RecordsPerSec), m, count(rows), num(perMin))
	}
	r.a.Latency = r.a.FetchMaxWait + r.a.MaxWait
	r.step("latency ≤ fetch_max_wait %s + a batch's wait %s = %s (batch.max_latency), plus the INSERT itself", r.a.FetchMaxWait, r.a.MaxWait, r.a.Latency)
}

// YAML is the recommendation as a config fragment.
func (a Advice) YAML() string {
	return fmt.Sprintf("kafka:\n  fetch_min_bytes: %s\n  fetch_max_wait: %s\n  request_timeout: %s\nbatch:\n  max_rows: %d\n  max_bytes: %s\n  max_latency: %s\n",
		a.FetchMinBytes, a.FetchMaxWait, a.RequestTimeout, a.MaxRows, a.MaxBytes, a.MaxWait+a.FetchMaxWait)
}

func clampDur(d, lo, hi time.Duration) time.Duration { return max(lo, min(d, hi)) }

// roundSize rounds a byte count up to whole KiB below 1MiB and to quarter
// MiB above, so the value prints exactly and short ("2.5MiB").
func roundSize(v float64) config.ByteSize {
	if v <= 0 {
		return 0
	}
	unit := float64(config.KiB)
	if v >= float64(config.MiB) {
		unit = float64(config.MiB / 4)
	}
	return config.ByteSize(math.Ceil(v/unit) * unit)
}

// roundMiB rounds up to whole MiB (at least 1MiB).
func roundMiB(v float64) config.ByteSize {
	return config.ByteSize(math.Max(1, math.Ceil(v/float64(config.MiB)))) * config.MiB
}

// roundUp2 rounds up to two significant digits: 243,000 → 250,000.
func roundUp2(v float64) float64 {
	if v <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(v))-1)
	return math.Ceil(v/p-1e-9) * p
}

func num(v float64) string {
	if v >= 100 || v == math.Trunc(v) {
		return count(v)
	}
	return fmt.Sprintf("%.1f", v)
}

// count prints a whole number with thousands separators.
func count(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// bytes prints a byte amount in SI units (MB), as sizing notes usually do.
func bytes(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2f GB", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2f MB", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f kB", v/1e3)
	}
	return fmt.Sprintf("%.0f B", v)
}
