package decode

import (
	"strconv"
	"time"

	"github.com/valyala/fastjson"
)

// semConv converts a field's value by the semantic type a Kafka Connect
// JSON schema block gives the field (Debezium's io.debezium.* types and
// Connect's own logical types: semNames in debezium_schema.go) into what
// the column reading it takes. The debezium-json format and the reader of
// Kafka Connect's JSON envelope (connect.go) share it, so a Decimal, a
// Date or a MicroTimestamp converts the same way in both; the rules, by
// column type, are the debezium-json format's (debeziumFormat's comment).
//
// A semConv is owned by one format and used from one goroutine; what it
// makes in points into its scratch, valid until the next conversion.
type semConv struct {
	st         *appendState
	dec        decimals        // debezium_decimal.go
	text       []byte          // formatting scratch
	jsonParser fastjson.Parser // io.debezium.data.Json text into Array/Map columns
}

// convert applies the semantic type fs to in, column c's value. Set the
// Decimal column first (dec.column) when c is one.
func (s *semConv) convert(c *dbzCol, fs fieldSem, in *input) error {
	switch fs.kind {
	case semDate, semTsMillis, semTsMicros, semTsNanos, semTimeMillis, semTimeMicros, semTimeNanos:
		return s.temporal(c, fs.kind, in)
	case semZonedTime:
		return s.zonedTime(c, in)
	case semZonedTs:
		return s.zonedTimestamp(c, in)
	case semDuration:
		if c.cls == clsTime && (in.kind == inNum || in.kind == inStr) {
			return reasonf("a Debezium MicroDuration (an interval) %s is not a point in time; use an integer, Decimal or String column", show(in))
		}
	case semDecimal:
		if in.kind == inStr {
			return s.dec.decimalFromBase64(in, in.b, int(fs.scale))
		}
	case semVarDecimal:
		if in.kind == inObject {
			return s.dec.varDecimal(in)
		}
	case semJSON:
		return s.jsonText(c, in)
	case semBytes:
		return s.bytes(c, in)
	}
	return nil
}

// temporal converts a date, timestamp or time of day (a number of days,
// ms, µs or ns) for a date, time or String column; numeric columns keep
// the number, other columns refuse it themselves.
func (s *semConv) temporal(c *dbzCol, k semKind, in *input) error {
	if in.kind != inNum || (c.cls != clsTime && c.cls != clsString) {
		return nil
	}
	n, err := strconv.ParseInt(b2s(in.b), 10, 64)
	if err != nil {
		return reasonf("cannot read %s as a Debezium %s value", show(in), semLabel(k))
	}
	if ns, ok, tod := timeOfDay(k, n); tod {
		if !ok {
			return reasonf("Debezium %s value %s is not a time of day", semLabel(k), show(in))
		}
		return s.timeInto(c, ns, in)
	}
	t, ok := semTime(k, n)
	if !ok {
		return reasonf("Debezium %s value %s is out of range", semLabel(k), show(in))
	}
	if c.cls == clsTime {
		in.kind, in.t, in.n = inTime, t, t.UnixMilli()
		return nil
	}
	layout := "2006-01-02 15:04:05.999999999"
	if k == semDate {
		layout = "2006-01-02"
	}
	s.text = t.AppendFormat(s.text[:0], layout)
	in.kind, in.b = inStr, s.text
	return nil
}

// zonedTime converts a ZonedTime text: String columns keep it, numeric ones
// get µs since midnight UTC (as MicroTime), time columns the time of day.
func (s *semConv) zonedTime(c *dbzCol, in *input) error {
	if in.kind != inStr || c.cls == clsString {
		return nil
	}
	ns, ok := zonedTimeOfDay(in.b)
	if !ok {
		return reasonf("cannot read %s as a Debezium ZonedTime value", show(in))
	}
	if c.cls == clsNumber || c.cls == clsDecimal {
		in.kind, in.n = inInt, ns/1000
		return nil
	}
	return s.timeInto(c, ns, in)
}

// zonedTimestamp converts a ZonedTimestamp text for numeric columns (µs
// since the epoch, as MicroTimestamp); DateTime columns read RFC 3339
// themselves, String columns keep it.
func (s *semConv) zonedTimestamp(c *dbzCol, in *input) error {
	if in.kind != inStr || (c.cls != clsNumber && c.cls != clsDecimal) {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, b2s(in.b))
	if err != nil {
		return reasonf("cannot read %s as a Debezium ZonedTimestamp value", show(in))
	}
	us, ok := unixMicro(t)
	if !ok {
		return reasonf("Debezium ZonedTimestamp value %s is out of range", show(in))
	}
	in.kind, in.n = inInt, us
	return nil
}

// jsonText parses io.debezium.data.Json text for an Array, Map or Tuple
// column; other columns keep the text.
func (s *semConv) jsonText(c *dbzCol, in *input) error {
	if in.kind != inStr || c.cls != clsComposite {
		return nil
	}
	v, err := s.jsonParser.ParseBytes(in.b)
	if err != nil {
		return reasonf("io.debezium.data.Json value is not JSON: %v", err)
	}
	s.st.fromJSON(v, in)
	return nil
}

// bytes decodes base64 bytes for a String or FixedString column; other
// columns get the text.
func (s *semConv) bytes(c *dbzCol, in *input) error {
	if in.kind != inStr || c.cls != clsString {
		return nil
	}
	raw, err := s.dec.base64(in.b)
	if err != nil {
		return reasonf("cannot decode %s as base64 bytes", show(in))
	}
	in.b = raw
	return nil
}

// timeInto sets in to a time of day (ns since midnight) for column c: text
// "15:04:05[.fraction]" for String ("24:00:00" stays so), the instant that
// long after 1970-01-01 00:00 UTC for DateTime and DateTime64 (24:00:00 is
// 1970-01-02 00:00:00). A Date column has no place for a time of day.
func (s *semConv) timeInto(c *dbzCol, ns int64, in *input) error {
	if c.day {
		return reasonf("a time of day %s cannot fill a Date column; use String, DateTime64 or an integer", show(in))
	}
	if c.cls == clsTime {
		t := time.Unix(0, ns).UTC()
		in.kind, in.t, in.n = inTime, t, t.UnixMilli()
		return nil
	}
	s.text = appendTimeOfDay(s.text[:0], ns)
	in.kind, in.b = inStr, s.text
	return nil
}
