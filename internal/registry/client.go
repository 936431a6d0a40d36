// Package registry reads schemas from a Confluent-compatible schema registry
// (Confluent, Redpanda, Apicurio's ccompat API) for records framed in the
// Confluent wire format: a zero magic byte, the 4-byte big-endian schema id,
// for Protobuf the message indexes, then the Avro, Protobuf or JSON payload.
//
// ParseFrame and ParseProtobufFrame split a frame without allocating. Client
// fetches a schema by id on first sight, with every schema it references
// (and, under schema_registry.subject_strategy, the subjects it is
// registered under, which Schema.CheckSubject judges a record's topic by),
// and keeps it in a bounded LRU cache, so that a registry outage only stops
// records whose ids were never seen. Errors say whose fault they are:
// ErrBadRecord (a malformed frame, an id the registry says does not exist:
// dead-letter the record) or ErrUnavailable (the registry is unreachable or
// failing: retry later, the record is fine).
//
// Concurrency: a Client is safe for concurrent use; concurrent lookups of
// one uncached id share one request. The parse functions are pure.
package registry

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
)

// Options tune a Client; zero values take the defaults.
type Options struct {
	// CacheSize bounds the schemas kept (default 1000, the capacity of
	// Confluent's own client cache). A topic carries a handful of ids
	// (one per producer schema version), so this covers hundreds of
	// topics; past it the least recently used schema is fetched again
	// when it is next seen.
	CacheSize int
	// Timeout bounds one HTTP request (default 10s): a registry that
	// answers at all answers in milliseconds, and a hung one must not hold
	// a record forever.
	Timeout time.Duration
	// NotFoundTTL is how long an id the registry said does not exist is
	// remembered (default 1m), so that a stream of records with a bogus id
	// costs one request per minute instead of one per record, while an id
	// registered late (a registry restored from backup) is found again.
	NotFoundTTL time.Duration
}

const (
	defaultCacheSize   = 1000
	defaultTimeout     = 10 * time.Second
	defaultNotFoundTTL = time.Minute
	// maxRefDepth bounds reference chains (and cycles, which a registry
	// should refuse but a hostile or broken one might serve).
	maxRefDepth = 16
)

// Schema is a registered schema with everything it references.
type Schema struct {
	ID   int
	Type sr.SchemaType // sr.TypeAvro, sr.TypeProtobuf or sr.TypeJSON
	Text string
	// References are the schemas Text references, transitively, each once,
	// dependencies before the schemas that use them: for Protobuf the
	// imported files (Name is the import path), for Avro the named types
	// (Name is the full name), for JSON Schema the $ref targets.
	References []Reference
	// Strategy is the schema_registry.subject_strategy the client checks
	// records' topics with (CheckSubject), and Subjects the subjects the
	// schema is registered under, read with it when Strategy needs them.
	// "" (a Schema not from a Client) checks nothing.
	Strategy string
	Subjects []string
}

// CheckSubject says whether a record of topic (its key, when key is set)
// may be decoded with s, under s.Strategy: with config.SubjectTopicName
// one of s's subjects must be TOPIC-value (TOPIC-key), with
// config.SubjectTopicRecordName one must start with "TOPIC-"; with
// config.SubjectAny (or none) any record may. The error wraps
// ErrBadRecord and names the subjects.
func (s *Schema) CheckSubject(topic string, key bool) error {
	suffix := "-value"
	if key {
		suffix = "-key"
	}
	var ok func(string) bool
	var want string
	switch s.Strategy {
	case config.SubjectTopicName:
		ok = func(sub string) bool {
			return len(sub) == len(topic)+len(suffix) && sub[:len(topic)] == topic && sub[len(topic):] == suffix
		}
		want = strconv.Quote(topic + suffix)
	case config.SubjectTopicRecordName:
		ok = func(sub string) bool {
			return len(sub) > len(topic)+1 && sub[:len(topic)] == topic && sub[len(topic)] == '-'
		}
		want = strconv.Quote(topic+"-") + "<record name>"
	default:
		return nil
	}
	if slices.ContainsFunc(s.Subjects, ok) {
		return nil
	}
	return fmt.Errorf("%w: schema id %d is registered under %s, not %s (schema_registry.subject_strategy: %s)",
		ErrBadRecord, s.ID, quoteSubjects(s.Subjects), want, s.Strategy)
}

// quoteSubjects lists subjects for a message: quoted, the first few.
func quoteSubjects(subjects []string) string {
	const most = 5
	if len(subjects) == 0 {
		return "no subject"
	}
	q := make([]string, 0, most+1)
	for i, sub := range subjects {
		if i == most {
			q = append(q, fmt.Sprintf("and %d more", len(subjects)-most))
			break
		}
		q = append(q, strconv.Quote(sub))
	}
	return "subject " + strings.Join(q, ", ")
}

