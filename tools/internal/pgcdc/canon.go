package pgcdc

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// A value is compared by its canonical text: the same number, instant, byte
// string, JSON document or array gives the same text whichever database it
// came from and however that database printed it (1.5000 and 1.5; NaN and
// nan; 2024-05-17T10:00:00Z and 2024-05-17 12:00:00+02; {"b":1,"a":2.0} and
// {"a":2,"b":1}). A text that does not parse as its kind canonicalizes to
// a marker that equals nothing a valid value gives, so the comparison
// reports it instead of stopping.

// side says where a raw value came from: PostgreSQL's text output or
// ClickHouse's toString of the mirror column.
type side struct {
	clickhouse bool
	chType     string // the mirror column's type, for ClickHouse
}

// invalid is the canonical form of a value that does not parse.
func invalid(err error) string { return "\x00invalid: " + err.Error() }

// canon returns the canonical text of a non-NULL scalar raw value of kind k.
func canon(k Kind, s side, raw string) string {
	c, err := canonErr(k, s, raw)
	if err != nil {
		return invalid(err)
	}
	return c
}

func canonErr(k Kind, s side, raw string) (string, error) {
	switch k {
	case KInt16, KInt32, KInt64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return "", errors.New("not an integer")
		}
		return strconv.FormatInt(n, 10), nil
	case KDecimal, KNumeric:
		return canonDecimal(raw)
	case KFloat32:
		return canonFloat(raw, 32)
	case KFloat64:
		return canonFloat(raw, 64)
	case KBool:
		switch raw {
		case "t", "true", "1":
			return "true", nil
		case "f", "false", "0":
			return "false", nil
		}
		return "", errors.New("not a boolean")
	case KDate:
		d, err := time.Parse("2006-01-02", raw)
		if err != nil {
			return "", errors.New("not a date (YYYY-MM-DD)")
		}
		return d.Format("2006-01-02"), nil
	case KTimestamp, KTimestampTZ:
		in, err := parseInstant(raw)
		if err != nil {
			return "", err
		}
		return in.UTC().Format("2006-01-02 15:04:05.000000Z"), nil
	case KTime:
		us, err := parseTimeOfDay(raw, s.clickhouse && strings.Contains(s.chType, "Int64"))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%02d:%02d:%02d.%06d", us/3_600_000_000, us/60_000_000%60, us/1_000_000%60, us%1_000_000), nil
	case KUUID:
		u, err := uuid.Parse(raw)
		if err != nil || len(raw) != 36 {
			return "", errors.New("not a UUID")
		}
		return u.String(), nil
	case KJSON:
		return canonJSON(raw)
	case KBytes:
		if s.clickhouse {
			return hex.EncodeToString([]byte(raw)), nil
		}
		b, err := hex.DecodeString(raw) // encode(col, 'hex')
		if err != nil {
			return "", errors.New("not hex")
		}
		return hex.EncodeToString(b), nil
	case KEnum:
		for _, m := range Moods {
			if raw == m {
				return raw, nil
			}
		}
		return "", errors.New("not a label of mood")
	}
	return raw, nil
}

func canonDecimal(raw string) (string, error) {
	if raw == "NaN" {
		return raw, nil
	}
	d, err := decimal.NewFromString(raw)
	if err != nil || strings.ContainsAny(raw, "eE") {
		return "", errors.New("not a decimal number")
	}
	// The exponent of the coefficient without trailing zeros: 1.5000 and
	// 1.5 print the same.
	return d.String(), nil
}

func canonFloat(raw string, bits int) (string, error) {
	switch strings.ToLower(raw) {
	case "nan":
		return "NaN", nil
	case "inf", "+inf", "infinity", "+infinity":
		return "+Inf", nil
	case "-inf", "-infinity":
		return "-Inf", nil
	}
	f, err := strconv.ParseFloat(raw, bits)
	if err != nil {
		return "", errors.New("not a number")
	}
	if f == 0 {
		f = 0 // -0 = 0
	}
	return strconv.FormatFloat(f, 'g', -1, bits), nil
}

