package format

import (
	"fmt"
	"math/bits"
	"path/filepath"
	"runtime"
	"strings"

	"sink/internal/decode/column"
)

// Limits on input. Whoever can produce records or register schemas chooses
// every length, size, count and depth the decoders read, so each is held
// to what the record (or a documented cap) allows before anything is
// allocated or rendered for it, and a decoded row is held to the batch's
// bytes before it is counted. A record past a limit is a bad record with
// the limit in its reason (dead-lettered, or the connector stops under
// errors.tolerance: none). docs/operations.md ("Limits on input") lists
// them for users; the hostile tests (internal/decode/hostile_test.go) pin
// each.
//
// Bounded by the record itself (exact, no cap to choose): a string, bytes,
// fixed, decimal or map key length (avrofmt: bytesLen, fits), an array or
// map block's item count (avrofmt: blocks; each item takes a byte unless
// it is a free value), a Protobuf length (protowire), a JSON text
// (jsonscan). The bounds of one format alone are its reader's.

const (
	// DefaultMaxRowBytes bounds a Plan's rows when its Policy sets no
	// MaxRowBytes: the default of batch.max_bytes.
	DefaultMaxRowBytes = 32 << 20

	// MaxFreeValues bounds, per record, the values a decoder makes
	// without reading a byte of the record for them: Avro values of type
	// null, fixed of size 0 and records without fields (a union's null
	// branch takes its index's byte and is not counted), and the absent
	// Protobuf fields a nested value writes at their defaults. Every other
	// value takes at least one byte, so a record of n bytes decodes into
	// at most n + MaxFreeValues values, whatever its schema says.
	MaxFreeValues = 1 << 16

	// maxDecimalBytes bounds the unscaled value of a decimal (Avro,
	// Debezium) before it is turned into digits: 64 KiB, 157,826 digits,
	// more than PostgreSQL's widest numeric (147,455 digits) and far more
	// than ClickHouse's Decimal256 (76). Converting it takes about 16 ms;
	// the 560 KB a record may otherwise carry took 0.7 s.
	maxDecimalBytes = 64 << 10
)

// Policy is the part of a Plan's policy (decode.Policy) that its reader
// applies: what a tombstone is, and the bound on a row's bytes (the
// readers hold the JSON text of nested values to it while they write it).
// The Plan owns it; its SetPolicy changes it before the first record.
type Policy struct {
	TombstoneBad bool // a record without a value is bad, not skipped
	MaxRowBytes  int  // 0: DefaultMaxRowBytes
}

// RowBytes is the most bytes a row may hold decoded under pol.
func (pol *Policy) RowBytes() int {
	if pol == nil || pol.MaxRowBytes <= 0 {
		return DefaultMaxRowBytes
	}
	return pol.MaxRowBytes
}

// Tombstone is a reader's answer for a record without a value: skipped
// (ErrTombstone), or bad as errors.on_tombstone says.
func (pol *Policy) Tombstone() error {
	if pol.TombstoneBad {
		return Bad("", "tombstone (null value) and errors.on_tombstone is bad_record")
	}
	return ErrTombstone
}

// TextTooLong is the reason of a nested value whose JSON text passed
// the row's bound while it was written.
func TextTooLong(max int) error {
	return column.Reasonf("nested value of more than %d bytes as JSON (batch.max_bytes)", max)
}

// FreeCount counts one record's free values (MaxFreeValues).
type FreeCount int

// Add counts n more, and fails past the bound.
func (c *FreeCount) Add(n int) error {
	*c += FreeCount(n)
	if *c > MaxFreeValues {
		return column.Reasonf("more than %d values that take no bytes of the record (nulls, empty records, absent fields at their defaults)", MaxFreeValues)
	}
	return nil
}

// CheckDecimal refuses a two's-complement big-endian unscaled value raw
// larger than maxDecimalBytes, or whose magnitude has more than maxDigits
// decimal digits (0: not bounded), judged from its bit length before any
// digit is made, never refusing a value that fits. colType names the
// column whose type sets maxDigits ("": the schema's precision does).
func CheckDecimal(raw []byte, maxDigits int, colType string) error {
	if len(raw) > maxDecimalBytes {
		return column.Reasonf("decimal of %d bytes, more than %d", len(raw), maxDecimalBytes)
	}
	if maxDigits <= 0 {
		return nil
	}
	// |v| ≥ 2^e; 2^e ≥ 10^maxDigits when e ≥ maxDigits·log2(10), and
	// 3.322 > log2(10).
	if e := magnitudeExp(raw); e*1000 < maxDigits*3322 {
		return nil
	}
	if colType == "" {
		return column.Reasonf("decimal with more digits than its precision %d", maxDigits)
	}
	return column.Reasonf("decimal with more digits than %s holds", colType)
}

// magnitudeExp is an e with |v| ≥ 2^e for the two's-complement
// big-endian v (0 for |v| < 2).
func magnitudeExp(raw []byte) int {
	if len(raw) == 0 {
		return 0
	}
	sign := byte(0)
	if raw[0]&0x80 != 0 {
		sign = 0xff
	}
	i := 0
	for i < len(raw) && raw[i] == sign {
		i++
	}
	if i == len(raw) {
		return 0 // 0 or -1
	}
	// The first byte that is not sign extension: its bits above the
	// sign's, ones of the magnitude (a negative v's magnitude is at least
	// its complement's).
	top := raw[i] ^ sign
	return bits.Len8(top) - 1 + 8*(len(raw)-i-1)
}

// PanicReason is a bad record's reason for the panic v recovered while a
// record was decoded: the value and where it was raised.
func PanicReason(v any) string {
	return fmt.Sprintf("the decoder failed on this record (a bug in the sink: please report it): %v%s", v, panicSite())
}

// panicSite is " at file:line (function)" of the innermost frame of the
// sink's own code below the panic in the calling goroutine's stack (call
// it from the deferred function that recovers), "" if none.
func panicSite() string {
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	raised := false
	for {
		fr, more := frames.Next()
		switch {
		case fr.Function == "runtime.gopanic":
			raised = true
		case raised && strings.HasPrefix(fr.Function, "sink/"):
			return fmt.Sprintf(" at %s:%d (%s)", filepath.Base(fr.File), fr.Line, fr.Function)
		}
		if !more {
			return ""
		}
	}
}
