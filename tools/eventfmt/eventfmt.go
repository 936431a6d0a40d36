// Package eventfmt re-encodes the load generator's click-stream event (the
// JSON that internal/gen makes) as the registry-framed formats a Kafka
// estate carries: Avro (hamba/avro), Protobuf (a descriptor compiled from
// .proto text by protocompile, filled through dynamicpb) and JSON Schema
// (the same JSON bytes), each prefixed with the Confluent wire-format
// header of the schema id it registered. Demos, tests and benchmarks use it
// to feed the same logical events in every format.
//
// The logical event and how each format carries it:
//
//	field       JSON              Avro                         Protobuf
//	id          number            long                         uint64
//	user_id     number            long                         uint64
//	ts          "2006-01-02 ..."  long timestamp-millis (UTC)  google.protobuf.Timestamp
//	event_type  string            string                       string
//	channel     string            string                       string
//	cost        number, 2 places  bytes decimal(18, 2)         double
//	payload     string            string                       string
//
// Concurrency: an Encoder is owned by one goroutine (it reuses one
// Protobuf message and one parse buffer).
package eventfmt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"sink/internal/registry"
)

// The formats, as loadgen's --format spells them.
const (
	JSON       = "json"
	Avro       = "avro"
	Protobuf   = "protobuf"
	JSONSchema = "json-schema"
)

// Formats lists every format, JSON (unframed, no registry) first.
var Formats = []string{JSON, Avro, Protobuf, JSONSchema}

// Event is the logical click-stream event.
type Event struct {
	ID        uint64
	UserID    uint64
	TS        time.Time // whole seconds, UTC
	EventType string
	Channel   string
	CostCents int64 // cost × 100: the JSON carries exactly two decimals
	Payload   string
}

// TSLayout is how the JSON event writes ts.
const TSLayout = "2006-01-02 15:04:05"

// ParseJSON reads an event as internal/gen writes it.
func ParseJSON(p *fastjson.Parser, b []byte) (Event, error) {
	v, err := p.ParseBytes(b)
	if err != nil {
		return Event{}, fmt.Errorf("event: %w", err)
	}
	num := func(key string) (*fastjson.Value, error) {
		n := v.Get(key)
		if n == nil || n.Type() != fastjson.TypeNumber {
			return nil, fmt.Errorf("event: %s is not a number", key)
		}
		return n, nil
	}
	var e Event
	for _, f := range [...]struct {
		key string
		dst *uint64
	}{{"id", &e.ID}, {"user_id", &e.UserID}} {
		n, err := num(f.key)
		if err != nil {
			return Event{}, err
		}
		if *f.dst, err = n.Uint64(); err != nil {
			return Event{}, fmt.Errorf("event: %s: %w", f.key, err)
		}
	}
	if e.TS, err = time.Parse(TSLayout, string(v.GetStringBytes("ts"))); err != nil {
		return Event{}, fmt.Errorf("event: ts: %w", err)
	}
	e.EventType = string(v.GetStringBytes("event_type"))
	e.Channel = string(v.GetStringBytes("channel"))
	n, err := num("cost")
	if err != nil {
		return Event{}, err
	}
	cost, err := n.Float64()
	if err != nil {
		return Event{}, fmt.Errorf("event: cost: %w", err)
	}
	e.CostCents = int64(math.Round(cost * 100))
	e.Payload = string(v.GetStringBytes("payload"))
	return e, nil
}

// Cost returns the cost as an exact decimal.
func (e Event) Cost() *big.Rat { return big.NewRat(e.CostCents, 100) }

// AvroSchema is the event's Avro schema.
const AvroSchema = `{"type":"record","name":"Event","namespace":"sink.loadgen","fields":[` +
	`{"name":"id","type":"long"},` +
	`{"name":"user_id","type":"long"},` +
	`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},` +
	`{"name":"event_type","type":"string"},` +
	`{"name":"channel","type":"string"},` +
	`{"name":"cost","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},` +
	`{"name":"payload","type":"string"}]}`

// ProtoFile is the name the .proto text compiles under, and ProtoSchema the
// text: one message, so every record's message index is [0].
const (
	ProtoFile    = "sink/loadgen/event.proto"
	ProtoMessage = "sink.loadgen.Event"
	ProtoSchema  = `syntax = "proto3";
package sink.loadgen;

import "google/protobuf/timestamp.proto";

message Event {
  uint64 id = 1;
  uint64 user_id = 2;
  google.protobuf.Timestamp ts = 3;
  string event_type = 4;
  string channel = 5;
  double cost = 6;
  string payload = 7;
}
`
)

// JSONSchemaText is the event's JSON Schema (draft-07).
const JSONSchemaText = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Event","type":"object",` +
	`"properties":{"id":{"type":"integer"},"user_id":{"type":"integer"},"ts":{"type":"string"},` +
	`"event_type":{"type":"string"},"channel":{"type":"string"},"cost":{"type":"number"},"payload":{"type":"string"}},` +
	`"required":["id","user_id","ts","event_type","channel","cost","payload"]}`

// avroEvent is Event in the shape hamba/avro maps onto AvroSchema.
type avroEvent struct {
	ID        int64     `avro:"id"`
	UserID    int64     `avro:"user_id"`
	TS        time.Time `avro:"ts"`
	EventType string    `avro:"event_type"`
	Channel   string    `avro:"channel"`
	Cost      *big.Rat  `avro:"cost"`
	Payload   string    `avro:"payload"`
}

