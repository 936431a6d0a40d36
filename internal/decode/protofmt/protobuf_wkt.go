package protofmt

import (
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"sink/internal/decode/column"
)

// The protobuf format's well-known types that are one value: Timestamp,
// Duration and the wrappers, read from their wire bytes.

// The well-known types that get a mapping of their own.
type wkt uint8

const (
	wktNone wkt = iota
	wktTimestamp
	wktDuration
	wktWrapper
	wktStruct
	wktValue
	wktList
)

func wellKnown(md protoreflect.MessageDescriptor) wkt {
	name := md.FullName()
	if !strings.HasPrefix(string(name), "google.protobuf.") {
		return wktNone
	}
	switch name {
	case "google.protobuf.Timestamp":
		return wktTimestamp
	case "google.protobuf.Duration":
		return wktDuration
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		return wktWrapper
	case "google.protobuf.Struct":
		return wktStruct
	case "google.protobuf.Value":
		return wktValue
	case "google.protobuf.ListValue":
		return wktList
	}
	return wktNone
}

// secondsAndNanos reads a Timestamp or Duration: seconds (field 1), nanos
// (field 2).
func secondsAndNanos(b []byte) (sec int64, nanos int32, err error) {
	for off := 0; off < len(b); {
		num, wt, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return 0, 0, column.Reasonf("invalid Protobuf seconds/nanos message: %v", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, wt, b[off+n:])
		if m < 0 {
			return 0, 0, column.Reasonf("invalid Protobuf seconds/nanos message: %v", protowire.ParseError(m))
		}
		if wt == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b[off+n:])
			switch num {
			case 1:
				sec = int64(v)
			case 2:
				nanos = int32(v)
			}
		}
		off += n + m
	}
	return sec, nanos, nil
}

// Timestamp's valid range (google/protobuf/timestamp.proto): 0001-01-01 to
// 9999-12-31 UTC.
const (
	minTimestamp = -62135596800
	maxTimestamp = 253402300799
)

func timestampOf(b []byte) (time.Time, error) {
	sec, nanos, err := secondsAndNanos(b)
	if err != nil {
		return time.Time{}, err
	}
	if sec < minTimestamp || sec > maxTimestamp || nanos < 0 || nanos > 999_999_999 {
		return time.Time{}, column.Reasonf("invalid google.protobuf.Timestamp (seconds %d, nanos %d)", sec, nanos)
	}
	return time.Unix(sec, int64(nanos)).UTC(), nil
}

// durationText appends a Duration as exact decimal seconds ("-1.5").
func durationText(dst, b []byte) ([]byte, error) {
	sec, nanos, err := secondsAndNanos(b)
	if err != nil {
		return nil, err
	}
	if nanos <= -1_000_000_000 || nanos >= 1_000_000_000 || (sec > 0 && nanos < 0) || (sec < 0 && nanos > 0) {
		return nil, column.Reasonf("invalid google.protobuf.Duration (seconds %d, nanos %d)", sec, nanos)
	}
	if sec < 0 || nanos < 0 {
		dst = append(dst, '-')
	}
	dst = strconv.AppendUint(dst, absU(sec), 10)
	if nanos != 0 {
		if nanos < 0 {
			nanos = -nanos
		}
		start := len(dst)
		dst = append(dst, '.')
		dst = strconv.AppendInt(dst, int64(nanos)+1_000_000_000, 10)
		dst = append(dst[:start+1], dst[start+2:]...) // drop the leading 1
		for dst[len(dst)-1] == '0' {
			dst = dst[:len(dst)-1]
		}
	}
	return dst, nil
}

func absU(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}
