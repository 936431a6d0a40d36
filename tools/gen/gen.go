// Package gen makes the reproducible JSON click-stream events that the demo,
// the tests and the benchmarks feed through Kafka (user_id, ts, event_type,
// channel, cost, payload, about Size bytes each), and produces them to a
// topic, optionally paced and with skewed keys.
//
// The same Config gives the same events byte for byte, so runs compare.
// It is test tooling, not part of the daemon; it sits outside tools/internal
// so that the product packages' benchmarks (internal/writer) can use it too.
//
// Concurrency: a Generator is owned by one goroutine. Produce may be called
// from several goroutines, each with its own Config.
package gen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config describes a stream of events.
type Config struct {
	// Size is the approximate event size in bytes; the payload is padded to
	// reach it.
	Size int
	// Seed makes the stream reproducible.
	Seed uint64
	// StartID is the id of the first event; ids are consecutive.
	StartID int
	// Skew is the Zipf exponent of user_id (must be > 1), or 0 for uniform
	// user ids. With skew, events are keyed by user_id, so Kafka's key hash
	// makes the partitions uneven the way hot users do.
	Skew float64
}

// Users is how many distinct user ids the events draw from.
const Users = 1_000_000

var (
	eventTypes = []string{"view", "click", "add_to_cart", "purchase", "search", "login", "logout"}
	channels   = []string{"web", "ios", "android", "email", "partner"}
)

// Generator yields the events of one Config in order.
type Generator struct {
	rng  *rand.Rand
	zipf *rand.Zipf
	size int
	next int
}

// New checks cfg and returns a generator positioned at cfg.StartID.
func New(cfg Config) (*Generator, error) {
	if cfg.Size < 0 {
		return nil, fmt.Errorf("gen: size %d is negative", cfg.Size)
	}
	if cfg.Skew != 0 && cfg.Skew <= 1 {
		return nil, fmt.Errorf("gen: skew %g must be 0 (uniform) or a Zipf exponent > 1", cfg.Skew)
	}
	// The stream (7) is fixed so that seed N gives the same events as ever.
	g := &Generator{rng: rand.New(rand.NewPCG(cfg.Seed, 7)), size: cfg.Size, next: cfg.StartID}
	if cfg.Skew > 0 {
		g.zipf = rand.NewZipf(g.rng, cfg.Skew, 1, Users-1)
	}
	return g, nil
}

// Keyed reports whether events carry a key (the user id).
func (g *Generator) Keyed() bool { return g.zipf != nil }

// Append appends the next event to buf and returns it with its user id.
func (g *Generator) Append(buf []byte) (event []byte, userID uint64) {
	if g.zipf != nil {
		userID = g.zipf.Uint64()
	} else {
		userID = uint64(g.rng.IntN(Users))
	}
	id := g.next
	g.next++
	return event1(buf, g.rng, id, userID, g.size), userID
}

// Event appends one JSON event with the given id and a uniform user id to
// buf, padded to about size bytes.
func Event(buf []byte, rng *rand.Rand, id, size int) []byte {
	return event1(buf, rng, id, uint64(rng.IntN(Users)), size)
}

func event1(buf []byte, rng *rand.Rand, id int, userID uint64, size int) []byte {
	start := len(buf)
	buf = append(buf, `{"id":`...)
	buf = strconv.AppendInt(buf, int64(id), 10)
	buf = append(buf, `,"user_id":`...)
	buf = strconv.AppendUint(buf, userID, 10)
	buf = append(buf, `,"ts":"`...)
	buf = time.Unix(1_714_557_600+int64(id/100), 0).UTC().AppendFormat(buf, "2006-01-02 15:04:05")
	buf = append(buf, `","event_type":"`...)
	buf = append(buf, eventTypes[rng.IntN(len(eventTypes))]...)
	buf = append(buf, `","channel":"`...)
	buf = append(buf, channels[rng.IntN(len(channels))]...)
	buf = append(buf, `","cost":`...)
	buf = strconv.AppendFloat(buf, float64(rng.IntN(100_000))/100, 'f', 2, 64)
	buf = append(buf, `,"payload":"`...)
	for pad := size - (len(buf) - start) - 2; pad > 0; pad-- {
		buf = append(buf, byte('a'+rng.IntN(26)))
	}
	return append(buf, `"}`...)
}

