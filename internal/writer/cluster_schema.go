package writer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sink/config"
)

// ReplicaColumns is what one replica has of a local table.
type ReplicaColumns struct {
	Shard   int
	Addr    string
	Exists  bool     // the table exists there
	Columns []string // "name type", in system.columns order (18.16 has no position column)
}

// ColumnDiffs compares every replica's columns with the first one's and
// says what each other replica lacks or has besides ("shard 2 replica
// 127.0.0.1:9204 has extra UInt8"), or that it has no such table; nil when
// every replica has the same columns (in any order).
func ColumnDiffs(rs []ReplicaColumns) []string {
	if len(rs) == 0 {
		return nil
	}
	set := func(cols []string) map[string]bool {
		m := make(map[string]bool, len(cols))
		for _, c := range cols {
			m[c] = true
		}
		return m
	}
	ref := rs[0]
	refCols := set(ref.Columns)
	var diffs []string
	for _, r := range rs {
		if !r.Exists {
			diffs = append(diffs, fmt.Sprintf("shard %d replica %s has no such table", r.Shard, r.Addr))
		}
	}
	if !ref.Exists {
		return diffs
	}
	for _, r := range rs[1:] {
		if !r.Exists {
			continue
		}
		cols := set(r.Columns)
		var lacks, extra []string
		for _, c := range ref.Columns {
			if !cols[c] {
				lacks = append(lacks, c)
			}
		}
		for _, c := range r.Columns {
			if !refCols[c] {
				extra = append(extra, c)
			}
		}
		if len(lacks) > 0 {
			diffs = append(diffs, fmt.Sprintf("shard %d replica %s lacks %s", r.Shard, r.Addr, strings.Join(lacks, ", ")))
		}
		if len(extra) > 0 {
			diffs = append(diffs, fmt.Sprintf("shard %d replica %s has %s", r.Shard, r.Addr, strings.Join(extra, ", ")))
		}
	}
	return diffs
}

// ReadReplicaColumns reads db.table's columns on the replica w.
func ReadReplicaColumns(ctx context.Context, w *Writer, db, table string) (ReplicaColumns, error) {
	var rc ReplicaColumns
	rows, err := w.conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ?", db, table)
	if err != nil {
		return rc, fmt.Errorf("reading the columns of %s.%s: %w", db, table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var n, t string
		if err := rows.Scan(&n, &t); err != nil {
			return rc, err
		}
		rc.Columns = append(rc.Columns, n+" "+t)
	}
	rc.Exists = len(rc.Columns) > 0
	return rc, rows.Err()
}

// SchemaObserver is told, when the ClusterObserver also implements it,
// that a target table's parts are held because its local tables differ
// across replicas (SchemaHeld, with the differences), and when the hold
// ends: the tables agree again (agreed) or the hold reached
// clickhouse.schema_agreement_timeout.
type SchemaObserver interface {
	SchemaHeld(table, diffs string)
	SchemaReleased(table string, waited time.Duration, agreed bool)
}

// localTableOf is the table that holds tt's rows on every shard.
func (c *Cluster) localTableOf(ctx context.Context, tt *tableTarget, db, table string) (string, string, error) {
	if tt.target == config.TargetDistributed {
		return LocalTable(ctx, c.conn, db, table)
	}
	return tt.localDB, tt.localName, nil
}

// schemaDiffs reads the local table of tt on every replica that answers
// and returns how they differ (ColumnDiffs); a replica that cannot be read
// is left out (its shard's parts wait for it anyway). It records the result
// for Insert.
func (c *Cluster) schemaDiffs(ctx context.Context, tt *tableTarget, db, table string) ([]string, error) {
	localDB, localName, err := c.localTableOf(ctx, tt, db, table)
	if err != nil {
		return nil, err
	}
	lay := c.lay.Load()
	var rs []ReplicaColumns
	for si, reps := range lay.shards {
		for ri, w := range reps {
			rc, err := ReadReplicaColumns(ctx, w, localDB, localName)
			if err != nil {
				continue
			}
			rc.Shard, rc.Addr = lay.topo.Shards[si].Num, lay.topo.Shards[si].Replicas[ri].Addr
			rs = append(rs, rc)
		}
	}
	diffs := ColumnDiffs(rs)
	tt.mu.Lock()
	tt.schemaDiffs = diffs
	tt.mu.Unlock()
	return diffs, nil
}

// schemaPoll is how often a held table's replicas are read again.
var schemaPoll = time.Second

// awaitSchema holds the caller while the local tables of tt differ across
// replicas, as the last schema read found them: it reads them again every
// schemaPoll until they agree, ctx ends, or clickhouse.schema_agreement_timeout
// passes (an error, which stops the batch: a row is not inserted around a
// half-applied ALTER, where a shard lacking a column would take the row
// without its value or refuse it).
func (c *Cluster) awaitSchema(ctx context.Context, tt *tableTarget, t *Table) error {
	tt.mu.Lock()
	diffs := tt.schemaDiffs
	tt.mu.Unlock()
	if len(diffs) == 0 {
		return nil
	}
	so, _ := c.obs.(SchemaObserver)
	full := t.FullName()
	if so != nil {
		so.SchemaHeld(full, strings.Join(diffs, "; "))
	}
	start := time.Now()
	limit := c.cfg.SchemaAgreementTimeout
	if limit <= 0 {
		limit = 10 * time.Minute
	}
	for {
		if err := sleepCtx(ctx, schemaPoll); err != nil {
			return err
		}
		if d, err := c.schemaDiffs(ctx, tt, t.Database, t.Name); err == nil {
			diffs = d
		}
		if len(diffs) == 0 {
			if so != nil {
				so.SchemaReleased(full, time.Since(start), true)
			}
			return nil
		}
		if waited := time.Since(start); waited >= limit {
			if so != nil {
				so.SchemaReleased(full, waited, false)
			}
			return fmt.Errorf("clickhouse: table %s: replicas have disagreed on its columns for %s (%s), a half-applied ALTER? (schema_agreement_timeout %s) (docs/cluster.md#a-half-applied-alter-is-waited-for)",
				full, waited.Round(time.Second), strings.Join(diffs, "; "), limit)
		}
	}
}
