package report

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestQueryClusterWithoutReadableNodes: a cluster none of whose nodes could be
// opened is an error naming the first node and why; an empty node list too.
func TestQueryClusterWithoutReadableNodes(t *testing.T) {
	o := Options{Target: Target{Database: "db", Table: "t"}, Since: time.Unix(0, 0), Until: time.Unix(60, 0)}
	nodes := []Node{
		{Shard: 1, Replica: 1, Addr: "10.0.0.1:9000", Err: errors.New("connection refused")},
		{Shard: 2, Replica: 1, Addr: "10.0.0.2:9000", Err: errors.New("timeout")},
	}
	_, err := QueryCluster(context.Background(), "c", nodes, o)
	if err == nil || !strings.Contains(err.Error(), "cluster c, shard 1 replica 1 (10.0.0.1:9000): connection refused") {
		t.Errorf("all nodes down: %v", err)
	}
	if _, err := QueryCluster(context.Background(), "c", nil, o); err == nil || !strings.Contains(err.Error(), "has no nodes") {
		t.Errorf("no nodes: %v", err)
	}
}
