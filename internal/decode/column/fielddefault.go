package column

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/chtype"
)

// Defaults that a record's schema declares for a field no column takes, so
// that a column schema evolution adds for it carries the source column's
// default (rows written before the column existed, and rows the source
// never sends again, then read the source's default rather than the type's
// zero): the JSON converter's "default" on a field of a Debezium schema
// block, and an Avro field's default.

// FieldDefault is a field's default as its schema declares it.
type FieldDefault struct {
	JSON string // the value, as JSON text
	// Unit says how a number counts a date or an instant (an Avro
	// logical type): "days", "ms", "us" or "ns"; "" for a plain value.
	Unit string
	// Skip says why the default cannot be written exactly ("": it can).
	Skip string
}

// Literal is d as a ClickHouse DEFAULT expression for a column of type typ,
// written so that the column reads exactly the value a record carrying
// the default inserts: numbers checked against the type (a Decimal as a
// quoted string, so that no float rounds it), strings quoted, booleans for
// Bool or as 1/0 for integer types, dates as 'YYYY-MM-DD', instants as
// toDateTime(unix seconds) or toDateTime64('…', p, 'UTC'). A default it
// cannot write exactly (null, an array or object, a value of another kind
// than the type, a fraction of a second for DateTime) is an error saying so.
// Every string literal is quoted by chschema.QuoteString, the one quoting
// of values in the sink's SQL.
func (d *FieldDefault) Literal(typ string) (string, error) {
	if d.Skip != "" {
		return "", fmt.Errorf("%s", d.Skip)
	}
	v, err := fastjson.Parse(d.JSON)
	if err != nil {
		return "", fmt.Errorf("default %s is not JSON", Cut([]byte(d.JSON)))
	}
	t := chtype.Parse(typ)
	for t != nil && (t.Kind == chtype.Nullable || t.Kind == chtype.LowCardinality) {
		t = t.Elem
	}
	lit := "" // with err errInexact when the kind of v has no literal for t
	err = errInexact
	if t != nil {
		base, _, _ := strings.Cut(t.Text, "(")
		switch v.Type() {
		case fastjson.TypeNumber:
			lit, err = numberLiteral(string(v.MarshalTo(nil)), d.Unit, base, t)
		case fastjson.TypeString:
			lit, err = stringLiteral(string(v.GetStringBytes()), base, t)
		case fastjson.TypeTrue, fastjson.TypeFalse:
			lit, err = boolLiteral(v.Type() == fastjson.TypeTrue, base)
		}
	}
	if errors.Is(err, errInexact) {
		return "", fmt.Errorf("default %s cannot be written exactly for %s", Cut([]byte(d.JSON)), typ)
	}
	return lit, err
}

// errInexact is a default whose kind (number, string, boolean) has no
// exact literal for the column's type; Literal says which.
var errInexact = errors.New("no exact literal")

// numberLiteral writes the JSON number text for a column of base type
// base (t: the whole type); unit, when set, makes it an instant
// (instantLiteral).
func numberLiteral(text, unit, base string, t *chtype.Type) (string, error) {
	if unit != "" {
		return instantLiteral(text, unit, base, t)
	}
	switch {
	case base == "Int128" || base == "Int256":
		if n, ok := new(big.Int).SetString(text, 10); ok {
			return n.String(), nil
		}
	case strings.HasPrefix(base, "Int"):
		if _, err := strconv.ParseInt(text, 10, 64); err == nil {
			return text, nil
		}
	case strings.HasPrefix(base, "UInt"):
		if _, err := strconv.ParseUint(text, 10, 64); err == nil {
			return text, nil
		}
	case base == "Float32" || base == "Float64":
		if _, err := strconv.ParseFloat(text, 64); err == nil {
			return text, nil
		}
	case strings.HasPrefix(base, "Decimal"):
		if _, err := strconv.ParseFloat(text, 64); err == nil {
			return chschema.QuoteString(text), nil
		}
	case base == "String":
		return chschema.QuoteString(text), nil
	}
	return "", errInexact
}

// stringLiteral writes the JSON string s for a column of base type base.
func stringLiteral(s, base string, t *chtype.Type) (string, error) {
	switch base {
	case "String", "FixedString", "Enum8", "Enum16", "UUID", "IPv4", "IPv6":
		return chschema.QuoteString(s), nil
	case "Date", "Date32":
		if y, m, dd, ok := parseYMD([]byte(s)); ok && len(s) == 10 {
			return chschema.QuoteString(fmt.Sprintf("%04d-%02d-%02d", y, m, dd)), nil
		}
	case "DateTime", "DateTime64":
		if sec, nsec, ok := parseDateTimeText([]byte(s), nil); ok {
			return timeLiteral(sec, nsec, base, t)
		}
	}
	return "", errInexact
}

// boolLiteral writes b for a Bool column, or as 1/0 for an integer one.
func boolLiteral(b bool, base string) (string, error) {
	switch {
	case base == "Bool":
		return strconv.FormatBool(b), nil
	case strings.HasPrefix(base, "Int"), strings.HasPrefix(base, "UInt"):
		if b {
			return "1", nil
		}
		return "0", nil
	}
	return "", errInexact
}

// instantLiteral writes a number that counts unit since the epoch for a
// Date, Date32, DateTime or DateTime64 column.
func instantLiteral(text, unit, base string, t *chtype.Type) (string, error) {
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return "", fmt.Errorf("default %s is not a whole number of %s", text, unit)
	}
	switch unit {
	case "days":
		if base == "Date" || base == "Date32" {
			return chschema.QuoteString(time.Unix(n*SecondsPerDay, 0).UTC().Format("2006-01-02")), nil
		}
		return timeLiteral(n*SecondsPerDay, 0, base, t)
	case "ms":
		return timeLiteral(floorDiv(n, 1e3), (n-floorDiv(n, 1e3)*1e3)*1e6, base, t)
	case "us":
		return timeLiteral(floorDiv(n, 1e6), (n-floorDiv(n, 1e6)*1e6)*1e3, base, t)
	case "ns":
		return timeLiteral(floorDiv(n, 1e9), n-floorDiv(n, 1e9)*1e9, base, t)
	}
	return "", fmt.Errorf("default %s in unknown unit %s", text, unit)
}

// timeLiteral writes an instant for a DateTime (whole seconds only) or a
// DateTime64(p) column (to p digits only), independent of any time zone.
func timeLiteral(sec, nsec int64, base string, t *chtype.Type) (string, error) {
	switch base {
	case "DateTime":
		if nsec != 0 {
			return "", fmt.Errorf("default has a fraction of a second, which DateTime does not keep")
		}
		return "toDateTime(" + strconv.FormatInt(sec, 10) + ")", nil
	case "DateTime64":
		if nsec%pow10[9-t.Precision] != 0 {
			return "", fmt.Errorf("default has more digits of a second than %s keeps", t.Text)
		}
		ts := time.Unix(sec, nsec).UTC().Format("2006-01-02 15:04:05.000000000")
		return "toDateTime64(" + chschema.QuoteString(ts) + ", " + strconv.Itoa(t.Precision) + ", 'UTC')", nil
	case "Date", "Date32":
		if sec%SecondsPerDay != 0 || nsec != 0 {
			return "", fmt.Errorf("default is not midnight, which a %s cannot keep", base)
		}
		return chschema.QuoteString(time.Unix(sec, 0).UTC().Format("2006-01-02")), nil
	}
	return "", fmt.Errorf("default is an instant, not a value for %s", t.Text)
}
