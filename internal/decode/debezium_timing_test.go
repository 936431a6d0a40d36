package decode

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/route"
)

// dbzBenchCols is a replicated PostgreSQL orders table: keys, an enum, money,
// two timestamps, free text, and the version and delete marker.
var dbzBenchCols = []chschema.ColumnSchema{
	{Name: "id", Type: "UInt64"},
	{Name: "customer_id", Type: "UInt32"},
	{Name: "status", Type: "LowCardinality(String)"},
	{Name: "total", Type: "Decimal(12, 2)"},
	{Name: "created_at", Type: "DateTime64(6)"},
	{Name: "updated_at", Type: "DateTime64(6)"},
	{Name: "note", Type: "String"},
	{Name: "_version", Type: "UInt64"},
	{Name: "_deleted", Type: "UInt8"},
}

const dbzBenchSchema = `{"type":"struct","fields":[` +
	`{"type":"struct","fields":%[1]s,"optional":true,"name":"pg.public.orders.Value","field":"before"},` +
	`{"type":"struct","fields":%[1]s,"optional":true,"name":"pg.public.orders.Value","field":"after"},` +
	`{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},` +
	`{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},` +
	`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,last,false,incremental"},"default":"false","field":"snapshot"},` +
	`{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},{"type":"string","optional":false,"field":"schema"},` +
	`{"type":"string","optional":false,"field":"table"},{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,"field":"lsn"},` +
	`{"type":"int64","optional":true,"field":"xmin"}],"optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source"},` +
	`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},` +
	`{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},` +
	`{"type":"int64","optional":false,"field":"data_collection_order"}],"optional":true,"name":"event.block","version":1,"field":"transaction"}],` +
	`"optional":false,"name":"pg.public.orders.Envelope","version":2}`

const dbzBenchValueFields = `[{"type":"int64","optional":false,"field":"id"},{"type":"int32","optional":false,"field":"customer_id"},` +
	`{"type":"string","optional":false,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"new,paid,shipped,cancelled"},"field":"status"},` +
	`{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"12"},"field":"total"},` +
	`{"type":"int64","optional":false,"name":"io.debezium.time.MicroTimestamp","version":1,"field":"created_at"},` +
	`{"type":"int64","optional":false,"name":"io.debezium.time.MicroTimestamp","version":1,"field":"updated_at"},` +
	`{"type":"string","optional":true,"field":"note"}]`

// dbzBenchEvents are PostgreSQL change events as Debezium 2.x sends them:
// mostly updates, some inserts and deletes, wrapped with the schema block or
// bare.
func dbzBenchEvents(n int, wrapped bool) [][]byte {
	statuses := []string{"new", "paid", "shipped", "cancelled"}
	schema := fmt.Sprintf(dbzBenchSchema, dbzBenchValueFields)
	out := make([][]byte, n)
	for i := range out {
		total := base64.StdEncoding.EncodeToString(big.NewInt(int64(i*7919%1_000_000 + 1)).Bytes())
		created := int64(1715949296_000000) + int64(i)*1_000_003
		row := fmt.Sprintf(`{"id":%d,"customer_id":%d,"status":%q,"total":%q,"created_at":%d,"updated_at":%d,"note":"gift wrap, leave at door %d"}`,
			1_000_000+i, i%5000, statuses[i%4], total, created, created+60_000_000, i)
		op, before, after := "u", row, row
		switch i % 10 {
		case 0:
			op, before = "c", "null"
		case 9:
			op, after = "d", "null"
		}
		lsn := 24023128 + i*120
		payload := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"version":"2.7.0.Final","connector":"postgresql","name":"pg",`+
			`"ts_ms":%d,"snapshot":"false","db":"shop","sequence":"[\"%d\",\"%d\"]","schema":"public","table":"orders","txId":%d,`+
			`"lsn":%d,"xmin":null},"op":%q,"ts_ms":%d,"transaction":null}`,
			before, after, 1715949296000+i, lsn-120, lsn, 5000+i, lsn, op, 1715949296100+i)
		if wrapped {
			out[i] = []byte(`{"schema":` + schema + `,"payload":` + payload + `}`)
		} else {
			out[i] = []byte(payload)
		}
	}
	return out
}

func dbzBenchRecords(n int, wrapped bool) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i, e := range dbzBenchEvents(n, wrapped) {
		recs[i] = &kgo.Record{Topic: "pg.public.orders", Partition: 3, Offset: int64(i), Value: e, Timestamp: time.Unix(1715949296, 0)}
	}
	return recs
}

// BenchmarkDebeziumAppend decodes Debezium change events into a block, one
// record per op, resetting the block every 10,000 rows like a batch flush.
// "wrapped" carries the JSON converter's schema block (schemas.enable=true,
// about three quarters of each message), "bare" does not.
//
//	go test ./internal/decode/ -run '^$' -bench DebeziumAppend -benchmem
func BenchmarkDebeziumAppend(b *testing.B) {
	for _, wrapped := range []bool{true, false} {
		name := "bare"
		if wrapped {
			name = "wrapped"
		}
		b.Run(name, func(b *testing.B) {
			p, err := Compile(route.Debezium, InsertColumns(dbzBenchCols), nil)
			if err != nil {
				b.Fatal(err)
			}
			recs := dbzBenchRecords(1024, wrapped)
			total := 0
			for _, r := range recs {
				total += len(r.Value)
			}
			b.SetBytes(int64(total / len(recs)))
			appendLoop(b, p, recs)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
