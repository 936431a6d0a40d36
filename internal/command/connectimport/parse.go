// Package connectimport turns the configuration of a Kafka Connect sink
// connector running ClickHouse's official sink
// (com.clickhouse.kafka.connect.ClickHouseSinkConnector) into this sink's
// YAML config, and says what became of every key: carried (to which key),
// not needed here (why) or not supported (why), so that nothing is dropped
// silently.
//
// Input is what people keep their connectors in: the JSON body of Connect's
// REST API ({"name": …, "config": {…}}), the bare config object, or a Java
// .properties file. Parse reads one file; Convert maps one connector.
// Both are pure (no I/O, no clock), and safe for concurrent use: no state
// is shared between calls. Import (command.go) is `sink import` over
// files: it reads the inputs, writes the YAML and prints the fate tables,
// on the calling goroutine.
package connectimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Connector is one Kafka Connect connector: its name and its config, every
// value as the text Connect would see.
type Connector struct {
	Name   string
	Config map[string]string
	// Source names where it came from (a file), for messages.
	Source string
}

// Parse reads one connector from data, which is the JSON body Connect's REST
// API takes ({"name": …, "config": {…}}), the bare config object, or a
// .properties file (anything that does not start with "{"). file names the
// input in messages and gives the name when the input has none (its base
// name without extension).
func Parse(file string, data []byte) (Connector, error) {
	if !utf8.Valid(data) {
		return Connector{}, fmt.Errorf("%s: not UTF-8 text", file)
	}
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	var c Connector
	var err error
	if len(trimmed) > 0 && trimmed[0] == '{' {
		c, err = parseJSON(trimmed)
	} else {
		c.Config, err = ParseProperties(string(trimmed))
	}
	if err != nil {
		return Connector{}, fmt.Errorf("%s: %w", file, err)
	}
	c.Source = file
	if c.Name == "" {
		c.Name = c.Config["name"]
	}
	if c.Name == "" {
		base := filepath.Base(file)
		c.Name = strings.TrimSuffix(base, filepath.Ext(base))
	}
	if len(c.Config) == 0 {
		return Connector{}, fmt.Errorf("%s: no connector config in it", file)
	}
	return c, nil
}

// parseJSON reads {"name": N, "config": {…}} or a bare config object.
func parseJSON(data []byte) (Connector, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		return Connector{}, fmt.Errorf("parse JSON: %w", err)
	}
	if dec.More() {
		return Connector{}, errors.New("parse JSON: more than one value")
	}
	var c Connector
	obj := top
	if cfg, ok := top["config"]; ok {
		m, ok := cfg.(map[string]any)
		if !ok {
			return Connector{}, fmt.Errorf(`"config" is %s, want an object`, jsonKind(cfg))
		}
		obj = m
		if n, ok := top["name"]; ok {
			s, ok := n.(string)
			if !ok {
				return Connector{}, fmt.Errorf(`"name" is %s, want a string`, jsonKind(n))
			}
			c.Name = s
		}
	}
	c.Config = make(map[string]string, len(obj))
	for k, v := range obj {
		s, err := jsonText(v)
		if err != nil {
			return Connector{}, fmt.Errorf("config key %q: %w", k, err)
		}
		c.Config[k] = s
	}
	return c, nil
}

// jsonText is a config value as Connect reads it: strings as they are,
// numbers and booleans as their literal, null as empty.
func jsonText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("is %s, want a string, number or boolean", jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// ParseProperties reads a Java .properties document as
// java.util.Properties.load does: "key=value", "key: value" or "key value"
// lines, # and ! comments, a backslash at the end of a line continuing it,
// and the escapes \t \n \r \f \uXXXX (any other escaped character stands
// for itself). A key given twice keeps its last value.
func ParseProperties(text string) (map[string]string, error) {
	out := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// A line ending in an odd number of backslashes continues.
		for endsContinued(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if endsContinued(line) {
			line = line[:len(line)-1]
		}
		key, value := splitProperty(line)
		k, err := unescape(key)
		if err != nil {
			return nil, fmt.Errorf("line %d: key: %w", i+1, err)
		}
		v, err := unescape(value)
		if err != nil {
			return nil, fmt.Errorf("line %d: value of %q: %w", i+1, k, err)
		}
		out[k] = v
	}
	return out, nil
}

func endsContinued(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty cuts a logical line at the first unescaped '=', ':' or
// whitespace; whitespace around the separator is not part of either side.
func splitProperty(line string) (key, value string) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	if i >= len(line) {
		return line, ""
	}
	key = line[:i]
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf(`malformed \uXXXX escape`)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \uXXXX escape`)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
