package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/v2"
	goyaml "go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment variable that overrides the file.
//
// After the prefix, a double underscore separates nesting levels and the rest
// is lower-cased: SINK_CLICKHOUSE__PASSWORD sets clickhouse.password,
// SINK_KAFKA__FETCH_MIN_BYTES sets kafka.fetch_min_bytes. List options take
// comma-separated values (SINK_KAFKA__BROKERS=a:9092,b:9092). The lists of
// mappings and of lists, routes and clickhouse.shards, take their whole
// value as JSON (or YAML in flow style), which replaces the file's:
// SINK_ROUTES='[{"topic": "a", "table": "b"}]',
// SINK_CLICKHOUSE__SHARDS='[["ch-1:9000", "ch-2:9000"], ["ch-3:9000"]]'; one
// element of them (SINK_ROUTES__0__TABLE) cannot be set alone.
//
// A few names under the prefix are not config overrides and are ignored:
// SINK_CONFIG (the config file path, for cmd/sink), SINK_REQUIRE_STACK and
// anything starting with SINK_TEST_ (test harness switches, which end up in
// the environment of everything a test run starts). Every other SINK_*
// variable must name a known key, so that a typo fails loudly instead of
// being ignored.
const EnvPrefix = "SINK_"

func isReservedEnv(name string) bool {
	switch name {
	case EnvPrefix + "CONFIG", EnvPrefix + "REQUIRE_STACK":
		return true
	}
	return strings.HasPrefix(name, EnvPrefix+"TEST_")
}

// Load reads the YAML file at path and applies Parse to it. Production passes
// os.Environ() as environ.
//
// Every error line starts with "config: <path>: ".
func Load(path string, environ []string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := parse(b, environ)
	if err != nil {
		return nil, prefixEach("config: "+path+": ", err)
	}
	return c, nil
}

// Parse builds a Config from defaults, then the YAML document, then the
// overrides in environ (see EnvPrefix), fills the defaults that derive from
// other options, and validates the result.
//
// Unknown keys, in the document or the environment, are errors, as are values
// of the wrong type; each is reported with its full key path, and with the
// variable's name when it came from the environment. Problems are reported
// all at once, joined with errors.Join, one per line, each starting with
// "config: ": first every decoding problem, or, when there is none, every
// problem Validate finds.
//
// A deprecated key (see deprecations) is accepted, from the document or the
// environment, and moved onto its replacement before decoding; Warnings
// then lists it, one line per key.
func Parse(yamlBytes []byte, environ []string) (*Config, error) {
	c, err := parse(yamlBytes, environ)
	if err != nil {
		return nil, prefixEach("config: ", err)
	}
	return c, nil
}

func parse(yamlBytes []byte, environ []string) (*Config, error) {
	ko := koanf.New(".")

	doc, err := yaml.Parser().Unmarshal(yamlBytes)
	if err != nil {
		// One problem per line, like every other error here.
		var te *goyaml.TypeError
		if errors.As(err, &te) {
			var errs []error
			for _, e := range te.Errors {
				errs = append(errs, fmt.Errorf("parse YAML: %s", e))
			}
			return nil, errors.Join(errs...)
		}
		return nil, fmt.Errorf("parse YAML: %s", fixYAMLLine(err.Error()))
	}
	// "kafka:" with everything below it commented out parses as null; it
	// means "use the defaults", not "zero every Kafka option".
	dropNulls(doc)
	if err := ko.Load(confmap.Provider(doc, ""), nil); err != nil {
		return nil, err
	}

	var envErrs []error
	envKeys := make(map[string]string) // key path -> variable that set it
	if err := ko.Load(envProvider(environ, envKeys, &envErrs), nil); err != nil {
		return nil, err
	}
	if len(envErrs) > 0 {
		return nil, errors.Join(envErrs...)
	}
	deprecated, errs := applyDeprecations(ko, envKeys)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	c := defaults()
	err = ko.UnmarshalWithConf("", c, koanf.UnmarshalConf{
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook:  decodeHook,
			ErrorUnused: true,
			// Lists and maps from the file replace the defaults instead of
			// being merged into them; absent keys keep their defaults.
			ZeroFields: true,
		},
	})
	if err != nil {
		return nil, decodeErrors(err, envKeys)
	}

	if err := writtenPositive(ko, c, envKeys); err != nil {
		return nil, err
	}
	c.normalize()
	c.fillMinimal()
	c.fillDerived()
	c.deprecated = deprecated
	errs = filePasswords(doc)
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// envProvider reads the overrides in environ (see EnvPrefix), noting in
// envKeys which variable set each key and in errs each variable refused.
func envProvider(environ []string, envKeys map[string]string, errs *[]error) *env.Env {
	return env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			key, err := envKey(name)
			if err == nil && key != "" {
				envKeys[key] = name
				if !structuredKeys[key] {
					return key, value
				}
				var v any
				if v, err = structuredEnv(name, value); err == nil {
					return key, v
				}
			}
			if err != nil {
				*errs = append(*errs, err)
			}
			return "", nil
		},
	})
}

