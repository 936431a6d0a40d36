package pipeline

// Unit tests of the unmapped-field slots (evolve.go, decode's drift): the
// names a record's producer chooses cannot take the slots a legitimate new
// field needs. Names the route's schema.allow / schema.deny refuse are
// tracked apart from those it accepts, names past the length cap (or not
// UTF-8, or with control characters) are never stored, and a field not
// seen for a while frees its slot. The metric's series stay bounded
// throughout.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/chschema"
	"sink/internal/decode"
	"sink/internal/metrics"
	"sink/internal/tables"
)

// junkRows are records id from..from+n-1, each with a field of its own
// named prefix and its id.
func junkRows(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"id":%d,"%s%d":1}`, from+i, prefix, from+i)
	}
	return out
}

// startSlots runs a pipeline over sink (its table starts as id UInt64)
// with the route's extra config and metrics m.
func startSlots(t *testing.T, extra string, sink *evolvingSink, m *metrics.Metrics) *running {
	t.Helper()
	sink.cols = []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}
	p, err := New(context.Background(), unitConfig(t, extra), zerolog.Nop(), sink, WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	t.Cleanup(sink.openGate)
	return launch(t, p, src, src, sink.fakeSink)
}

// unmappedSeries is the field label of every sink_unmapped_fields_total
// series m has.
func unmappedSeries(t *testing.T, m *metrics.Metrics) []string {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != metrics.UnmappedFields {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "field" {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	return out
}

// TestUnitEvolveSlotsJunkRefused: a name that is not UTF-8 (which, as a
// metric label, would panic), 70 fields the route's schema.allow refuses
// and 3 names past the length cap come first; then a field the route
// allows still gets its column at its first record, and every value of it
// lands. The metric names no field past the cap and no more fields than
// the slots.
func TestUnitEvolveSlotsJunkRefused(t *testing.T) { synctest.Test(t, testUnitEvolveSlotsJunkRefused) }

func testUnitEvolveSlotsJunkRefused(t *testing.T) {
	sink := &evolvingSink{fakeSink: newFakeSink(nil)}
	m := metrics.New("unit")
	r := startSlots(t, "    schema: {evolve: add_columns, allow: [city]}\n", sink, m)
	junk := append([]string{`{"id":0,"bad` + "\xff" + `name":1}`}, junkRows("junk_", 1, 70)...)
	long := strings.Repeat("x", decode.MaxFieldName+1)
	for i := range 3 {
		junk = append(junk, fmt.Sprintf(`{"id":%d,"%s%d":1}`, 71+i, long, i))
	}
	r.src.send(unitTP, 0, junk...)
	eventually(t, 5*time.Second, "offset 74 committed", func() bool { return r.src.committed(unitTP) == 74 })
	r.src.send(unitTP, 74, cityRows(74, 6)...)
	eventually(t, 5*time.Second, "offset 80 committed", func() bool { return r.src.committed(unitTP) == 80 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkCities(t, sink, 0, 80, 74)
	if got := sink.added(); len(got) != 1 || !strings.Contains(got[0], "`city` String") {
		t.Fatalf("ALTERs %q, want the one for city", got)
	}
	series := unmappedSeries(t, m)
	if len(series) > 2*decode.MaxUnmappedFields+1 {
		t.Errorf("%d series of %s, want at most %d", len(series), metrics.UnmappedFields, 2*decode.MaxUnmappedFields+1)
	}
	for _, f := range series {
		if len(f) > decode.MaxFieldName {
			t.Errorf("a series names a field of %d bytes, past the cap of %d", len(f), decode.MaxFieldName)
		}
	}
}

// TestUnitEvolveSlotsAgeOut: 70 fields the route accepts fill every
// slot; once none of them has been seen for a while, a column a person
// added for a new field is found (the table is re-read at its first
// record) and filled from that record on. Without evolution no ALTER is
// run.
func TestUnitEvolveSlotsAgeOut(t *testing.T) { synctest.Test(t, testUnitEvolveSlotsAgeOut) }

func testUnitEvolveSlotsAgeOut(t *testing.T) {
	sink := &evolvingSink{fakeSink: newFakeSink(nil)}
	m := metrics.New("unit")
	r := startSlots(t, "", sink, m)
	r.src.send(unitTP, 0, junkRows("junk_", 0, 70)...)
	eventually(t, 5*time.Second, "offset 70 committed", func() bool { return r.src.committed(unitTP) == 70 })
	time.Sleep(tables.DriftIdle + time.Minute)
	sink.addColumn("city", "String") // a person's ALTER
	r.src.send(unitTP, 70, cityRows(70, 6)...)
	eventually(t, 5*time.Second, "offset 76 committed", func() bool { return r.src.committed(unitTP) == 76 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkCities(t, sink, 0, 76, 70)
	if got := sink.added(); len(got) != 0 {
		t.Fatalf("ALTERs %q, want none (no evolution)", got)
	}
	if series := unmappedSeries(t, m); len(series) > decode.MaxUnmappedFields+1 {
		t.Errorf("%d series of %s, want at most %d", len(series), metrics.UnmappedFields, decode.MaxUnmappedFields+1)
	}
}
