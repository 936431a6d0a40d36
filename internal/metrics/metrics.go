// Package metrics is the sink's live numbers: Prometheus collectors on a
// dedicated registry (never the global one, so tests and several pipelines
// in one process do not collide), the small handles the pipeline updates,
// and the HTTP server for /metrics, /healthz and /readyz (and whatever a
// wrapping handler adds: internal/status's endpoints).
//
// Cheapness is the design constraint: the pipeline resolves a handle per
// table, per topic and per partition once (Table, Topic, Partition) and
// keeps it in its own state, so the hot path is an atomic add on a
// pre-resolved prometheus.Counter, never a label lookup with string
// building. Every method is safe on a nil *Metrics and on nil handles, and
// then does nothing: a pipeline built without metrics pays one nil check.
//
// Concurrency: all methods are safe for concurrent use. The pipeline's owner
// goroutine makes most calls; insert goroutines call Table.Retry; HTTP
// handlers read.
package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"sink/internal/batch"
)

// Metric names, exported so tests and docs use the same strings.
const (
	RecordsConsumed = "sink_records_consumed_total"
	BytesConsumed   = "sink_bytes_consumed_total"
	DLQRecords      = "sink_dlq_records_total"
	SkippedRecords  = "sink_skipped_records_total"
	// UnroutedRecords counts the records no route's topic and when: take.
	UnroutedRecords = "sink_records_unrouted_total"
	RowsInserted    = "sink_rows_inserted_total"
	Inserts         = "sink_inserts_total"
	InsertDuration  = "sink_insert_duration_seconds"
	RowsPerInsert   = "sink_rows_per_insert"
	BatchesSealed   = "sink_batches_sealed_total"
	InsertRetries   = "sink_insert_retries_total"
	BufferBytes     = "sink_buffer_bytes"
	BufferLimit     = "sink_buffer_limit_bytes"
	FetchPaused     = "sink_fetch_paused"
	ConsumerLag     = "sink_consumer_lag"
	LastCommitAge   = "sink_last_commit_age_seconds"
	Partitions      = "sink_assigned_partitions"
	DefaultsApplied = "sink_defaults_applied_total"
	MostlyDefaulted = "sink_batches_mostly_defaulted_total"
	UnmappedFields  = "sink_unmapped_fields_total"
	Truncates       = "sink_truncates_total"
	// Time-based views of the same flow (see lag.go).
	ConsumerLagSeconds = "sink_consumer_lag_seconds"
	EndToEndLatency    = "sink_end_to_end_latency_seconds"
	LastInsertAge      = "sink_last_insert_age_seconds"
	// The fixed-mode batch wait (batch.max_latency less
	// kafka.fetch_max_wait), so alerts can scale with it.
	BatchMaxWait = "sink_batch_max_wait_seconds"
	// Records held because the schema registry could not be asked for
	// their schema, and the failed attempts to decode them again.
	RegistryWaiting = "sink_registry_waiting_records"
	RegistryRetries = "sink_registry_retries_total"
	// Records held because they carry a field whose column is being added
	// (schema.evolve: add_columns) or whose table is being re-read.
	SchemaWaiting = "sink_schema_waiting_records"
	// The batch controller's decision per table (batch.mode adaptive; in
	// fixed mode the configured max_rows and the batch wait, pressure 1) and
	// what it decided from (adaptive only).
	BatchTargetRows   = "sink_batch_target_rows"
	BatchTargetWait   = "sink_batch_target_wait_seconds"
	BatchPressure     = "sink_batch_pressure"
	BatchOverLatency  = "sink_batch_over_latency"
	BatchTargetReason = "sink_batch_target_reason"
	BatchInputRate    = "sink_batch_input_rows_per_second"
	TableActiveParts  = "sink_table_active_parts"
	TablePartsToDelay = "sink_table_parts_to_delay_insert"
	// ConnectorState is 1 for the connector's state (RUNNING, PAUSING,
	// PAUSED, STOPPING, ...; see internal/status) and 0 for the others.
	ConnectorState = "sink_connector_state"
)

// reasons are the seal reasons with a pre-resolved counter each.
var reasons = []batch.Reason{batch.ReasonRows, batch.ReasonBytes, batch.ReasonWait, batch.ReasonRevoke, batch.ReasonShutdown, batch.ReasonSchema, batch.ReasonPause,
	batch.ReasonTruncate, batch.ReasonBudget, batch.ReasonDeadline, batch.ReasonMemory}