// writtenPositive refuses a batch.max_wait or batch.max_latency written as
// 0 or less: left out, 0 gives them their defaults (fillLatency).
func writtenPositive(ko *koanf.Koanf, c *Config, envKeys map[string]string) error {
	for _, kd := range []struct {
		key string
		d   time.Duration
	}{{"batch.max_wait", c.Batch.MaxWait}, {"batch.max_latency", c.Batch.MaxLatency}} {
		if ko.Exists(kd.key) && kd.d <= 0 {
			return fmt.Errorf("%s (%v) must be positive%s", kd.key, kd.d, envSource(kd.key, envKeys, false))
		}
	}
	return nil
}

// envKey turns SINK_KAFKA__FETCH_MIN_BYTES into kafka.fetch_min_bytes. It
// returns "" for variables that are not config overrides.
func envKey(name string) (string, error) {
	if isReservedEnv(name) {
		return "", nil
	}
	rest := strings.TrimPrefix(name, EnvPrefix)
	key := strings.ToLower(strings.ReplaceAll(rest, "__", "."))
	for _, part := range strings.Split(key, ".") {
		if part == "" {
			return "", fmt.Errorf("environment variable %s: empty key level (want e.g. %sKAFKA__BROKERS)", name, EnvPrefix)
		}
	}
	for k := range structuredKeys {
		if strings.HasPrefix(key, k+".") {
			return "", fmt.Errorf("environment variable %s: %s cannot be set from the environment one element at a time; set %s%s to the whole list as JSON", name, k, EnvPrefix, strings.ToUpper(strings.ReplaceAll(k, ".", "__")))
		}
	}
	return key, nil
}

// structuredKeys are the keys whose environment value is the whole list,
// as JSON: their elements are mappings or lists, which a comma-separated
// value cannot say.
var structuredKeys = map[string]bool{"routes": true, "clickhouse.shards": true}

// structuredEnv parses the value of variable name, a key of
// structuredKeys: a list in JSON, or in YAML's flow style.
func structuredEnv(name, value string) (any, error) {
	var v any
	if err := goyaml.Unmarshal([]byte(value), &v); err != nil {
		return nil, fmt.Errorf("environment variable %s: not a JSON list: %s", name, fixYAMLLine(err.Error()))
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("environment variable %s: want a JSON list, e.g. %s", name, structuredExample[strings.TrimPrefix(name, EnvPrefix)])
	}
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			dropNulls(m)
		}
	}
	return list, nil
}

// structuredExample shows each structured variable's form.
var structuredExample = map[string]string{
	"ROUTES":             `[{"topic": "events", "table": "events"}]`,
	"CLICKHOUSE__SHARDS": `[["ch-1:9000", "ch-2:9000"], ["ch-3:9000"]]`,
}

// dropNulls removes null values from a parsed YAML document, recursively.
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	byteSizeType = reflect.TypeFor[ByteSize]()
)

