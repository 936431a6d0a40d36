// Package consumer is the Kafka side of the sink: one franz-go client that
// joins the connector's consumer group, with cooperative-sticky balancing
// under the classic protocol or the broker's uniform assignor under the
// consumer protocol (KIP-848, kafka.group_protocol: protocol.go), fetches in large responses (kafka.fetch_min_bytes, fetch_max_wait) with
// read_committed, keeping the transaction markers (control records) in the
// fetches so that the pipeline commits past them, never commits on its own,
// and produces dead-letter records. A Consumer is the
// pipeline's Source (internal/pipeline's ports). Beside it, a Sampler
// (sample.go) reads topics' newest records with a client of its own that
// joins no group: the pipeline's Sampler for schema.create, and what `sink
// check` and `sink advise` sample.
//
// Rebalances are blocked while polled records are being processed
// (BlockRebalanceOnPoll): the pipeline calls AllowRebalance after each poll,
// so a revoke callback never races with records it has not yet tracked.
//
// Concurrency: Poll is called by one goroutine; Commit, ProduceDLQ,
// PauseFetch, ResumeFetch and Positions are safe from any goroutine. The partition callbacks in Hooks run
// on franz-go's group goroutine and may block until the pipeline has
// flushed and committed.
package consumer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"sink/config"
	"sink/internal/kafkaauth"
	"sink/internal/offsets"
)

// Hooks receive group membership changes. Each map is topic → partitions.
type Hooks struct {
	Assigned func(ctx context.Context, parts map[string][]int32)
	Revoked  func(ctx context.Context, parts map[string][]int32)
	Lost     func(ctx context.Context, parts map[string][]int32)
	// Pool is the memory franz-go reuses for fetched records; nil: a
	// NewPool of the client's own. Tests give one that checks what is put
	// back.
	Pool kgo.Pool
}

// Rebalancer takes a member's group membership changes
// (pipeline.Pipeline): HooksOf makes the Hooks that call it.
type Rebalancer interface {
	Assigned(ctx context.Context, parts map[string][]int32)
	Revoked(ctx context.Context, parts map[string][]int32)
	Lost(ctx context.Context, parts map[string][]int32)
}

// HooksOf returns the Hooks that hand every membership change to r.
func HooksOf(r Rebalancer) Hooks {
	return Hooks{Assigned: r.Assigned, Revoked: r.Revoked, Lost: r.Lost}
}

// Consumer wraps the franz-go client.
type Consumer struct {
	cl  *kgo.Client
	cfg *config.Config
	log zerolog.Logger
	dlq *DLQInfo // nil without a dead-letter topic
	// asked is the group protocol this member asked for (classic when
	// New found the brokers without KIP-848); protocol is the one the
	// broker reported (watchProtocol); stopWatch ends watchProtocol at
	// Close.
	asked     string
	protocol  atomic.Pointer[string]
	stopWatch context.CancelFunc
}

