// Package cluster describes a ClickHouse cluster as the sink writes to it:
// its shards, each shard's weight and replicas (Topology), read from the
// server's system.clusters (Discover) or listed in the configuration
// (FromShards); and the Distributed engine's placement of a row on a shard,
// reproduced exactly (Placement, KeyHash), so that rows the sink writes into
// each shard's local table are where a Distributed table over them with the
// same sharding expression looks for them. The sharding hashes are checked
// against the server's own functions (CheckHash) before rows are placed by
// them. (The pairing of a Distributed table with its local table is read by
// internal/writer: ParseDistributed, LocalTable.)
//
// Concurrency: a Topology, a KeyHash and a Placement are immutable once
// built and safe for concurrent use; Discover and CheckHash only read.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Replica is one server of a shard, by its native-protocol address.
type Replica struct {
	// Addr is host:port of the native protocol.
	Addr string
	// Num is the replica's number in its shard, from 1 (system.clusters'
	// replica_num, or the position in clickhouse.shards).
	Num int
}

// Shard is a set of replicas holding the same data.
type Shard struct {
	// Num is the shard's number, from 1 (system.clusters' shard_num).
	Num int
	// Weight is the share of rows the Distributed engine gives the shard:
	// Weight out of the sum of all shards' weights. 0 means none.
	Weight   int
	Replicas []Replica
}

// Topology is a cluster's shards in shard_num order.
type Topology struct {
	// Name is the cluster's name in the servers' remote_servers, or "" for
	// a topology listed in the configuration.
	Name   string
	Shards []Shard
}

// FromShards builds a topology from clickhouse.shards: each element lists
// one shard's replicas (host:port), every shard of weight 1.
func FromShards(shards [][]string) (*Topology, error) {
	if len(shards) == 0 {
		return nil, errors.New("no shards")
	}
	t := &Topology{}
	for i, rs := range shards {
		if len(rs) == 0 {
			return nil, fmt.Errorf("shard %d has no replicas", i+1)
		}
		s := Shard{Num: i + 1, Weight: 1}
		for j, a := range rs {
			s.Replicas = append(s.Replicas, Replica{Addr: a, Num: j + 1})
		}
		t.Shards = append(t.Shards, s)
	}
	return t, nil
}

// Discover reads cluster name's shards, weights and replicas from
// system.clusters on the server conn is connected to. Addresses are the
// host_address (resolved IP) and port of each replica, as that server sees
// them: the sink must reach the same addresses.
func Discover(ctx context.Context, conn driver.Conn, name string) (*Topology, error) {
	rows, err := conn.Query(ctx, `SELECT toUInt32(shard_num), toUInt32(shard_weight), toUInt32(replica_num),
		host_name, host_address, toUInt16(port) FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num`, name)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: reading system.clusters: %w", name, err)
	}
	defer rows.Close()
	t := &Topology{Name: name}
	for rows.Next() {
		var (
			shard, weight, replica uint32
			hostName, hostAddr     string
			port                   uint16
		)
		if err := rows.Scan(&shard, &weight, &replica, &hostName, &hostAddr, &port); err != nil {
			return nil, fmt.Errorf("cluster %s: reading system.clusters: %w", name, err)
		}
		host := hostAddr
		if host == "" {
			host = hostName
		}
		if n := len(t.Shards); n == 0 || t.Shards[n-1].Num != int(shard) {
			t.Shards = append(t.Shards, Shard{Num: int(shard), Weight: int(weight)})
		}
		s := &t.Shards[len(t.Shards)-1]
		s.Replicas = append(s.Replicas, Replica{Addr: net.JoinHostPort(host, strconv.Itoa(int(port))), Num: int(replica)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cluster %s: reading system.clusters: %w", name, err)
	}
	if len(t.Shards) == 0 {
		return nil, fmt.Errorf("cluster %s: not in system.clusters of the server (is it in remote_servers?)", name)
	}
	return t, nil
}

// TotalWeight is the sum of the shards' weights.
func (t *Topology) TotalWeight() int {
	n := 0
	for _, s := range t.Shards {
		n += s.Weight
	}
	return n
}

// Addrs lists every replica's address, shard by shard.
func (t *Topology) Addrs() []string {
	var a []string
	for _, s := range t.Shards {
		for _, r := range s.Replicas {
			a = append(a, r.Addr)
		}
	}
	return a
}

// String is "2 shards (weights 1,1) × 2,2 replicas".
func (t *Topology) String() string {
	ws := make([]string, len(t.Shards))
	rs := make([]string, len(t.Shards))
	for i, s := range t.Shards {
		ws[i] = strconv.Itoa(s.Weight)
		rs[i] = strconv.Itoa(len(s.Replicas))
	}
	return fmt.Sprintf("%d shards (weights %s) × %s replicas", len(t.Shards), strings.Join(ws, ","), strings.Join(rs, ","))
}

// Slots maps hash % TotalWeight to a shard index (into Shards), as the
// Distributed engine's slot_to_shard does: shard 0 takes the first Weight
// slots, shard 1 the next ones, and so on.
func (t *Topology) Slots() []int {
	slots := make([]int, 0, t.TotalWeight())
	for i, s := range t.Shards {
		for range s.Weight {
			slots = append(slots, i)
		}
	}
	return slots
}

// RandomShard picks a shard index with probability weight/total, for
// sharding: random (a whole batch to one shard).
func (t *Topology) RandomShard() int {
	slots := t.Slots()
	if len(slots) == 0 {
		return 0
	}
	return slots[rand.IntN(len(slots))]
}