// decodeHook converts the loosely typed values from YAML and the environment
// (where everything is a string) into the field types. mapstructure's weak
// typing is not used because it accepts too much: a bare 5 would become a
// 5ns duration.
func decodeHook(from, to reflect.Type, data any) (any, error) {
	switch {
	case to == durationType:
		return decodeDuration(data)
	case to == byteSizeType:
		return decodeByteSize(data)
	case from.Kind() == reflect.Float64 && to.Kind() == reflect.Int:
		// mapstructure would truncate 1.5 to 1.
		f := reflect.ValueOf(data).Float()
		if f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
			return nil, fmt.Errorf("invalid integer %v", f)
		}
		return int(f), nil
	case from.Kind() == reflect.String:
		return decodeString(to, reflect.ValueOf(data).String(), data)
	}
	return data, nil
}

// decodeDuration takes a duration as it is, or its text ("5s").
func decodeDuration(data any) (any, error) {
	switch v := data.(type) {
	case time.Duration:
		return v, nil
	case string:
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q: want a number with a unit, e.g. \"500ms\", \"5s\", \"1m30s\"", v)
		}
		return d, nil
	}
	return nil, fmt.Errorf("invalid duration %v: want a number with a unit, e.g. \"500ms\", \"5s\", \"1m30s\"", data)
}

// decodeByteSize takes a byte size as it is, its text ("32MiB"), or a
// whole, non-negative number of bytes.
func decodeByteSize(data any) (any, error) {
	switch v := data.(type) {
	case ByteSize:
		return v, nil
	case string:
		return ParseByteSize(v)
	case int:
		return byteSizeFromInt(int64(v))
	case int64:
		return byteSizeFromInt(v)
	case uint64:
		if v > math.MaxInt64 {
			return nil, fmt.Errorf("invalid byte size %d: too large", v)
		}
		return ByteSize(v), nil
	case float64:
		if v != math.Trunc(v) || v < 0 || v >= math.MaxInt64 {
			return nil, fmt.Errorf("invalid byte size %v: want a whole, non-negative number of bytes or a size such as \"32MiB\"", v)
		}
		return ByteSize(v), nil
	}
	return nil, fmt.Errorf("invalid byte size %v: want a number of bytes or a size such as \"32MiB\"", data)
}

// decodeString converts text (data, whose string is s) into a field of
// type to: a list of strings, an integer, a number or a boolean; data is
// returned as it is for other types.
func decodeString(to reflect.Type, s string, data any) (any, error) {
	switch {
	case to.Kind() == reflect.Slice && to.Elem().Kind() == reflect.String:
		// Environment lists are comma-separated; a YAML string gets the
		// same treatment rather than a confusing type error.
		out := []string{} // not nil: mapstructure skips nil, keeping the default
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
		return out, nil
	case to.Kind() == reflect.Int:
		s = strings.TrimSpace(s)
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("invalid integer %q", s)
		}
		return n, nil
	case to.Kind() == reflect.Float64:
		s = strings.TrimSpace(s)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("invalid number %q", s)
		}
		return f, nil
	case to.Kind() == reflect.Bool:
		s = strings.TrimSpace(s)
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("invalid boolean %q: want true or false", s)
		}
		return b, nil
	}
	return data, nil
}

func byteSizeFromInt(n int64) (ByteSize, error) {
	if n < 0 {
		return 0, fmt.Errorf("invalid byte size %d: must not be negative", n)
	}
	return ByteSize(n), nil
}

