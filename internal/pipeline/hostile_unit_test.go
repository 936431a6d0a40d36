package pipeline

// Unit tests of hostile records through the pipeline (fakes behind its
// ports): a record whose decoding panics, and a row larger than
// batch.max_bytes, are bad records like any other: dead-lettered with
// their cause while the records around them land and the offsets pass
// them, or the connector stops (errors.tolerance: none) without a crash
// and without committing past them.

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/registry"
	"sink/internal/tables"
)

// panickyRegistry serves unitAvroSchema for id 1 and, for id 9, nothing
// (nil with no error): compiling it panics, a stand-in for a decoder bug
// some record exposes.
type panickyRegistry struct{ unitRegistry }

func (r *panickyRegistry) Schema(ctx context.Context, id int) (*registry.Schema, error) {
	if id == 9 {
		return nil, nil
	}
	return r.unitRegistry.Schema(ctx, id)
}

// TestUnitDecoderPanicDeadLettered: a record whose decoding panics goes
// to the dead-letter topic and table with the panic as its cause (class
// decoder); the records before and after it are inserted and the
// committed offset passes it.
func TestUnitDecoderPanicDeadLettered(t *testing.T) {
	synctest.Test(t, testUnitDecoderPanicDeadLettered)
}

func testUnitDecoderPanicDeadLettered(t *testing.T) {
	sink := newDLQSink("db.t_dead")
	cfg := avroUnitConfig(t, "errors: {tolerance: all, dlq_topic: dead, dlq_table: t_dead}\n")
	cfg.Batch.MaxWait = 50 * time.Millisecond
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink, WithRegistry(&panickyRegistry{unitRegistry{known: map[int]bool{1: true}}}))
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	r := launch(t, p, src, src, sink.fakeSink)
	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0), append(registry.AppendFrame(nil, 9, false), 2), avroRow(t, 1, 2), avroRow(t, 1, 3))
	eventually(t, 2*time.Second, "offset 4 committed", func() bool { return r.src.committed(unitTP) == 4 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.sink.inserted("db.t"); got != 3 {
		t.Fatalf("%d rows in db.t, want 3", got)
	}
	if len(r.src.dlqSent) != 1 || r.src.dlqSent[0] != 1 {
		t.Fatalf("dead-letter topic got offsets %v, want [1]", r.src.dlqSent)
	}
	rows := sink.rowsIn()
	if len(rows) != 1 || rows[0].offset != 1 || rows[0].class != tables.ClassDecoder ||
		!strings.Contains(rows[0].errText, "schema id 9: the decoder failed on this record") ||
		!strings.Contains(rows[0].errText, "nil pointer dereference") {
		t.Fatalf("dead-letter rows %+v, want offset 1, class decoder and the panic as the error", rows)
	}
}

// TestUnitDecoderPanicStops: under errors.tolerance: none the same record
// stops the connector with its cause (Run returns it; nothing crashes),
// and the committed offset stays at it.
func TestUnitDecoderPanicStops(t *testing.T) { synctest.Test(t, testUnitDecoderPanicStops) }

func testUnitDecoderPanicStops(t *testing.T) {
	reg := &panickyRegistry{unitRegistry{known: map[int]bool{1: true}}}
	r := start(t, avroUnitConfig(t, ""), newFakeSink(nil), WithRegistry(reg))
	r.src.sendRaw(unitTP, 0, avroRow(t, 1, 0), avroRow(t, 1, 1), append(registry.AppendFrame(nil, 9, false), 2), avroRow(t, 1, 3))
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "offset 2: schema id 9: the decoder failed on this record") || !strings.Contains(err.Error(), "errors.tolerance is none") {
		t.Fatalf("Run: %v, want the panic of offset 2 as the stop's cause", err)
	}
	if got := r.src.committed(unitTP); got != 2 {
		t.Fatalf("committed %d, want 2 (the bad record's offset)", got)
	}
}

// TestUnitRowPastMaxBytes: a record whose row would hold more than
// batch.max_bytes decoded is dead-lettered with that reason before its row
// counts; the rows around it are inserted.
func TestUnitRowPastMaxBytes(t *testing.T) { synctest.Test(t, testUnitRowPastMaxBytes) }

func testUnitRowPastMaxBytes(t *testing.T) {
	cfg := unitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n")
	cfg.Batch.MaxBytes = 4 << 10
	r := start(t, cfg, newFakeSink(nil))
	big := `{"id":1,"s":"` + strings.Repeat("x", 5<<10) + `"}`
	r.src.send(unitTP, 0, `{"id":0,"s":"a"}`, big, `{"id":2,"s":"c"}`, `{"id":3,"s":"d"}`)
	// Batches of two rows: 0 and 2 are inserted, 3 waits in the open
	// batch until the shutdown.
	eventually(t, 2*time.Second, "offset 3 committed", func() bool { return r.src.committed(unitTP) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, c := r.sink.inserted("db.t"), r.src.committed(unitTP); got != 3 || c != 4 {
		t.Fatalf("%d rows in db.t, committed %d; want 3 and 4", got, c)
	}
	if len(r.src.dlqSent) != 1 || r.src.dlqSent[0] != 1 {
		t.Fatalf("dead-letter topic got offsets %v, want [1]", r.src.dlqSent)
	}
}