// Metrics holds the collectors of one connector.
type Metrics struct {
	reg *prometheus.Registry

	records, bytes, dlq, skipped *prometheus.CounterVec
	unrouted                     *prometheus.CounterVec
	rows, inserts                *prometheus.CounterVec
	duration, perInsert, e2e     *prometheus.HistogramVec
	sealed, retries              *prometheus.CounterVec
	defaults, unmapped           *prometheus.CounterVec
	mostlyDefaulted              *prometheus.CounterVec
	truncates                    *prometheus.CounterVec
	lag                          *prometheus.GaugeVec
	buffer, paused               prometheus.Gauge
	limit, partitions, maxWait   prometheus.Gauge
	regWaiting                   prometheus.Gauge
	regRetries                   prometheus.Counter
	schemaWaiting                prometheus.Gauge
	targets                      map[string]*prometheus.GaugeVec // the Batch*/TableParts* gauges by name, labeled by table
	reason                       *prometheus.GaugeVec
	state                        *prometheus.GaugeVec

	now        func() time.Time
	lastCommit atomic.Int64 // unix nanoseconds
	joined     atomic.Bool
	assigned   atomic.Int64
	ping       atomic.Pointer[Pinger]
	group      string
	ages       *ages // the per-partition and per-table values computed at scrape time
	cluster    *clusterVecs
	eosMargin  *prometheus.GaugeVec
	budget     *budgetVecs // nil until the first Budget
}

