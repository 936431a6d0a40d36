package format

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sink/internal/decode/column"
	"sink/internal/registry"
)

// The plumbing every registry-framed format shares (avro, protobuf,
// json-schema, debezium-avro): where a Plan gets its schemas, how a
// record's schema id becomes a compiled per-schema reader, and how the
// registry's answers become Append's errors.

// Registry is where the registry-framed formats find the schema a record's
// id names. *registry.Client satisfies it; tests pass fakes. Schema's
// errors must wrap registry.ErrBadRecord (the id does not exist: the
// record is bad) or registry.ErrUnavailable (ask again later); any other
// error is treated as ErrUnavailable.
type Registry interface {
	Schema(ctx context.Context, id int) (*registry.Schema, error)
}

// ErrUnavailable matches (errors.Is) the error Append returns for a
// record whose schema could not be fetched now (the registry is down, or
// failing, and the id is not cached). The record is not bad: the caller
// keeps it, and everything after it in its partition, and appends it again
// later. The block is unchanged.
var ErrUnavailable = registry.ErrUnavailable

// Env is what a reader is made with: the Plan's conversion scratch, the
// reader's part of its policy (SetPolicy may change it before the first
// Append), the schema registry (nil when none is configured) and, for
// protobuf, the one message type the route reads ("": every type).
type Env struct {
	State    *column.State
	Policy   *Policy
	Registry Registry
	Message  string // decode.WithMessage
}

// lookupTimeout bounds one schema lookup. It runs on the goroutine that
// appends, so a registry that hangs instead of refusing must not hold it
// for long; a fetch that answers at all answers in milliseconds. The
// record is retried later (ErrUnavailable). (The pipeline's registry
// answers its owner goroutine at once and looks ids up on goroutines of
// its own: pipeline/intake/lookup.go.)
const lookupTimeout = 5 * time.Second

// maxReaders bounds the compiled per-schema readers one Plan keeps. A topic
// carries a handful of schema ids (one per producer schema version); past
// the bound, the cache starts over, and each id is compiled again (from
// the registry client's own cache) when next seen.
const maxReaders = 256

// Schemas is a reader's cache of per-schema readers: R compiled once
// per schema id for this Plan's columns (so, per (schema id, table)), on the
// first record that names the id. A schema whose reader does not compile
// (a field that cannot fill its column) is remembered as such, and every
// record of it is bad with that reason.
type Schemas[R any] struct {
	reg   Registry
	build func(*registry.Schema) (R, error)
	m     map[int]readerEntry[R]
	// The last id's entry, so a stream of one schema costs no map lookup,
	// with the topic and key-ness its subjects were checked for.
	lastID    int
	lastTopic string
	lastKey   bool
	last      readerEntry[R]
	ok        bool
}

type readerEntry[R any] struct {
	r      R
	err    error            // a *BadRecord: the schema cannot fill the columns
	schema *registry.Schema // its subjects, for the topics of its records
}

// NewSchemas returns an empty cache that asks reg for a schema the first
// time its id is seen, and builds its reader with build.
func NewSchemas[R any](reg Registry, build func(*registry.Schema) (R, error)) *Schemas[R] {
	return &Schemas[R]{reg: reg, build: build, m: map[int]readerEntry[R]{}}
}

// Get returns the reader of schema id for a record of topic (its key, when
// key is set). The error is a *BadRecord (the registry says the id does not
// exist, the schema is not one the topic's records may name under
// schema_registry.subject_strategy, or it cannot fill the columns) or wraps
// ErrUnavailable (nothing is cached for id: retried on the next record that
// names it).
func (c *Schemas[R]) Get(id int, topic string, key bool) (R, error) {
	if c.ok && id == c.lastID && key == c.lastKey && topic == c.lastTopic {
		return c.last.r, c.last.err
	}
	e, err := c.entry(id)
	if err == nil && e.schema != nil {
		if serr := e.schema.CheckSubject(topic, key); serr != nil {
			err = Bad("", serr.Error())
		}
	}
	if err != nil {
		var zero R
		return zero, err
	}
	c.lastID, c.lastTopic, c.lastKey, c.last, c.ok = id, topic, key, e, true
	return e.r, e.err
}

// entry returns the cached reader of schema id, or fetches and compiles
// it; the error is the registry's (get's, the schema's own aside).
func (c *Schemas[R]) entry(id int) (readerEntry[R], error) {
	if e, found := c.m[id]; found {
		return e, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	s, err := c.reg.Schema(ctx, id)
	cancel()
	switch {
	case err != nil && errors.Is(err, registry.ErrBadRecord):
		// Not cached here: the registry client remembers "not
		// found" for a while and asks again after, in case the id
		// is registered late.
		return readerEntry[R]{}, Bad("", err.Error())
	case err != nil && !errors.Is(err, ErrUnavailable):
		return readerEntry[R]{}, fmt.Errorf("%w: schema id %d: %w", ErrUnavailable, id, err)
	case err != nil:
		return readerEntry[R]{}, err
	}
	e := readerEntry[R]{schema: s}
	e.r, err = c.compile(id, s)
	if err != nil {
		var br *BadRecord
		if !errors.As(err, &br) {
			err = Bad("", fmt.Sprintf("schema id %d: %v", id, err))
		}
		e.err = err
	}
	if len(c.m) >= maxReaders {
		clear(c.m)
	}
	c.m[id] = e
	return e, nil
}

// compile builds the reader of schema id, s; a panic while it does is the
// schema's fault as far as its records go (a bug the schema exposes): a
// bad-record reason, cached like a schema that cannot fill the columns,
// so it is not compiled again for every record.
func (c *Schemas[R]) compile(id int, s *registry.Schema) (r R, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &BadRecord{Reason: fmt.Sprintf("schema id %d: %s", id, PanicReason(v)), Cause: ErrPanic}
		}
	}()
	return c.build(s)
}

// Frame splits a registry-framed Avro or JSON Schema value into its
// schema id and payload; the error is a *BadRecord naming what is wrong
// with the frame.
func Frame(value []byte) (int, []byte, error) {
	id, payload, err := registry.ParseFrame(value)
	if err != nil {
		return 0, nil, Bad("", err.Error())
	}
	return id, payload, nil
}
