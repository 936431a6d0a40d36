package connect

import (
	"strconv"
	"time"

	"github.com/valyala/fastjson"

	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/route"
)

// Conv converts a field's value by the semantic type a Kafka Connect
// JSON schema block gives the field (Debezium's io.debezium.* types and
// Connect's own logical types: SemNames) into what
// the column reading it takes. The debezium-json format and the reader of
// Kafka Connect's JSON envelope (Envelope) share it, so a Decimal, a
// Date or a MicroTimestamp converts the same way in both; the rules, by
// column type, are the debezium-json format's (the debezium reader's
// package comment).
//
// A Conv is owned by one reader and used from one goroutine; what it
// makes in points into its scratch, valid until the next conversion.
type Conv struct {
	st         *column.State
	Dec        Decimals        // decimal.go
	text       []byte          // formatting scratch
	jsonParser fastjson.Parser // io.debezium.data.Json text into Array/Map columns
}

// NewConv returns the converter of a reader appending with st.
func NewConv(st *column.State) Conv { return Conv{st: st} }

// Convert applies the semantic type fs to in, column c's value. Set the
// Decimal column first (dec.column) when c is one.
func (s *Conv) Convert(c *Col, fs Sem, in *column.Value) error {
	switch fs.Kind {
	case SemDate, SemTsMillis, SemTsMicros, SemTsNanos, SemTimeMillis, SemTimeMicros, SemTimeNanos:
		return s.temporal(c, fs.Kind, in)
	case SemZonedTime:
		return s.zonedTime(c, in)
	case SemZonedTs:
		return s.zonedTimestamp(c, in)
	case SemDuration:
		if c.Class == chtype.ClassTime && (in.Kind == column.Number || in.Kind == column.String) {
			return column.Reasonf("a Debezium MicroDuration (an interval) %s is not a point in time; use an integer, Decimal or String column", column.Show(in))
		}
	case SemDecimal:
		if in.Kind == column.String {
			return s.Dec.FromBase64(in, in.Bytes, int(fs.Scale))
		}
	case SemVarDecimal:
		if in.Kind == column.Object {
			return s.Dec.VarDecimal(in)
		}
	case SemJSON:
		return s.jsonText(c, in)
	case SemBytes:
		return s.bytes(c, in)
	}
	return nil
}

// temporal converts a date, timestamp or time of day (a number of days,
// ms, µs or ns) for a date, time or String column; numeric columns keep
// the number, other columns refuse it themselves.
func (s *Conv) temporal(c *Col, k SemKind, in *column.Value) error {
	if in.Kind != column.Number || (c.Class != chtype.ClassTime && c.Class != chtype.ClassString) {
		return nil
	}
	n, err := strconv.ParseInt(column.B2S(in.Bytes), 10, 64)
	if err != nil {
		return column.Reasonf("cannot read %s as a Debezium %s value", column.Show(in), semLabel(k))
	}
	if ns, ok, tod := timeOfDay(k, n); tod {
		if !ok {
			return column.Reasonf("Debezium %s value %s is not a time of day", semLabel(k), column.Show(in))
		}
		return s.timeInto(c, ns, in)
	}
	t, ok := semTime(k, n)
	if !ok {
		return column.Reasonf("Debezium %s value %s is out of range", semLabel(k), column.Show(in))
	}
	if c.Class == chtype.ClassTime {
		in.Kind, in.Time, in.Int = column.Instant, t, t.UnixMilli()
		return nil
	}
	layout := "2006-01-02 15:04:05.999999999"
	if k == SemDate {
		layout = "2006-01-02"
	}
	s.text = t.AppendFormat(s.text[:0], layout)
	in.Kind, in.Bytes = column.String, s.text
	return nil
}

// zonedTime converts a ZonedTime text: String columns keep it, numeric ones
// get µs since midnight UTC (as MicroTime), time columns the time of day.
func (s *Conv) zonedTime(c *Col, in *column.Value) error {
	if in.Kind != column.String || c.Class == chtype.ClassString {
		return nil
	}
	ns, ok := zonedTimeOfDay(in.Bytes)
	if !ok {
		return column.Reasonf("cannot read %s as a Debezium ZonedTime value", column.Show(in))
	}
	if c.Class == chtype.ClassNumber || c.Class == chtype.ClassDecimal {
		in.Kind, in.Int = column.Integer, ns/1000
		return nil
	}
	return s.timeInto(c, ns, in)
}