// Encoder turns gen's JSON events into framed records of one format.
type Encoder struct {
	format string
	id     int // registered schema id; 0 before Register
	parser fastjson.Parser

	avro avro.Schema

	msg                                  *dynamicpb.Message
	fID, fUser, fTS, fType, fChan, fCost protoreflect.FieldDescriptor
	fPayload, fSeconds, fNanos           protoreflect.FieldDescriptor
}

// NewEncoder compiles format's schema.
func NewEncoder(format string) (*Encoder, error) {
	e := &Encoder{format: format}
	switch format {
	case JSON, JSONSchema:
	case Avro:
		s, err := avro.Parse(AvroSchema)
		if err != nil {
			return nil, fmt.Errorf("avro schema: %w", err)
		}
		e.avro = s
	case Protobuf:
		md, err := CompileProto(ProtoFile, ProtoSchema, nil, ProtoMessage)
		if err != nil {
			return nil, err
		}
		e.msg = dynamicpb.NewMessage(md)
		f := md.Fields()
		e.fID, e.fUser, e.fTS, e.fType = f.ByName("id"), f.ByName("user_id"), f.ByName("ts"), f.ByName("event_type")
		e.fChan, e.fCost, e.fPayload = f.ByName("channel"), f.ByName("cost"), f.ByName("payload")
		ts := e.fTS.Message().Fields()
		e.fSeconds, e.fNanos = ts.ByName("seconds"), ts.ByName("nanos")
	default:
		return nil, fmt.Errorf("unknown format %q (want one of json, avro, protobuf, json-schema)", format)
	}
	return e, nil
}

// CompileProto compiles .proto text (with the files it imports, by import
// path, and Google's well-known types) and returns the named message.
func CompileProto(file, text string, imports map[string]string, message string) (protoreflect.MessageDescriptor, error) {
	srcs := map[string]string{file: text}
	for k, v := range imports {
		srcs[k] = v
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(srcs),
	})}
	files, err := c.Compile(context.Background(), file)
	if err != nil {
		return nil, fmt.Errorf("protobuf schema: %w", err)
	}
	d := files[0].FindDescriptorByName(protoreflect.FullName(message))
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("protobuf schema: no message %s in %s", message, file)
	}
	return md, nil
}

// SchemaType and Schema are what Register registers.
func (e *Encoder) SchemaType() sr.SchemaType {
	switch e.format {
	case Protobuf:
		return sr.TypeProtobuf
	case JSONSchema:
		return sr.TypeJSON
	}
	return sr.TypeAvro
}

// Schema returns the format's schema text ("" for plain JSON).
func (e *Encoder) Schema() string {
	switch e.format {
	case Avro:
		return AvroSchema
	case Protobuf:
		return ProtoSchema
	case JSONSchema:
		return JSONSchemaText
	}
	return ""
}

// Register registers the schema under subject and frames records with its
// id from then on. Plain JSON registers nothing.
func (e *Encoder) Register(ctx context.Context, c *registry.Client, subject string) (int, error) {
	if e.format == JSON {
		return 0, nil
	}
	id, err := c.Register(ctx, subject, e.SchemaType(), e.Schema())
	if err != nil {
		return 0, err
	}
	e.id = id
	return id, nil
}

// Append appends the framed record for one of gen's JSON events to dst.
func (e *Encoder) Append(dst, jsonEvent []byte) ([]byte, error) {
	if e.format == JSON {
		return append(dst, jsonEvent...), nil
	}
	if e.id == 0 {
		return nil, errors.New("eventfmt: Register first: records need a schema id")
	}
	dst = registry.AppendFrame(dst, e.id, e.format == Protobuf)
	if e.format == JSONSchema {
		return append(dst, jsonEvent...), nil
	}
	ev, err := ParseJSON(&e.parser, jsonEvent)
	if err != nil {
		return nil, err
	}
	if e.format == Avro {
		b, err := avro.Marshal(e.avro, &avroEvent{
			ID: int64(ev.ID), UserID: int64(ev.UserID), TS: ev.TS, EventType: ev.EventType,
			Channel: ev.Channel, Cost: ev.Cost(), Payload: ev.Payload,
		})
		if err != nil {
			return nil, fmt.Errorf("avro: %w", err)
		}
		return append(dst, b...), nil
	}
	m := e.msg
	m.Set(e.fID, protoreflect.ValueOfUint64(ev.ID))
	m.Set(e.fUser, protoreflect.ValueOfUint64(ev.UserID))
	ts := m.Mutable(e.fTS).Message()
	ts.Set(e.fSeconds, protoreflect.ValueOfInt64(ev.TS.Unix()))
	ts.Set(e.fNanos, protoreflect.ValueOfInt32(int32(ev.TS.Nanosecond())))
	m.Set(e.fType, protoreflect.ValueOfString(ev.EventType))
	m.Set(e.fChan, protoreflect.ValueOfString(ev.Channel))
	cost, _ := strconv.ParseFloat(ev.Cost().FloatString(2), 64)
	m.Set(e.fCost, protoreflect.ValueOfFloat64(cost))
	m.Set(e.fPayload, protoreflect.ValueOfString(ev.Payload))
	// Deterministic: the same event gives the same bytes, as with JSON.
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
}