// Produce describes one production run.
type Produce struct {
	Brokers    []string
	Topic      string
	Count      int
	Partitions int // when the topic is created
	// Recreate deletes and creates the topic first, for fresh offsets.
	Recreate bool
	// Rate is events per second; 0 is as fast as possible.
	Rate float64
	// Profile, when set, paces the events instead of Rate (and Count is
	// at most the profile's Events).
	Profile Profile
	Events  Config
	// Progress, if set, is called every 100,000 events.
	Progress func(done int)
	// Encode, if set, turns each JSON event into the record value it
	// appends to dst (another format, framed for a schema registry);
	// nil sends the JSON as it is.
	Encode func(dst, event []byte) ([]byte, error)
	// Topics, when set, spreads the events over these topics instead of
	// Topic, from the one client (Rate is then the total of all topics):
	// round-robin, so every topic gets Rate/len(Topics), or with TopicSkew
	// a Zipf draw, topic i getting a share proportional to (i+1)^-TopicSkew
	// (TopicShares). The topics must exist (EnsureTopics).
	Topics    []string
	TopicSkew float64 // Zipf exponent (> 1) across Topics; 0 = even
}

// TopicShares is the expected share of the events each of n topics gets
// with Zipf exponent skew across them (0: even), in topic order; the
// shares add up to 1.
func TopicShares(n int, skew float64) []float64 {
	w := make([]float64, n)
	var sum float64
	for i := range w {
		w[i] = 1
		if skew > 0 {
			w[i] = math.Pow(float64(i+1), -skew)
		}
		sum += w[i]
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

// topicPicker chooses each event's topic among Topics.
type topicPicker struct {
	n    int
	next int
	zipf *rand.Zipf
}

func newTopicPicker(p Produce) (*topicPicker, error) {
	tp := &topicPicker{n: len(p.Topics)}
	if p.TopicSkew != 0 {
		if p.TopicSkew <= 1 {
			return nil, fmt.Errorf("gen: topic skew %g must be 0 (even) or a Zipf exponent > 1", p.TopicSkew)
		}
		// A stream of its own (8), so the events stay those of Config.
		tp.zipf = rand.NewZipf(rand.New(rand.NewPCG(p.Events.Seed, 8)), p.TopicSkew, 1, uint64(tp.n-1))
	}
	return tp, nil
}

// pick is the index of the next event's topic.
func (tp *topicPicker) pick() int {
	if tp.zipf != nil {
		return int(tp.zipf.Uint64())
	}
	i := tp.next
	tp.next = (tp.next + 1) % tp.n
	return i
}

// Result is what a production run did.
type Result struct {
	Events int
	Bytes  int64
	Took   time.Duration
}

// Run creates the topic if needed and produces p.Count events, returning
// once the broker acknowledged all of them (or the first error).
func (p Produce) Run(ctx context.Context) (Result, error) {
	g, err := New(p.Events)
	if err != nil {
		return Result{}, err
	}
	part := kgo.RecordPartitioner(kgo.RoundRobinPartitioner())
	if g.Keyed() {
		part = kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)) // Kafka's murmur2 key hash
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(p.Brokers...),
		kgo.DefaultProduceTopic(p.Topic),
		part,
		kgo.ProducerLinger(10*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20),
	)
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	var topics *topicPicker
	if len(p.Topics) > 0 {
		if topics, err = newTopicPicker(p); err != nil {
			return Result{}, err
		}
	} else if err := EnsureTopic(ctx, kadm.NewClient(cl), p.Topic, p.Partitions, p.Recreate); err != nil {
		return Result{}, err
	}
	var failed atomic.Pointer[error]
	var res Result
	start := time.Now()
	buf := make([]byte, 0, 512)
	for i := 0; i < p.Count; i++ {
		due, paced := time.Duration(0), p.Rate > 0
		if p.Profile != nil {
			var ok bool
			if due, ok = p.Profile.At(i); !ok {
				break
			}
			paced = true
		} else if paced {
			due = time.Duration(float64(i) / p.Rate * float64(time.Second))
		}
		// Paced, it sleeps only once it is a millisecond ahead: a timer
		// per record would cost more than the record at hundreds of
		// thousands a second, and a record a millisecond early changes
		// no rate anybody measures.
		if paced {
			if d := time.Until(start.Add(due)); d > time.Millisecond {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return res, ctx.Err()
				}
			}
		}
		var user uint64
		buf, user = g.Append(buf[:0])
		r := &kgo.Record{}
		if topics != nil {
			r.Topic = p.Topics[topics.pick()]
		}
		if p.Encode == nil {
			r.Value = append([]byte(nil), buf...)
		} else if r.Value, err = p.Encode(nil, buf); err != nil {
			return res, err
		}
		if g.Keyed() {
			r.Key = strconv.AppendUint(nil, user, 10)
		}
		res.Bytes += int64(len(r.Key) + len(r.Value))
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		if e := failed.Load(); e != nil {
			return res, fmt.Errorf("produce to %s: %w", p.Topic, *e)
		}
		res.Events = i + 1
		if p.Progress != nil && (i+1)%100_000 == 0 {
			p.Progress(i + 1)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return res, fmt.Errorf("produce to %s: %w", p.Topic, err)
	}
	if e := failed.Load(); e != nil {
		return res, fmt.Errorf("produce to %s: %w", p.Topic, *e)
	}
	res.Took = time.Since(start)
	return res, nil
}

