package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// String returns the configuration as YAML in the layout of example.yaml,
// with the password masked (see Redacted), for `sink check` and logs. The
// output parses back to the same Config, except for the password.
func (c *Config) String() string {
	var buf strings.Builder
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(toNode(reflect.ValueOf(*c.Redacted()))); err != nil {
		return fmt.Sprintf("config: cannot print: %v", err)
	}
	_ = enc.Close()
	return buf.String()
}

// toNode renders v with koanf key names, in struct field order (a plain map
// would come out sorted, scattering related keys).
func toNode(v reflect.Value) *yaml.Node {
	switch x := v.Interface().(type) {
	case time.Duration:
		return scalar(x.String())
	case ByteSize:
		return scalar(x.String())
	}
	switch v.Kind() {
	case reflect.Struct:
		return structNode(v)
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		if v.Type().Elem().Kind() == reflect.Struct {
			n.Style = 0
		}
		for i := range v.Len() {
			n.Content = append(n.Content, toNode(v.Index(i)))
		}
		return n
	case reflect.Map:
		return mapNode(v)
	case reflect.Interface:
		if v.IsNil() {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
		}
		return toNode(v.Elem())
	}
	// Scalars: let the encoder pick tags and quoting.
	n := &yaml.Node{}
	if err := n.Encode(v.Interface()); err != nil {
		return scalar(fmt.Sprint(v.Interface()))
	}
	return n
}

// structNode renders a struct as a mapping of its exported fields by koanf
// key, in field order, leaving out a deprecated key that is not set.
func structNode(v reflect.Value) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key := f.Tag.Get("koanf")
		if !f.IsExported() || key == "-" {
			continue
		}
		if f.Anonymous && key == ",squash" {
			// An embedded struct's keys are the enclosing section's.
			n.Content = append(n.Content, structNode(v.Field(i)).Content...)
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		if f.Tag.Get("print") == "-" {
			continue // derived from other keys, which are printed
		}
		if f.Tag.Get("print") == "omitzero" && v.Field(i).IsZero() {
			continue // a deprecated key, not set
		}
		n.Content = append(n.Content, scalar(key), toNode(v.Field(i)))
	}
	return n
}

// mapNode renders a map with string keys as a mapping sorted by key.
func mapNode(v reflect.Value) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	keys := make([]string, 0, v.Len())
	for _, k := range v.MapKeys() {
		keys = append(keys, k.String())
	}
	sort.Strings(keys)
	for _, k := range keys {
		n.Content = append(n.Content, scalar(k), toNode(v.MapIndex(reflect.ValueOf(k))))
	}
	return n
}

func scalar(s string) *yaml.Node {
	n := &yaml.Node{}
	_ = n.Encode(s) // a string always encodes
	return n
}

// Flat returns the configuration as one map of dotted key paths to their
// values in text, the way the REST API's Kafka Connect style
// /connectors/NAME/config serves a connector's config: "kafka.topics" →
// "a,b", "routes.0.table" → "events", a setting map's entries under its
// key ("clickhouse.settings.insert_quorum"). Every secret is masked as in
// String (Redacted), and a null value is "".
func (c *Config) Flat() map[string]string {
	out := map[string]string{}
	flatten(toNode(reflect.ValueOf(*c.Redacted())), "", out)
	return out
}

// flatten adds n's values to out under prefix: a mapping's keys and a
// list of mappings' indexes extend the path; a list of scalars is one
// comma-separated value.
func flatten(n *yaml.Node, prefix string, out map[string]string) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch {
	case n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			flatten(n.Content[i+1], join(n.Content[i].Value), out)
		}
	case n.Kind == yaml.SequenceNode && !scalars(n.Content):
		for i, e := range n.Content {
			flatten(e, join(fmt.Sprint(i)), out)
		}
	case n.Kind == yaml.SequenceNode:
		vals := make([]string, len(n.Content))
		for i, e := range n.Content {
			vals[i] = e.Value
		}
		out[prefix] = strings.Join(vals, ",")
	case n.Tag == "!!null":
		out[prefix] = ""
	default:
		out[prefix] = n.Value
	}
}

// scalars reports whether every node of ns is a scalar.
func scalars(ns []*yaml.Node) bool {
	for _, n := range ns {
		if n.Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}