// Options translates the config into franz-go options; exported so tests
// and `sink check` use exactly what `run` uses. It fails only when a TLS or
// password file cannot be read (config.Validate read them once already).
func Options(cfg *config.Config, log zerolog.Logger, h Hooks) ([]kgo.Opt, error) {
	k := cfg.Kafka
	opts, err := ClientOptions(k)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.ConsumerGroup(k.Group),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(k.FetchMaxWait),
	)
	opts = append(opts, groupProtocolOpts(k)...)
	if heartbeatInterval > 0 {
		opts = append(opts, kgo.HeartbeatInterval(heartbeatInterval))
	}
	fl := FetchLimitsFor(cfg)
	log.Debug().Int64("fetch_max_bytes", fl.MaxBytes).Int64("max_partition_fetch_bytes", fl.PartitionBytes).
		Int("max_concurrent_fetches", fl.Concurrent).Str("buffer_memory", cfg.Batch.BufferMemory.String()).
		Msg("kafka fetch sizes derived from batch.buffer_memory")
	opts = append(opts,
		kgo.FetchMinBytes(int32(min(int64(k.FetchMinBytes), fl.MaxBytes))),
		kgo.FetchMaxBytes(int32(fl.MaxBytes)),
		kgo.FetchMaxPartitionBytes(int32(fl.PartitionBytes)),
		kgo.MaxConcurrentFetches(fl.Concurrent),
		kgo.SessionTimeout(k.SessionTimeout),
		kgo.RebalanceTimeout(k.RebalanceTimeout),
		// A fetch may legitimately wait fetch_max_wait on the broker; the
		// request timeout is on top of that.
		kgo.RequestTimeoutOverhead(k.RequestTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers come to the pipeline as records, so that it
		// can commit past them (and past the aborted records before an
		// abort marker, which read_committed never returns): without them
		// the committed offset stops at the last data record and the
		// group's lag never reaches 0 on a transactional topic.
		kgo.KeepControlRecords(),
		kgo.WithLogger(newKzerolog(log)),
		// DLQ records must keep their order per source partition only
		// loosely; what matters is that each is acknowledged.
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordRetries(10),
	)
	// Fetched batches are decompressed into, and their records decoded
	// into, pooled memory that the pipeline hands back record by record
	// (kgo.Record.Recycle) once it no longer needs it (pool.go).
	pool := h.Pool
	if pool == nil {
		pool = NewPool()
	}
	opts = append(opts, kgo.WithPools(pool))
	if k.StartOffset == "latest" {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	} else {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	if k.TopicRegex != "" {
		opts = append(opts, kgo.ConsumeRegex(), kgo.ConsumeTopics(k.ConsumePatterns()...))
	} else {
		opts = append(opts, kgo.ConsumeTopics(k.Topics...))
	}
	if h.Assigned != nil {
		opts = append(opts, kgo.OnPartitionsAssigned(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) { h.Assigned(ctx, m) }))
	}
	if h.Revoked != nil {
		opts = append(opts, kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) { h.Revoked(ctx, m) }))
	}
	if h.Lost != nil {
		opts = append(opts, kgo.OnPartitionsLost(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) { h.Lost(ctx, m) }))
	}
	return opts, nil
}

// heartbeatInterval, when set, replaces franz-go's heartbeat interval (3 s,
// the Java client's default), which is also how soon a member hears that a
// rebalance began. The package's tests against kfake shorten it, so that a
// rebalance between two members takes milliseconds instead of seconds.
var heartbeatInterval time.Duration

// Security returns the TLS and SASL options of k (none for a PLAINTEXT
// listener). Every client the sink makes for these brokers uses them.
func Security(k config.Kafka) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	tlsCfg, err := k.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kafka.tls.%w", err)
	}
	if tlsCfg != nil {
		// franz-go clones it per broker and fills in ServerName from the
		// broker's host when server_name is "".
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if k.SASL.Mechanism == "" {
		return opts, nil
	}
	if kafkaauth.Managed(k.SASL.Mechanism) {
		m, err := kafkaauth.Mechanism(k)
		if err != nil {
			return nil, err
		}
		return append(opts, kgo.SASL(m)), nil
	}
	pw, err := k.SASL.PasswordValue()
	if err != nil {
		return nil, fmt.Errorf("kafka.sasl.%w", err)
	}
	var m sasl.Mechanism
	switch k.SASL.Mechanism {
	case config.SASLPlain:
		m = plain.Auth{User: k.SASL.Username, Pass: pw}.AsMechanism()
	case config.SASLScramSHA256:
		m = scram.Auth{User: k.SASL.Username, Pass: pw}.AsSha256Mechanism()
	case config.SASLScramSHA512:
		m = scram.Auth{User: k.SASL.Username, Pass: pw}.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("kafka.sasl.mechanism: %q is not supported", k.SASL.Mechanism)
	}
	return append(opts, kgo.SASL(m)), nil
}

