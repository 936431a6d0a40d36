//go:build integration

package budget_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/budget"
	"sink/internal/consumer"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestSharedBudget: four connectors, each with two tables of its own on
// one server, share its budget of 60 INSERTs a minute with no coordinator
// (clickhouse.share_budget, internal/budget): three start together, the
// fourth 90 s later. Each table gets 10 records a second and seals every
// second unhindered (120 INSERTs a minute per connector), with a latency
// bound of 10 minutes so the budget, not the bound, decides. The server's
// INSERTs in every minute, counted in system.query_log (every client's),
// stay within the budget: the starting minutes and the one the fourth
// joins in too. From the third minute the connectors use at least half of
// it, and from a minute and a half after the fourth joined each connector
// has a fair part of them (equal demands: a quarter each, within a factor
// of 2) over the five minutes 3–7 together. A single minute is not fair on
// its own: the room splits the slack by what each connector sends, so the
// parts swing from minute to minute while the price evens them out
// (TestSimulationSplitOverMinutes runs this case at every phase).
//
// The server is one of the test's own (testenv.PrivateClickHouse, 18.16):
// the stack's servers take a thousand INSERTs a minute and more from the
// other tests running at the same time, which would leave the connectors
// their least share and nothing to measure.
func TestSharedBudget(t *testing.T) {
	const (
		budgetPerMinute = 60
		pods            = 4
		joinAt          = 90 * time.Second
		runFor          = 480 * time.Second
	)
	node := testenv.PrivateClickHouse(t)
	broker := testenv.Kafka(t)[0]
	ch := node.Conn(t)
	db := testenv.UniqueName(t, "share")
	testenv.Exec(t, ch, "CREATE DATABASE "+db)
	t.Cleanup(func() { _ = ch.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })

	type pod struct {
		name   string
		tables []string
		topics []string
	}
	var all []pod
	for i := range pods {
		p := pod{name: testenv.UniqueName(t, fmt.Sprintf("share%d", i))}
		for _, s := range []string{"a", "b"} {
			table := fmt.Sprintf("p%d_%s", i, s)
			testenv.Exec(t, ch, fmt.Sprintf("CREATE TABLE %s.%s (id UInt64) ENGINE = MergeTree ORDER BY id", db, table))
			p.tables = append(p.tables, table)
			p.topics = append(p.topics, testenv.NewTopic(t, 1))
		}
		all = append(all, p)
	}
	var topics []string
	for _, p := range all {
		topics = append(topics, p.topics...)
	}
	produceJSON(t, topics, 10)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, pods)
	start := time.Now()
	run := func(p pod) {
		routes := make([]string, len(p.tables))
		for i := range p.tables {
			routes[i] = fmt.Sprintf("{topic: %q, table: %s, max_latency: 10m}", p.topics[i], p.tables[i])
		}
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q, %q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s, max_inserts_per_minute: %d}
batch: {max_rows: 100000, max_wait: 1s}
routes: [%s]
http: {listen: ""}
`, p.name, broker, p.topics[0], p.topics[1], node.Addr, db, budgetPerMinute, strings.Join(routes, ", ")))
		log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Str("connector", p.name).Logger()
		w, err := writer.Open(ctx, cfg.Name, cfg.ClickHouse)
		if err != nil {
			errs <- err
			return
		}
		defer w.Close()
		// As sink run wires it (cmd/sink).
		sh := budget.NewSharer(budget.Settings{PerMinute: budgetPerMinute}, writer.ShareReader(w, cfg.ClickHouse.QueryTimeout), 0, log)
		wg.Add(2)
		go func() { defer wg.Done(); sh.Run(ctx) }()
		go func() { // a trace of the share every 15 s
			defer wg.Done()
			for tick := time.NewTicker(15 * time.Second); ; {
				select {
				case <-ctx.Done():
					tick.Stop()
					return
				case <-tick.C:
					for _, s := range sh.Shares() {
						t.Logf("%3.0fs %s: share %5.1f/min, price %.2f, server %5.1f/min, own %5.1f/min (%s)",
							time.Since(start).Seconds(), p.name[:6], s.PerMinute, s.Price, s.Server, s.Own, s.Reason)
					}
				}
			}
		}()
		pl, err := pipeline.New(ctx, cfg, log, w, pipeline.WithAllowance(sh))
		if err != nil {
			errs <- err
			return
		}
		cons, err := consumer.New(ctx, cfg, log, consumer.HooksOf(pl))
		if err != nil {
			errs <- err
			return
		}
		pl.Attach(cons)
		err = pl.Run(ctx)
		cons.Close()
		if err != nil {
			errs <- fmt.Errorf("%s: %w", p.name, err)
		}
		t.Logf("%s: shares at the end %+v", p.name, sh.Shares())
	}
	for i, p := range all {
		if i == pods-1 {
			time.Sleep(time.Until(start.Add(joinAt)))
		}
		wg.Add(1)
		go func() { defer wg.Done(); run(p) }()
	}
	time.Sleep(time.Until(start.Add(runFor)))
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Every INSERT the server started, whoever sent it, and ours by
	// connector, per minute from the start.
	if err := ch.Exec(context.Background(), "SYSTEM FLUSH LOGS"); err != nil {
		t.Fatal(err)
	}
	startSec := start.Unix()
	rows, err := ch.Query(context.Background(), `
