package pipeline

// The fakes behind the ExactlyOnce port: an eoWorld is what runs of the
// sink leave behind for the next one (the group's committed offsets and
// ledgers, the topic's log, the table's rows by offset and the tokens it
// deduplicates), so that a test can crash a run, start another on the same
// world and count every offset's rows. Nothing here opens a connection.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// eoWorld is Kafka's and ClickHouse's state across runs.
type eoWorld struct {
	mu sync.Mutex
	// group is the consumer group's committed offset and metadata per
	// partition (what Source.Commit stores, what Snapshot returns).
	group eos.Snapshot
	// log holds each partition's record values, by offset from 0.
	log map[offsets.TP][]string
	// ids are the topics' IDs now (TopicState); absent: none given.
	ids map[string]string
	// ends overrides a partition's log end offset (default: len(log)).
	ends map[offsets.TP]int64
	// table counts the rows the table holds of each offset.
	table map[offsets.TP]map[int64]int
	// dlq names the dead-letter table (db.table; "" none), and dead counts
	// its rows by offset as table does the target's.
	dlq  string
	dead map[offsets.TP]map[int64]int
	// tokens are the tokens of the blocks the table kept, oldest first;
	// an INSERT whose token is among the last window of them is dropped,
	// as ClickHouse drops it.
	tokens  []string
	window  int
	dropped int // INSERTs dropped as repeats
	kept    int // INSERTs whose rows the table kept
	// placement is how the cluster splits the table's rows across shards
	// now (eoTable.Placement); "": not split.
	placement string
	// unreadable makes ReadRanges fail (retention deleted the records).
	unreadable bool
	// stateErrs are what TopicState fails with, first to last, before it
	// answers.
	stateErrs []error
	// snapshotErrs are what Snapshot fails with, first to last, before it
	// answers.
	snapshotErrs []error
	// presentErrs are what Present fails with, first to last, before it
	// answers.
	presentErrs []error
	// windowsErr is what Windows refuses with (a cluster's shard whose
	// window is 0, say); unchecked the replicas it names as not reached.
	windowsErr error
	unchecked  []string
	// calls counts the port's calls by method; reads are ReadRanges's
	// ranges and presents Present's regions, in call order.
	calls    map[string]int
	reads    [][]eos.Range
	presents []string
}

func newEOWorld() *eoWorld {
	return &eoWorld{group: eos.Snapshot{}, log: map[offsets.TP][]string{}, ids: map[string]string{},
		ends: map[offsets.TP]int64{}, table: map[offsets.TP]map[int64]int{}, dead: map[offsets.TP]map[int64]int{},
		window: 1000, calls: map[string]int{}}
}

// produce appends n records to tp's log.
func (w *eoWorld) produce(tp offsets.TP, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := len(w.log[tp])
	w.log[tp] = append(w.log[tp], rows(at, n)...)
}

// commit stores a commit of tp at offset with metadata, as if an earlier
// run (or a tool) had made it.
func (w *eoWorld) commit(tp offsets.TP, offset int64, meta string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.group[tp] = eos.Committed{Offset: offset, Metadata: meta}
}

// ledger commits tp at offset with a ledger listing entries.
func (w *eoWorld) ledger(t *testing.T, tp offsets.TP, offset int64, topicID string, entries ...eos.Entry) {
	t.Helper()
	s, err := eos.Ledger{Offset: offset, TopicID: topicID, Entries: entries}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	w.commit(tp, offset, s)
}

// intent returns the token of a batch of ranges into db.t and each
// partition's ledger entry for it.
func intent(ranges ...eos.Range) (string, map[offsets.TP]eos.Entry) {
	tok := eos.Token("db.t", ranges)
	out := map[offsets.TP]eos.Entry{}
	for _, r := range ranges {
		out[r.TP] = eos.Entry{Token: tok, First: r.First, Last: r.Last, N: len(ranges)}
	}
	return tok, out
}

// landed puts offsets first..last of each range into the table as one
// block of token, as an INSERT of an earlier run did.
func (w *eoWorld) landed(token string, ranges ...eos.Range) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range ranges {
		for o := r.First; o <= r.Last; o++ {
			w.row(r.TP, o)
		}
	}
	w.tokens = append(w.tokens, token)
	w.kept++
}

func (w *eoWorld) row(tp offsets.TP, o int64) { addRow(w.table, tp, o) }

func addRow(table map[offsets.TP]map[int64]int, tp offsets.TP, o int64) {
	if table[tp] == nil {
		table[tp] = map[int64]int{}
	}
	table[tp][o]++
}

// rowsOf is the rows of table (db.table): the dead-letter table's or the
// target's.
func (w *eoWorld) rowsOf(table string) map[offsets.TP]map[int64]int {
	if w.dlq != "" && table == w.dlq {
		return w.dead
	}
	return w.table
}