// New checks that the brokers answer, the configured topics exist and the
// dead-letter topic is usable (ProbeDLQ), so that a wrong address or topic
// fails at start with one line instead of a silent wait or a stop at the
// first bad record, then creates the group client.
func New(ctx context.Context, cfg *config.Config, log zerolog.Logger, h Hooks) (*Consumer, error) {
	_, dlq, err := ProbeDLQ(ctx, cfg)
	if err != nil {
		return nil, err
	}
	run := cfg
	if cfg.Kafka.GroupProtocol == config.GroupConsumer {
		var has bool
		err := withProbeClient(cfg, func(cl *kgo.Client) (err error) {
			has, err = brokerHasKIP848(ctx, cl, cfg.Kafka.RequestTimeout)
			return err
		})
		if err != nil {
			return nil, ConnError(cfg.Kafka, err)
		}
		if !has {
			log.Warn().Str("group", cfg.Kafka.Group).Msg("kafka.group_protocol is consumer but the brokers lack KIP-848 (ConsumerGroupHeartbeat v1, Kafka 4.0+): joining with the classic protocol (cooperative-sticky)")
			c := *cfg
			c.Kafka.GroupProtocol = config.GroupClassic
			run = &c
		}
	}
	opts, err := Options(run, log, h)
	if err != nil {
		return nil, err
	}
	if dlq != nil {
		if dlq.Created {
			log.Info().Str("dlq_topic", dlq.Topic).Int("partitions", dlq.Partitions).Msg("dead-letter topic created (errors.dlq_create)")
		}
		// Let the client send what the topic accepts; DLQRecord cuts
		// copies to that size.
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(dlq.MaxMessageBytes)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	c := &Consumer{cl: cl, cfg: cfg, log: log, dlq: dlq, asked: run.Kafka.GroupProtocol}
	var watch context.Context
	watch, c.stopWatch = context.WithCancel(context.Background())
	go c.watchProtocol(watch)
	return c, nil
}

// Probe reaches the brokers with a short-lived client that joins no group
// and logs nothing (its dial retries would only repeat the error it
// returns), and returns the partition count of every consumed topic (all
// matching topics for topic_regex).
func Probe(ctx context.Context, cfg *config.Config) (map[string]int, error) {
	var out map[string]int
	err := withProbeClient(cfg, func(cl *kgo.Client) (err error) {
		out, err = Describe(ctx, cl, cfg)
		return err
	})
	return out, err
}

// ProbeDLQ is Probe plus CheckDLQ when errors.dlq_topic is set (the
// DLQInfo is nil otherwise).
func ProbeDLQ(ctx context.Context, cfg *config.Config) (map[string]int, *DLQInfo, error) {
	var (
		topics map[string]int
		dlq    *DLQInfo
	)
	err := withProbeClient(cfg, func(cl *kgo.Client) (err error) {
		if topics, err = Describe(ctx, cl, cfg); err != nil || cfg.Errors.DLQTopic == "" {
			return err
		}
		dlq, err = CheckDLQ(ctx, cl, cfg, topics)
		return err
	})
	return topics, dlq, err
}

// ClientOptions are the options every client of k's brokers starts from:
// the seed brokers, the client id, and Security's TLS and SASL. Clients
// that join no group (the probes, `sink advise`) use them as they are.
func ClientOptions(k config.Kafka) ([]kgo.Opt, error) {
	sec, err := Security(k)
	if err != nil {
		return nil, err
	}
	return append([]kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.ClientID(k.ClientID)}, sec...), nil
}

func withProbeClient(cfg *config.Config, fn func(*kgo.Client) error) error {
	opts, err := ClientOptions(cfg.Kafka)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	return fn(cl)
}

// Describe asks cl's brokers for the consumed topics and returns their
// partition counts; a topic no broker knows is an error naming it, at
// once. A topic whose metadata the broker cannot give yet (a leader being
// elected, a passing condition by kafkaerr.Classify, or a new topic that
// another broker already lists) is asked for again (startRetry) within
// kafka.request_timeout.
func Describe(ctx context.Context, cl *kgo.Client, cfg *config.Config) (map[string]int, error) {
	k := cfg.Kafka
	ctx, cancel := context.WithTimeout(ctx, k.RequestTimeout)
	defer cancel()
	var out map[string]int
	// An unknown topic passes: describeOnce has found another broker that
	// knows it (knownElsewhere), so the one that answered will soon.
	_, err := retryStart(ctx, true, func() (err error) {
		out, err = describeOnce(ctx, cl, cfg)
		var te *topicError
		if err != nil && !errors.As(err, &te) {
			// Not about a topic: describeOnce retried it already, and
			// a refused login or handshake is not retried at all.
			return stopRetry{err}
		}
		return err
	})
	var stop stopRetry
	if errors.As(err, &stop) {
		return nil, stop.err
	}
	return out, err
}