// decodeErrors rewrites mapstructure's errors so that each names the full key
// path once, in this package's style, and says which environment variable
// set the key when one did.
func decodeErrors(err error, envKeys map[string]string) error {
	var out []error
	for _, leaf := range decodeLeaves(err) {
		de, ok := leaf.(*mapstructure.DecodeError)
		if !ok {
			out = append(out, leaf)
			continue
		}
		name := mapKeyRE.ReplaceAllString(de.Name(), ".$1")
		inner := de.Unwrap()
		if keys, ok := strings.CutPrefix(inner.Error(), "has invalid keys: "); ok {
			for _, k := range strings.Split(keys, ", ") {
				if name != "" {
					k = name + "." + k
				}
				out = append(out, fmt.Errorf("unknown key %q%s", k, envSource(k, envKeys, true)))
			}
			continue
		}
		var ute *mapstructure.UnconvertibleTypeError
		if errors.As(inner, &ute) {
			inner = fmt.Errorf("expected %s, got %s", typeName(ute.Expected.Type()), describe(ute.Value))
		} else if got, ok := strings.CutPrefix(inner.Error(), "source data must be an array or slice, got "); ok {
			inner = fmt.Errorf("expected a list, got %s", got)
		} else if got, ok := strings.CutPrefix(inner.Error(), "expected a map or struct, got "); ok {
			inner = fmt.Errorf("expected a mapping, got %s", strings.Trim(got, `"`))
		}
		out = append(out, fmt.Errorf("%s: %w%s", name, inner, envSource(name, envKeys, false)))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Error() < out[j].Error() })
	return errors.Join(out...)
}

// mapKeyRE finds map keys in mapstructure's names ("settings[x]", unlike list
// indexes "routes[0]") so they can be written as key paths ("settings.x"),
// the form used everywhere else.
var mapKeyRE = regexp.MustCompile(`\[([^\]]*[^\]0-9][^\]]*)\]`)

// decodeLeaves finds the DecodeErrors in what mapstructure returns: a
// "decoding failed" wrapper around errors joined per struct and per slice.
// A DecodeError never wraps another one.
func decodeLeaves(err error) []error {
	if _, ok := err.(*mapstructure.DecodeError); ok {
		return []error{err}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, decodeLeaves(e)...)
		}
		return out
	}
	if inner := errors.Unwrap(err); inner != nil {
		return decodeLeaves(inner)
	}
	return []error{err}
}

// leaves flattens a tree of joined errors.
func leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

func envSource(key string, envKeys map[string]string, unknown bool) string {
	name, ok := envKeys[key]
	if !ok {
		// SINK_LOG__LEVEL__X turns log.level into a mapping; the error
		// is about log.level, the culprit is the longer variable. An
		// error in routes[0].table is SINK_ROUTES's, which set the list.
		for _, k := range sortedKeys(envKeys) {
			if strings.HasPrefix(k, key+".") || strings.HasPrefix(key, k+"[") {
				name, ok = envKeys[k], true
				break
			}
		}
	}
	if !ok {
		return ""
	}
	// SINK_KAFKA_BROKERS is the likely mistake: one underscore too few.
	if rest := strings.TrimPrefix(name, EnvPrefix); unknown && !strings.Contains(rest, "__") && strings.Contains(rest, "_") {
		return fmt.Sprintf(" (from %s; nesting levels are separated by a double underscore, e.g. %sKAFKA__BROKERS)", name, EnvPrefix)
	}
	return " (from " + name + ")"
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.String:
		return "a string"
	case reflect.Int:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Float64:
		return "a number"
	}
	return t.String()
}

func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("string %q", v)
	}
	return fmt.Sprintf("%T %v", v, v)
}

// prefixEach prefixes every joined error with p, so that each line of a
// multi-problem report reads on its own.
func prefixEach(p string, err error) error {
	var out []error
	for _, e := range leaves(err) {
		out = append(out, fmt.Errorf("%s%w", p, e))
	}
	return errors.Join(out...)
}

// parserLineRE matches the YAML library's parser (not scanner) errors. The
// library reports their line zero-based, one above the line where the
// problem is (scanner errors it corrects itself).
var parserLineRE = regexp.MustCompile(`^yaml: line (\d+): (did not find expected (key|node content|<document start>|'-' indicator|',' or '\]'|',' or '\}')|found duplicate %|found incompatible YAML document|found undefined tag handle)`)

// fixYAMLLine rewrites a YAML error message so that its line number names
// the line where the problem is.
func fixYAMLLine(msg string) string {
	m := parserLineRE.FindStringSubmatchIndex(msg)
	if m == nil {
		return msg
	}
	n, err := strconv.Atoi(msg[m[2]:m[3]])
	if err != nil {
		return msg
	}
	return msg[:m[2]] + strconv.Itoa(n+1) + msg[m[3]:]
}
