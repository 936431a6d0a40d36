//go:build integration

package main

import (
	"fmt"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// A column type the sink cannot fill fails sink check and sink run at start
// with one line naming the column and its type: here a geo type, and an
// Enum whose element names clickhouse-go v2.51 cannot parse, on 26.9.
func TestUnsupportedTypesFailAtStartOn26(t *testing.T) {
	brokers := testenv.Kafka(t)
	s := testenv.Server26(t)
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 1)
	for _, c := range []struct{ col, typ, want string }{
		{"p", "Point", `column "p" has type Point which the json format cannot fill`},
		{"e", `Enum8('it\'s' = 1, 'b' = 2)`, `column "e" has type Enum8('it\'s' = 1, 'b' = 2): clickhouse-go cannot parse this type`},
	} {
		table := "t_" + c.col
		ddl := fmt.Sprintf("CREATE TABLE %s.%s (id UInt64, %s %s) ENGINE = MergeTree ORDER BY id", db, table, c.col, c.typ)
		testenv.Exec(t, ch, ddl)
		path := writeConfig(t, fmt.Sprintf(`
name: types
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: %s}]
http: {listen: ""}
`, brokers[0], topic, s.Addr, db, topic, table))
		for _, cmd := range []string{"check", "run"} {
			code, _, errOut := sinkCmd(t, cmd, "--config", path)
			if code != 1 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("sink %s, %s: exit %d, stderr %q; want one line containing %q", cmd, c.typ, code, errOut, c.want)
			}
		}
	}
}