// topicError is one topic's error in a metadata answer.
type topicError struct {
	topic string
	err   error
}

func (e *topicError) Error() string { return fmt.Sprintf("kafka: topic %q: %v", e.topic, e.err) }
func (e *topicError) Unwrap() error { return e.err }

// stopRetry carries an error that retryStart must not retry: it hides the
// error from kafkaerr.Classify, which sees no passing condition in it.
type stopRetry struct{ err error }

func (e stopRetry) Error() string { return e.err.Error() }

// describeOnce is one metadata request of Describe, retried only when the
// connection closed under it (another seed broker then answers).
func describeOnce(ctx context.Context, cl *kgo.Client, cfg *config.Config) (map[string]int, error) {
	resp, err := requestMetadata(ctx, cl, cfg.Kafka)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if cfg.Kafka.TopicRegex != "" {
			if t.ErrorCode == 0 && cfg.Consumes(name) && !t.IsInternal {
				out[name] = len(t.Partitions)
			}
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) && !knownElsewhere(ctx, cl, name) {
				return nil, fmt.Errorf("kafka: topic %q does not exist", name)
			}
			return nil, &topicError{topic: name, err: err}
		}
		out[name] = len(t.Partitions)
	}
	return out, nil
}

// requestMetadata sends Describe's metadata request (every topic for a
// topic regex, else the configured ones) and returns the answer, or an
// error that names the brokers.
func requestMetadata(ctx context.Context, cl *kgo.Client, k config.Kafka) (*kmsg.MetadataResponse, error) {
	req := kmsgMetadata(k)
	resp, err := req.RequestWith(ctx, cl)
	// A broker of a cluster may die while it answers (a restart, a kill):
	// the connection closes mid-request. Ask again, up to twice per seed
	// broker, so another one answers; a refused login or handshake is not
	// asked again, and a listener that wants SASL keeps closing and ends
	// with the same error after those tries.
	for try := 1; err != nil && try < 2*len(k.Brokers) && probeRetriable(err) && ctx.Err() == nil; try++ {
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
		resp, err = req.RequestWith(ctx, cl)
	}
	if kafkaauth.Classify(err) == kafkaauth.Rejected {
		resp, err = askAgainRejected(ctx, req, cl)
	}
	if err == nil {
		return resp, nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
		return nil, fmt.Errorf("kafka: brokers %s not reachable within %s", strings.Join(k.Brokers, ","), k.RequestTimeout)
	}
	return nil, ConnError(k, err)
}

// askAgainRejected sends req once more a second after the brokers rejected
// the token: Kafka's OAuth validator refuses the first token signed by a
// key it has not fetched yet, and fetches its JWKS then, so a provider
// that rotated its key a moment ago is not taken for a wrong audience.
func askAgainRejected(ctx context.Context, req *kmsg.MetadataRequest, cl *kgo.Client) (*kmsg.MetadataResponse, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Second):
	}
	return req.RequestWith(ctx, cl)
}

// Poll returns every buffered record, blocking until there are some or
// ctx ends. Rebalances stay blocked until AllowRebalance.
func (c *Consumer) Poll(ctx context.Context) kgo.Fetches {
	return c.cl.PollFetches(ctx)
}

// AllowRebalance lets a rebalance that waited for the last poll proceed.
func (c *Consumer) AllowRebalance() { c.cl.AllowRebalance() }

