//go:build integration

package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/testenv"
)

// dlqKill9 is one dead-letter-table run against a server or a cluster:
// where to connect (the clickhouse: section's keys), the connection to
// read back with, the database, and the SQL that creates the target table
// ev (id UInt64, _partition Int32, _offset Int64) in it.
type dlqKill9 struct {
	chKeys string
	target string // the route's target: "" or distributed
	// settle, when set, runs before the tables are read (a cluster's
	// replicas fetch what their shard has)
	settle func()
	ch     driver.Conn
	db     string
	create []string
	// exactlyOnce runs with delivery: exactly_once: every record is then a
	// row of one of the two tables once, with no duplicate to read away.
	exactlyOnce bool
	// kills are the fractions of the records committed at which the run is
	// killed with SIGKILL and started again (default: one tenth); a kill
	// after the first waits for the restarted run to commit more too.
	kills []float64
	// maxRows is batch.max_rows (default 1000): smaller batches take the
	// stream in more steps, so that a kill falls between them.
	maxRows int
}

// TestDLQTableKill9 streams 20,000 records over four partitions, 1% of
// them (198) bad (half not JSON, half with an id that is not a number), into a
// table with errors.dlq_table; kills `sink run` with SIGKILL once a tenth
// is committed,
// checks that every record below the committed offsets is either a row of
// the target or of the dead-letter table, restarts it to the end, and
// checks that every record is in exactly one of the two tables, the bad
// ones byte for byte, no offset in both. The dead-letter table is created
// by the sink. On both servers. Parallel with the package's other
// parallel tests, as are the two below: each uses its own topic, tables and
// group, kills only its own child process and measures no time.
func TestDLQTableKill9(t *testing.T) {
	t.Parallel()
	bin := buildSink(t)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		db := s.NewDatabase(t)
		runDLQKill9(t, bin, dlqKill9{
			chKeys: fmt.Sprintf("addrs: [%s]\n  database: %s", s.Addr, db),
			ch:     s.Conn(t), db: db,
			create: []string{fmt.Sprintf("CREATE TABLE %s.ev (id UInt64, _partition Int32, _offset Int64) ENGINE = ReplacingMergeTree ORDER BY (_partition, _offset)", db)},
		})
	})
}

// TestDLQTableKill9Cluster is TestDLQTableKill9 on the local cluster: the
// target is a Distributed table over replicated local tables (target:
// distributed), and the sink creates the dead-letter table ON CLUSTER as
// local tables and a Distributed one, as schema.create does, and inserts
// into it synchronously: rows committed are on their shards at the kill.
func TestDLQTableKill9Cluster(t *testing.T) {
	t.Parallel()
	c := testenv.Cluster(t)
	if !c.Keeper {
		t.Skip("the cluster has no ZooKeeper: ON CLUSTER DDL does not run")
	}
	bin := buildSink(t)
	db := c.NewDatabase(t)
	runDLQKill9(t, bin, dlqKill9{
		chKeys: fmt.Sprintf("addrs: [%s]\n  database: %s\n  cluster: %s", c.Shards[0][0].Addr, db, c.Name),
		ch:     c.Conn(t), db: db, target: "distributed",
		settle: func() {
			for _, n := range c.Nodes() {
				conn := n.Conn(t)
				c.SyncReplica(t, conn, db+".ev_local")
				var n uint64
				if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.tables WHERE database = ? AND name = 'ev_dead_local'", db).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					c.SyncReplica(t, conn, db+".ev_dead_local")
				}
			}
		},
		create: []string{
			fmt.Sprintf("CREATE TABLE %s.ev_local ON CLUSTER %s (id UInt64, _partition Int32, _offset Int64) ENGINE = %s", db, c.Name, c.Engine(db, "ev_local", "(_partition, _offset)")),
			fmt.Sprintf("CREATE TABLE %s.ev ON CLUSTER %s AS %s.ev_local ENGINE = Distributed(%s, %s, ev_local, rand())", db, c.Name, db, c.Name, db),
		},
	})
}

// TestDLQTableKill9ExactlyOnceOn26 is TestDLQTableKill9 with delivery:
// exactly_once on 26.9 (the only server with deduplication tokens): the
// target is a plain MergeTree with a deduplication window, the sink
// creates the dead-letter table (with its own window), and the run is
// killed twice, at a tenth and at half of the records committed. At the
// end every record is a row of the target or of the dead-letter table,
// once: rows in the target + rows in the dead-letter table = records
// produced, and no (topic, partition, offset) twice in either table or
// across both, without FINAL or LIMIT BY.
func TestDLQTableKill9ExactlyOnceOn26(t *testing.T) {
	t.Parallel()
	bin := buildSink(t)
	s := testenv.Server26(t)
	db := s.NewDatabase(t)
	runDLQKill9(t, bin, dlqKill9{
		chKeys: fmt.Sprintf("addrs: [%s]\n  database: %s", s.Addr, db),
		ch:     s.Conn(t), db: db, exactlyOnce: true, kills: []float64{0.1, 0.5}, maxRows: 100,
		create: []string{fmt.Sprintf("CREATE TABLE %s.ev (id UInt64, _topic String, _partition Int32, _offset Int64) ENGINE = MergeTree ORDER BY (_partition, _offset) SETTINGS non_replicated_deduplication_window = 1000", db)},
	})
}

