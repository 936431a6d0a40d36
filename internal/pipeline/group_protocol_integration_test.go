//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"

	"sink/config"
	"sink/internal/status"
	"sink/internal/testenv"
)

// TestConsumerGroupProtocolTwoMembers: two connectors of one group under
// kafka.group_protocol: consumer (KIP-848) on the real broker split the
// topic's partitions while records keep coming, and every record is in the
// table: at least once on both servers, exactly once (no offset twice) on
// 26.9.
func TestConsumerGroupProtocolTwoMembers(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		testTwoMembers(t, s, config.DeliveryAtLeastOnce)
	})
	t.Run("exactly_once", func(t *testing.T) { testTwoMembers(t, testenv.Server26(t), config.DeliveryExactlyOnce) })
}

func testTwoMembers(t *testing.T, s testenv.Server, delivery string) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	const partitions, half = 6, 30_000
	topic := testenv.NewTopic(t, partitions)
	table := db + ".events"
	if delivery == config.DeliveryExactlyOnce {
		eoTable(t, ch, table)
	} else if err := ch.Exec(context.Background(), `CREATE TABLE `+table+` (id UInt64, user_id UInt32, ts DateTime,
		event_type String, cost Decimal(18, 4), payload String, _topic String, _partition Int32, _offset Int64)
		ENGINE = MergeTree ORDER BY (_topic, _partition, _offset)`); err != nil {
		t.Fatal(err)
	}
	group := testenv.UniqueName(t, "kip848")
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
delivery: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms, group_protocol: consumer}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 3000, max_wait: 1s}
routes: [{topic: %q, table: events}]
http: {listen: ""}
`, group, delivery, testenv.Kafka(t)[0], topic, s.Addr, db, topic))

	distinct := "SELECT uniqExact(_topic, _partition, _offset) FROM " + table
	produceEvents(t, topic, half)
	a, aDone, aStop := startRunningThen(t, cfg, nil)
	waitFor(t, "the first rows", func() (bool, string) {
		n := scalar(t, ch, "SELECT count() FROM "+table)
		return n > 0, fmt.Sprintf("%d rows", n)
	})
	b, bDone, bStop := startRunningThen(t, cfg, nil)
	adm := kadm.NewClient(testenv.KafkaClient(t))
	// Both members own partitions, by the broker's word; ConsumerGroupDescribe
	// answers for KIP-848 groups only, so this also says the group runs the
	// consumer protocol.
	waitFor(t, "the partitions to be split between the two members", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		g := d[group]
		if g.Err != nil {
			return false, g.Err.Error()
		}
		owned := 0
		for _, m := range g.Members {
			n := 0
			for _, ps := range m.Assignment {
				n += len(ps)
			}
			if n > 0 {
				owned++
			}
		}
		return len(g.Members) == 2 && owned == 2, fmt.Sprintf("%d members, %d own partitions", len(g.Members), owned)
	})
	// Each member says in its status which protocol its group runs.
	for name, p := range map[string]interface{ Status() *status.Snapshot }{"a": a, "b": b} {
		waitFor(t, "member "+name+"'s status to name the group protocol", func() (bool, string) {
			s := p.Status()
			return s != nil && s.GroupProtocol == config.GroupConsumer, fmt.Sprintf("%+v", s)
		})
	}
	produceEvents(t, topic, half)
	waitFor(t, "every record", func() (bool, string) {
		n := scalar(t, ch, distinct)
		return n >= 2*half, fmt.Sprintf("%d distinct offsets of %d", n, 2*half)
	})
	for _, m := range []struct {
		stop context.CancelFunc
		done <-chan error
	}{{bStop, bDone}, {aStop, aDone}} {
		m.stop()
		if err := <-m.done; err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
	if delivery == config.DeliveryExactlyOnce {
		exact(t, ch, table, 2*half)
		return
	}
	if n := scalar(t, ch, distinct); n != 2*half {
		t.Fatalf("%d distinct offsets, want %d", n, 2*half)
	}
	t.Logf("%d rows for %d records (at least once: a partition moved may be read again from its last commit)", scalar(t, ch, "SELECT count() FROM "+table), 2*half)
}

// scalar runs a query whose answer is one number.
func scalar(t *testing.T, ch driver.Conn, query string) uint64 {
	t.Helper()
	var n uint64
	if err := ch.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond every 200 ms for up to two minutes; its message says
// what is missing when the time runs out.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s", what, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
