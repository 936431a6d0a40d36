package advise

import (
	"strings"
	"testing"
	"time"

	"sink/config"
)

func cfg(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte("name: x\nroutes: [{topic: a, table: t}]\n"+yaml), []string{"SINK_KAFKA__TOPICS=a"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// topic is a minute-long measurement of rate records/s of size bytes each.
func topic(name, table string, parts int, rate, size float64) Topic {
	return Topic{Name: name, Table: table, Partitions: parts, Window: time.Minute,
		Records: int64(rate * 60), Sampled: 1000, SampledBytes: int64(size * 1000)}
}

func TestRecommend(t *testing.T) {
	type want struct {
		fetchMin              config.ByteSize
		fetchWait, reqTimeout time.Duration
		maxRows               int
		maxBytes              config.ByteSize
		maxWait, latency      time.Duration
		rowsPerInsert         []float64 // per table, sorted by name
		insertsPerMin         []float64
		warnings              []string // substrings, in order
	}
	f := func(name string, topics []Topic, c *config.Config, tgt Target, w want) {
		t.Helper()
		a := Recommend(topics, c, tgt)
		got := want{a.FetchMinBytes, a.FetchMaxWait, a.RequestTimeout, a.MaxRows, a.MaxBytes, a.MaxWait, a.Latency, nil, nil, nil}
		for _, tb := range a.Tables {
			got.rowsPerInsert = append(got.rowsPerInsert, tb.RowsPerInsert)
			got.insertsPerMin = append(got.insertsPerMin, tb.InsertsPerMinute)
		}
		bad := got.fetchMin != w.fetchMin || got.fetchWait != w.fetchWait || got.reqTimeout != w.reqTimeout ||
			got.maxRows != w.maxRows || got.maxBytes != w.maxBytes || got.maxWait != w.maxWait || got.latency != w.latency ||
			len(got.rowsPerInsert) != len(w.rowsPerInsert) || len(a.Warnings) != len(w.warnings)
		for i := range w.rowsPerInsert {
			if bad || !near(got.rowsPerInsert[i], w.rowsPerInsert[i]) || !near(got.insertsPerMin[i], w.insertsPerMin[i]) {
				bad = true
			}
		}
		for i, s := range w.warnings {
			if bad || !strings.Contains(a.Warnings[i], s) {
				bad = true
			}
		}
		if bad {
			t.Fatalf("%s:\ngot  %+v warnings %q\nwant %+v\nsteps:\n%s", name, got, a.Warnings, w, strings.Join(a.Steps, "\n"))
		}
	}
	def := cfg(t, "")

	// A topic of 10,000 messages/min of 208.82 bytes, one insert a
	// minute. 34,803 B/s × 6s × 1.2 = 250,584 B → 245KiB; the caps stay at
	// their floors since 2 × 10,000 rows and 2 × 2.09 MB are below them.
	f("10k per minute", []Topic{{Name: "a", Table: "db.t", Partitions: 12, Window: time.Minute, Records: 10_000,
		Sampled: 1000, SampledBytes: 208_820}}, def, Target{InsertsPerMinute: 1},
		want{245 * config.KiB, 6 * time.Second, 30 * time.Second, FloorRows, FloorBytes, time.Minute, 66 * time.Second,
			[]float64{10_000}, []float64{1}, nil})

	// 2,000 records/s of 180 B: 360 kB/s × 6s × 1.2 = 2.592 MB → 2.5MiB;
	// 2 × 120,000 rows = 240,000; 2 × 21.6 MB = 43.2 MB → 42MiB.
	f("2000/s", []Topic{topic("a", "db.t", 12, 2000, 180)}, def, Target{InsertsPerMinute: 1},
		want{config.MiB * 5 / 2, 6 * time.Second, 30 * time.Second, 240_000, 42 * config.MiB, time.Minute, 66 * time.Second,
			[]float64{120_000}, []float64{1}, nil})

	// Four a minute: T = 15s, fetch_max_wait 1.5s; 648,000 B → 633KiB.
	f("4/min", []Topic{topic("a", "db.t", 1, 2000, 180)}, def, Target{InsertsPerMinute: 4},
		want{633 * config.KiB, 1500 * time.Millisecond, 30 * time.Second, FloorRows, FloorBytes, 15 * time.Second, 16500 * time.Millisecond,
			[]float64{30_000}, []float64{4}, nil})

	// A 5s latency bound wins over 4/min: fetch_max_wait 0.5s, a batch's wait 4.5s,
	// 60 / 4.5 = 13.3 inserts/min; 216,000 B → 211KiB.
	f("latency", []Topic{topic("a", "db.t", 1, 2000, 180)}, def, Target{InsertsPerMinute: 4, MaxLatency: 5 * time.Second},
		want{211 * config.KiB, 500 * time.Millisecond, 30 * time.Second, FloorRows, FloorBytes, 4500 * time.Millisecond, 5 * time.Second,
			[]float64{9000}, []float64{60 / 4.5}, nil})

	// A bound below a second cannot be met without more than one insert a
	// second: held at 1s, with a warning. 21,600 B → 22KiB.
	f("too tight", []Topic{topic("a", "db.t", 1, 2000, 180)}, def, Target{InsertsPerMinute: 1, MaxLatency: 500 * time.Millisecond},
		want{22 * config.KiB, 50 * time.Millisecond, 30 * time.Second, FloorRows, FloorBytes, time.Second, 1050 * time.Millisecond,
			[]float64{2000}, []float64{60}, []string{"more than one INSERT per second"}})

	// Two topics into one table add up; a third table is slower and gets
	// the same insert rate; an idle table gets none. 401 kB/s × 3s × 1.2 =
	// 1.44 MB → 1.5MiB; 2 × 4,000/s × 30s = 240,000 rows; 2 × 12 MB is
	// below the bytes floor; three tables' worst case overflows 256MiB.
	f("tables", []Topic{topic("a", "db.t", 3, 3000, 100), topic("b", "db.t", 3, 1000, 100), topic("c", "db.u", 1, 10, 100),
		topic("d", "db.v", 1, 0, 0)}, def, Target{InsertsPerMinute: 2},
		want{config.MiB * 3 / 2, 3 * time.Second, 30 * time.Second, 240_000, FloorBytes, 30 * time.Second, 33 * time.Second,
			[]float64{120_000, 300, 0}, []float64{2, 2, 0}, []string{"3 table(s) × (1 open + 2 in flight) × max_bytes 32MiB = 288MiB"}})

	// Without ignore_partitions each partition is its own batch.
	f("per partition", []Topic{topic("a", "db.t", 12, 2000, 180)}, cfg(t, "batch: {ignore_partitions: false}"), Target{InsertsPerMinute: 1},
		want{config.MiB * 5 / 2, 6 * time.Second, 30 * time.Second, 240_000, 42 * config.MiB, time.Minute, 66 * time.Second,
			[]float64{10_000}, []float64{12}, []string{"one insert per partition (12), 12 inserts/min instead of 1"}})

	// One insert per 10 minutes: fetch_max_wait held at 10s, above a 5s
	// request timeout, which must grow; 1 GB/s overflows the fetch size
	// derived from the default buffer_memory (8 MiB) and 2 × 600 GB the
	// buffer.
	f("slow and big", []Topic{topic("a", "db.t", 1, 1_000_000, 1000)}, cfg(t, "kafka: {request_timeout: 5s, fetch_max_wait: 1s}"),
		Target{InsertsPerMinute: 0.1},
		want{8 * config.MiB, 10 * time.Second, 40 * time.Second, 1_200_000_000, 1_144_410 * config.MiB, 10 * time.Minute, 610 * time.Second,
			[]float64{600_000_000}, []float64{0.1}, []string{"would exceed the fetch size 8MiB", "buffer_memory"}})

	// An idle topic: nothing to wait for, fetch_min_bytes 1.
	f("idle", []Topic{topic("a", "db.t", 1, 0, 0)}, def, Target{},
		want{1, 6 * time.Second, 30 * time.Second, FloorRows, FloorBytes, time.Minute, 66 * time.Second,
			[]float64{0}, []float64{0}, []string{"no bytes arrived"}})
}

func near(a, b float64) bool { return a-b < 1e-6*max(1, b) && b-a < 1e-6*max(1, b) }

func TestStepsShowTheArithmetic(t *testing.T) {
	a := Recommend([]Topic{topic("events", "db.t", 12, 2000, 180)}, cfg(t, ""), Target{InsertsPerMinute: 1})
	all := strings.Join(a.Steps, "\n")
	for _, s := range []string{
		"topic events: end offsets +120,000 in 1m0s → 2,000 records/s (120,000/min)",
		"avg 180 bytes → 360.0 kB/s (21.60 MB/min)",
		"insert interval T = 60s / 1 = 1m0s",
		"fetch_min_bytes = 1.2 × 360.0 kB/s (all topics) × 6s = 2.59 MB → 2.5MiB",
		"batch.max_rows = 2 × 2,000 records/s × 1m0s (busiest table db.t) = 240,000 → 240,000",
		"table db.t: 2,000 records/s × 1m0s = 120,000 rows/insert, 1 inserts/min",
		"latency ≤ fetch_max_wait 6s + a batch's wait 1m0s = 1m6s (batch.max_latency)",
	} {
		if !strings.Contains(all, s) {
			t.Fatalf("steps lack %q:\n%s", s, all)
		}
	}
	y := a.YAML()
	c, err := config.Parse([]byte("name: x\nroutes: [{topic: a, table: t}]\n"+y), []string{"SINK_KAFKA__TOPICS=a"})
	if err != nil {
		t.Fatalf("the YAML fragment does not load: %v\n%s", err, y)
	}
	if c.Batch.MaxRows != a.MaxRows || c.Kafka.FetchMinBytes != a.FetchMinBytes || c.Batch.MaxWait != a.MaxWait {
		t.Fatalf("the YAML fragment loads as different values:\n%s", y)
	}
}

func TestRounding(t *testing.T) {
	f := func(in, want float64) {
		t.Helper()
		if got := roundUp2(in); !near(got, want) {
			t.Fatalf("roundUp2(%v) = %v, want %v", in, got, want)
		}
	}
	f(0, 0)
	f(7, 7)
	f(243_000, 250_000)
	f(240_000, 240_000)
	f(20_001, 21_000)
	f(99.5, 100)
	g := func(in float64, want config.ByteSize) {
		t.Helper()
		if got := roundSize(in); got != want {
			t.Fatalf("roundSize(%v) = %v, want %v", in, got, want)
		}
	}
	g(0, 0)
	g(1, config.KiB)
	g(250_584, 245*config.KiB)
	g(float64(config.MiB), config.MiB)
	g(2_592_000, config.MiB*5/2)
}
