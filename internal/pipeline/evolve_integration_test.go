//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
)

// evolveConfig is a one-topic connector into db.t with the route's schema
// section set to schema (YAML flow mapping, "" for none).
func evolveConfig(t *testing.T, s testenv.Server, topic, db, schema string) *config.Config {
	return evolveConfigFormat(t, s, topic, db, "", schema)
}

// evolveConfigFormat is evolveConfig with the route's format (a registry
// format gets the stack's schema registry; "" is json).
func evolveConfigFormat(t *testing.T, s testenv.Server, topic, db, format, schema string) *config.Config {
	route := fmt.Sprintf("topic: %q, table: t", topic)
	if schema != "" {
		route += ", schema: " + schema
	}
	reg := ""
	if format != "" {
		route += ", format: " + format
		reg = fmt.Sprintf("schema_registry: {urls: [%q]}", testenv.Registry(t))
	}
	return newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 50ms, retry_max: 300ms, schema_refresh: 0s}
batch: {max_rows: 1000, max_wait: 300ms}
routes: [{%s}]
http: {listen: ""}
%s
`, testenv.UniqueName(t, "evolve"), testenv.Kafka(t)[0], topic, s.Addr, db, route, reg))
}

// freshTable makes a database holding table t of columns and a
// one-partition topic, and returns them with a connection to s.
func freshTable(t *testing.T, s testenv.Server, columns string) (driver.Conn, string, string) {
	t.Helper()
	ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
	createT(t, ch, db, columns)
	return ch, db, topic
}

// sendValues produces values to topic and waits until cfg's connector has
// committed total records of it.
func sendValues(t *testing.T, done <-chan error, cfg *config.Config, topic string, total int64, values ...string) {
	t.Helper()
	produceValues(t, topic, values...)
	waitCommitted(t, done, cfg.Kafka.Group, topic, total)
}

// sendBytes is sendValues for binary values.
func sendBytes(t *testing.T, done <-chan error, cfg *config.Config, topic string, total int64, values ...[]byte) {
	t.Helper()
	produceBytes(t, topic, values...)
	waitCommitted(t, done, cfg.Kafka.Group, topic, total)
}

// expectEvolved waits until db.t has as many columns as want, expects
// them to be want (in any order), then waits a second: the connector
// applies the table description it read after its ALTERs.
func expectEvolved(t *testing.T, ch driver.Conn, db string, done <-chan error, want []string) {
	t.Helper()
	expectColumns(t, waitColumns(t, ch, db, done, len(want)), want)
	time.Sleep(time.Second)
}

// expectCount runs the count query q and expects want; msg is the error
// message, formatted with the count found.
func expectCount(t *testing.T, ch driver.Conn, q string, want uint64, msg string) {
	t.Helper()
	if n := uint64Of(t, ch, q); n != want {
		t.Errorf(msg, n)
	}
}

// checkCapped waits a second for any ALTER still under way, then expects
// db.t to hold id and two more columns (the cap of two new columns), each
// one of allowed ("name type"; note says why the others are not), and
// rows rows.
func checkCapped(t *testing.T, ch driver.Conn, db string, allowed map[string]bool, note string, rows uint64) {
	t.Helper()
	time.Sleep(time.Second)
	cols := columnsOf(t, ch, db)
	if len(cols) != 3 {
		t.Fatalf("columns %v; want id and two of %v (the cap)", cols, allowed)
	}
	for _, c := range cols[1:] {
		if !allowed[c] {
			t.Errorf("column %q: want one of %v (%s)", c, allowed, note)
		}
	}
	if n := countRows(t, ch, db+".t"); n != rows {
		t.Errorf("%d rows; want %d", n, rows)
	}
}

func createT(t *testing.T, ch driver.Conn, db, columns string) {
	t.Helper()
	createTable(t, ch, db, "t", columns)
}

// createTable makes db.table of columns, a MergeTree ordered by id.
func createTable(t *testing.T, ch driver.Conn, db, table, columns string) {
	t.Helper()
	if err := ch.Exec(context.Background(), "CREATE TABLE "+db+"."+table+" ("+columns+") ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
}

// columnsOf returns db.t's columns as "name type", in table order.
func columnsOf(t *testing.T, ch driver.Conn, db string) []string {
	t.Helper()
	return columnsOfTable(t, ch, db, "t")
}

// columnsOfTable returns db.table's columns as "name type", in table order.
func columnsOfTable(t *testing.T, ch driver.Conn, db, table string) []string {
	t.Helper()
	rows, err := ch.Query(context.Background(), "SELECT name, type FROM system.columns WHERE database = ? AND table = ?", db, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n, typ string
		if err := rows.Scan(&n, &typ); err != nil {
			t.Fatal(err)
		}
		out = append(out, n+" "+typ)
	}
	return out
}

// waitColumns waits until db.t has exactly want columns (or fails after 30 s).
func waitColumns(t *testing.T, ch driver.Conn, db string, done <-chan error, want int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cols := columnsOf(t, ch, db)
		if len(cols) == want {
			return cols
		}
		if time.Now().After(deadline) {
			t.Fatalf("table has columns %v; want %d columns", cols, want)
		}
		select {
		case err := <-done:
			t.Fatalf("connector stopped: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func stopClean(t *testing.T, done <-chan error, stop context.CancelFunc) {
	t.Helper()
	stop()
	if err := <-done; err != nil {
		t.Fatalf("clean stop: %v", err)
	}
}

// Fields that no column takes are counted per table and field in
// sink_unmapped_fields_total, scraped over HTTP; the table is not changed
// (no schema.evolve) and every record still lands.
func TestUnmappedFieldsCountedInMetrics(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id UInt64, n String")
		cfg := evolveConfig(t, s, topic, db, "")
		done, stop, unmapped := startWithMetrics(t, cfg)

		var values []string
		for i := 0; i < 300; i++ {
			switch {
			case i < 100:
				values = append(values, fmt.Sprintf(`{"id":%d,"n":"x"}`, i))
			case i < 250:
				values = append(values, fmt.Sprintf(`{"id":%d,"n":"x","color":"red","size":%d}`, i, i))
			default:
				values = append(values, fmt.Sprintf(`{"id":%d,"size":1.5}`, i))
			}
		}
		sendValues(t, done, cfg, topic, 300, values...)
		stopClean(t, done, stop) // the last batch is sealed and counted

		checkUnmapped(t, unmapped, db, map[string]float64{"color": 150, "size": 200}, 2)
		if n := countRows(t, ch, db+".t"); n != 300 {
			t.Errorf("%d rows; want 300", n)
		}
		if cols := columnsOf(t, ch, db); len(cols) != 2 {
			t.Errorf("columns %v: the table changed without schema.evolve", cols)
		}
	})
}

// startWithMetrics runs cfg's connector with a metrics endpoint; unmapped
// scrapes it for sink_unmapped_fields_total of db.t.
func startWithMetrics(t *testing.T, cfg *config.Config) (<-chan error, context.CancelFunc, func() map[string]float64) {
	t.Helper()
	m, scrapeNow := serveMetrics(t, cfg.Kafka.Group)
	done, stop := startPipelineWith(t, cfg, pipeline.WithMetrics(m))
	return done, stop, scrapeNow
}

// serveMetrics makes group's metrics and serves them over HTTP until the
// test ends; scrapeNow fetches /metrics (failing the test unless it
// answers 200) and returns its samples.
func serveMetrics(t *testing.T, group string) (m *metrics.Metrics, scrapeNow func() map[string]float64) {
	t.Helper()
	m = metrics.New(group)
	srv, err := metrics.Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	return m, func() map[string]float64 {
		code, body := scrape(t, "http://"+srv.Addr()+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		return samples(t, body)
	}
}

// checkUnmapped scrapes sink_unmapped_fields_total of db.t and expects the
// counts of want, and series series in all.
func checkUnmapped(t *testing.T, scrapeNow func() map[string]float64, db string, want map[string]float64, series int) {
	t.Helper()
	smp := scrapeNow()
	table := fmt.Sprintf(`table="%s.t"`, db)
	for field, n := range want {
		if got, _ := sum(smp, metrics.UnmappedFields, table, `field="`+field+`"`); got != n {
			t.Errorf("%s{field=%q} = %v; want %v", metrics.UnmappedFields, field, got, n)
		}
	}
	if _, got := sum(smp, metrics.UnmappedFields, table); got != series {
		t.Errorf("%d series of %s; want %d", got, metrics.UnmappedFields, series)
	}
}

// typedRecord carries one field of each inferred kind.
func typedRecord(id int) string {
	return fmt.Sprintf(`{"id":%d,"i":%d,"f":%d.5,"b":%t,"s":"s%d","ts":"2024-05-17T12:00:%02d.250Z","o":{"k":%d},"arr":[%d,%d],"nul":null}`,
		id, id*10, id, id%2 == 0, id, id%60, id, id, id+1)
}

// schema.evolve: add_columns turns new fields into typed columns (the types
// the server has, inferred from the values), and every record fills them:
// the records that revealed the fields wait for the ALTER. A field that
// was only ever null gets no column.
func TestEvolveAddsTypedColumns(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id UInt64")
		cfg := evolveConfig(t, s, topic, db, "{evolve: add_columns}")
		done, stop := startPipeline(t, cfg)

		var first []string
		for i := 0; i < 100; i++ {
			first = append(first, typedRecord(i))
		}
		sendValues(t, done, cfg, topic, 100, first...)
		want := []string{"id UInt64", "i Int64", "f Float64", "b UInt8", "s String", "ts String", "o String", "arr Array(Int64)"}
		if s.AtLeast(24, 8) {
			want = []string{"id UInt64", "i Int64", "f Float64", "b Bool", "s String", "ts DateTime64(3)", "o JSON", "arr Array(Int64)"}
		}
		expectEvolved(t, ch, db, done, want)

		var second []string
		for i := 100; i < 300; i++ {
			second = append(second, typedRecord(i))
		}
		sendValues(t, done, cfg, topic, 300, second...)
		if n := countRows(t, ch, db+".t"); n != 300 {
			t.Fatalf("%d rows; want 300", n)
		}
		filled := "SELECT count() FROM " + db + ".t WHERE i = id*10 AND f = id + 0.5 AND b = (id % 2 = 0) AND s = concat('s', toString(id))" +
			" AND toString(ts) LIKE '2024-05-17%' AND arr = [toInt64(id), toInt64(id+1)]"
		expectCount(t, ch, filled, 300, "%d of the 300 records filled every new column; want 300 (the first ones wait for the ALTER)")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE replaceAll(toString(o), ' ', '') = concat('{\"k\":', toString(id), '}')", 300, "%d of 300 rows hold their object; want 300")
		stopClean(t, done, stop)
	})
}

// Two connectors (two groups, so both read every record) evolve the same
// table at the same time: both keep running, the table gets one column per
// field, and both fill it.
func TestEvolveTwoInstancesRace(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id UInt64")
		cfgA := evolveConfig(t, s, topic, db, "{evolve: add_columns}")
		cfgB := evolveConfig(t, s, topic, db, "{evolve: add_columns}")
		doneA, stopA := startPipeline(t, cfgA)
		doneB, stopB := startPipeline(t, cfgB)

		var first, second []string
		for i := 0; i < 100; i++ {
			first = append(first, fmt.Sprintf(`{"id":%d,"x":%d,"y":"a"}`, i, i))
			second = append(second, fmt.Sprintf(`{"id":%d,"x":%d,"y":"b"}`, i+100, i+100))
		}
		produceValues(t, topic, first...)
		waitCommitted(t, doneA, cfgA.Kafka.Group, topic, 100)
		waitCommitted(t, doneB, cfgB.Kafka.Group, topic, 100)
		cols := waitColumns(t, ch, db, doneA, 3)
		time.Sleep(time.Second)
		produceValues(t, topic, second...)
		waitCommitted(t, doneA, cfgA.Kafka.Group, topic, 200)
		waitCommitted(t, doneB, cfgB.Kafka.Group, topic, 200)
		if got := columnsOf(t, ch, db); len(got) != 3 {
			t.Fatalf("columns %v (first seen %v); want id, x, y once each", got, cols)
		}
		if n := countRows(t, ch, db+".t"); n != 400 {
			t.Fatalf("%d rows; want 400 (200 from each connector)", n)
		}
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id >= 100 AND x = id AND y = 'b'", 200, "%d rows after the ALTER filled by both connectors; want 200")
		stopClean(t, doneA, stopA)
		stopClean(t, doneB, stopB)
	})
}

// schema.max_new_columns_per_hour caps the columns added; schema.allow and
// schema.deny pick the fields that may become columns (deny wins). The
// fields left out are still counted and every record lands.
func TestEvolveCapAndLists(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id UInt64")
		cfg := evolveConfig(t, s, topic, db, `{evolve: add_columns, allow: ["k*"], deny: [kx], max_new_columns_per_hour: 2, nullable: true}`)
		done, stop := startPipeline(t, cfg)
		var values []string
		for i := 0; i < 100; i++ {
			values = append(values, fmt.Sprintf(`{"id":%d,"k1":1,"k2":2,"k3":3,"kx":4,"other":5}`, i))
		}
		sendValues(t, done, cfg, topic, 100, values...)
		waitColumns(t, ch, db, done, 3)
		// More batches: the cap holds for the hour.
		sendValues(t, done, cfg, topic, 200, values...)
		allowed := map[string]bool{"k1 Nullable(Int64)": true, "k2 Nullable(Int64)": true, "k3 Nullable(Int64)": true}
		checkCapped(t, ch, db, allowed, "kx is denied, other not allowed", 200)
		stopClean(t, done, stop)
	})
}

// A column added by hand before its field first arrives is picked up at
// that first sighting, not at the next schema_refresh (an hour here): the
// first record carrying the field re-reads the table before it is decoded,
// and it and every record after it fill the column.
func TestColumnAddedBeforeFieldArrivesIsFilledAtFirstSighting(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		r := startOnTable(t, s, "id UInt64, n String", "1h", jsonRows(0, 100))
		ch, db, topic, cfg, done, stop := r.ch, r.db, r.topic, r.cfg, r.done, r.stop
		if err := ch.Exec(context.Background(), "ALTER TABLE "+db+".t ADD COLUMN extra String"); err != nil {
			t.Fatal(err)
		}
		sendValues(t, done, cfg, topic, 200, withExtra(100, 200)...)
		sendValues(t, done, cfg, topic, 300, withExtra(200, 300)...)
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id >= 100 AND extra = concat('e', toString(id))", 200, "%d of the 200 records from the first sighting on filled extra; want 200")
		if n := countRows(t, ch, db+".t"); n != 300 {
			t.Errorf("%d rows; want 300", n)
		}
		stopClean(t, done, stop)
	})
}

// debezium-json: the row image's fields that no column takes are counted
// too (creates by their after image, deletes by their before image).
func TestUnmappedDebeziumFieldsCounted(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id Int64, _version UInt64, _deleted UInt8")
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 1000, max_wait: 300ms}
routes: [{topic: %q, table: t, format: debezium-json}]
http: {listen: ""}
`, testenv.UniqueName(t, "dbzdrift"), testenv.Kafka(t)[0], topic, s.Addr, db, topic))
		done, stop, unmapped := startWithMetrics(t, cfg)
		var values []string
		for i := 0; i < 50; i++ {
			values = append(values, fmt.Sprintf(`{"op":"c","after":{"id":%d,"email":"u%d@x"},"source":{"lsn":%d},"ts_ms":1}`, i, i, 100+i))
		}
		for i := 0; i < 20; i++ {
			values = append(values, fmt.Sprintf(`{"op":"d","before":{"id":%d,"email":"u%d@x","phone":"1"},"after":null,"source":{"lsn":%d},"ts_ms":2}`, i, i, 200+i))
		}
		sendValues(t, done, cfg, topic, 70, values...)
		stopClean(t, done, stop)
		checkUnmapped(t, unmapped, db, map[string]float64{"email": 70, "phone": 20}, 2)
		if n := countRows(t, ch, db+".t"); n != 70 {
			t.Errorf("%d rows; want 70", n)
		}
	})
}