// insert is an INSERT of block with token reaching table.
func (w *eoWorld) insert(table, token string, block chschema.Block) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if token != "" {
		from := max(len(w.tokens)-w.window, 0)
		for _, tok := range w.tokens[from:] {
			if tok == token {
				w.dropped++
				return nil
			}
		}
	}
	col := map[string]any{}
	for i, c := range block.Columns() {
		col[c.Name] = block.ColumnData(i)
	}
	topics, ok1 := col["_topic"].([]string)
	parts, ok2 := col["_partition"].([]int32)
	offs, ok3 := col["_offset"].([]int64)
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("fake table: block without the Kafka columns: %T %T %T", col["_topic"], col["_partition"], col["_offset"])
	}
	for i := range offs {
		addRow(w.rowsOf(table), offsets.TP{Topic: topics[i], Partition: parts[i]}, offs[i])
	}
	if token != "" {
		w.tokens = append(w.tokens, token)
	}
	w.kept++
	return nil
}

// exactly fails t unless the table holds each offset from..to-1 of tp once
// and no other offset of it.
func (w *eoWorld) exactly(t *testing.T, tp offsets.TP, from, to int64) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var bad []string
	for o := from; o < to; o++ {
		if n := w.table[tp][o]; n != 1 {
			bad = append(bad, fmt.Sprintf("offset %d ×%d", o, n))
		}
	}
	for o, n := range w.table[tp] {
		if o < from || o >= to {
			bad = append(bad, fmt.Sprintf("offset %d ×%d (outside %d..%d)", o, n, from, to-1))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%s[%d] in the table: %v; want each of %d..%d once", tp.Topic, tp.Partition, bad, from, to-1)
	}
}

func (w *eoWorld) count(method string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[method]
}

func (w *eoWorld) counts() (kept, dropped int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kept, w.dropped
}

