// Package chtype owns the grammar of ClickHouse column types: the text
// system.columns prints for a column's type (Nullable(Decimal(18, 2)),
// Map(String, Array(UInt64)), Enum8('a' = 1), JSON(a.b UInt32), ...)
// parsed into a Type tree that the decoder builds its column buffers and
// conversions from. It also says which types the sink can fill and how a
// type groups for the readers' conversions (Class). Types the sink does
// not fill, and malformed text, parse to Unsupported.
//
// Concurrency: Parse is safe for concurrent use; a Type is immutable
// once parsed.
package chtype

import (
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // DateTime('tz') columns must resolve their zone even in images without /usr/share/zoneinfo
)

// Kind is the ClickHouse type family a column buffer is built for.
type Kind uint8

const (
	Unsupported Kind = iota
	Int8
	Int16
	Int32
	Int64
	UInt8
	UInt16
	UInt32
	UInt64
	Float32
	Float64
	Decimal
	String
	FixedString
	Date
	Date32
	DateTime
	DateTime64
	UUID
	Enum8
	Enum16
	Bool
	IPv4
	IPv6
	Array
	Map
	Nullable
	LowCardinality
	Int128
	Int256
	UInt128
	UInt256
	Tuple   // Elems, Names (all set for a named tuple, all "" otherwise)
	JSON    // Elems are the typed paths, Names their dotted paths
	Dynamic // no parameters kept
	Variant // Elems are the alternatives as the server lists them
)

// Type is a parsed ClickHouse type string. Wrappers (Nullable,
// LowCardinality, Array, Map) keep their inner type in Elem (and Key for
// Map).
type Type struct {
	Kind      Kind
	Text      string         // the type as the server printed it, for messages (String)
	Elem      *Type          // Array element, Map value, Nullable/LowCardinality inner type
	Key       *Type          // Map key
	Size      int            // FixedString length
	Precision int            // DateTime64 precision, Decimal precision
	Scale     int            // Decimal scale
	Loc       *time.Location // DateTime/DateTime64 zone for zone-less text; nil means UTC

	Elems []*Type  // Tuple elements, Variant alternatives, JSON typed paths
	Names []string // Tuple element names (named tuples), JSON typed paths ("a.b")

	EnumByName  map[string]int16
	EnumByValue map[int16]bool
	EnumMin     int16
}

// Parse parses a type string as system.columns prints it. Types the sink
// cannot fill parse to Unsupported (the caller reports the whole column
// type); malformed strings also end up there.
func Parse(s string) *Type {
	s = strings.TrimSpace(s)
	t := &Type{Text: s}
	name, args, ok := splitTypeName(s)
	if !ok {
		return t
	}
	if k, ok := simpleTypes[name]; ok {
		if args == nil { // "Int8()" is not a type
			t.Kind = k
		}
		return t
	}
	if parse := typeParsers[name]; parse != nil {
		return parse(t, name, args)
	}
	return t
}

// simpleTypes are the types without parameters, by name.
var simpleTypes = map[string]Kind{
	"Int8":    Int8,
	"Int16":   Int16,
	"Int32":   Int32,
	"Int64":   Int64,
	"Int128":  Int128,
	"Int256":  Int256,
	"UInt8":   UInt8,
	"UInt16":  UInt16,
	"UInt32":  UInt32,
	"UInt64":  UInt64,
	"UInt128": UInt128,
	"UInt256": UInt256,
	"Float32": Float32,
	"Float64": Float64,
	"String":  String,
	"Date":    Date,
	"Date32":  Date32,
	"UUID":    UUID,
	"Bool":    Bool,
	"Boolean": Bool,
	"IPv4":    IPv4,
	"IPv6":    IPv6,
}

// typeParser fills t (named name, with these top-level arguments; args is
// nil without parentheses) and returns it, or returns it still
// Unsupported when the arguments do not fit.
type typeParser func(t *Type, name string, args []string) *Type

// typeParsers are the types with parameters (or optional ones), by name.
// Set in init: the parsers of nested types call Parse.
var typeParsers map[string]typeParser

func init() {
	typeParsers = map[string]typeParser{
		"FixedString":             parseFixedString,
		"DateTime":                parseDateTime,
		"DateTime64":              parseDateTime64,
		"Decimal":                 parseDecimal,
		"Decimal32":               parseDecimalN,
		"Decimal64":               parseDecimalN,
		"Decimal128":              parseDecimalN,
		"Decimal256":              parseDecimalN,
		"Enum8":                   parseEnum,
		"Enum16":                  parseEnum,
		"Nullable":                parseWrapper,
		"LowCardinality":          parseWrapper,
		"Array":                   parseArray,
		"Map":                     parseMap,
		"Dynamic":                 parseDynamic,
		"Tuple":                   parseTuple,
		"Nested":                  parseTuple,
		"Variant":                 parseVariant,
		"JSON":                    parseJSONType,
		"SimpleAggregateFunction": parseSimpleAggregate,
	}
}

