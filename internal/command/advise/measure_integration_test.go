//go:build integration

package advise

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"sink/config"
	"sink/internal/testenv"
)

// TestMeasureKnownRate feeds a topic at 2,000 records/s of 200 bytes,
// measures it the way `sink advise` does, and checks the measured rate, the
// sampled size, and that the advice is the arithmetic applied to what was
// measured.
func TestMeasureKnownRate(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 4)
	const rate, size = 2000.0, 200
	testenv.ProduceAt(t, topic, rate, size)
	testenv.WaitRecords(t, topic, 100) // steady state, and the 100 records per partition the sample reads
	adm := kadm.NewClient(testenv.KafkaClient(t))

	cur, err := config.Parse([]byte("name: x\nroutes: [{topic: a, table: t}]\n"),
		[]string{"SINK_KAFKA__TOPICS=a", "SINK_KAFKA__BROKERS=" + strings.Join(brokers, ",")})
	if err != nil {
		t.Fatal(err)
	}
	// What the producer really managed around the window, from the end
	// offsets before and after it: on a loaded machine it falls behind the
	// fed rate, and Measure must report what arrived, not what was asked.
	end := func() (int64, time.Time) {
		offs, err := adm.ListEndOffsets(context.Background(), topic)
		if err != nil || offs.Error() != nil {
			t.Fatalf("end offsets: %v %v", err, offs.Error())
		}
		var n int64
		offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n, time.Now()
	}
	n0, t0 := end()
	topics, err := Measure(context.Background(), cur.Kafka, []string{topic}, 5*time.Second, 400)
	if err != nil {
		t.Fatal(err)
	}
	n1, t1 := end()
	arrived := float64(n1-n0) / t1.Sub(t0).Seconds()
	if len(topics) != 1 {
		t.Fatalf("measured %d topics, want 1", len(topics))
	}
	m := topics[0]
	rps := m.RecordsPerSec()
	t.Logf("measured %d records in %s: %.1f records/s (fed at %.0f); sampled %d, avg %.1f bytes",
		m.Records, m.Window, rps, rate, m.Sampled, m.AvgBytes())
	// 10% of what arrived around the window (the window sits inside that
	// span; a busy moment moves records across its edges).
	if math.Abs(rps-arrived)/arrived > 0.10 {
		t.Fatalf("measured %.1f records/s, %.1f/s arrived around the window (fed %.0f): more than 10%% off", rps, arrived, rate)
	}
	if m.Partitions != 4 || m.Sampled != 400 || m.AvgBytes() != size {
		t.Fatalf("partitions %d, sampled %d records of avg %.2f bytes; want 4, 400, %d", m.Partitions, m.Sampled, m.AvgBytes(), size)
	}

	// The advice is the documented arithmetic on the measured rate: one
	// insert a minute → max_wait 60s, fetch_max_wait 6s, fetch_min_bytes
	// 1.2 × bytes/s × 6s rounded up to a quarter MiB, max_rows 2 × rate ×
	// 60s rounded up to two digits.
	m.Table = "db.t"
	a := Recommend([]Topic{m}, cur, Target{InsertsPerMinute: 1})
	quarter := float64(config.MiB / 4)
	wantFetch := config.ByteSize(math.Ceil(1.2*rps*size*6/quarter) * quarter)
	p := math.Pow(10, math.Floor(math.Log10(2*rps*60))-1)
	wantRows := int(math.Ceil(2*rps*60/p-1e-9) * p)
	if a.MaxWait != time.Minute || a.FetchMaxWait != 6*time.Second || a.FetchMinBytes != wantFetch || a.MaxRows != wantRows ||
		math.Abs(a.Tables[0].RowsPerInsert-rps*60) > 1e-6 || a.Tables[0].InsertsPerMinute != 1 {
		t.Fatalf("advice %+v; want max_wait 1m, fetch_max_wait 6s, fetch_min_bytes %s, max_rows %d, %.0f rows/insert\n%s",
			a, wantFetch, wantRows, rps*60, strings.Join(a.Steps, "\n"))
	}
	// At 2,000 × 200 B/s that is about 2.88 MB per fetch, 240,000 rows
	// (when the producer kept up with the fed rate).
	if math.Abs(arrived-rate)/rate > 0.05 {
		t.Logf("the producer reached %.0f of %.0f records/s on this machine; the absolute check is skipped", arrived, rate)
		return
	}
	if a.FetchMinBytes < config.MiB*5/2 || a.FetchMinBytes > 3*config.MiB || a.MaxRows < 220_000 || a.MaxRows > 260_000 {
		t.Fatalf("fetch_min_bytes %s, max_rows %d: far from the fed rate's 2.75MiB and 240,000", a.FetchMinBytes, a.MaxRows)
	}
}
