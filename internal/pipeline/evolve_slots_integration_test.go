//go:build integration

package pipeline_test

import (
	"fmt"
	"strings"
	"testing"

	"sink/internal/decode"
	"sink/internal/metrics"
	"sink/internal/testenv"
)

// TestEvolveJunkNamesKeepSlots: records whose producer sends junk field
// names (one not UTF-8, 70 that schema.allow refuses, 3 past the length
// cap) come before the first record of a field the route allows: that
// field still gets its column, every one of its values lands, the
// connector stays up, and the metric has no series per junk name beyond
// the slots and none past the cap.
func TestEvolveJunkNamesKeepSlots(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id UInt64")
		cfg := evolveConfig(t, s, topic, db, `{evolve: add_columns, allow: [city]}`)
		done, stop, scrapeNow := startWithMetrics(t, cfg)

		values := []string{`{"id":0,"bad` + "\xff" + `name":1}`}
		for i := 1; i <= 70; i++ {
			values = append(values, fmt.Sprintf(`{"id":%d,"junk_%d":1}`, i, i))
		}
		long := strings.Repeat("x", decode.MaxFieldName+1)
		for i := 71; i <= 73; i++ {
			values = append(values, fmt.Sprintf(`{"id":%d,"%s%d":1}`, i, long, i))
		}
		sendValues(t, done, cfg, topic, 74, values...)
		var cities []string
		for i := 74; i < 124; i++ {
			cities = append(cities, fmt.Sprintf(`{"id":%d,"city":"c%d"}`, i, i))
		}
		sendValues(t, done, cfg, topic, 124, cities...)
		expectEvolved(t, ch, db, done, []string{"id UInt64", "city String"})
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE city = concat('c', toString(id))", 50,
			"%d rows carry their city; want the 50 records that had one")
		if n := countRows(t, ch, db+".t"); n != 124 {
			t.Errorf("%d rows; want 124", n)
		}
		stopClean(t, done, stop) // the last batch is sealed and counted

		table := fmt.Sprintf(`table="%s.t"`, db)
		smp := scrapeNow()
		if _, series := sum(smp, metrics.UnmappedFields, table); series > 2*decode.MaxUnmappedFields+1 {
			t.Errorf("%d series of %s; want at most %d", series, metrics.UnmappedFields, 2*decode.MaxUnmappedFields+1)
		}
		for k := range smp {
			if strings.HasPrefix(k, metrics.UnmappedFields) && strings.Contains(k, long) {
				t.Errorf("a series names a field past the cap: %.80s…", k)
			}
		}
	})
}