// instantLayouts are the ways a timestamp arrives: PostgreSQL's ISO output
// (zone as +00), ClickHouse's DateTime64 text (no zone: the column is UTC),
// and Debezium's text as the sink writes it into a String column
// (2024-05-17 12:34:56.789012, or RFC 3339 with Z).
var instantLayouts = []string{
	"2006-01-02 15:04:05.999999999-07",
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
}

func parseInstant(raw string) (time.Time, error) {
	for _, l := range instantLayouts {
		if t, err := time.Parse(l, raw); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("not a timestamp")
}

// parseTimeOfDay reads a time of day into µs since midnight: the text
// HH:MM:SS[.ffffff] (24:00:00 is the end of the day), or, from an integer
// column, the µs themselves.
func parseTimeOfDay(raw string, micros bool) (int64, error) {
	if micros {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 || n > 86_400_000_000 {
			return 0, errors.New("not µs since midnight")
		}
		return n, nil
	}
	bad := errors.New("not a time of day (HH:MM:SS[.ffffff])")
	hms, frac, _ := strings.Cut(raw, ".")
	p := strings.Split(hms, ":")
	if len(p) != 3 || len(p[0]) != 2 || len(p[1]) != 2 || len(p[2]) != 2 || len(frac) > 9 {
		return 0, bad
	}
	var v [3]int64
	for i, s := range p {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, bad
		}
		v[i] = n
	}
	var us int64
	if frac != "" {
		f, err := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		if err != nil || f < 0 {
			return 0, bad
		}
		us = f / 1000
	}
	total := ((v[0]*60+v[1])*60+v[2])*1_000_000 + us
	if v[1] > 59 || v[2] > 59 || total > 86_400_000_000 {
		return 0, bad
	}
	return total, nil
}

// canonJSON re-renders a JSON document with object keys sorted and every
// number as its exact decimal value (1.50, 1.5 and 15e-1 alike).
func canonJSON(raw string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", errors.New("not JSON")
	}
	if dec.More() {
		return "", errors.New("not JSON (text after the document)")
	}
	var b bytes.Buffer
	if err := writeJSON(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			if err := writeJSON(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case json.Number:
		d, err := decimal.NewFromString(string(x))
		if err != nil {
			return errors.New("not JSON (bad number)")
		}
		b.WriteString(d.String())
	case string:
		b.WriteString(strconv.Quote(x))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	}
	return nil
}

// canonArray returns the canonical text of an array whose elements (nil for
// NULL) are of kind elem.
func canonArray(elem Kind, s side, els []*string) string {
	parts := make([]string, len(els))
	for i, e := range els {
		if e == nil {
			parts[i] = "NULL"
			continue
		}
		c, err := canonErr(elem, s, *e)
		if err != nil {
			return invalid(fmt.Errorf("element %d: %v", i+1, err))
		}
		parts[i] = strconv.Quote(c)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// pgArrayElements reads the JSON that array_to_json prints into elements:
// numbers as their text, strings unquoted, null as nil.
func pgArrayElements(raw string) ([]*string, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v []any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("not a JSON array")
	}
	out := make([]*string, len(v))
	for i, e := range v {
		switch x := e.(type) {
		case nil:
		case json.Number:
			s := string(x)
			out[i] = &s
		case string:
			out[i] = &x
		default:
			return nil, fmt.Errorf("element %d is %T", i+1, e)
		}
	}
	return out, nil
}

// elemKind is the kind of an array kind's elements.
func elemKind(k Kind) Kind {
	if k == KIntArray {
		return KInt32
	}
	return KText
}

// isArray reports whether values of kind k are arrays.
func isArray(k Kind) bool { return k == KIntArray || k == KTextArray }

// show renders a raw value for a message: quoted, cut after 60 bytes with
// the full length, or NULL.
func show(raw *string) string {
	if raw == nil {
		return "NULL"
	}
	s := *raw
	if len(s) > 60 {
		return fmt.Sprintf("%q… (%d bytes)", s[:60], len(s))
	}
	return strconv.Quote(s)
}
