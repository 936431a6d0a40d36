package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/testenv"
)

// TestClassPool: a slice is handed out from the smallest class that holds
// what is asked for (at most 12.5% more), comes back to the class it fills,
// and what is beyond the classes is made and dropped, never kept.
func TestClassPool(t *testing.T) {
	c := newClassPool[byte](1<<10, 1<<20)
	for _, n := range []int{0, 1, 1000, 1024, 1025, 1300, 5000, 700_000, 1 << 20} {
		s := c.get(n)
		if len(s) != n || cap(s) < n || (n > 1<<10 && cap(s) > n*9/8+1) {
			t.Fatalf("get(%d): len %d cap %d; want len %d, cap in [%d, %d]", n, len(s), cap(s), n, n, n*9/8)
		}
		c.put(s)
	}
	if s := c.get(2 << 20); len(s) != 2<<20 {
		t.Fatalf("get beyond the classes: len %d", len(s))
	}
	// A put slice is handed out again by a get its class satisfies. (A
	// sync.Pool may drop what it holds at any time, so only the capacity
	// is checked, and only when the slice did come back.)
	big := make([]byte, 0, 3000) // fills the 2816 class
	c.put(big)
	if s := c.get(2500); cap(s) < 2500 {
		t.Fatalf("get(2500) after a put of cap 3000: cap %d", cap(s))
	}
}

// TestDecompressedSize: snappy and zstd batches say how large they are
// decompressed; other codecs are guessed.
func TestDecompressedSize(t *testing.T) {
	raw := bytes.Repeat([]byte(`{"id":1,"s":"row 1"}`), 500)
	if got := decompressedSize(s2.EncodeSnappy(nil, raw), kgo.CodecSnappy); got != len(raw) {
		t.Fatalf("snappy: %d, want %d", got, len(raw))
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := decompressedSize(enc.EncodeAll(raw, nil), kgo.CodecZstd); got != len(raw) {
		t.Fatalf("zstd: %d, want %d", got, len(raw))
	}
	if got := decompressedSize(make([]byte, 100), kgo.CodecGzip); got != 400 {
		t.Fatalf("gzip: %d, want the guess 400", got)
	}
}

// TestPoolRecycledRecords consumes snappy batches (franz-go's producer
// default) through the consumer's options with a pool that poisons what
// is put back: every record reads exactly what was produced until it is
// recycled, a dead-letter copy of one is exact although its batch's other
// records were recycled while it was on its way, and once every record is
// recycled every batch's decompression buffer and record slice is back.
func TestPoolRecycledRecords(t *testing.T) {
	_, cfg := fake(t, "src", "dlq")
	pool := &testenv.PoisonPool{Inner: NewPool()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := New(ctx, cfg, zerolog.Nop(), Hooks{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...), kgo.DefaultProduceTopic("src"),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerLinger(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 3000
	want := map[string]bool{}
	for i := range n {
		v := fmt.Sprintf(`{"id":%d,"s":"value %d %s"}`, i, i, bytes.Repeat([]byte{'x'}, i%50))
		want[v] = true
		prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("header " + fmt.Sprint(i))}}}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var dead *kgo.Record
	var deadValue string
	dlqDone := make(chan error, 1)
	for seen := 0; seen < n; {
		f := c.Poll(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("polled %d of %d records: %v", seen, n, err)
		}
		f.EachRecord(func(r *kgo.Record) {
			seen++
			v := string(r.Value)
			if !want[v] || string(r.Headers[0].Value) != "header "+string(r.Key) {
				t.Fatalf("record at offset %d reads %q (header %q), not what was produced", r.Offset, v, r.Headers[0].Value)
			}
			delete(want, v)
			if dead == nil {
				// Sent while the rest of its batch is recycled below.
				dead, deadValue = r, v
				c.ProduceDLQ(ctx, "dlq", r, errors.New("bad"), false, func(err error) { dlqDone <- err })
				return
			}
			r.Recycle()
		})
		c.AllowRebalance()
	}
	if err := <-dlqDone; err != nil {
		t.Fatal(err)
	}
	if pool.BytesGot.Load() == 0 || pool.RecordsGot.Load() == 0 {
		t.Fatalf("no batch came from the pool (bytes %d, records %d)", pool.BytesGot.Load(), pool.RecordsGot.Load())
	}
	if got, put := pool.BytesGot.Load(), pool.BytesPut.Load(); put != got-1 {
		t.Fatalf("%d decompression buffers handed out, %d back; want all but the dead-letter record's", got, put)
	}
	dead.Recycle()
	if got, put := pool.RecordsGot.Load(), pool.RecordsPut.Load(); got != put || pool.BytesGot.Load() != pool.BytesPut.Load() {
		t.Fatalf("records slices %d out, %d back; buffers %d out, %d back: want all back", got, put, pool.BytesGot.Load(), pool.BytesPut.Load())
	}

	// The dead-letter copy is the record as produced.
	rd, err := kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...), kgo.ConsumeTopics("dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for {
		f := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading the dead-letter topic: %v", err)
		}
		if f.NumRecords() == 0 {
			continue
		}
		if got := string(f.Records()[0].Value); got != deadValue {
			t.Fatalf("dead-letter copy reads %q, want %q", got, deadValue)
		}
		break
	}
}
