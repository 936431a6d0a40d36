package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The per-shard and per-replica series of a clustered configuration's
// target local routes (writer.Cluster). They are looked up by label on each
// call, not pre-resolved like the per-table handles: a call is one shard
// part of a batch, a few per minute, and the replicas of a cluster whose
// topology is re-read can change while the sink runs.
const (
	ShardInserts   = "sink_cluster_inserts_total"
	ShardRows      = "sink_cluster_rows_total"
	ShardFailovers = "sink_cluster_failovers_total"
	ShardErrors    = "sink_cluster_errors_total"
	ReplicaHealthy = "sink_cluster_replica_up"
	// SchemaHeld is 1 while a target table's parts are held because its
	// local tables differ across replicas (writer.SchemaObserver);
	// SchemaHolds counts the holds and SchemaHoldSeconds their time.
	SchemaHeld        = "sink_cluster_schema_held"
	SchemaHolds       = "sink_cluster_schema_holds_total"
	SchemaHoldSeconds = "sink_cluster_schema_hold_seconds_total"
)

type clusterVecs struct {
	inserts, rows, errors *prometheus.CounterVec
	failovers             *prometheus.CounterVec
	up                    *prometheus.GaugeVec
	held                  *prometheus.GaugeVec
	holds, holdSeconds    *prometheus.CounterVec
}

func newClusterVecs(reg *prometheus.Registry) *clusterVecs {
	byReplica := []string{"shard", "replica"}
	v := &clusterVecs{
		inserts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ShardInserts,
			Help: "INSERTs of a batch's shard part that a replica acknowledged."}, byReplica),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ShardRows,
			Help: "Rows a replica acknowledged, in shard parts."}, byReplica),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ShardErrors,
			Help: "Failed INSERT attempts of a shard part, by replica and ClickHouse error code (0: network or client)."}, []string{"shard", "replica", "code"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ShardFailovers,
			Help: "Retries of a shard part moved to another replica of the shard after a retriable error."}, []string{"shard"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ReplicaHealthy,
			Help: "1 when the replica's last INSERT succeeded, 0 when it failed; absent before its first."}, byReplica),
	}
	v.held = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: SchemaHeld,
		Help: "1 while the table's parts are held because its local tables have different columns on different replicas or shards (a half-applied ALTER)."}, []string{"table"})
	v.holds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: SchemaHolds,
		Help: "Times a part of the table was held for its local tables to agree across replicas."}, []string{"table"})
	v.holdSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: SchemaHoldSeconds,
		Help: "Seconds the table's parts were held for its local tables to agree across replicas."}, []string{"table"})
	reg.MustRegister(v.inserts, v.rows, v.errors, v.failovers, v.up, v.held, v.holds, v.holdSeconds)
	return v
}

// ShardInserted counts a shard part replica acknowledged (writer.ClusterObserver).
func (m *Metrics) ShardInserted(shard int, replica string, rows int) {
	if m == nil {
		return
	}
	s := strconv.Itoa(shard)
	m.cluster.inserts.WithLabelValues(s, replica).Inc()
	m.cluster.rows.WithLabelValues(s, replica).Add(float64(rows))
	m.cluster.up.WithLabelValues(s, replica).Set(1)
}

// ShardFailed counts a failed attempt of a shard part on replica, and a
// failover when the retry goes to another replica.
func (m *Metrics) ShardFailed(shard int, replica string, code int32, failover bool) {
	if m == nil {
		return
	}
	s := strconv.Itoa(shard)
	m.cluster.errors.WithLabelValues(s, replica, strconv.Itoa(int(code))).Inc()
	m.cluster.up.WithLabelValues(s, replica).Set(0)
	if failover {
		m.cluster.failovers.WithLabelValues(s).Inc()
	}
}

// SchemaHeld marks table's parts held while its local tables differ across
// replicas (writer.SchemaObserver).
func (m *Metrics) SchemaHeld(table, diffs string) {
	if m == nil {
		return
	}
	m.cluster.held.WithLabelValues(table).Set(1)
	m.cluster.holds.WithLabelValues(table).Inc()
}

// SchemaReleased ends a hold of table's parts after waited.
func (m *Metrics) SchemaReleased(table string, waited time.Duration, agreed bool) {
	if m == nil {
		return
	}
	m.cluster.held.WithLabelValues(table).Set(0)
	m.cluster.holdSeconds.WithLabelValues(table).Add(waited.Seconds())
}
