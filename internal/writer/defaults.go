package writer

// The values of DEFAULT expressions. A record that lacks a field must
// insert what ClickHouse would have put in the column, not the type's zero;
// and the INSERT must still name the column so that the records that do
// carry the field are inserted. So Describe asks the server, once per
// expression, for the expression's value in the column's type
// (SELECT CAST((expr) AS T), which 18.16 runs too), and hands it to decode
// as JSON text (chschema.ColumnSchema.Default) that the plan puts in a row
// whose field is absent. A block is then built from the records and those
// constants alone, the same way every time (exactly-once rebuilds a batch
// identically).
//
// An expression that cannot be computed once is left to the server, as
// before: one that reads another column (the SELECT fails without a row),
// one that calls a function that is not deterministic (now(), rand(),
// dictGet …: system.functions says so on servers that have its
// deterministic column, a list below says so on older ones), one that does
// not give exactly one value, or one of a type this file does not turn
// into JSON (Map, Tuple, JSON, Variant, Dynamic, aggregate states). Its
// column stays out of the INSERT unless a route maps it, and DefaultWhy
// says why (sink check prints it, the pipeline logs it once).

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"sink/internal/chschema"
	"sink/internal/chtable"
)

// defaultCache remembers each (type, expression)'s outcome for the life of
// the Writer: a deterministic expression has one value, so the periodic
// re-reads of a table ask the server nothing new.
type defaultCache struct {
	mu   sync.Mutex
	vals map[string]defaultValue
	// server is whether system.functions has the deterministic column
	// (0 unknown, 1 yes, 2 no).
	server int
}

type defaultValue struct{ json, why string }

// fillDefaults sets Default or DefaultWhy of every DEFAULT column of cols.
// A server that does not answer is an error; an expression the server
// refuses is a DefaultWhy.
func (w *Writer) fillDefaults(ctx context.Context, cols []chschema.ColumnSchema) error {
	for i := range cols {
		c := &cols[i]
		if c.DefaultKind != "DEFAULT" {
			continue
		}
		v, err := w.defaultOf(ctx, c.Name, c.Type, c.DefaultExpr)
		if err != nil {
			return err
		}
		c.Default, c.DefaultWhy = v.json, v.why
	}
	return nil
}

func (w *Writer) defaultOf(ctx context.Context, name, typ, expr string) (defaultValue, error) {
	if err := chtable.CheckColumnName(name); err != nil {
		return defaultValue{why: "the driver cannot name the column in an INSERT"}, nil
	}
	key := typ + "\x00" + expr
	w.dflt.mu.Lock()
	v, ok := w.dflt.vals[key]
	w.dflt.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := w.evalDefault(ctx, typ, expr)
	if err != nil {
		return v, err
	}
	w.dflt.mu.Lock()
	if w.dflt.vals == nil {
		w.dflt.vals = map[string]defaultValue{}
	}
	w.dflt.vals[key] = v
	w.dflt.mu.Unlock()
	return v, nil
}

