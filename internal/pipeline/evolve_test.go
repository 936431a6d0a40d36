package pipeline

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/chschema"
	"sink/internal/chtable"
)

// evolvingSink is a fakeSink whose table gains the columns AddColumn adds,
// and which records the column names of each INSERT.
type evolvingSink struct {
	*fakeSink
	mu      sync.Mutex
	cols    []chschema.ColumnSchema
	alters  []string
	inserts [][]string // column names per INSERT
	// Optional: gate, when set, holds every AddColumn until it is closed;
	// refuse answers AddColumn with the error (fail: only that many
	// times, then it succeeds; 0: every time).
	gate      chan struct{}
	gateOnce  sync.Once
	refuse    error
	fail      int
	tries     int                 // AddColumn calls
	describes int                 // Describe calls
	rowsSeen  []map[string]string // every inserted row, column -> value
}

func (k *evolvingSink) Describe(context.Context, string, string) ([]chschema.ColumnSchema, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.describes++
	return slices.Clone(k.cols), nil
}

// openGate lets the AddColumn calls held at the gate (and every later one)
// go on; safe to call more than once (a test's cleanup calls it too, so
// no call is left waiting when a test fails before it opened the gate).
func (k *evolvingSink) openGate() {
	k.gateOnce.Do(func() {
		if k.gate != nil {
			close(k.gate)
		}
	})
}

// addColumn adds a column the way a person's ALTER does.
func (k *evolvingSink) addColumn(name, typ string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cols = append(k.cols, chschema.ColumnSchema{Name: name, Type: typ})
}

// rowsByID is the inserted rows by their id column, and how many rows
// there were in all.
func (k *evolvingSink) rowsByID() (map[string]map[string]string, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]map[string]string{}
	for _, r := range k.rowsSeen {
		out[r["id"]] = r
	}
	return out, len(k.rowsSeen)
}

func (k *evolvingSink) Features(context.Context) (chschema.ServerInfo, error) {
	v, _ := chschema.ParseVersion("26.9.2.1")
	return chschema.ServerInfo{Version: v, JSONType: true}, nil
}

func (k *evolvingSink) AddColumn(ctx context.Context, info chschema.ServerInfo, db, table, cluster, name, typ string) (string, bool, error) {
	k.mu.Lock()
	gate := k.gate
	k.tries++
	k.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refuse != nil && (k.fail == 0 || k.tries <= k.fail) {
		return "", false, k.refuse
	}
	if slices.ContainsFunc(k.cols, func(c chschema.ColumnSchema) bool { return c.Name == name }) {
		return "", false, nil
	}
	k.cols = append(k.cols, chschema.ColumnSchema{Name: name, Type: typ})
	ddl := chtable.AddColumnDDL(db, table, cluster, name, typ, info.AddIfNotExists())
	k.alters = append(k.alters, ddl)
	return ddl, true, nil
}

func (k *evolvingSink) Insert(ctx context.Context, t *chtable.Table, block chschema.Block, id uint64,
	onRetry func(chtable.Attempt), refresh chtable.Refresh) error {
	var names []string
	for _, c := range block.Columns() {
		names = append(names, c.Name)
	}
	k.mu.Lock()
	k.inserts = append(k.inserts, names)
	for row := 0; row < block.Rows(); row++ {
		m := map[string]string{}
		for i, c := range block.Columns() {
			m[c.Name] = fmt.Sprint(reflect.ValueOf(block.ColumnData(i)).Index(row).Interface())
		}
		k.rowsSeen = append(k.rowsSeen, m)
	}
	k.mu.Unlock()
	return k.fakeSink.Insert(ctx, t, block, id, onRetry, refresh)
}

func (k *evolvingSink) added() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.alters)
}

// TestUnitEvolveCapPerHour: with max_new_columns_per_hour 1 and three new
// fields, one column is added; the others wait while the hour is full,
// however many batches carry them; an hour later the next one is added. The
// INSERTs after an ALTER name the new column. The ALTERs carry ON CLUSTER
// when clickhouse.cluster is set.
func TestUnitEvolveCapPerHour(t *testing.T) { synctest.Test(t, testUnitEvolveCapPerHour) }

func testUnitEvolveCapPerHour(t *testing.T) {
	cfg := unitConfig(t, "    schema: {evolve: add_columns, max_new_columns_per_hour: 1, deny: [c]}\n")
	cfg.ClickHouse.Cluster = "main"
	sink := &evolvingSink{fakeSink: newFakeSink(nil), cols: []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}}
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	var offset atomic.Int64 // how far the test moved the clock
	p.now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	src := newFakeSource()
	p.Attach(src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	rec := `{"id":1,"a":1,"b":"x","c":true}`
	next := int64(0)
	send := func(n int) {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = rec
		}
		src.send(unitTP, next, vals...)
		next += int64(n)
		eventually(t, 2*time.Second, "the records committed", func() bool { return src.committed(unitTP) >= next })
	}
	send(2) // one batch (max_rows 2): a and b seen, c denied
	eventually(t, 2*time.Second, "one column added", func() bool { return len(sink.added()) == 1 })
	for i := 0; i < 5; i++ {
		send(2)
	}
	time.Sleep(100 * time.Millisecond)
	if got := sink.added(); len(got) != 1 {
		t.Fatalf("ALTERs within the hour: %q; want 1 (the cap)", got)
	}
	first := sink.added()[0]
	if first != "ALTER TABLE `db`.`t` ON CLUSTER `main` ADD COLUMN IF NOT EXISTS `a` Int64" &&
		first != "ALTER TABLE `db`.`t` ON CLUSTER `main` ADD COLUMN IF NOT EXISTS `b` String" {
		t.Fatalf("ALTER %q", first)
	}
	offset.Store(int64(time.Hour + time.Minute))
	send(2)
	eventually(t, 2*time.Second, "the second column added an hour later", func() bool { return len(sink.added()) == 2 })
	send(2)
	send(2)
	sink.mu.Lock()
	last := sink.inserts[len(sink.inserts)-1]
	sink.mu.Unlock()
	if !slices.Equal(last, []string{"id", "a", "b"}) && !slices.Equal(last, []string{"id", "b", "a"}) {
		t.Fatalf("last INSERT names %v; want id and both added columns (never the denied c)", last)
	}
}
