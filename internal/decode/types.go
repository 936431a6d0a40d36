package decode

import (
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // DateTime('tz') columns must resolve their zone even in images without /usr/share/zoneinfo
)

// kind is the ClickHouse type family a column buffer is built for.
type kind uint8

const (
	kUnsupported kind = iota
	kInt8
	kInt16
	kInt32
	kInt64
	kUInt8
	kUInt16
	kUInt32
	kUInt64
	kFloat32
	kFloat64
	kDecimal
	kString
	kFixedString
	kDate
	kDate32
	kDateTime
	kDateTime64
	kUUID
	kEnum8
	kEnum16
	kBool
	kIPv4
	kIPv6
	kArray
	kMap
	kNullable
	kLowCardinality
	kInt128
	kInt256
	kUInt128
	kUInt256
	kTuple   // elems, names (all set for a named tuple, all "" otherwise)
	kJSON    // elems are the typed paths, names their dotted paths
	kDynamic // no parameters kept
	kVariant // elems are the alternatives as the server lists them
)

// chType is a parsed ClickHouse type string. Wrappers (Nullable,
// LowCardinality, Array, Map) keep their inner type in elem (and key for Map).
type chType struct {
	kind  kind
	str   string         // the type as the server printed it, for messages
	elem  *chType        // Array element, Map value, Nullable/LowCardinality inner type
	key   *chType        // Map key
	n     int            // FixedString length, DateTime64 precision, Decimal precision
	scale int            // Decimal scale
	loc   *time.Location // DateTime/DateTime64 zone for zone-less text; nil means UTC

	elems []*chType // Tuple elements, Variant alternatives, JSON typed paths
	names []string  // Tuple element names (named tuples), JSON typed paths ("a.b")

	enumByName  map[string]int16
	enumByValue map[int16]bool
	enumMin     int16
}

// parseType parses a type string as system.columns prints it. Types this
// package cannot fill parse to kUnsupported (the caller reports the whole
// column type); malformed strings also end up there.
func parseType(s string) *chType {
	s = strings.TrimSpace(s)
	t := &chType{str: s}
	name, args, ok := splitTypeName(s)
	if !ok {
		return t
	}
	if k, ok := simpleTypes[name]; ok {
		if args == nil { // "Int8()" is not a type
			t.kind = k
		}
		return t
	}
	if parse := typeParsers[name]; parse != nil {
		return parse(t, name, args)
	}
	return t
}

// simpleTypes are the types without parameters, by name.
var simpleTypes = map[string]kind{
	"Int8":    kInt8,
	"Int16":   kInt16,
	"Int32":   kInt32,
	"Int64":   kInt64,
	"Int128":  kInt128,
	"Int256":  kInt256,
	"UInt8":   kUInt8,
	"UInt16":  kUInt16,
	"UInt32":  kUInt32,
	"UInt64":  kUInt64,
	"UInt128": kUInt128,
	"UInt256": kUInt256,
	"Float32": kFloat32,
	"Float64": kFloat64,
	"String":  kString,
	"Date":    kDate,
	"Date32":  kDate32,
	"UUID":    kUUID,
	"Bool":    kBool,
	"Boolean": kBool,
	"IPv4":    kIPv4,
	"IPv6":    kIPv6,
}

// typeParser fills t (named name, with these top-level arguments; args is
// nil without parentheses) and returns it, or returns it still
// kUnsupported when the arguments do not fit.
type typeParser func(t *chType, name string, args []string) *chType

// typeParsers are the types with parameters (or optional ones), by name.
// Set in init: the parsers of nested types call parseType.
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

func parseFixedString(t *chType, _ string, args []string) *chType {
	if len(args) != 1 {
		return t
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		return t
	}
	t.kind, t.n = kFixedString, n
	return t
}

func parseDateTime(t *chType, _ string, args []string) *chType {
	switch len(args) {
	case 0:
	case 1:
		loc, ok := parseZone(args[0])
		if !ok {
			return t
		}
		t.loc = loc
	default:
		return t
	}
	t.kind = kDateTime
	return t
}

