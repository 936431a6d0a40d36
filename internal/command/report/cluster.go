package report

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Node is one server of a cluster, as a cluster report reads it: its place in
// the cluster and a connection to it.
type Node struct {
	// Shard and Replica are 1-based, as system.clusters numbers them.
	Shard, Replica int
	// Addr is the native host:port, for the report and its messages.
	Addr string
	// Conn is a connection to this server; nil when it could not be opened,
	// with Err saying why (the node is then reported as not read).
	Conn driver.Conn
	Err  error
}

// ShardReport is one shard's part of a cluster report.
type ShardReport struct {
	Shard int `json:"shard"`
	// Total, Before and After are as the report's, over this shard's
	// replicas only.
	Total  Side  `json:"total"`
	Before *Side `json:"before,omitempty"`
	After  *Side `json:"after,omitempty"`
	// Replicas are the shard's servers with what each one logged.
	Replicas []ReplicaTotal `json:"replicas"`
}

// ReplicaTotal is what one server's logs hold for the report's range: the
// INSERTs it received, their rows, and the new parts those INSERTs made on it
// (a replica that fetched a part from another replica does not log it as a
// new part, so each part is counted once, on the replica that wrote it).
type ReplicaTotal struct {
	Replica  int    `json:"replica"`
	Addr     string `json:"addr"`
	Read     bool   `json:"read"` // false: the server could not be read (see the notes)
	Inserts  int    `json:"inserts"`
	Rows     uint64 `json:"rows"`
	NewParts int    `json:"new_parts"`
}

// QueryCluster reads every node's query_log and part_log (one connection per
// node: each node's logs are flushed by that node, and no password has to go
// into a remote() table function's text, where 18.16 would log it) and
// aggregates them as Query does a single server's: the minutes and sides sum
// every node, Shards split them per shard, each with its replicas' totals. A
// node that cannot be read is left out with a note saying so; when none can be
// read, the first node's error is returned.
func QueryCluster(ctx context.Context, cluster string, nodes []Node, o Options) (Report, error) {
	var (
		all      logs
		byShard  = map[int]*logs{}
		shardIDs []int
		notes    []string
		matched  []string
		read     int
		firstErr error
		noPart   []string
	)
	totals := map[int][]ReplicaTotal{}
	for _, n := range nodes {
		if _, ok := byShard[n.Shard]; !ok {
			byShard[n.Shard] = &logs{partLog: true}
			shardIDs = append(shardIDs, n.Shard)
		}
		rt := ReplicaTotal{Replica: n.Replica, Addr: n.Addr}
		err := n.Err
		var l logs
		if err == nil {
			l, err = readLogs(ctx, n.Conn, o)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("cluster %s, shard %d replica %d (%s): %w", cluster, n.Shard, n.Replica, n.Addr, err)
			}
			notes = append(notes, fmt.Sprintf("shard %d replica %d (%s) not read, its INSERTs and parts are missing from the sums: %v",
				n.Shard, n.Replica, n.Addr, err))
			totals[n.Shard] = append(totals[n.Shard], rt)
			continue
		}
		read++
		rt.Read, rt.Inserts, rt.NewParts = true, len(l.ins), len(l.parts)
		for _, in := range l.ins {
			rt.Rows += in.Rows
		}
		totals[n.Shard] = append(totals[n.Shard], rt)
		s := byShard[n.Shard]
		s.ins, s.parts = append(s.ins, l.ins...), append(s.parts, l.parts...)
		s.partLog = s.partLog && l.partLog
		all.ins, all.parts = append(all.ins, l.ins...), append(all.parts, l.parts...)
		if !l.partLog {
			noPart = append(noPart, n.Addr)
		}
		if !slices.Contains(matched, l.matchedBy) {
			matched = append(matched, l.matchedBy)
		}
	}
	if read == 0 {
		if firstErr == nil {
			return Report{}, fmt.Errorf("cluster %s has no nodes", cluster)
		}
		return Report{}, firstErr
	}
	// New parts are known only when every node that was read has a part_log.
	partLog := len(noPart) == 0
	r := Aggregate(o.Target.FullName(), o.Since, o.Until, all.ins, all.parts, partLog, o.Split)
	r.Cluster = cluster
	r.MatchedBy = strings.Join(matched, ", ")
	slices.Sort(shardIDs)
	for _, id := range shardIDs {
		s := byShard[id]
		sr := Aggregate(o.Target.FullName(), o.Since, o.Until, s.ins, s.parts, partLog, o.Split)
		r.Shards = append(r.Shards, ShardReport{Shard: id, Total: sr.Total, Before: sr.Before, After: sr.After, Replicas: totals[id]})
	}
	if !partLog {
		r.Notes = append(r.Notes, "system.part_log does not exist on "+strings.Join(noPart, ", ")+": new parts are not known (enable the <part_log> section in the server config)")
	}
	r.Notes = append(r.Notes, notes...)
	if len(all.ins) == 0 {
		r.Notes = append(r.Notes, "no finished INSERT into "+o.insertTargets()+" in the query_log of any node of cluster "+cluster+" in this range")
	}
	return r, nil
}
