// Package cdcevent builds Debezium change events for tests: the events of
// one PostgreSQL table (pg.public.t, key column id) as Kafka Connect's
// JSON converter writes them with schemas, so decoder and pipeline tests
// can make inserts and deletes with any columns, including the
// placeholders a delete carries under REPLICA IDENTITY DEFAULT.
//
// It is test support (under internal/testenv, imported only by _test.go
// files). It holds no state; its functions are safe to call from any
// goroutine.
package cdcevent

import (
	"fmt"
	"strings"
)

// Column is a NOT NULL column as Debezium describes it: its Kafka Connect
// type ("string", "int32", "bytes", "array" …), its semantic name
// ("io.debezium.time.Date" …, or "") and its schema's parameters object as
// JSON (or "").
type Column struct {
	Name, Type, Semantic, Params string
}

// Event is the value and the key of a change event of row id: op "c" (an
// insert, values in the after image) or "d" (a delete, values in the before
// image). values holds one JSON value per column of cols; lsn is the
// event's source.lsn. The key is {"id": id}, wrapped with its schema.
func Event(op string, id int, lsn int64, cols []Column, values []string) (value, key []byte) {
	fields := []string{`{"type":"int32","optional":false,"field":"id"}`}
	vals := []string{fmt.Sprintf(`"id":%d`, id)}
	for i, c := range cols {
		f := fmt.Sprintf(`{"type":%q,"optional":false,"field":%q`, c.Type, c.Name)
		if c.Semantic != "" {
			f += fmt.Sprintf(`,"name":%q,"version":1`, c.Semantic)
		}
		if c.Params != "" {
			f += `,"parameters":` + c.Params
		}
		if c.Type == "array" {
			f += `,"items":{"type":"string","optional":true}`
		}
		fields = append(fields, f+"}")
		vals = append(vals, fmt.Sprintf("%q:%s", c.Name, values[i]))
	}
	img := `{"type":"struct","fields":[` + strings.Join(fields, ",") + `],"optional":true,"name":"pg.public.t.Value","field":"%s"}`
	schema := `{"type":"struct","fields":[` + fmt.Sprintf(img, "before") + "," + fmt.Sprintf(img, "after") +
		`,{"type":"struct","fields":[{"type":"string","optional":false,"field":"connector"},{"type":"int64","optional":true,"field":"lsn"}],"optional":false,"field":"source"},` +
		`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}],"optional":false,"name":"pg.public.t.Envelope"}`
	before, after := "null", "{"+strings.Join(vals, ",")+"}"
	if op == "d" {
		before, after = after, before
	}
	payload := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"connector":"postgresql","lsn":%d},"op":%q,"ts_ms":1717000000000}`, before, after, lsn, op)
	value = []byte(`{"schema":` + schema + `,"payload":` + payload + `}`)
	key = fmt.Appendf(nil, `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"pg.public.t.Key"},"payload":{"id":%d}}`, id)
	return value, key
}