// zonedTimestamp converts a ZonedTimestamp text for numeric columns (µs
// since the epoch, as MicroTimestamp); DateTime columns read RFC 3339
// themselves, String columns keep it.
func (s *Conv) zonedTimestamp(c *Col, in *column.Value) error {
	if in.Kind != column.String || (c.Class != chtype.ClassNumber && c.Class != chtype.ClassDecimal) {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, column.B2S(in.Bytes))
	if err != nil {
		return column.Reasonf("cannot read %s as a Debezium ZonedTimestamp value", column.Show(in))
	}
	us, ok := unixMicro(t)
	if !ok {
		return column.Reasonf("Debezium ZonedTimestamp value %s is out of range", column.Show(in))
	}
	in.Kind, in.Int = column.Integer, us
	return nil
}

// jsonText parses io.debezium.data.Json text for an Array, Map or Tuple
// column; other columns keep the text.
func (s *Conv) jsonText(c *Col, in *column.Value) error {
	if in.Kind != column.String || c.Class != chtype.ClassComposite {
		return nil
	}
	v, err := s.jsonParser.ParseBytes(in.Bytes)
	if err != nil {
		return column.Reasonf("io.debezium.data.Json value is not JSON: %v", err)
	}
	s.st.FromJSON(v, in)
	return nil
}

// bytes decodes base64 bytes for a String or FixedString column; other
// columns get the text.
func (s *Conv) bytes(c *Col, in *column.Value) error {
	if in.Kind != column.String || c.Class != chtype.ClassString {
		return nil
	}
	raw, err := s.Dec.base64(in.Bytes)
	if err != nil {
		return column.Reasonf("cannot decode %s as base64 bytes", column.Show(in))
	}
	in.Bytes = raw
	return nil
}

// timeInto sets in to a time of day (ns since midnight) for column c: text
// "15:04:05[.fraction]" for String ("24:00:00" stays so), the instant that
// long after 1970-01-01 00:00 UTC for DateTime and DateTime64 (24:00:00 is
// 1970-01-02 00:00:00). A Date column has no place for a time of day.
func (s *Conv) timeInto(c *Col, ns int64, in *column.Value) error {
	if c.Day {
		return column.Reasonf("a time of day %s cannot fill a Date column; use String, DateTime64 or an integer", column.Show(in))
	}
	if c.Class == chtype.ClassTime {
		t := time.Unix(0, ns).UTC()
		in.Kind, in.Time, in.Int = column.Instant, t, t.UnixMilli()
		return nil
	}
	s.text = appendTimeOfDay(s.text[:0], ns)
	in.Kind, in.Bytes = column.String, s.text
	return nil
}

// ColOf is what a reader converting Kafka Connect's semantic types knows
// of a column of type t that reads a field.
func ColOf(t *chtype.Type) Col {
	b := t.Base()
	c := Col{Kind: route.Field, Class: t.Class(), Scale: b.Scale, Day: b.Kind == chtype.Date || b.Kind == chtype.Date32}
	if b.Kind == chtype.Decimal {
		c.IntDigits, c.DecType = b.Precision-b.Scale, b.Text
	}
	return c
}

// Col is what a reader converting semantic types knows of one column it
// reads (ColOf): Kind and Path are the reader's own (debezium-json's
// source kinds), the rest says how the column's type takes a converted
// value.
type Col struct {
	Kind  route.Kind
	Path  []string     // route.SourceBlock: the path below the source block
	Class chtype.Class // route.Field: how Debezium's encodings reach the column type
	Scale int          // route.Field: the column's Decimal scale (schema-less decimals)
	// route.Field into a Decimal(P, S) column: P - S, the integer digits
	// it holds, and its type; "" for other columns (Decimals.ForColumn).
	IntDigits int
	DecType   string
	Day       bool // route.Field: a Date or Date32 column (no time of day)
}
