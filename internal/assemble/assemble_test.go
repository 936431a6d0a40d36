package assemble

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/budget"
	"sink/internal/consumer"
)

// Close undoes the parts in the reverse order of their opening, the
// sharer's reads (started last) first, and only once.
func TestCloseReversesTheOpening(t *testing.T) {
	var order []string
	var reads atomic.Int32
	read := func(context.Context) (map[string]budget.Reading, error) { reads.Add(1); return nil, nil }
	p := &Parts{Sharer: budget.NewSharer(budget.Settings{PerMinute: 60}, read, 10*time.Millisecond, zerolog.Nop())}
	p.closers = []func(){func() { order = append(order, "sink") }, func() { order = append(order, "exactly-once") }}
	p.StartSharing()
	deadline := time.Now().Add(5 * time.Second)
	for reads.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if reads.Load() == 0 {
		t.Fatal("the sharer read nothing after StartSharing")
	}
	p.closers = append(p.closers, func() { order = append(order, "after sharing") })
	p.Close()
	p.Close()
	if want := []string{"after sharing", "exactly-once", "sink"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("closed %v; want %v", order, want)
	}
	n := reads.Load()
	time.Sleep(50 * time.Millisecond)
	if reads.Load() != n {
		t.Fatal("the sharer still reads after Close")
	}
}

// Options wire in exactly the parts present, and Summary says so.
func TestOptionsFollowTheParts(t *testing.T) {
	k := config.Kafka{Brokers: []string{"k:9092"}}
	bare := &Parts{Sampler: consumer.Sampler{Kafka: k}}
	if n := len(bare.Options()); n != 2 { // metrics (nil: none), sampler
		t.Fatalf("no optional part: %d options; want 2", n)
	}
	shared := &Parts{Sampler: consumer.Sampler{Kafka: k}, Sharer: budget.NewSharer(budget.Settings{PerMinute: 60}, nil, 0, zerolog.Nop())}
	if n := len(shared.Options()); n != 3 {
		t.Fatalf("with a sharer: %d options; want 3", n)
	}
	want := Summary{Sink: "writer", Sharer: true, Sampled: k.Brokers, Options: 3}
	if got := shared.Summary(); !reflect.DeepEqual(got, want) {
		t.Fatalf("summary %+v; want %+v", got, want)
	}
}