// Commit commits the given positions synchronously. meta, if not nil, is
// stored as the commit metadata of its partitions (WithMetadata).
func (c *Consumer) Commit(ctx context.Context, pos map[offsets.TP]offsets.Commit, meta map[offsets.TP]string) error {
	if len(pos) == 0 {
		return nil
	}
	if meta != nil {
		ctx = WithMetadata(ctx, meta)
	}
	m := make(map[string]map[int32]kgo.EpochOffset)
	for tp, p := range pos {
		if m[tp.Topic] == nil {
			m[tp.Topic] = make(map[int32]kgo.EpochOffset)
		}
		m[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: p.Epoch, Offset: p.Offset}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Kafka.RequestTimeout)
	defer cancel()
	var cerr error
	c.cl.CommitOffsetsSync(ctx, m, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for i, t := range resp.Topics {
			// Newer protocol versions answer with topic IDs only; the
			// request lists the same topics in the same order.
			name := t.Topic
			if name == "" && i < len(req.Topics) {
				name = req.Topics[i].Topic
			}
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
					cerr = fmt.Errorf("%s[%d]: %w", name, p.Partition, err)
				}
			}
		}
	})
	if cerr != nil {
		return fmt.Errorf("kafka: commit: %w", cerr)
	}
	return nil
}

// Seek makes the group consumer fetch each partition again from the given
// offset (exactly-once delivery reads again the records of a batch it
// dropped). Call it from a group callback or between a poll and
// AllowRebalance: with BlockRebalanceOnPoll no poll returns records then,
// and SetOffsets discards the fetches already buffered, so the next poll
// returns nothing of these partitions from before the seek. A partition not
// assigned to this member is skipped.
func (c *Consumer) Seek(pos map[offsets.TP]int64) {
	m := make(map[string]map[int32]kgo.EpochOffset)
	for tp, at := range pos {
		if m[tp.Topic] == nil {
			m[tp.Topic] = make(map[int32]kgo.EpochOffset)
		}
		m[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
	}
	c.cl.SetOffsets(m)
}

// Positions asks the brokers for the group's committed offsets and the log
// end offsets (high watermarks) of topics' partitions, for /status: the
// partitions that fetch nothing (idle, or paused) still show where they
// are. It makes plain requests (no group state is touched), so it is safe
// from any goroutine, also while a group callback waits.
func (c *Consumer) Positions(ctx context.Context, topics []string) (committed, ends map[offsets.TP]int64, err error) {
	adm := kadm.NewClient(c.cl) // not closed: that would close the group's client
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Kafka.RequestTimeout)
	defer cancel()
	fetched, err := adm.FetchOffsets(ctx, c.cfg.Kafka.Group)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: committed offsets of group %q: %w", c.cfg.Kafka.Group, err)
	}
	committed = map[offsets.TP]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			committed[offsets.TP{Topic: o.Topic, Partition: o.Partition}] = o.At
		}
	})
	listed, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: log end offsets: %w", err)
	}
	ends = map[offsets.TP]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset >= 0 {
			ends[offsets.TP{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	})
	return committed, ends, nil
}

// PauseFetch stops fetching topics without leaving the group (POST
// /pause): franz-go drops what it buffered for them and fetches it again
// after ResumeFetch, and a poll returns nothing of them meanwhile.
func (c *Consumer) PauseFetch(topics []string) { c.cl.PauseFetchTopics(topics...) }

// ResumeFetch resumes fetching every paused topic.
func (c *Consumer) ResumeFetch() {
	if paused := c.cl.PauseFetchTopics(); len(paused) > 0 {
		c.cl.ResumeFetchTopics(paused...)
	}
}

// WithMetadata returns ctx carrying meta for the next CommitOffsetsSync made
// with it: franz-go calls the function just before sending the request, after
// it filled in the group, member id and generation (which is what fences a
// member that lost its membership), and the function sets each partition's
// metadata. A partition of the request missing from meta keeps franz-go's
// default metadata (the member id), which exactly-once recovery (internal/eos) reads as unmarked.
func WithMetadata(ctx context.Context, meta map[offsets.TP]string) context.Context {
	return kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				if m, ok := meta[offsets.TP{Topic: t.Topic, Partition: p.Partition}]; ok {
					m := m
					p.Metadata = &m
				}
			}
		}
		return nil
	})
}