func parseFixedString(t *Type, _ string, args []string) *Type {
	if len(args) != 1 {
		return t
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		return t
	}
	t.Kind, t.Size = FixedString, n
	return t
}

func parseDateTime(t *Type, _ string, args []string) *Type {
	switch len(args) {
	case 0:
	case 1:
		loc, ok := parseZone(args[0])
		if !ok {
			return t
		}
		t.Loc = loc
	default:
		return t
	}
	t.Kind = DateTime
	return t
}

func parseDateTime64(t *Type, _ string, args []string) *Type {
	if len(args) < 1 || len(args) > 2 {
		return t
	}
	p, err := strconv.Atoi(args[0])
	if err != nil || p < 0 || p > 9 {
		return t
	}
	if len(args) == 2 {
		loc, ok := parseZone(args[1])
		if !ok {
			return t
		}
		t.Loc = loc
	}
	t.Kind, t.Precision = DateTime64, p
	return t
}

// parseDecimal is Decimal(P) and Decimal(P, S).
func parseDecimal(t *Type, _ string, args []string) *Type {
	if len(args) < 1 || len(args) > 2 {
		return t
	}
	p, err := strconv.Atoi(args[0])
	if err != nil || p < 1 || p > 76 {
		return t
	}
	s := 0
	if len(args) == 2 {
		if s, err = strconv.Atoi(args[1]); err != nil || s < 0 || s > p {
			return t
		}
	}
	t.Kind, t.Precision, t.Scale = Decimal, p, s
	return t
}

// decimalNPrecision is the precision of DecimalN(S).
var decimalNPrecision = map[string]int{"Decimal32": 9, "Decimal64": 18, "Decimal128": 38, "Decimal256": 76}

// parseDecimalN is Decimal32(S) … Decimal256(S).
func parseDecimalN(t *Type, name string, args []string) *Type {
	if len(args) != 1 {
		return t
	}
	p := decimalNPrecision[name]
	s, err := strconv.Atoi(args[0])
	if err != nil || s < 0 || s > p {
		return t
	}
	t.Kind, t.Precision, t.Scale = Decimal, p, s
	return t
}

// parseEnum is Enum8('a' = 1, …) and Enum16(…).
func parseEnum(t *Type, name string, args []string) *Type {
	if len(args) == 0 {
		return t
	}
	t.EnumByName = make(map[string]int16, len(args))
	t.EnumByValue = make(map[int16]bool, len(args))
	lo, hi := -128, 127
	t.Kind = Enum8
	if name == "Enum16" {
		lo, hi = -32768, 32767
		t.Kind = Enum16
	}
	for i, a := range args {
		eq := strings.LastIndexByte(a, '=')
		if eq < 0 {
			t.Kind = Unsupported
			return t
		}
		label, ok := unquote(strings.TrimSpace(a[:eq]))
		v, err := strconv.Atoi(strings.TrimSpace(a[eq+1:]))
		if !ok || err != nil || v < lo || v > hi {
			t.Kind = Unsupported
			return t
		}
		t.EnumByName[label] = int16(v)
		t.EnumByValue[int16(v)] = true
		if i == 0 || int16(v) < t.EnumMin {
			t.EnumMin = int16(v) // ClickHouse's default for an Enum is its smallest value
		}
	}
	return t
}

// parseWrapper is Nullable(T) and LowCardinality(T).
func parseWrapper(t *Type, name string, args []string) *Type {
	if len(args) != 1 {
		return t
	}
	t.Elem = Parse(args[0])
	t.Kind = Nullable
	if name == "LowCardinality" {
		t.Kind = LowCardinality
	}
	return t
}

func parseArray(t *Type, _ string, args []string) *Type {
	if len(args) != 1 {
		return t
	}
	t.Kind, t.Elem = Array, Parse(args[0])
	return t
}

func parseMap(t *Type, _ string, args []string) *Type {
	if len(args) != 2 {
		return t
	}
	t.Kind, t.Key, t.Elem = Map, Parse(args[0]), Parse(args[1])
	return t
}

func parseDynamic(t *Type, _ string, args []string) *Type {
	// Dynamic(max_types=N) only limits how the server stores it.
	if args == nil || (len(args) == 1 && strings.HasPrefix(args[0], "max_types=")) {
		t.Kind = Dynamic
	}
	return t
}

