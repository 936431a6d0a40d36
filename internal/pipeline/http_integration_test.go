//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"sink/internal/testenv"
)

// TestPipelineOverHTTPOn26 runs the sink end to end with clickhouse.protocol:
// http (ClickHouse 26.9; 18.16 is refused, see the writer's tests). The
// ClickHouse HTTP port sits behind a proxy that fails the first INSERTs, half
// with a 502 as a load balancer would send, half by closing the connection:
// every batch must still arrive exactly once (the identical block is
// retried), with LZ4-compressed blocks, and the group commits the end of
// every partition.
func TestPipelineOverHTTPOn26(t *testing.T) {
	s := testenv.Server26(t)
	brokers := testenv.Kafka(t)
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 4)
	const n = 30_000
	produceEvents(t, topic, n)
	ctx := context.Background()
	ddl := fmt.Sprintf(`CREATE TABLE %s.events (id UInt64, user_id UInt32, ts DateTime, event_type String,
		cost Decimal(18, 4), payload String, _partition UInt16, _offset UInt64) ENGINE = MergeTree ORDER BY id`, db)
	if err := ch.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}

	target, err := url.Parse("http://" + s.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var failures, inserts atomic.Int32
	failures.Store(4)
	var compressed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if strings.HasPrefix(q.Get("query"), "INSERT") {
			inserts.Add(1)
			if q.Get("decompress") == "1" {
				compressed.Store(true)
			}
			if left := failures.Add(-1); left >= 0 {
				if left%2 == 0 {
					http.Error(w, "Bad Gateway", http.StatusBadGateway)
					return
				}
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close() // the client sees the connection drop
				}
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()

	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {protocol: http, addrs: [%q], database: %s, compression: lz4, retry_initial: 50ms, retry_max: 200ms}
batch: {max_rows: 10000, max_wait: 1s}
routes: [{topic: %q, table: events, format: json, columns: {id: id, user_id: user_id, ts: ts, event_type: event_type, cost: cost, payload: payload, _partition: $partition, _offset: $offset}}]
http: {listen: ""}
`, testenv.UniqueName(t, "http"), brokers[0], topic, srv.Listener.Addr().String(), db, topic))
	st := runUntil(t, cfg, ch, db+".events", n)

	var rows, distinct, pairs uint64
	if err := ch.QueryRow(ctx, "SELECT count(), uniqExact(id), uniqExact(_partition, _offset) FROM "+db+".events").
		Scan(&rows, &distinct, &pairs); err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n || pairs != n {
		t.Fatalf("%d rows, %d distinct ids, %d distinct offsets; want exactly %d of each", rows, distinct, pairs, n)
	}
	if left := failures.Load(); left > 0 {
		t.Fatalf("only %d of 4 INSERTs were failed by the proxy", 4-left)
	}
	if !compressed.Load() {
		t.Fatal("the INSERTs were not sent as compressed blocks (no decompress=1)")
	}
	assertCommittedAtEnd(t, cfg.Kafka.Group, topic)

	// The server saw the INSERTs over HTTP (query_log.interface 2), none
	// over the native protocol, and as many as succeeded at the proxy.
	if err := ch.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		t.Fatal(err)
	}
	var overHTTP, overNative uint64
	err = ch.QueryRow(ctx, `SELECT countIf(interface = 2), countIf(interface = 1) FROM system.query_log
		WHERE type = 'QueryFinish' AND query_kind = 'Insert' AND has(tables, ?)`, db+".events").Scan(&overHTTP, &overNative)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d INSERTs reached the proxy, 4 failed there, %d finished over HTTP, pipeline counted %d", inserts.Load(), overHTTP, st.Inserts)
	if overNative != 0 || overHTTP == 0 || int64(overHTTP) != st.Inserts || int32(overHTTP) != inserts.Load()-4 {
		t.Fatalf("INSERTs: %d over HTTP, %d native, %d at the proxy, pipeline %d", overHTTP, overNative, inserts.Load(), st.Inserts)
	}
}