// Reference is one referenced schema.
type Reference struct {
	Name    string
	Subject string
	Version int
	Type    sr.SchemaType
	Text    string
}

// Stats counts cache activity since the Client was made.
type Stats struct {
	Hits, Misses, Fetches, Entries int
}

// Client fetches and caches schemas. Make one with New.
type Client struct {
	sr       *sr.Client
	opts     Options
	now      func() time.Time
	strategy string // schema_registry.subject_strategy

	mu      sync.Mutex
	entries map[int]*list.Element // of *entry
	order   *list.List            // most recently used first
	flights map[int]*flight

	hits, misses, fetches atomic.Int64
}

// entry is a cached schema, or a remembered "does not exist".
type entry struct {
	id      int
	schema  *Schema
	err     error     // ErrBadRecord-wrapped, with schema nil
	expires time.Time // for err only
}

// flight is one fetch in progress, shared by concurrent lookups of its id.
type flight struct {
	done   chan struct{}
	schema *Schema
	err    error
}

// New makes a client for the registry in cfg. It does not contact the
// registry (see Check); the password file is read now.
func New(cfg config.SchemaRegistry, opts Options) (*Client, error) {
	if !cfg.Enabled() {
		return nil, errors.New("schema_registry.urls: no registry configured")
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = defaultCacheSize
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.NotFoundTTL <= 0 {
		opts.NotFoundTTL = defaultNotFoundTTL
	}
	// The transport franz-go would build for DialTLSConfig, with the
	// answers' size bounded (limits.go).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	srOpts := []sr.ClientOpt{
		sr.URLs(append([]string(nil), cfg.URLs...)...),
		sr.HTTPClient(&http.Client{Timeout: opts.Timeout, Transport: limitAnswers{next: tr}}),
		sr.UserAgent("sink"),
	}
	if cfg.Username != "" {
		pw, err := cfg.PasswordValue()
		if err != nil {
			return nil, fmt.Errorf("schema_registry.%w", err)
		}
		srOpts = append(srOpts, sr.BasicAuth(cfg.Username, pw))
	}
	if cfg.TLS.Enabled {
		tc, err := cfg.TLS.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("schema_registry.tls.%w", err)
		}
		tr.TLSClientConfig = tc
	}
	cl, err := sr.NewClient(srOpts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return &Client{
		sr:       cl,
		opts:     opts,
		now:      time.Now,
		strategy: cfg.SubjectStrategy,
		entries:  make(map[int]*list.Element),
		order:    list.New(),
		flights:  make(map[int]*flight),
	}, nil
}

// Schema returns the schema with the given id, from the cache or else from
// the registry. The returned Schema is shared and must not be modified.
//
// Errors wrap ErrBadRecord when the registry says the id (or a schema it
// references) does not exist, and ErrUnavailable when the registry cannot
// be asked: unreachable, failing, refusing our credentials, or ctx ended.
func (c *Client) Schema(ctx context.Context, id int) (*Schema, error) {
	c.mu.Lock()
	if el, ok := c.entries[id]; ok {
		e := el.Value.(*entry)
		if e.schema != nil || c.now().Before(e.expires) {
			c.order.MoveToFront(el)
			c.mu.Unlock()
			c.hits.Add(1)
			return e.schema, e.err
		}
		c.removeLocked(el) // a "not found" that expired: ask again
	}
	c.misses.Add(1)
	f, waiting := c.flights[id]
	if !waiting {
		f = &flight{done: make(chan struct{})}
		c.flights[id] = f
	}
	c.mu.Unlock()

	if waiting { // someone else is fetching this id
		select {
		case <-f.done:
			return f.schema, f.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: schema id %d: %w", ErrUnavailable, id, ctx.Err())
		}
	}

	f.schema, f.err = c.fetch(ctx, id)
	c.mu.Lock()
	delete(c.flights, id)
	switch {
	case f.err == nil:
		c.addLocked(&entry{id: id, schema: f.schema})
	case errors.Is(f.err, ErrBadRecord):
		c.addLocked(&entry{id: id, err: f.err, expires: c.now().Add(c.opts.NotFoundTTL)})
	}
	c.mu.Unlock()
	close(f.done)
	return f.schema, f.err
}

func (c *Client) addLocked(e *entry) {
	if el, ok := c.entries[e.id]; ok {
		c.removeLocked(el)
	}
	c.entries[e.id] = c.order.PushFront(e)
	for c.order.Len() > c.opts.CacheSize {
		c.removeLocked(c.order.Back())
	}
}

func (c *Client) removeLocked(el *list.Element) {
	delete(c.entries, el.Value.(*entry).id)
	c.order.Remove(el)
}