// EnsureTopic creates topic with the given partitions (replication 1) unless
// it exists; with recreate it deletes it first, so offsets start at 0. It
// returns once the broker's metadata lists the topic with a leader for every
// partition: a created topic is not at once visible to the next client.
func EnsureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int, recreate bool) error {
	if recreate {
		if _, err := adm.DeleteTopic(ctx, topic); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("delete topic %s: %w", topic, err)
		}
		// Deletion is asynchronous on the broker; creating too early fails.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
			if err == nil {
				return waitTopic(ctx, adm, topic, partitions)
			}
			if !errors.Is(err, kerr.TopicAlreadyExists) || time.Now().After(deadline) {
				return fmt.Errorf("create topic %s: %w", topic, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	_, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	switch {
	case err == nil:
		return waitTopic(ctx, adm, topic, partitions)
	case errors.Is(err, kerr.TopicAlreadyExists):
		return waitTopic(ctx, adm, topic, 0) // an existing topic keeps its partition count
	}
	return fmt.Errorf("create topic %s: %w", topic, err)
}

// EnsureTopics creates every one of topics that does not exist, with the
// given partitions (replication 1), in one request, and returns once the
// metadata lists each with a leader for every partition. Existing topics
// keep their partitions. A broker creating many partitions at once (or
// busy with other benches' topics) takes longer than one topic's wait: the
// topics share one deadline of 30 s plus 100 ms per topic.
func EnsureTopics(ctx context.Context, adm *kadm.Client, topics []string, partitions int) error {
	resp, err := adm.CreateTopics(ctx, int32(partitions), 1, nil, topics...)
	if err != nil {
		return fmt.Errorf("create %d topics: %w", len(topics), err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
		}
	}
	deadline := time.Now().Add(30*time.Second + time.Duration(len(topics))*100*time.Millisecond)
	for _, t := range topics {
		if err := waitTopicUntil(ctx, adm, t, 0, deadline); err != nil {
			return err
		}
	}
	return nil
}

// waitTopic waits (up to 30 s) until the metadata lists topic with a leader
// for each of its partitions, and with partitions of them unless that is 0
// (a recreated topic can still be listed with the old one's for a moment).
func waitTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	return waitTopicUntil(ctx, adm, topic, partitions, time.Now().Add(30*time.Second))
}

// waitTopicUntil is waitTopic with its own deadline.
func waitTopicUntil(ctx context.Context, adm *kadm.Client, topic string, partitions int, deadline time.Time) error {
	for {
		tds, err := adm.ListTopics(ctx, topic)
		if err == nil {
			if td, ok := tds[topic]; ok && td.Err == nil && len(td.Partitions) > 0 && (partitions == 0 || len(td.Partitions) == partitions) {
				ready := true
				for _, p := range td.Partitions {
					ready = ready && p.Err == nil && p.Leader >= 0
				}
				if ready {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("not listed with a leader for every partition")
			}
			return fmt.Errorf("topic %s after creating it: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