// evalDefault computes expr as a value of type typ on the server.
func (w *Writer) evalDefault(ctx context.Context, typ, expr string) (defaultValue, error) {
	if strings.TrimSpace(expr) == "" {
		return defaultValue{why: "the server reports no default expression"}, nil
	}
	if kind, ok := unreadableType(typ); ok {
		return defaultValue{why: "a default of a " + kind + " column is not read back by the sink"}, nil
	}
	fns := exprFunctions(expr)
	volatile, err := w.volatile(ctx, fns)
	if err != nil {
		return defaultValue{}, err
	}
	if len(volatile) > 0 {
		return defaultValue{why: "it calls " + strings.Join(volatile, ", ") + ", which is not deterministic"}, nil
	}
	rows, err := w.conn.Query(ctx, "SELECT CAST(("+expr+") AS "+typ+")")
	if err != nil {
		if chtable.Code(err) != 0 {
			return defaultValue{why: "the server cannot compute it without a row (it reads another column?): " + firstLine(err.Error())}, nil
		}
		return defaultValue{}, fmt.Errorf("clickhouse: computing default %s of type %s: %w", expr, typ, err)
	}
	defer rows.Close()
	var vals []any
	for rows.Next() {
		v := reflect.New(rows.ColumnTypes()[0].ScanType())
		if err := rows.Scan(v.Interface()); err != nil {
			return defaultValue{why: "its value is not read back by the sink: " + err.Error()}, nil
		}
		vals = append(vals, v.Elem().Interface())
	}
	if err := rows.Err(); err != nil {
		if chtable.Code(err) != 0 {
			return defaultValue{why: "the server cannot compute it without a row: " + firstLine(err.Error())}, nil
		}
		return defaultValue{}, fmt.Errorf("clickhouse: computing default %s of type %s: %w", expr, typ, err)
	}
	if len(vals) != 1 {
		return defaultValue{why: fmt.Sprintf("it gives %d values, not one", len(vals))}, nil
	}
	text, err := DefaultJSON(vals[0], typ)
	if err != nil {
		return defaultValue{why: err.Error()}, nil
	}
	return defaultValue{json: text}, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// unreadableType names the kind of a type whose values DefaultJSON does not
// write (ok true), looking through Nullable, LowCardinality and Array.
func unreadableType(typ string) (string, bool) {
	t := innerType(typ)
	for strings.HasPrefix(t, "Array(") {
		t = innerType(t[len("Array(") : len(t)-1])
	}
	for _, k := range []string{"Map", "Tuple", "Nested", "JSON", "Object", "Variant", "Dynamic", "AggregateFunction", "SimpleAggregateFunction", "Point", "Ring", "Polygon", "MultiPolygon", "LineString", "MultiLineString", "Nothing", "QBit", "Time", "Time64"} {
		if t == k || strings.HasPrefix(t, k+"(") {
			return k, true
		}
	}
	return "", false
}

// innerType strips Nullable( ) and LowCardinality( ) from typ.
func innerType(typ string) string {
	for {
		switch {
		case strings.HasPrefix(typ, "Nullable(") && strings.HasSuffix(typ, ")"):
			typ = typ[len("Nullable(") : len(typ)-1]
		case strings.HasPrefix(typ, "LowCardinality(") && strings.HasSuffix(typ, ")"):
			typ = typ[len("LowCardinality(") : len(typ)-1]
		default:
			return typ
		}
	}
}

// exprFunctions returns the names of the functions expr calls (an
// identifier followed by an opening parenthesis), outside string literals
// and quoted identifiers, in order of first appearance.
func exprFunctions(expr string) []string {
	var out []string
	for i := 0; i < len(expr); {
		switch ch := expr[i]; {
		case ch == '\'' || ch == '"' || ch == '`':
			i = skipQuoted(expr, i)
		case isIdentStart(ch):
			j := skipWhile(expr, i, isIdentByte)
			if k := skipWhile(expr, j, isBlank); k < len(expr) && expr[k] == '(' {
				out = appendNew(out, expr[i:j])
			}
			i = j
		case ch >= '0' && ch <= '9':
			i = skipWhile(expr, i, isNumberByte) // a number, with its exponent or hex digits
		default:
			i++
		}
	}
	return out
}

// skipWhile returns the index of the first byte of s from i on that in
// does not accept (len(s) when all do).
func skipWhile(s string, i int, in func(byte) bool) int {
	for i < len(s) && in(s[i]) {
		i++
	}
	return i
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentByte(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func isNumberByte(c byte) bool { return isIdentByte(c) || c == '.' }

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// appendNew appends name to names unless names holds it already.
func appendNew(names []string, name string) []string {
	for _, f := range names {
		if f == name {
			return names
		}
	}
	return append(names, name)
}

// skipQuoted returns the index after the quoted text that starts at i
// (backslash escapes and a doubled quote inside).
func skipQuoted(s string, i int) int {
	q := s[i]
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			if i+1 < len(s) && s[i+1] == q {
				i++
				continue
			}
			return i + 1
		}
	}
	return len(s)
}

// volatileNames are the functions whose value changes from call to call or
// with state outside the expression, for servers whose system.functions
// does not say (before the deterministic column); prefixes end in '*'.
var volatileNames = []string{
	"now*", "today", "yesterday", "rand*", "generate*", "random*", "fuzzBits",
	"dict*", "joinGet*", "hostName", "hostname", "FQDN", "fullHostName", "currentDatabase", "currentUser",
	"currentQueryID", "queryID", "initialQueryID", "uptime", "version", "revision", "timezone", "timeZone",
	"serverTimezone", "serverTimeZone", "serverUUID", "rowNumberIn*", "blockNumber", "blockSize",
	"runningDifference*", "runningAccumulate", "neighbor", "arrayJoin", "getSetting*", "getMacro",
	"getServerPort", "tcpPort", "shardNum", "shardCount", "file", "filesystem*", "transactionID",
	"user", "connectionId", "UTCTimestamp", "current_*", "localtime*", "curdate", "arrayShuffle",
	"arrayPartialShuffle", "arrayRandomSample", "isConstant",
}

// builtinVolatile reports whether volatileNames lists fn (case-insensitive).
func builtinVolatile(fn string) bool {
	f := strings.ToLower(fn)
	for _, v := range volatileNames {
		v = strings.ToLower(v)
		if p, ok := strings.CutSuffix(v, "*"); ok {
			if strings.HasPrefix(f, p) {
				return true
			}
		} else if f == v {
			return true
		}
	}
	return false
}

// volatile returns the functions of fns that are not known to be
// deterministic: listed in volatileNames, or, on a server whose
// system.functions has the deterministic column, not marked 1 there
// (unknown functions, such as user-defined ones, count as not deterministic).
func (w *Writer) volatile(ctx context.Context, fns []string) ([]string, error) {
	var out []string
	var ask []string
	for _, f := range fns {
		if builtinVolatile(f) {
			out = append(out, f)
		} else {
			ask = append(ask, f)
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	has, err := w.hasDeterministic(ctx)
	if err != nil || !has {
		return out, err
	}
	lower := make([]string, len(ask))
	for i, f := range ask {
		lower[i] = strings.ToLower(f)
	}
	det, err := w.deterministic(ctx, lower)
	if err != nil {
		return nil, err
	}
	for i, f := range ask {
		if !det[lower[i]] && !operatorLike(lower[i]) {
			out = append(out, f)
		}
	}
	return out, nil
}

// hasDeterministic reports whether the server's system.functions has the
// deterministic column, asking once for the life of the Writer.
func (w *Writer) hasDeterministic(ctx context.Context) (bool, error) {
	w.dflt.mu.Lock()
	server := w.dflt.server
	w.dflt.mu.Unlock()
	if server == 0 {
		var n uint64
		if err := w.conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = 'system' AND table = 'functions' AND name = 'deterministic'").Scan(&n); err != nil {
			return false, fmt.Errorf("clickhouse: reading system.columns: %w", err)
		}
		server = 2
		if n > 0 {
			server = 1
		}
		w.dflt.mu.Lock()
		w.dflt.server = server
		w.dflt.mu.Unlock()
	}
	return server == 1, nil
}

// deterministic returns the functions of lower (lower-case names) that
// system.functions marks deterministic.
func (w *Writer) deterministic(ctx context.Context, lower []string) (map[string]bool, error) {
	rows, err := w.conn.Query(ctx, "SELECT lower(name) FROM system.functions WHERE lower(name) IN (?) AND deterministic = 1", lower)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: reading system.functions: %w", err)
	}
	defer rows.Close()
	det := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("clickhouse: reading system.functions: %w", err)
		}
		det[n] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: reading system.functions: %w", err)
	}
	return det, nil
}

