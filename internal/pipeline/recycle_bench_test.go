package pipeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/internal/consumer"
)

// BenchmarkDecodeFetchSnappy is BenchmarkDecodeFetch through franz-go's
// own fetch path: each iteration parses one fetch of 10,000 records (rows
// of the fake table padded to 180 bytes, the size of the bench's events,
// in snappy record batches of 2,500 as franz-go's producer writes them by
// default) with kgo.ProcessFetchPartition, which
// checks the CRCs, decompresses the batches and decodes their records as
// the consumer does, and the owner decodes them into blocks and inserts
// them (into the fake sink). pool=off is franz-go without pools (every
// fetch allocates its decompressed batches and records); pool=on is the
// consumer's pool (consumer.Pool), the pipeline recycling each record once
// decoded.
func BenchmarkDecodeFetchSnappy(b *testing.B) {
	const n, perBatch = 10_000, 2_500
	values := make([]string, n)
	for i := range values {
		v := fmt.Sprintf(`{"id":%d,"s":"row %d `, i, i)
		values[i] = v + strings.Repeat("x", 180-len(v)-2) + `"}`
	}
	fetch, starts := snappyFetch(values, perBatch)
	for _, bc := range []struct {
		name  string
		pools []kgo.Pool
	}{{"pool=off", nil}, {"pool=on", []kgo.Pool{consumer.NewPool()}}} {
		b.Run(bc.name, func(b *testing.B) {
			p, _ := benchPipeline(b, "")
			ctx := context.Background()
			decompressor := kgo.DefaultDecompressor(bc.pools...)
			b.ReportAllocs()
			b.ResetTimer()
			var cpu int64
			for i := range b.N {
				// The same batches at the next offsets (the first offset is
				// outside the CRC).
				first := int64(i * n)
				for j, at := range starts {
					binary.BigEndian.PutUint64(fetch.RecordBatches[at:], uint64(first+int64(j*perBatch)))
				}
				fetch.HighWatermark = first + n
				start := cpuTime()
				fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: unitTopic, Offset: first,
					IsolationLevel: kgo.ReadCommitted(), KeepControlRecords: true, Pools: bc.pools}, fetch, decompressor, nil)
				if fp.Err != nil || len(fp.Records) != n {
					b.Fatalf("fetch: %d records, %v", len(fp.Records), fp.Err)
				}
				decodeFetch(ctx, p, kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: unitTopic, Partitions: []kgo.FetchPartition{fp}}}}})
				cpu += cpuTime() - start
			}
			reportPerRecord(b, cpu, n)
		})
	}
}

// snappyFetch is a fetch response's partition holding values as record
// batches of perBatch records, each snappy-compressed, and where each
// batch starts in its RecordBatches.
func snappyFetch(values []string, perBatch int) (*kmsg.FetchResponseTopicPartition, []int) {
	var out []byte
	var starts []int
	ts := time.Now().UnixMilli()
	for first := 0; first < len(values); first += perBatch {
		batch := values[first:min(first+perBatch, len(values))]
		var raw []byte
		for i, v := range batch {
			r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
			r.Length = int32(len(r.AppendTo(nil)) - 1) // what follows the length (a one-byte 0 when measured)
			raw = r.AppendTo(raw)
		}
		rb := kmsg.RecordBatch{FirstOffset: int64(first), Magic: 2, Attributes: int16(kgo.CodecSnappy),
			LastOffsetDelta: int32(len(batch) - 1), FirstTimestamp: ts, MaxTimestamp: ts,
			ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(batch)),
			Records: s2.EncodeSnappy(nil, raw)}
		enc := rb.AppendTo(nil)
		binary.BigEndian.PutUint32(enc[8:], uint32(len(enc)-12))
		binary.BigEndian.PutUint32(enc[17:], crc32.Checksum(enc[21:], crc32.MakeTable(crc32.Castagnoli)))
		starts = append(starts, len(out))
		out = append(out, enc...)
	}
	return &kmsg.FetchResponseTopicPartition{HighWatermark: int64(len(values)), LastStableOffset: -1, RecordBatches: out}, starts
}
