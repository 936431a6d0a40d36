package writer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestNoDistributedDDL(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&clickhouse.Exception{Code: 392, Message: "Replicated DDL queries are disabled"}, true}, // clickhouse-local, chdb
		{fmt.Errorf("clickhouse: ALTER …: %w", &clickhouse.Exception{Code: 139, Message: "There is no DistributedDDL configuration in server config"}), true},
		{&clickhouse.Exception{Code: 371, Message: "Table events isn't replicated, but shard #1 is replicated according to its cluster definition"}, false},
		{&clickhouse.Exception{Code: 999, Message: "Coordination::Exception: Connection loss"}, false},
		{&clickhouse.Exception{Code: 159, Message: "Watching task /clickhouse/task_queue/ddl/query-0000000001 is executing longer than distributed_ddl_task_timeout"}, false},
		{errors.New("dial tcp 127.0.0.1:9201: connect: connection refused"), false},
	} {
		if got := NoDistributedDDL(tc.err); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}