// parseTuple is Tuple(T, U), Tuple(a T, b U) and Nested(a T, b U).
func parseTuple(t *Type, name string, args []string) *Type {
	if len(args) == 0 {
		return t
	}
	named := 0
	for _, a := range args {
		name, typ := splitElement(a)
		if name != "" {
			named++
		}
		t.Names = append(t.Names, name)
		t.Elems = append(t.Elems, Parse(typ))
	}
	if named != 0 && named != len(args) {
		return t // mixed named and unnamed elements: not something the server prints
	}
	if name == "Nested" {
		// Nested(a T, b U) (a table made with flatten_nested = 0) is
		// Array(Tuple(a T, b U)) on the wire.
		if named == 0 {
			return t
		}
		tup := &Type{Kind: Tuple, Text: "Tuple(" + strings.Join(args, ", ") + ")", Elems: t.Elems, Names: t.Names}
		t.Elems, t.Names = nil, nil
		t.Kind, t.Elem = Array, tup
		return t
	}
	t.Kind = Tuple
	return t
}

func parseVariant(t *Type, _ string, args []string) *Type {
	if len(args) == 0 {
		return t
	}
	for _, a := range args {
		t.Elems = append(t.Elems, Parse(a))
	}
	t.Kind = Variant
	return t
}

// parseJSONType is JSON and JSON(a.b T, SKIP c, max_dynamic_paths=N, …).
func parseJSONType(t *Type, _ string, args []string) *Type {
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "max_dynamic_paths=") || strings.HasPrefix(a, "max_dynamic_types="):
		case strings.HasPrefix(a, "SKIP "):
			// Skipped paths are dropped by the server.
		default:
			path, typ := splitElement(a)
			if path == "" {
				return t
			}
			t.Names = append(t.Names, path)
			t.Elems = append(t.Elems, Parse(typ))
		}
	}
	t.Kind = JSON
	return t
}

// parseSimpleAggregate is SimpleAggregateFunction(f, T): stored and
// inserted as its argument type T; clickhouse-go delegates.
func parseSimpleAggregate(t *Type, _ string, args []string) *Type {
	if len(args) != 2 {
		return t
	}
	return Parse(args[1])
}

// splitTypeName splits "Name(a, b)" into "Name" and its top-level
// arguments; args is nil when there are no parentheses.
func splitTypeName(s string) (name string, args []string, ok bool) {
	i := strings.IndexByte(s, '(')
	if i < 0 {
		return s, nil, s != ""
	}
	if !strings.HasSuffix(s, ")") {
		return "", nil, false
	}
	name = strings.TrimSpace(s[:i])
	inner := s[i+1 : len(s)-1]
	depth, quoted, start := 0, false, 0
	args = []string{}
	for j := 0; j < len(inner); j++ {
		ch := inner[j]
		switch {
		case quoted:
			if ch == '\\' {
				j++
			} else if ch == '\'' {
				quoted = false
			}
		case ch == '\'':
			quoted = true
		case ch == '(':
			depth++
		case ch == ')':
			depth--
			if depth < 0 {
				return "", nil, false
			}
		case ch == ',' && depth == 0:
			args = append(args, strings.TrimSpace(inner[start:j]))
			start = j + 1
		}
	}
	if depth != 0 || quoted {
		return "", nil, false
	}
	if last := strings.TrimSpace(inner[start:]); last != "" || len(args) > 0 {
		args = append(args, last)
	}
	return name, args, true
}

// splitElement splits a Tuple element or JSON typed path "name Type" into
// its name (unquoted from backticks) and type; an element without a name
// ("UInt8", "DateTime64(3, 'UTC')") returns "" and the whole text.
func splitElement(s string) (name, typ string) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "`") {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				if i+1 < len(s) {
					i++
					b.WriteByte(s[i])
				}
			case '`':
				if i+1 < len(s) && s[i+1] == '`' {
					i++
					b.WriteByte('`')
					continue
				}
				return b.String(), strings.TrimSpace(s[i+1:])
			default:
				b.WriteByte(s[i])
			}
		}
		return "", s
	}
	sp := strings.IndexByte(s, ' ')
	if sp <= 0 || strings.ContainsAny(s[:sp], "(,'") {
		return "", s
	}
	return s[:sp], strings.TrimSpace(s[sp+1:])
}

// unquote decodes a single-quoted ClickHouse string literal.
func unquote(s string) (string, bool) {
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		return "", false
	}
	s = s[1 : len(s)-1]
	if !strings.ContainsRune(s, '\\') && !strings.Contains(s, "''") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		if ch == '\'' && i+1 < len(s) && s[i+1] == '\'' {
			i++
		}
		b.WriteByte(ch)
	}
	return b.String(), true
}