func parseDateTime64(t *chType, _ string, args []string) *chType {
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
		t.loc = loc
	}
	t.kind, t.n = kDateTime64, p
	return t
}

// parseDecimal is Decimal(P) and Decimal(P, S).
func parseDecimal(t *chType, _ string, args []string) *chType {
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
	t.kind, t.n, t.scale = kDecimal, p, s
	return t
}

// decimalNPrecision is the precision of DecimalN(S).
var decimalNPrecision = map[string]int{"Decimal32": 9, "Decimal64": 18, "Decimal128": 38, "Decimal256": 76}

// parseDecimalN is Decimal32(S) … Decimal256(S).
func parseDecimalN(t *chType, name string, args []string) *chType {
	if len(args) != 1 {
		return t
	}
	p := decimalNPrecision[name]
	s, err := strconv.Atoi(args[0])
	if err != nil || s < 0 || s > p {
		return t
	}
	t.kind, t.n, t.scale = kDecimal, p, s
	return t
}

// parseEnum is Enum8('a' = 1, …) and Enum16(…).
func parseEnum(t *chType, name string, args []string) *chType {
	if len(args) == 0 {
		return t
	}
	t.enumByName = make(map[string]int16, len(args))
	t.enumByValue = make(map[int16]bool, len(args))
	lo, hi := -128, 127
	t.kind = kEnum8
	if name == "Enum16" {
		lo, hi = -32768, 32767
		t.kind = kEnum16
	}
	for i, a := range args {
		eq := strings.LastIndexByte(a, '=')
		if eq < 0 {
			t.kind = kUnsupported
			return t
		}
		label, ok := unquote(strings.TrimSpace(a[:eq]))
		v, err := strconv.Atoi(strings.TrimSpace(a[eq+1:]))
		if !ok || err != nil || v < lo || v > hi {
			t.kind = kUnsupported
			return t
		}
		t.enumByName[label] = int16(v)
		t.enumByValue[int16(v)] = true
		if i == 0 || int16(v) < t.enumMin {
			t.enumMin = int16(v) // ClickHouse's default for an Enum is its smallest value
		}
	}
	return t
}

// parseWrapper is Nullable(T) and LowCardinality(T).
func parseWrapper(t *chType, name string, args []string) *chType {
	if len(args) != 1 {
		return t
	}
	t.elem = parseType(args[0])
	t.kind = kNullable
	if name == "LowCardinality" {
		t.kind = kLowCardinality
	}
	return t
}

func parseArray(t *chType, _ string, args []string) *chType {
	if len(args) != 1 {
		return t
	}
	t.kind, t.elem = kArray, parseType(args[0])
	return t
}

func parseMap(t *chType, _ string, args []string) *chType {
	if len(args) != 2 {
		return t
	}
	t.kind, t.key, t.elem = kMap, parseType(args[0]), parseType(args[1])
	return t
}

func parseDynamic(t *chType, _ string, args []string) *chType {
	// Dynamic(max_types=N) only limits how the server stores it.
	if args == nil || (len(args) == 1 && strings.HasPrefix(args[0], "max_types=")) {
		t.kind = kDynamic
	}
	return t
}

// parseTuple is Tuple(T, U), Tuple(a T, b U) and Nested(a T, b U).
func parseTuple(t *chType, name string, args []string) *chType {
	if len(args) == 0 {
		return t
	}
	named := 0
	for _, a := range args {
		name, typ := splitElement(a)
		if name != "" {
			named++
		}
		t.names = append(t.names, name)
		t.elems = append(t.elems, parseType(typ))
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
		tup := &chType{kind: kTuple, str: "Tuple(" + strings.Join(args, ", ") + ")", elems: t.elems, names: t.names}
		t.elems, t.names = nil, nil
		t.kind, t.elem = kArray, tup
		return t
	}
	t.kind = kTuple
	return t
}