SELECT toUInt32(intDiv(toUInt32(event_time) - ?, 60)) AS minute, count() AS n,
       countIf(position(query, ?) > 0) AS ours,
       extract(query, '\\.\\x60?p(\\d)_[ab]\\b') AS pod
FROM system.query_log
WHERE type = 1 AND query LIKE 'INSERT%' AND event_time >= toDateTime(?) AND event_time < toDateTime(?)
GROUP BY minute, pod ORDER BY minute, pod`, uint32(startSec), db, uint32(startSec), uint32(startSec+int64(runFor/time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	total := map[uint32]uint64{}
	perPod := map[uint32]map[string]uint64{}
	for rows.Next() {
		var (
			minute  uint32
			n, ours uint64
			p       string
		)
		if err := rows.Scan(&minute, &n, &ours, &p); err != nil {
			t.Fatal(err)
		}
		total[minute] += n
		if ours > 0 {
			if perPod[minute] == nil {
				perPod[minute] = map[string]uint64{}
			}
			perPod[minute][p] += ours
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for m := uint32(0); m < uint32(runFor/time.Minute); m++ {
		t.Logf("minute %d: %d INSERTs on the server, ours by connector %v", m, total[m], perPod[m])
	}
	// Within the budget in sum, every minute. The slow start takes the
	// first two minutes to fill it (its share doubles once a window).
	for m := uint32(0); m < uint32(runFor/time.Minute); m++ {
		if total[m] > budgetPerMinute {
			t.Errorf("minute %d: %d INSERTs, budget %d", m, total[m], budgetPerMinute)
		}
		if m >= 2 && float64(total[m]) < budgetPerMinute*0.5 {
			t.Errorf("minute %d: %d INSERTs, the connectors leave most of the budget %d unused", m, total[m], budgetPerMinute)
		}
	}
	// Fair parts once the fourth has had a minute: minutes 3–7 together.
	var sum uint64
	made := make([]uint64, pods)
	for m := uint32(3); m < uint32(runFor/time.Minute); m++ {
		for i := range pods {
			made[i] += perPod[m][fmt.Sprint(i)]
			sum += perPod[m][fmt.Sprint(i)]
		}
	}
	mean := float64(sum) / pods
	for i, n := range made {
		if float64(n) < mean/2 || float64(n) > mean*2 {
			t.Errorf("minutes 3–%d: connector %d made %d INSERTs, the mean is %.1f", runFor/time.Minute-1, i, n, mean)
		}
	}
}

// produceJSON feeds each topic rate records/s of {"id":N} until the test
// ends.
func produceJSON(t *testing.T, topics []string, rate float64) {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		for n := int64(0); ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
			for due := int64(time.Since(start).Seconds() * rate); n < due; n++ {
				for _, topic := range topics {
					cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"id":%d}`, n)}, nil)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func newConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}