func buildSink(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sink")
	if out, err := exec.Command("go", "build", "-o", bin, "sink/cmd/sink").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// dlqValue is record i's value: every 101st is bad (101 is prime to the
// four partitions the records go to in turn, so every partition has bad
// records), alternately not JSON (with bytes that are not UTF-8) and with
// an id that is not a number.
func dlqValue(i int) (string, bool) {
	switch {
	case i%101 != 50:
		return fmt.Sprintf(`{"id":%d}`, i), false
	case i/101%2 == 0:
		return fmt.Sprintf("not json \xff\x00 %d", i), true
	}
	return fmt.Sprintf(`{"id":"n%d"}`, i), true
}

func runDLQKill9(t *testing.T, bin string, e dlqKill9) {
	ctx := context.Background()
	testenv.Exec(t, e.ch, e.create...)
	topic := testenv.NewTopic(t, 4)
	const n = 20_000
	values := make([]string, n)
	bad := 0
	for i := range values {
		var b bool
		if values[i], b = dlqValue(i); b {
			bad++
		}
	}
	recs := produceDLQStream(t, topic, values)
	group := "dlqtable-" + topic
	cfgPath := filepath.Join(t.TempDir(), "sink.yaml")
	delivery := "at_least_once"
	if e.exactlyOnce {
		delivery = "exactly_once"
	}
	level := "warn"
	if e.exactlyOnce {
		level = "info" // the log shows what recovery replayed and skipped
	}
	maxRows := e.maxRows
	if maxRows == 0 {
		maxRows = 1000
	}
	kills := e.kills
	if len(kills) == 0 {
		kills = []float64{0.1}
	}
	yaml := fmt.Sprintf(`name: %s
delivery: %s
kafka:
  brokers: [%s]
  topics: [%s]
  fetch_min_bytes: 1
  fetch_max_wait: 100ms
  fetch_max_bytes: 128KiB
  max_partition_fetch_bytes: 32KiB
clickhouse:
  %s
batch:
  max_rows: %d
  max_wait: 200ms
routes:
  - topic: %s
    table: ev
    target: "%s"
errors:
  tolerance: all
  dlq_table: ev_dead
http:
  listen: ""
log:
  level: %s
`, group, delivery, testenv.Kafka(t)[0], topic, e.chKeys, maxRows, topic, e.target, level)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// where reads the (partition, offset) pairs of a table, with how many
	// rows each has.
	where := func(table string, settle bool) map[[2]int64]int {
		if settle && e.settle != nil {
			e.settle()
		}
		rows, err := e.ch.Query(ctx, fmt.Sprintf("SELECT _partition, _offset FROM %s.%s", e.db, table))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[[2]int64]int{}
		for rows.Next() {
			var p int32
			var o int64
			if err := rows.Scan(&p, &o); err != nil {
				t.Fatal(err)
			}
			out[[2]int64{int64(p), o}]++
		}
		return out
	}

	child := startSink(t, bin, cfgPath)
	sum := func(m map[int32]int64) (n int64) {
		for _, o := range m {
			n += o
		}
		return n
	}
	var old map[string]bool // the members before the last kill
	var last int64          // the records committed at the last kill
	for _, frac := range kills {
		if last == n {
			break // the stream was done at the last kill
		}
		if old != nil {
			// The restarted run is known to be up by a member id of its
			// own: the killed run stays a member until its session
			// times out.
			waitNewMember(t, group, old, 2*time.Minute)
		}
		// Killed once frac of the records is committed (and more than at
		// the last kill): the committed offsets are then past bad records
		// of every partition (one in 101), whose rows must be in.
		deadline := time.Now().Add(2 * time.Minute)
		for c := sum(fetchCommitted(t, group, topic)); c < int64(frac*n) || c <= last; c = sum(fetchCommitted(t, group, topic)) {
			if time.Now().After(deadline) {
				t.Fatalf("the group committed %v after 2 minutes", fetchCommitted(t, group, topic))
			}
			time.Sleep(10 * time.Millisecond)
		}
		old = groupMembers(t, group)
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
		committed := fetchCommitted(t, group, topic)
		last = sum(committed)
		good, dead := where("ev", true), where("ev_dead", true)
		below := 0
		for i, r := range recs {
			if r.offset >= committed[r.partition] {
				continue
			}
			below++
			k := [2]int64{int64(r.partition), r.offset}
			if _, isBad := dlqValue(i); isBad && dead[k] == 0 || !isBad && good[k] == 0 {
				t.Errorf("record %d (partition %d offset %d, bad %v) is below the committed offset %d but in neither table", i, r.partition, r.offset, isBad, committed[r.partition])
			}
		}
		t.Logf("killed with %d of %d records committed; %d dead-letter rows", below, n, len(dead))
		child = startSink(t, bin, cfgPath)
	}
	// Everything may be committed already (the first run can get that far
	// before its kill): wait until the new run has joined the group, which
	// it does after setting up its signal handling, before stopping it.
	waitNewMember(t, group, old, 2*time.Minute)
	ends := endOffsets(t, topic)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c := fetchCommitted(t, group, topic)
		done := true
		for p, end := range ends {
			done = done && c[p] == end
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the group committed %v of %v", c, ends)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("sink run after SIGTERM: %v", err)
	}

	good, dead := where("ev", true), where("ev_dead", true)
	if len(good)+len(dead) != n || len(dead) != bad {
		t.Errorf("%d distinct offsets in ev + %d in ev_dead, want %d records (%d bad)", len(good), len(dead), n, bad)
	}
	replayed, total := 0, 0
	for k, c := range dead {
		if good[k] > 0 {
			t.Errorf("partition %d offset %d is both a row and a dead letter", k[0], k[1])
		}
		replayed += c - 1
		total += c
	}
	for _, c := range good {
		total += c
	}
	if e.exactlyOnce {
		// Exactly once: no copy at all, in either table.
		if total != n || replayed != 0 {
			t.Errorf("exactly-once: %d rows in ev + ev_dead (%d dead-letter rows written twice), want %d, one per record", total, replayed, n)
		}
		for k, c := range good {
			if c != 1 {
				t.Errorf("exactly-once: partition %d offset %d is %d rows of ev", k[0], k[1], c)
			}
		}
	} else {
		t.Logf("dead-letter rows written twice by the replay after the kill (at-least-once): %d", replayed)
	}
	// sink report counts each bad record once, however often it was written.
	out, err := exec.Command(bin, "report", "--config", cfgPath, "--table", e.db+".ev", "--since", "1h", "--format", "json").Output()
	if err != nil {
		t.Fatalf("sink report: %v\n%s", err, out)
	}
	var rep struct {
		DeadLettered []struct {
			DLQTable string `json:"dlq_table"`
			Records  int    `json:"records"`
		} `json:"dead_lettered"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("sink report --format json: %v\n%s", err, out)
	}
	if len(rep.DeadLettered) != 1 || rep.DeadLettered[0].DLQTable != e.db+".ev_dead" || rep.DeadLettered[0].Records != bad {
		t.Errorf("sink report's dead_lettered %+v, want %d records in %s.ev_dead", rep.DeadLettered, bad, e.db)
	}

	// The bad records' values, byte for byte, with their class.
	rows, err := e.ch.Query(ctx, fmt.Sprintf("SELECT _partition, _offset, value, value_length, error_class, target_table, error FROM %s.ev_dead LIMIT 1 BY _partition, _offset", e.db))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	byPos := map[[2]int64]int{}
	for i, r := range recs {
		byPos[[2]int64{int64(r.partition), r.offset}] = i
	}
	for rows.Next() {
		var p int32
		var o int64
		var value, class, table, errText string
		var vlen uint64
		if err := rows.Scan(&p, &o, &value, &vlen, &class, &table, &errText); err != nil {
			t.Fatal(err)
		}
		i := byPos[[2]int64{int64(p), o}]
		wantClass := "column"
		if strings.HasPrefix(values[i], "not json") {
			wantClass = "malformed"
		}
		if value != values[i] || vlen != uint64(len(values[i])) || class != wantClass || table != e.db+".ev" || !strings.Contains(errText, fmt.Sprintf("offset %d", o)) {
			t.Errorf("dead letter of record %d: value %q (%d) class %s table %s error %q; want %q class %s", i, value, vlen, class, table, errText, values[i], wantClass)
		}
	}
}

// produceDLQStream produces values round-robin over topic's partitions and
// returns where each landed (id is the value's index).
func produceDLQStream(t *testing.T, topic string, values []string) []fanRec {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)}
	}
	return produceRoundRobin(t, topic, recs)
}

// groupMembers returns the member ids group has now.
func groupMembers(t *testing.T, group string) map[string]bool {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	gs, err := adm.DescribeGroups(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	if g, ok := gs[group]; ok && g.Err == nil {
		for _, m := range g.Members {
			ids[m.MemberID] = true
		}
	}
	return ids
}

// waitNewMember waits until group has a member whose id is not in old (a
// sink run started since has joined).
func waitNewMember(t *testing.T, group string, old map[string]bool, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for id := range groupMembers(t, group) {
			if !old[id] {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new member joined group %s within %v", group, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
