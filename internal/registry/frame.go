package registry

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"
)

// MaxIndexes bounds the Protobuf message indexes a frame may carry: one per
// nesting level of the message type within its .proto file. Real schemas
// nest a handful deep; the bound keeps a hostile count (the wire allows up
// to 2^63) from sizing an allocation.
const MaxIndexes = 32

// header is franz-go's codec for the Confluent wire format's first five
// bytes: the magic byte 0 and the big-endian schema id.
var header sr.ConfluentHeader

// ParseFrame splits a registry-framed Avro or JSON Schema record into its
// schema id and payload: a zero magic byte, the 4-byte big-endian id, then
// the payload. An error wraps ErrBadRecord. It does not allocate.
func ParseFrame(b []byte) (id int, payload []byte, err error) {
	id, payload, err = header.DecodeID(b)
	if err != nil {
		return 0, nil, frameError(b)
	}
	return id, payload, nil
}

// ParseProtobufFrame splits a registry-framed Protobuf record: the id as in
// ParseFrame, then the message indexes (which message of the schema's .proto
// file the payload is: [0] is the first top-level message, [1, 0] the first
// message nested in the second), then the payload. The indexes are a
// zig-zag varint count followed by that many zig-zag varints; a count of 0
// is the shorthand for [0].
//
// The indexes are appended to idx[:0], so a caller that passes a reused
// slice with room for its schemas' depth parses without allocating (franz-go's
// ConfluentHeader.DecodeIndex allocates a new slice per record, sized by the
// count on the wire). An error wraps ErrBadRecord.
func ParseProtobufFrame(b []byte, idx []int) (id int, indexes []int, payload []byte, err error) {
	id, rest, err := ParseFrame(b)
	if err != nil {
		return 0, nil, nil, err
	}
	n, w := binary.Varint(rest)
	switch {
	case w <= 0:
		return 0, nil, nil, badRecordf("schema id %d: truncated or overlong Protobuf message index count", id)
	case n == 0:
		return id, append(idx[:0], 0), rest[w:], nil
	case n < 0 || n > MaxIndexes:
		return 0, nil, nil, badRecordf("schema id %d: Protobuf message index count %d is not in 1..%d", id, n, MaxIndexes)
	}
	rest = rest[w:]
	idx = idx[:0]
	for range n {
		v, w := binary.Varint(rest)
		if w <= 0 {
			return 0, nil, nil, badRecordf("schema id %d: truncated or overlong Protobuf message index", id)
		}
		if v < 0 || v > maxIndex {
			return 0, nil, nil, badRecordf("schema id %d: Protobuf message index %d is out of range", id, v)
		}
		idx = append(idx, int(v))
		rest = rest[w:]
	}
	return id, idx, rest, nil
}

// maxIndex bounds one message index: a .proto file never declares more
// messages at one level than fit in an int32.
const maxIndex = 1<<31 - 1

// AppendFrame appends the Confluent wire-format header for schema id to b:
// for Protobuf pass the message indexes (nil means [0]), for Avro and JSON
// Schema pass protobuf false. The payload follows.
func AppendFrame(b []byte, id int, protobuf bool, indexes ...int) []byte {
	if protobuf && len(indexes) == 0 {
		indexes = firstMessage
	}
	b, _ = header.AppendEncode(b, id, indexes) // never fails
	return b
}

var firstMessage = []int{0}

func frameError(b []byte) error {
	switch {
	case len(b) == 0:
		return badRecordf("empty value where a registry-framed record (magic byte 0, 4-byte schema id) was expected")
	case b[0] != 0:
		return badRecordf("first byte is 0x%02x, not the registry wire format's magic byte 0 (is the record registry-framed?)", b[0])
	default:
		return badRecordf("%d bytes is shorter than the registry wire format's 5-byte header", len(b))
	}
}

// ErrBadRecord marks errors that are the record's fault: a malformed frame,
// or a schema id the registry says does not exist. Such a record belongs in
// the dead-letter topic; retrying cannot help.
var ErrBadRecord = errors.New("bad record")

// ErrUnavailable marks errors that are the registry's: it could not be
// reached or answered with a server error, for a schema id not in the
// cache. Retrying later can succeed; the record is not bad.
var ErrUnavailable = errors.New("schema registry unavailable")

func badRecordf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRecord}, args...)...)
}