// New creates the collectors on a fresh registry, together with the Go
// runtime and process collectors. group names the consumer group in
// readiness messages.
func New(group string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), now: time.Now, group: group}
	m.ages = newAges(m.clock)
	m.lastCommit.Store(m.now().UnixNano())
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m.records = counter(RecordsConsumed, "Records fetched from Kafka and handed to the pipeline.", "topic")
	m.bytes = counter(BytesConsumed, "Key plus value bytes of the consumed records.", "topic")
	m.dlq = counter(DLQRecords, "Records that could not be decoded and were sent to the dead-letter topic.", "topic")
	m.skipped = counter(SkippedRecords, "Records that need no row (Debezium tombstones, truncates, topics no route matches), handled as soon as seen.", "topic")
	m.unrouted = counter(UnroutedRecords, "Records no route takes (no route's topic and when: match them); skipped, or sent to the dead-letter topic with errors.unrouted: dlq.", "topic")
	m.rows = counter(RowsInserted, "Rows ClickHouse acknowledged.", "table")
	m.inserts = counter(Inserts, "Successful INSERT statements (one per batch).", "table")
	m.sealed = counter(BatchesSealed, "Batches sealed, by what sealed them: rows, bytes, wait, revoke, shutdown, schema, pause; with clickhouse.max_inserts_per_minute budget, deadline, memory.", "table", "reason")
	m.retries = counter(InsertRetries, "Failed insert attempts that were retried, by ClickHouse exception code (0: no server code, e.g. a network error or timeout).", "table", "code")
	m.defaults = counter(DefaultsApplied, "Values written as the column type's default because the record's value was missing or null (errors.on_missing / on_null: default).", "table", "column", "reason")
	m.truncates = counter(Truncates, "Debezium TRUNCATE events (op t) of the table's topics, by action: skipped (the route's truncate: skip, the default; the table keeps rows the source no longer has) or applied (truncate: apply ran TRUNCATE TABLE).", "table", "action")
	m.mostlyDefaulted = counter(MostlyDefaulted, "Sealed batches in which most rows got no value for the column from their records (missing or null: the type's default, or NULL, was inserted), by column; sink check names such a column and the field of similar name the records carry.", "table", "column")
	m.unmapped = counter(UnmappedFields, "Records that carried a top-level field (debezium-json: a row image field) that no column of the table takes, by field; fields beyond the 64 tracked per table (and 64 more whose names schema.allow / schema.deny refuse), and names that are not 1 to 128 bytes of UTF-8 without control characters, are counted as field=\"(other)\"; a field no batch carried for 10 minutes frees its slot and its series.", "table", "field")
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: InsertDuration, Help: "Time from starting a batch's INSERT to its success, retries included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 15), // 5ms .. ~82s
	}, []string{"table"})
	m.perInsert = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: RowsPerInsert, Help: "Rows in each successful INSERT: the number that batching across partitions raises from tens to tens of thousands.",
		Buckets: []float64{1, 10, 100, 1000, 5000, 10_000, 50_000, 100_000, 500_000, 1_000_000},
	}, []string{"table"})
	m.e2e = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    EndToEndLatency,
		Help:    "Per successful INSERT: from the Kafka timestamp of the batch's oldest record to the INSERT's acknowledgement, i.e. the longest any row of that insert waited.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 16), // 100ms .. ~55min
	}, []string{"table"})
	m.lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: ConsumerLag, Help: "Records in the partition after the last one fetched (high watermark - 1 - last fetched offset).",
	}, []string{"topic", "partition"})
	m.buffer = prometheus.NewGauge(prometheus.GaugeOpts{Name: BufferBytes, Help: "Bytes held by open and in-flight batches."})
	m.limit = prometheus.NewGauge(prometheus.GaugeOpts{Name: BufferLimit, Help: "batch.buffer_memory: fetching pauses when sink_buffer_bytes reaches it."})
	m.paused = prometheus.NewGauge(prometheus.GaugeOpts{Name: FetchPaused, Help: "1 while fetching is paused because the buffer is full."})
	m.maxWait = prometheus.NewGauge(prometheus.GaugeOpts{Name: BatchMaxWait, Help: "The longest a fixed-mode batch stays open (batch.max_latency less kafka.fetch_max_wait), so a sink with rows inserts at least this often."})
	m.targets = map[string]*prometheus.GaugeVec{}
	for _, g := range []struct{ name, help string }{
		{BatchTargetRows, "Rows at which the table's batch is sealed now: max_rows in fixed mode; in adaptive mode the controller's ceiling (twice the measured rate over the wait, within the memory share)."},
		{BatchTargetWait, "The longest the table's batch stays open now: batch.max_latency less kafka.fetch_max_wait (capped by the table's routes' max_latency) in fixed mode; the controller's wait in adaptive mode."},
		{BatchPressure, "The factor ClickHouse's feedback (active parts, TOO_MANY_PARTS, slow inserts) stretches the adaptive wait by; 1 when none."},
		{BatchOverLatency, "1 while ClickHouse's pushback makes the adaptive wait longer than batch.max_latency allows."},
		{BatchInputRate, "The input rate the adaptive controller measured, rows per second."},
		{TableActiveParts, "Active parts in the table's fullest partition, as last read from system.parts (adaptive mode)."},
		{TablePartsToDelay, "The table's parts_to_delay_insert (its own SETTINGS or the server's), as last read (adaptive mode)."},
	} {
		m.targets[g.name] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: g.name, Help: g.help}, []string{"table"})
	}
	m.reason = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: BatchTargetReason,
		Help: "1 for what decides the adaptive wait now (target, latency, parts, too_many_parts, slow_insert, memory, starting), 0 for the others."}, []string{"table", "reason"})
	m.state = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ConnectorState,
		Help: "1 for the connector's state (STARTING, RUNNING, PAUSING, PAUSED, STOPPING, STOPPED, FAILED), 0 for the others; PAUSING and PAUSED follow POST /pause."}, []string{"state"})
	m.partitions = prometheus.NewGauge(prometheus.GaugeOpts{Name: Partitions, Help: "Partitions this member owns."})
	m.regWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: RegistryWaiting, Help: "Records held (with fetching paused) because their schema id is not cached and the schema registry cannot be asked; they are decoded when it answers."})
	m.schemaWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: SchemaWaiting, Help: "Records held (with fetching paused) because they carry a field whose column is being added, or whose table is being re-read, or because they follow a TRUNCATE event being applied (truncate: apply); they are decoded once the table has the column (or the ALTER is refused) or the TRUNCATE ran."})
	m.regRetries = prometheus.NewCounter(prometheus.CounterOpts{Name: RegistryRetries, Help: "Attempts to decode held records that found the schema registry still unavailable."})
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: LastCommitAge,
		Help: "Seconds since the last successful offset commit, or since the sink last had nothing left to commit; counts from start before the first.",
	}, func() float64 { return m.now().Sub(time.Unix(0, m.lastCommit.Load())).Seconds() })

	for _, g := range m.targets {
		m.reg.MustRegister(g)
	}
	m.reg.MustRegister(m.reason, m.state)
	m.cluster = newClusterVecs(m.reg)
	m.eosMargin = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: DedupWindowMargin,
		Help: "Deduplication window of the table minus this process's inserts into it since its oldest pending intent was recorded: at 0 a replay of that batch could insert it twice.",
	}, []string{"table"})
	m.reg.MustRegister(m.eosMargin)
	m.reg.MustRegister(m.records, m.bytes, m.dlq, m.skipped, m.unrouted, m.rows, m.inserts, m.sealed, m.retries, m.defaults, m.mostlyDefaulted, m.unmapped, m.truncates, m.duration,
		m.perInsert, m.e2e, m.ages, m.lag, m.buffer, m.limit, m.paused, m.partitions, m.maxWait, m.regWaiting, m.regRetries, m.schemaWaiting, age,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetState sets sink_connector_state: 1 for state, 0 for each other of all.
func (m *Metrics) SetState(state string, all []string) {
	if m == nil {
		return
	}
	for _, s := range all {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(s).Set(v)
	}
}

// clock is m.now as a method value, so handles and scrape-time collectors
// read the clock tests may swap.
func (m *Metrics) clock() time.Time { return m.now() }

// Registry is the registry /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Table is the handle of one ClickHouse table.
type Table struct {
	rows, inserts            prometheus.Counter
	duration, perInsert, e2e prometheus.Observer
	lastInsert               *atomic.Int64 // unix nanoseconds; read at scrape time
	now                      func() time.Time
	sealed                   [batch.ReasonMemory + 1]prometheus.Counter // indexed by batch.Reason
	retries                  *prometheus.CounterVec                     // curried with the table
	defaults                 *prometheus.CounterVec                     // curried with the table
	mostlyDefaulted          *prometheus.CounterVec                     // curried with the table
	unmapped                 *prometheus.CounterVec                     // curried with the table
	truncates                *prometheus.CounterVec                     // curried with the table
	targetRows, targetWait   prometheus.Gauge
	pressure, overLatency    prometheus.Gauge
	inputRate                prometheus.Gauge
	activeParts, partsDelay  prometheus.Gauge
	reason                   *prometheus.GaugeVec // curried with the table; nil until adaptive() ran
	lastReason               string
	adaptive                 func() // resolves the adaptive-only gauges
}

// Table resolves the handle for table (db.table); call it once per table.
func (m *Metrics) Table(name string) *Table {
	if m == nil {
		return nil
	}
	t := &Table{
		rows:            m.rows.WithLabelValues(name),
		inserts:         m.inserts.WithLabelValues(name),
		duration:        m.duration.WithLabelValues(name),
		perInsert:       m.perInsert.WithLabelValues(name),
		e2e:             m.e2e.WithLabelValues(name),
		retries:         m.retries.MustCurryWith(prometheus.Labels{"table": name}),
		defaults:        m.defaults.MustCurryWith(prometheus.Labels{"table": name}),
		mostlyDefaulted: m.mostlyDefaulted.MustCurryWith(prometheus.Labels{"table": name}),
		unmapped:        m.unmapped.MustCurryWith(prometheus.Labels{"table": name}),
		truncates:       m.truncates.MustCurryWith(prometheus.Labels{"table": name}),
		lastInsert:      m.ages.table(name),
		now:             m.clock,
	}
	g := func(metric string) prometheus.Gauge { return m.targets[metric].WithLabelValues(name) }
	t.targetRows, t.targetWait, t.pressure, t.overLatency = g(BatchTargetRows), g(BatchTargetWait), g(BatchPressure), g(BatchOverLatency)
	// The adaptive controller's inputs appear on its first report, so a
	// fixed-mode sink does not serve a rate or parts count of 0.
	t.adaptive = func() {
		t.inputRate, t.activeParts, t.partsDelay = g(BatchInputRate), g(TableActiveParts), g(TablePartsToDelay)
		t.reason = m.reason.MustCurryWith(prometheus.Labels{"table": name})
	}
	for _, r := range reasons {
		t.sealed[r] = m.sealed.WithLabelValues(name, r.String())
	}
	return t
}

// Defaulted counts n values of column written as the type's default for
// reason ("missing" or "null").
func (t *Table) Defaulted(column, reason string, n uint64) {
	if t == nil {
		return
	}
	t.defaults.WithLabelValues(column, reason).Add(float64(n))
}

// MostlyDefaulted counts a sealed batch most of whose rows got no value
// for column from their records.
func (t *Table) MostlyDefaulted(column string) {
	if t == nil {
		return
	}
	t.mostlyDefaulted.WithLabelValues(column).Inc()
}

// Unmapped counts n records that carried field, which no column takes.
// The pipeline bounds the distinct fields (and so the label values) per
// table; it calls this once per field per sealed batch, not per record.
func (t *Table) Unmapped(field string, n uint64) {
	if t == nil {
		return
	}
	t.unmapped.WithLabelValues(field).Add(float64(n))
}

// ForgetUnmapped deletes field's series of sink_unmapped_fields_total:
// the pipeline calls it when the field frees its slot, so that the label
// values stay bounded while names come and go.
func (t *Table) ForgetUnmapped(field string) {
	if t == nil {
		return
	}
	t.unmapped.DeleteLabelValues(field)
}

// Truncate counts one TRUNCATE event of the table: applied, or skipped.
func (t *Table) Truncate(applied bool) {
	if t == nil {
		return
	}
	action := "skipped"
	if applied {
		action = "applied"
	}
	t.truncates.WithLabelValues(action).Inc()
}

// Inserted records one successful INSERT of rows rows that took took.
// oldest is the Kafka timestamp of the batch's oldest record: the
// end-to-end latency observed is from it to now, the acknowledgement. The
// zero time (or one at or before the Unix epoch) means no record carried a
// timestamp, and then no latency is observed for this insert.
func (t *Table) Inserted(rows int, took time.Duration, oldest time.Time) {
	if t == nil {
		return
	}
	now := t.now()
	t.rows.Add(float64(rows))
	t.inserts.Inc()
	t.duration.Observe(took.Seconds())
	t.perInsert.Observe(float64(rows))
	t.lastInsert.Store(now.UnixNano())
	if known(oldest) {
		t.e2e.Observe(max(now.Sub(oldest), 0).Seconds())
	}
}

// Target reports the batch controller's decision: the rows and wait that
// seal the table's batches now, the pressure from ClickHouse's feedback,
// whether it waits past max_latency, the measured input rate and, for
// adaptive mode, what decided (reason; "" in fixed mode, which exposes
// no reason series). Owner goroutine only.
func (t *Table) Target(rows int, wait time.Duration, pressure float64, over bool, rate float64, reason string) {
	if t == nil {
		return
	}
	t.targetRows.Set(float64(rows))
	t.targetWait.Set(wait.Seconds())
	t.pressure.Set(pressure)
	t.overLatency.Set(b2f(over))
	if reason == "" {
		return // fixed mode
	}
	if t.reason == nil {
		t.adaptive()
	}
	t.inputRate.Set(rate)
	if reason != t.lastReason {
		if t.lastReason != "" {
			t.reason.WithLabelValues(t.lastReason).Set(0)
		}
		t.reason.WithLabelValues(reason).Set(1)
		t.lastReason = reason
	}
}

// Parts reports the table's active parts in its fullest partition and its
// parts_to_delay_insert, as last read from ClickHouse.
func (t *Table) Parts(active, delayAt int) {
	if t == nil {
		return
	}
	if t.reason == nil {
		t.adaptive()
	}
	t.activeParts.Set(float64(active))
	t.partsDelay.Set(float64(delayAt))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Sealed counts a sealed batch by its reason.
func (t *Table) Sealed(r batch.Reason) {
	if t == nil || int(r) >= len(t.sealed) || t.sealed[r] == nil {
		return
	}
	t.sealed[r].Inc()
}

// Retry counts a retried insert attempt. Retries are rare, so the label
// lookup here is fine; it is safe from insert goroutines.
func (t *Table) Retry(code int32) {
	if t == nil {
		return
	}
	t.retries.WithLabelValues(strconv.Itoa(int(code))).Inc()
}

// Topic is the handle of one Kafka topic.
type Topic struct {
	records, bytes, dlq, skipped prometheus.Counter
	unrouted                     prometheus.Counter
}

// Topic resolves the handle for a topic; call it once per topic.
func (m *Metrics) Topic(name string) *Topic {
	if m == nil {
		return nil
	}
	return &Topic{
		records:  m.records.WithLabelValues(name),
		bytes:    m.bytes.WithLabelValues(name),
		dlq:      m.dlq.WithLabelValues(name),
		skipped:  m.skipped.WithLabelValues(name),
		unrouted: m.unrouted.WithLabelValues(name),
	}
}

// Consumed counts records records of bytes bytes.
func (t *Topic) Consumed(records, bytes int) {
	if t == nil {
		return
	}
	t.records.Add(float64(records))
	t.bytes.Add(float64(bytes))
}

// Skipped counts one record that needs no row.
func (t *Topic) Skipped() {
	if t == nil {
		return
	}
	t.skipped.Inc()
}

// Unrouted counts one record that no route takes.
func (t *Topic) Unrouted() {
	if t == nil {
		return
	}
	t.unrouted.Inc()
}

// DLQ counts one record sent to the dead-letter topic.
func (t *Topic) DLQ() {
	if t == nil {
		return
	}
	t.dlq.Inc()
}

// Partition is the handle of one owned topic-partition.
type Partition struct {
	lag      prometheus.Gauge
	position *position // read at scrape time for sink_consumer_lag_seconds
}

// Partition resolves the lag gauges of topic/partition; call it once per
// assignment and ForgetPartition when the partition goes away, so a
// partition this member no longer owns does not report a stale lag.
func (m *Metrics) Partition(topic string, partition int32) *Partition {
	if m == nil {
		return nil
	}
	return &Partition{
		lag:      m.lag.WithLabelValues(topic, strconv.Itoa(int(partition))),
		position: m.ages.partition(topic, partition),
	}
}

// SetLag reports the partition's position after a fetch: records is the
// number of records after the last one fetched (high watermark - 1 - its
// offset), last is that record's Kafka timestamp. See LagSeconds for what
// the time-based lag makes of them.
func (p *Partition) SetLag(records int64, last time.Time) {
	if p == nil {
		return
	}
	p.lag.Set(float64(records))
	p.position.set(records, last)
}

// ForgetPartition removes the partition's lag series.
func (m *Metrics) ForgetPartition(topic string, partition int32) {
	if m == nil {
		return
	}
	m.lag.DeleteLabelValues(topic, strconv.Itoa(int(partition)))
	m.ages.forget(topic, partition)
}

// SetBuffer reports the bytes buffered, the budget and whether fetching is
// paused.
func (m *Metrics) SetBuffer(used, limit int, paused bool) {
	if m == nil {
		return
	}
	m.buffer.Set(float64(used))
	m.limit.Set(float64(limit))
	if paused {
		m.paused.Set(1)
	} else {
		m.paused.Set(0)
	}
}

// SetRegistryWaiting reports the records held for the schema registry.
func (m *Metrics) SetRegistryWaiting(n int) {
	if m == nil {
		return
	}
	m.regWaiting.Set(float64(n))
}

// SetSchemaWaiting reports the records held for a column being added or a
// table being re-read.
func (m *Metrics) SetSchemaWaiting(n int) {
	if m == nil {
		return
	}
	m.schemaWaiting.Set(float64(n))
}

// RegistryRetry counts an attempt at the held records that found the
// schema registry still unavailable.
func (m *Metrics) RegistryRetry() {
	if m == nil {
		return
	}
	m.regRetries.Inc()
}

// SetMaxWait reports the fixed-mode batch wait (config.Batch.MaxWait).
func (m *Metrics) SetMaxWait(d time.Duration) {
	if m == nil {
		return
	}
	m.maxWait.Set(d.Seconds())
}

// Committed notes that, at t, every handled record was committed.
func (m *Metrics) Committed(t time.Time) {
	if m == nil {
		return
	}
	m.lastCommit.Store(t.UnixNano())
}

// Assigned notes that the group gave this member n more partitions; from
// the first assignment on, the consumer counts as joined.
func (m *Metrics) Assigned(n int) {
	if m == nil {
		return
	}
	m.partitions.Set(float64(m.assigned.Add(int64(n))))
	m.joined.Store(true)
}

// Revoked notes that n partitions were given up in a rebalance; the member
// stays in the group.
func (m *Metrics) Revoked(n int) {
	if m == nil {
		return
	}
	m.partitions.Set(float64(m.assigned.Add(-int64(n))))
}

// Left notes that the member is out of the group (partitions lost, or the
// pipeline stopped): not ready until the next assignment.
func (m *Metrics) Left() {
	if m == nil {
		return
	}
	m.assigned.Store(0)
	m.partitions.Set(0)
	m.joined.Store(false)
}

// DedupWindowMargin is the exactly-once margin gauge (delivery:
// exactly_once); it has no series in the other modes.
const DedupWindowMargin = "sink_eos_dedup_window_margin"

// DedupMargin sets table's exactly-once margin: its deduplication window
// minus the inserts into it since its oldest pending intent was recorded.
func (m *Metrics) DedupMargin(table string, margin int64) {
	if m == nil {
		return
	}
	m.eosMargin.WithLabelValues(table).Set(float64(margin))
}