func parseZone(arg string) (*time.Location, bool) {
	name, ok := unquote(strings.TrimSpace(arg))
	if !ok {
		return nil, false
	}
	if name == "UTC" || name == "" {
		return nil, true
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, false
	}
	return loc, true
}

// String is the type's text, as the server printed it.
func (t *Type) String() string { return t.Text }

// Base is t without its Nullable and LowCardinality wrappers: the type
// whose values a column holds.
func (t *Type) Base() *Type {
	for t.Kind == Nullable || t.Kind == LowCardinality {
		t = t.Elem
	}
	return t
}

// TakesNull reports whether t stores NULL (Nullable(T),
// LowCardinality(Nullable(T))).
func (t *Type) TakesNull() bool {
	return t.Kind == Nullable || (t.Kind == LowCardinality && t.Elem != nil && t.Elem.Kind == Nullable)
}

// Unsupported reports whether t, or a type inside it, is one the sink
// cannot fill. Nesting rules follow ClickHouse's (no Nullable(Array), etc.).
// JSON, Dynamic and Variant are supported as a column's own type only.
func (t *Type) Unsupported() bool { return t.unsupportedIn(true) }

func (t *Type) unsupportedIn(top bool) bool {
	switch t.Kind {
	case Unsupported:
		return true
	case JSON:
		if !top {
			return true
		}
		for _, e := range t.Elems {
			if !e.literal() {
				return true
			}
		}
		return false
	case Dynamic:
		return !top
	case Variant:
		if !top {
			return true
		}
		for _, e := range t.Elems {
			if e.Kind == Nullable || e.Kind == LowCardinality && e.Elem.Kind == Nullable || e.unsupportedIn(false) {
				return true
			}
		}
		return false
	case Tuple:
		for _, e := range t.Elems {
			if e.unsupportedIn(false) {
				return true
			}
		}
		return false
	case Nullable:
		switch t.Elem.Kind {
		case Array, Map, Nullable, LowCardinality, Tuple, JSON, Dynamic, Variant:
			return true
		}
		return t.Elem.unsupportedIn(false)
	case LowCardinality:
		e := t.Elem
		if e.Kind == Nullable {
			e = e.Elem
		}
		switch e.Kind {
		case Array, Map, LowCardinality, Nullable, Tuple, JSON, Dynamic, Variant:
			return true
		}
		return e.unsupportedIn(false)
	case Array:
		return t.Elem.unsupportedIn(false)
	case Map:
		k := t.Key
		if k.Kind == LowCardinality {
			k = k.Elem
		}
		switch k.Kind {
		case Array, Map, Nullable, LowCardinality, Tuple, JSON, Dynamic, Variant:
			return true
		}
		return k.unsupportedIn(false) || t.Elem.unsupportedIn(false)
	}
	return false
}

// literal reports whether values of t can be written as a canonical JSON
// literal (the decoder's JSON column writes them so): the scalar types, Nullable and
// LowCardinality of them, and Arrays of those. These are the types a JSON
// column's typed paths may have.
func (t *Type) literal() bool {
	switch t.Kind {
	case Nullable, LowCardinality, Array:
		return !t.unsupportedIn(false) && t.Elem.literal()
	case Unsupported, Map, Tuple, JSON, Dynamic, Variant:
		return false
	}
	return true
}

// Scalar reports whether t (after LowCardinality/Nullable) is a single value,
// i.e. something a string or integer meta source can fill.
func (t *Type) Scalar() bool {
	switch t.Kind {
	case Array, Map, Tuple, JSON, Variant:
		return false
	case Nullable, LowCardinality:
		return t.Elem.Scalar()
	}
	return true
}

// Class groups column types by the values a reader converts for them
// (Debezium's and Kafka Connect's encodings of dates, decimals and JSON,
// Protobuf's enums and messages).
type Class uint8

const (
	ClassOther     Class = iota
	ClassTime            // Date, Date32, DateTime, DateTime64
	ClassString          // String, FixedString
	ClassNumber          // integers and floats
	ClassDecimal         // Decimal
	ClassComposite       // Array, Map, Tuple
)

// Class is the group of t (after Nullable/LowCardinality).
func (t *Type) Class() Class {
	switch t.Base().Kind {
	case Date, Date32, DateTime, DateTime64:
		return ClassTime
	case String, FixedString:
		return ClassString
	case Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float32, Float64,
		Int128, Int256, UInt128, UInt256:
		return ClassNumber
	case Decimal:
		return ClassDecimal
	case Array, Map, Tuple:
		return ClassComposite
	}
	return ClassOther
}