func parseVariant(t *chType, _ string, args []string) *chType {
	if len(args) == 0 {
		return t
	}
	for _, a := range args {
		t.elems = append(t.elems, parseType(a))
	}
	t.kind = kVariant
	return t
}

// parseJSONType is JSON and JSON(a.b T, SKIP c, max_dynamic_paths=N, …).
func parseJSONType(t *chType, _ string, args []string) *chType {
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
			t.names = append(t.names, path)
			t.elems = append(t.elems, parseType(typ))
		}
	}
	t.kind = kJSON
	return t
}

// parseSimpleAggregate is SimpleAggregateFunction(f, T): stored and
// inserted as its argument type T; clickhouse-go delegates.
func parseSimpleAggregate(t *chType, _ string, args []string) *chType {
	if len(args) != 2 {
		return t
	}
	return parseType(args[1])
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

// unsupported reports whether t, or a type inside it, is one this package
// cannot fill. Nesting rules follow ClickHouse's (no Nullable(Array), etc.).
// JSON, Dynamic and Variant are supported as a column's own type only.
// base is t without its Nullable and LowCardinality wrappers: the type
// whose values a column holds.
func (t *chType) base() *chType {
	for t.kind == kNullable || t.kind == kLowCardinality {
		t = t.elem
	}
	return t
}

func (t *chType) unsupported() bool { return t.unsupportedIn(true) }

func (t *chType) unsupportedIn(top bool) bool {
	switch t.kind {
	case kUnsupported:
		return true
	case kJSON:
		if !top {
			return true
		}
		for _, e := range t.elems {
			if !e.literal() {
				return true
			}
		}
		return false
	case kDynamic:
		return !top
	case kVariant:
		if !top {
			return true
		}
		for _, e := range t.elems {
			if e.kind == kNullable || e.kind == kLowCardinality && e.elem.kind == kNullable || e.unsupportedIn(false) {
				return true
			}
		}
		return false
	case kTuple:
		for _, e := range t.elems {
			if e.unsupportedIn(false) {
				return true
			}
		}
		return false
	case kNullable:
		switch t.elem.kind {
		case kArray, kMap, kNullable, kLowCardinality, kTuple, kJSON, kDynamic, kVariant:
			return true
		}
		return t.elem.unsupportedIn(false)
	case kLowCardinality:
		e := t.elem
		if e.kind == kNullable {
			e = e.elem
		}
		switch e.kind {
		case kArray, kMap, kLowCardinality, kNullable, kTuple, kJSON, kDynamic, kVariant:
			return true
		}
		return e.unsupportedIn(false)
	case kArray:
		return t.elem.unsupportedIn(false)
	case kMap:
		k := t.key
		if k.kind == kLowCardinality {
			k = k.elem
		}
		switch k.kind {
		case kArray, kMap, kNullable, kLowCardinality, kTuple, kJSON, kDynamic, kVariant:
			return true
		}
		return k.unsupportedIn(false) || t.elem.unsupportedIn(false)
	}
	return false
}

// literal reports whether values of t can be written as a canonical JSON
// literal (see appendLiteral): the scalar types, Nullable and
// LowCardinality of them, and Arrays of those. These are the types a JSON
// column's typed paths may have.
func (t *chType) literal() bool {
	switch t.kind {
	case kNullable, kLowCardinality, kArray:
		return !t.unsupportedIn(false) && t.elem.literal()
	case kUnsupported, kMap, kTuple, kJSON, kDynamic, kVariant:
		return false
	}
	return true
}

// scalar reports whether t (after LowCardinality/Nullable) is a single value,
// i.e. something a string or integer meta source can fill.
func (t *chType) scalar() bool {
	switch t.kind {
	case kArray, kMap, kTuple, kJSON, kVariant:
		return false
	case kNullable, kLowCardinality:
		return t.elem.scalar()
	}
	return true
}