// operatorLike is a call the server parses itself that system.functions
// may not list under that name (CAST is listed; these are syntax).
func operatorLike(f string) bool {
	switch f {
	case "cast", "in", "not", "and", "or", "if", "tuple", "array", "interval", "extract", "substring", "trim", "position", "exists":
		return true
	}
	return false
}

// DefaultJSON writes v, a value of ClickHouse type typ as clickhouse-go
// scans it, as the JSON text decode reads back into the same value: numbers
// as numbers (NaN and infinities as the strings decode takes), Decimals and
// big integers by their exact digits, strings quoted byte for byte, Date
// as YYYY-MM-DD, DateTime and DateTime64 as RFC 3339 instants in UTC to
// the nanosecond, UUIDs and IP addresses as text, Enums by name, arrays as
// arrays, NULL as null. A value it cannot write exactly is an error.
func DefaultJSON(v any, typ string) (string, error) {
	var b strings.Builder
	if err := writeDefault(&b, reflect.ValueOf(v), innerType(typ)); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeDefault(b *strings.Builder, v reflect.Value, typ string) error {
	if !v.IsValid() {
		b.WriteString("null")
		return nil
	}
	if writeKnownDefault(b, v.Interface(), typ) {
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writeDefault(b, v.Elem(), typ)
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		writeFloatDefault(b, v.Float(), v.Type().Bits())
	case reflect.String:
		quoteJSON(b, v.String())
	case reflect.Slice, reflect.Array:
		return writeArrayDefault(b, v, typ)
	default:
		return fmt.Errorf("a default of type %s (%s) is not read back by the sink", typ, v.Type())
	}
	return nil
}

// writeKnownDefault writes x when it is one of the driver's value types
// that has a text form of its own (times, Decimals, big integers, UUIDs,
// IP addresses, bytes) and reports whether it was.
func writeKnownDefault(b *strings.Builder, x any, typ string) bool {
	switch x := x.(type) {
	case time.Time:
		if typ == "Date" || typ == "Date32" {
			b.WriteString(`"` + x.Format("2006-01-02") + `"`)
		} else {
			b.WriteString(`"` + x.UTC().Format(time.RFC3339Nano) + `"`)
		}
	case decimal.Decimal:
		b.WriteString(x.String())
	case big.Int:
		b.WriteString(x.String())
	case uuid.UUID:
		b.WriteString(`"` + x.String() + `"`)
	case net.IP:
		b.WriteString(`"` + x.String() + `"`)
	case netip.Addr:
		b.WriteString(`"` + x.String() + `"`)
	case []byte:
		quoteJSON(b, string(x))
	default:
		return false
	}
	return true
}

// writeFloatDefault writes f as a JSON number, or NaN and the infinities
// as the strings decode takes.
func writeFloatDefault(b *strings.Builder, f float64, bits int) {
	switch {
	case math.IsNaN(f):
		b.WriteString(`"NaN"`)
	case math.IsInf(f, 1):
		b.WriteString(`"Infinity"`)
	case math.IsInf(f, -1):
		b.WriteString(`"-Infinity"`)
	default:
		b.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
	}
}

// writeArrayDefault writes the slice or array v as a JSON array of its
// elements, each of the element type of the Array type typ.
func writeArrayDefault(b *strings.Builder, v reflect.Value, typ string) error {
	elem := typ
	if strings.HasPrefix(typ, "Array(") && strings.HasSuffix(typ, ")") {
		elem = innerType(typ[len("Array(") : len(typ)-1])
	}
	b.WriteByte('[')
	for i := 0; i < v.Len(); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeDefault(b, v.Index(i), elem); err != nil {
			return err
		}
	}
	b.WriteByte(']')
	return nil
}

// quoteJSON writes s as a JSON string, byte for byte: only the quote, the
// backslash and control characters are escaped, so bytes that are not
// UTF-8 reach the column unchanged.
func quoteJSON(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}
