package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LagSeconds is the time-based consumer lag of a partition, as
// sink_consumer_lag_seconds reports it: how old, at now, the oldest record
// not yet fetched is.
//
// The sink knows, from its last fetch of the partition, how many records
// follow the last one it fetched (records) and that record's Kafka
// timestamp (last). When records is 0 the consumer had caught up: nothing
// is waiting, the lag is 0. Otherwise the oldest waiting record is the one
// right after last; its own timestamp is not fetched yet, but it was
// written no earlier than last (Kafka timestamps grow with offsets, give or
// take producer clocks), so now - last is the age it has at most, exact
// when records arrive steadily. The value keeps growing between fetches
// while records wait, which is what an alert on a stuck consumer needs. A
// timestamp in the future (producer clock ahead) counts as 0. ok is false
// when last is unknown (the zero time, or a record without timestamp,
// which franz-go reports at or before the Unix epoch): then there is no
// honest value and no sample is exported.
func LagSeconds(records int64, last, now time.Time) (seconds float64, ok bool) {
	if records <= 0 {
		return 0, true
	}
	if !known(last) {
		return 0, false
	}
	return max(now.Sub(last), 0).Seconds(), true
}

// known reports whether ts is a real record timestamp: franz-go reports a
// record without one at or before the Unix epoch, and the zero time is
// "none".
func known(ts time.Time) bool { return ts.Unix() > 0 }

// position is what the last fetch of a partition said, written by the
// pipeline's owner goroutine and read at scrape time.
type position struct {
	topic, partition string
	records          atomic.Int64
	last             atomic.Int64 // unix nanoseconds of the last fetched record's timestamp; 0: unknown
}

func (p *position) set(records int64, last time.Time) {
	ns := int64(0)
	if known(last) {
		ns = last.UnixNano()
	}
	p.last.Store(ns)
	p.records.Store(records)
}

// ages is a collector for the values that depend on the time of the scrape:
// sink_consumer_lag_seconds per partition and sink_last_insert_age_seconds
// per table. The hot path only stores atomics in the entries it holds; the
// mutex guards the maps, touched when a handle is resolved or forgotten and
// at scrape time.
type ages struct {
	now            func() time.Time
	start          int64 // unix nanoseconds: the last insert "was" at start until there is one
	lagDesc, ageIn *prometheus.Desc

	mu     sync.Mutex
	parts  map[partKey]*position
	tables map[string]*atomic.Int64 // table → unix nanoseconds of its last successful insert
}

type partKey struct {
	topic     string
	partition int32
}

func newAges(now func() time.Time) *ages {
	return &ages{
		now:   now,
		start: now().UnixNano(),
		lagDesc: prometheus.NewDesc(ConsumerLagSeconds,
			"Age of the oldest record of the partition not yet fetched: 0 when the last fetch reached the log end, else seconds since the Kafka timestamp of the last fetched record (an upper bound, exact for steady input).",
			[]string{"topic", "partition"}, nil),
		ageIn: prometheus.NewDesc(LastInsertAge,
			"Seconds since the table's last successful INSERT was acknowledged; counts from start before the first.",
			[]string{"table"}, nil),
		parts:  map[partKey]*position{},
		tables: map[string]*atomic.Int64{},
	}
}

// partition returns the position entry of topic/partition, creating it.
func (a *ages) partition(topic string, partition int32) *position {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := partKey{topic, partition}
	p := a.parts[k]
	if p == nil {
		p = &position{topic: topic, partition: strconv.Itoa(int(partition))}
		a.parts[k] = p
	}
	return p
}

func (a *ages) forget(topic string, partition int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.parts, partKey{topic, partition})
}

// table returns the last-insert time of table, creating it at start.
func (a *ages) table(name string) *atomic.Int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tables[name]
	if t == nil {
		t = &atomic.Int64{}
		t.Store(a.start)
		a.tables[name] = t
	}
	return t
}

func (a *ages) Describe(ch chan<- *prometheus.Desc) {
	ch <- a.lagDesc
	ch <- a.ageIn
}

func (a *ages) Collect(ch chan<- prometheus.Metric) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.parts {
		var last time.Time
		if ns := p.last.Load(); ns > 0 {
			last = time.Unix(0, ns)
		}
		if v, ok := LagSeconds(p.records.Load(), last, now); ok {
			ch <- prometheus.MustNewConstMetric(a.lagDesc, prometheus.GaugeValue, v, p.topic, p.partition)
		}
	}
	for name, t := range a.tables {
		v := max(now.Sub(time.Unix(0, t.Load())), 0).Seconds()
		ch <- prometheus.MustNewConstMetric(a.ageIn, prometheus.GaugeValue, v, name)
	}
}