// ProduceDLQ sends a copy of rec to topic with headers describing why it
// could not be written (DLQRecord: cut to the topic's max.message.bytes,
// or without its value when refOnly); done is called once Kafka
// acknowledged it or franz-go gave up on it (internal/kafkaerr's Classify sorts the error).
func (c *Consumer) ProduceDLQ(ctx context.Context, topic string, rec *kgo.Record, cause error, refOnly bool, done func(error)) {
	limit := 0
	if c.dlq != nil && c.dlq.Topic == topic {
		limit = c.dlq.MaxMessageBytes
	}
	out := DLQRecord(topic, c.cfg.Name, rec, cause, limit, refOnly)
	c.cl.Produce(ctx, out, func(_ *kgo.Record, err error) { done(err) })
}

// Close leaves the group and closes the client. Rebalances blocked by an
// unprocessed poll are released first. Leaving is bounded: by now every
// offset is committed, so if the coordinator does not answer in time the
// session timeout will remove the member anyway.
func (c *Consumer) Close() {
	c.stopWatch()
	c.cl.AllowRebalance()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.cl.LeaveGroupContext(ctx); err != nil {
		c.log.Warn().Err(err).Msg("leaving the consumer group did not finish; the session timeout will end the membership")
	}
	// Close leaves again if the leave above did not finish; never let that
	// hold the exit of a process that has already committed.
	closed := make(chan struct{})
	go func() { c.cl.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		c.log.Warn().Msg("kafka client did not close within 5s; exiting anyway")
	}
}

// probeRetriable reports whether a start-up request that failed with err
// may succeed on another try or broker: not after a refused SASL login or
// mechanism, or a failed TLS handshake.
func probeRetriable(err error) bool {
	var (
		verify *tls.CertificateVerificationError
		rec    tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, kgo.ErrClientClosed),
		errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.UnsupportedSaslMechanism),
		errors.Is(err, kerr.IllegalSaslState), errors.As(err, &verify), errors.As(err, &rec),
		strings.Contains(err.Error(), "remote error: tls:"),
		kafkaauth.Classify(err) != kafkaauth.None:
		return false
	}
	return true
}

// ConnError turns an error from a request to the brokers into one line that
// says what was refused and where: SASL credentials, an unsupported
// mechanism, the TLS handshake. Other errors keep franz-go's text. Neither
// franz-go nor the broker puts the password into an error.
func ConnError(k config.Kafka, err error) error {
	if e := kafkaauth.Explain(k, err); e != nil {
		return e // a token or credentials not had, or rejected
	}
	addrs := strings.Join(k.Brokers, ",")
	var (
		verify *tls.CertificateVerificationError
		rec    tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("kafka: SASL authentication failed for user %q at %s: %s", k.SASL.Username, addrs, brokerMessage(err))
	case errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("kafka: brokers %s do not accept SASL mechanism %s: %v (is this a SASL_SSL or SASL_PLAINTEXT listener?)", addrs, k.SASL.Mechanism, err)
	case errors.As(err, &verify):
		return fmt.Errorf("kafka: TLS handshake with %s failed: %v (check kafka.tls.ca_file and server_name)", addrs, verify.Err)
	case errors.As(err, &rec):
		return fmt.Errorf("kafka: TLS handshake with %s failed: the broker does not speak TLS on this port (kafka.tls.enabled is true; is this an SSL or SASL_SSL listener?)", addrs)
	case k.TLS.Enabled && strings.Contains(err.Error(), "remote error: tls:"):
		// crypto/tls reports alerts from the server as an unexported type.
		return fmt.Errorf("kafka: TLS handshake with %s failed: the broker refused it: %v (does the listener require a client certificate? kafka.tls.cert_file, key_file)", addrs, err)
	}
	return fmt.Errorf("kafka: brokers %s: %w", addrs, err)
}

// brokerMessage is the broker's own explanation from a franz-go error
// ("CODE: description: broker message"), or the whole error.
func brokerMessage(err error) string {
	msg := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if _, rest, ok := strings.Cut(msg, ke.Description+": "); ok && rest != "" {
			return rest
		}
	}
	return msg
}