// committed is tp's committed offset and ledger in the group.
func (w *eoWorld) committed(t *testing.T, tp offsets.TP) (int64, eos.Ledger) {
	t.Helper()
	w.mu.Lock()
	c, ok := w.group[tp]
	w.mu.Unlock()
	if !ok {
		return -1, eos.Ledger{}
	}
	l, _, err := eos.Decode(c.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	return c.Offset, l
}

// eoFakeIO is the ExactlyOnce port on a world.
type eoFakeIO struct{ w *eoWorld }

func (f eoFakeIO) Snapshot(context.Context) (eos.Snapshot, error) {
	w := f.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls["Snapshot"]++
	if len(w.snapshotErrs) > 0 {
		err := w.snapshotErrs[0]
		w.snapshotErrs = w.snapshotErrs[1:]
		return nil, err
	}
	out := eos.Snapshot{}
	for tp, c := range w.group {
		out[tp] = c
	}
	return out, nil
}

func (f eoFakeIO) TopicState(_ context.Context, tps []offsets.TP) (map[string]string, map[offsets.TP]int64, error) {
	w := f.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls["TopicState"]++
	if len(w.stateErrs) > 0 {
		err := w.stateErrs[0]
		w.stateErrs = w.stateErrs[1:]
		return nil, nil, fmt.Errorf("exactly-once: reading the topics' IDs: %w", err)
	}
	ids, ends := map[string]string{}, map[offsets.TP]int64{}
	for _, tp := range tps {
		if id, ok := w.ids[tp.Topic]; ok {
			ids[tp.Topic] = id
		}
		ends[tp] = int64(len(w.log[tp]))
		if e, ok := w.ends[tp]; ok {
			ends[tp] = e
		}
	}
	return ids, ends, nil
}

func (f eoFakeIO) ReadRanges(_ context.Context, ranges []eos.Range) (map[offsets.TP][]*kgo.Record, error) {
	w := f.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls["ReadRanges"]++
	w.reads = append(w.reads, append([]eos.Range(nil), ranges...))
	if w.unreadable {
		return nil, fmt.Errorf("kafka: reading a pending batch back: %s[%d] up to %d not reached within 30s", ranges[0].TP.Topic, ranges[0].TP.Partition, ranges[0].Last)
	}
	out := map[offsets.TP][]*kgo.Record{}
	for _, r := range ranges {
		for o := r.First; o <= r.Last && o < int64(len(w.log[r.TP])); o++ {
			out[r.TP] = append(out[r.TP], &kgo.Record{Topic: r.TP.Topic, Partition: r.TP.Partition, Offset: o,
				Value: []byte(w.log[r.TP][o]), Timestamp: time.Now()})
		}
	}
	return out, nil
}

func (f eoFakeIO) Present(_ context.Context, t *chtable.Table, tp offsets.TP, from, to int64) ([]eos.Span, error) {
	w := f.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls["Present"]++
	w.presents = append(w.presents, fmt.Sprintf("%s[%d] %d..%d", tp.Topic, tp.Partition, from, to))
	if len(w.presentErrs) > 0 {
		err := w.presentErrs[0]
		w.presentErrs = w.presentErrs[1:]
		return nil, err
	}
	var offs []int64
	rows := w.table
	if t != nil {
		rows = w.rowsOf(t.FullName())
	}
	for o, n := range rows[tp] {
		if n > 0 && o >= from && (to < 0 || o < to) {
			offs = append(offs, o)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	var out []eos.Span
	for _, o := range offs {
		if n := len(out); n > 0 && out[n-1].Last+1 == o {
			out[n-1].Last = o
			continue
		}
		out = append(out, eos.Span{First: o, Last: o})
	}
	return out, nil
}

func (f eoFakeIO) Windows(_ context.Context, tables []*chtable.Table) ([]eos.Window, error) {
	w := f.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls["Windows"]++
	if w.windowsErr != nil {
		return nil, w.windowsErr
	}
	dedups := make([]chschema.TableDedup, len(tables))
	out := make([]eos.Window, len(tables))
	for i, t := range tables {
		dedups[i] = chschema.TableDedup{Table: t.FullName(), Engine: "MergeTree", Setting: "non_replicated_deduplication_window", Value: fmt.Sprint(w.window)}
		out[i] = eos.Window{Setting: dedups[i].Setting, Size: int64(w.window), Unchecked: w.unchecked}
	}
	targets := make([]eos.Target, len(tables))
	for i, t := range tables {
		targets[i] = eos.Target{Database: t.Database, Name: t.Name, Insert: t.Insert}
	}
	if err := eos.Require(chschema.ServerInfo{DedupToken: true}, targets, dedups); err != nil {
		return nil, err
	}
	return out, nil
}

// eoTable is the fake sink over a world's table: its table has the Kafka
// columns, and an INSERT that the script lets succeed reaches the world's
// table, which drops a repeated token.
type eoTable struct {
	*fakeSink
	w *eoWorld
	// landFirst says whether INSERT call n (1-based) reaches the table
	// before its script runs: the server has the rows whatever the
	// client hears next (a hang, a lost answer).
	landFirst func(n int) bool
}

func (s eoTable) Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error) {
	if s.w.dlq != "" && db+"."+table == s.w.dlq {
		return tables.DLQTableSpec(db, table, chschema.ServerTypes{DateTime64: true}, 0, "").Columns, nil
	}
	cols, err := s.fakeSink.Describe(ctx, db, table)
	return append(cols, chschema.ColumnSchema{Name: "_topic", Type: "String"},
		chschema.ColumnSchema{Name: "_partition", Type: "Int32"}, chschema.ColumnSchema{Name: "_offset", Type: "Int64"}), err
}

func (s eoTable) Placement(context.Context, string, string) (string, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.placement, nil
}

func (s eoTable) Insert(ctx context.Context, t *chtable.Table, block chschema.Block, id uint64,
	onRetry func(chtable.Attempt), refresh chtable.Refresh) error {
	s.fakeSink.mu.Lock()
	n := s.fakeSink.calls + 1
	s.fakeSink.mu.Unlock()
	if s.landFirst != nil && s.landFirst(n) {
		if err := s.w.insert(t.FullName(), chtable.DedupToken(ctx), block); err != nil {
			return err
		}
		return s.fakeSink.Insert(ctx, t, block, id, onRetry, refresh)
	}
	if err := s.fakeSink.Insert(ctx, t, block, id, onRetry, refresh); err != nil {
		return err
	}
	return s.w.insert(t.FullName(), chtable.DedupToken(ctx), block)
}

// eoRun is one run of the sink on a world: an exactly-once pipeline with
// no partition assigned yet.
type eoRun struct {
	*running
	src *eoSource
}

// run starts a run of cfg (exactly-once) on w whose INSERTs follow script
// (nil: all succeed).
func (w *eoWorld) run(t *testing.T, cfg *config.Config, script func(n int) insertScript) *eoRun {
	t.Helper()
	return w.runOn(t, cfg, eoTable{fakeSink: newFakeSink(script), w: w})
}

// runOn is run with the sink given.
func (w *eoWorld) runOn(t *testing.T, cfg *config.Config, table eoTable) *eoRun {
	t.Helper()
	cfg.Delivery = config.DeliveryExactlyOnce
	sink := table.fakeSink
	p, err := New(context.Background(), cfg, zerolog.New(zerolog.NewTestWriter(t)), table, WithExactlyOnce(eoFakeIO{w}))
	if err != nil {
		t.Fatal(err)
	}
	src := &eoSource{fakeSource: newFakeSource(), world: w}
	return &eoRun{running: launch(t, p, src.fakeSource, src, sink), src: src}
}

// assign calls the assigned callback for tps as franz-go does; it returns
// once recovery is done.
func (r *eoRun) assign(tps ...offsets.TP) {
	m := map[string][]int32{}
	for _, tp := range tps {
		m[tp.Topic] = append(m[tp.Topic], tp.Partition)
	}
	r.p.Assigned(context.Background(), m)
}

// feed hands the run tp's records from offset from to the log's end, as
// the consumer fetches them from where the group's offset points.
func (r *eoRun) feed(w *eoWorld, tp offsets.TP, from int64) {
	w.mu.Lock()
	vals := append([]string(nil), w.log[tp][from:]...)
	w.mu.Unlock()
	r.src.send(tp, from, vals...)
}

// resume is feed from tp's committed offset (0 when none), where the
// consumer starts after an assignment.
func (r *eoRun) resume(t *testing.T, w *eoWorld, tp offsets.TP) {
	t.Helper()
	at, _ := w.committed(t, tp)
	r.feed(w, tp, max(at, 0))
}