// fetch asks the registry for schema id and everything it references. A
// panic while it reads the registry's answers (a bug an answer exposes) is
// the id's ErrBadRecord: asking again would fail again, and its records
// must not stop their partitions.
func (c *Client) fetch(ctx context.Context, id int) (_ *Schema, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: schema id %d: reading the registry's answer failed: %v", ErrBadRecord, id, v)
		}
	}()
	c.fetches.Add(1)
	s, err := c.sr.SchemaByID(ctx, id)
	if err != nil {
		return nil, classify(ctx, fmt.Sprintf("schema id %d", id), err)
	}
	out := &Schema{ID: id, Type: s.Type, Text: s.Schema}
	seen := make(map[sr.SchemaReference]bool)
	if err := c.resolve(ctx, id, s.References, seen, &out.References, 1); err != nil {
		return nil, err
	}
	if err := tooLarge(id, out.References, len(out.Text)); err != nil {
		return nil, err
	}
	if c.strategy != "" && c.strategy != config.SubjectAny {
		// GET /schemas/ids/{id}/subjects: the subjects that registered
		// this schema (a registry gives equal schemas one id).
		if out.Subjects, err = c.sr.SubjectsByID(ctx, id); err != nil {
			return nil, classify(ctx, fmt.Sprintf("schema id %d: its subjects", id), err)
		}
		out.Strategy = c.strategy
	}
	return out, nil
}

// resolve appends refs and what they reference to out, dependencies first.
func (c *Client) resolve(ctx context.Context, id int, refs []sr.SchemaReference, seen map[sr.SchemaReference]bool, out *[]Reference, depth int) error {
	for _, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		if depth > maxRefDepth {
			return fmt.Errorf("%w: schema id %d: references nest deeper than %d (a cycle?)", ErrBadRecord, id, maxRefDepth)
		}
		what := fmt.Sprintf("schema id %d: reference %q (subject %q version %d)", id, ref.Name, ref.Subject, ref.Version)
		ss, err := c.sr.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return classify(ctx, what, err)
		}
		if err := c.resolve(ctx, id, ss.References, seen, out, depth+1); err != nil {
			return err
		}
		*out = append(*out, Reference{Name: ref.Name, Subject: ref.Subject, Version: ref.Version, Type: ss.Type, Text: ss.Schema.Schema})
		if err := tooLarge(id, *out, 0); err != nil {
			return err
		}
	}
	return nil
}

// classify turns a registry client error into ErrBadRecord (the registry
// answered that the thing does not exist) or ErrUnavailable (anything
// else: the record may well be fine).
func classify(ctx context.Context, what string, err error) error {
	if isTooLarge(err) {
		return fmt.Errorf("%w: %s: %w", ErrBadRecord, what, err)
	}
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, ctx.Err())
		}
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	}
	switch {
	case re.StatusCode == http.StatusNotFound && sr.IsNotFoundError(re.ErrorCode):
		// Only the registry's own "not found" codes (40401..40409): a
		// plain 404 is as likely a wrong path in schema_registry.urls,
		// which must not send every record to the dead-letter topic.
		return fmt.Errorf("%w: %s: the registry says it does not exist (%d %s)", ErrBadRecord, what, re.ErrorCode, re.Error())
	case re.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s: HTTP 404 without a registry error code from %s; do schema_registry.urls point at the registry's API (Apicurio: .../apis/ccompat/v7)?", ErrUnavailable, what, re.URL)
	case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: %s: HTTP %d: the registry refuses our credentials (schema_registry.username, password)", ErrUnavailable, what, re.StatusCode)
	}
	return fmt.Errorf("%w: %s: HTTP %d: %s", ErrUnavailable, what, re.StatusCode, re.Error())
}

// Register registers a schema under subject (TopicNameStrategy: the topic
// name plus "-value" or "-key") and returns its id; registering the same
// schema again returns the same id. For producers and tests: the sink
// itself only reads.
func (c *Client) Register(ctx context.Context, subject string, typ sr.SchemaType, text string, refs ...sr.SchemaReference) (int, error) {
	id, err := c.sr.RegisterSchema(ctx, subject, sr.Schema{Schema: text, Type: typ, References: refs}, -1, -1)
	if err != nil {
		return 0, fmt.Errorf("register the %s schema under subject %q: %w", typ, subject, err)
	}
	return id, nil
}

// Check reads the registry's global compatibility setting (GET /config,
// which Confluent, Redpanda, Apicurio and franz-go's srfake all serve), to
// find out at start-up that it answers, with our credentials, at the
// configured path.
func (c *Client) Check(ctx context.Context) error {
	var body []byte
	if err := c.sr.Do(ctx, http.MethodGet, "/config", nil, &body); err != nil {
		return classify(ctx, "schema registry check", err)
	}
	return nil
}

// Stats returns the cache counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	n := c.order.Len()
	c.mu.Unlock()
	return Stats{Hits: int(c.hits.Load()), Misses: int(c.misses.Load()), Fetches: int(c.fetches.Load()), Entries: n}
}
