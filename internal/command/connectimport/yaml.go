package connectimport

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"sink/config"
)

// omap is an ordered YAML mapping: keys come out in the order first set.
type omap struct {
	keys []string
	vals map[string]any
}

// set stores value at a dotted path ("kafka.tls.enabled"), creating the
// mappings on the way.
func (m *omap) set(path string, value any) {
	head, rest, nested := strings.Cut(path, ".")
	if m.vals == nil {
		m.vals = map[string]any{}
	}
	if _, ok := m.vals[head]; !ok {
		m.keys = append(m.keys, head)
	}
	if !nested {
		m.vals[head] = value
		return
	}
	sub, ok := m.vals[head].(*omap)
	if !ok {
		sub = &omap{}
		m.vals[head] = sub
	}
	sub.set(rest, value)
}

// topOrder is the order of the top-level sections, as in example.yaml.
var topOrder = []string{"name", "kafka", "clickhouse", "batch", "routes", "errors", "delivery", "schema_registry"}

func node(v any) *yaml.Node {
	switch x := v.(type) {
	case *omap:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range x.keys {
			n.Content = append(n.Content, scalarNode(k), node(x.vals[k]))
		}
		return n
	case map[string]string:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range sortedKeys(x) {
			n.Content = append(n.Content, scalarNode(k), scalarNode(x[k]))
		}
		return n
	case []string:
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, s := range x {
			n.Content = append(n.Content, scalarNode(s))
		}
		return n
	case []*omap:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, m := range x {
			n.Content = append(n.Content, node(m))
		}
		return n
	case string:
		return scalarNode(x)
	}
	n := &yaml.Node{}
	_ = n.Encode(v) // ints and bools always encode
	return n
}

// scalarNode is a string that stays a string when read back ("true",
// "8123" and "${topic}" are quoted as needed).
func scalarNode(s string) *yaml.Node {
	n := &yaml.Node{}
	_ = n.Encode(s)
	return n
}

// render writes the YAML: the fate table as a comment, then the config,
// and checks that the sink's config loader accepts it.
func render(doc *omap, r *Result, c Connector, passwords []envSecret) ([]byte, error) {
	secrets := append(envSecrets(doc), passwords...)
	top := &omap{}
	for _, k := range topOrder {
		if k == "routes" {
			continue
		}
		if val, ok := doc.vals[k]; ok {
			top.set(k, val)
		}
	}
	var buf bytes.Buffer
	writeHeader(&buf, r, c, secrets)
	body := node(top)
	// routes go after batch, as in example.yaml.
	routes := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{scalarNode("routes"), node(routesOf(doc))}}
	var out []*yaml.Node
	placed := false
	for i := 0; i < len(body.Content); i += 2 {
		k := body.Content[i].Value
		if !placed && (k == "errors" || k == "delivery" || k == "schema_registry") {
			out = append(out, routes.Content...)
			placed = true
		}
		out = append(out, body.Content[i], body.Content[i+1])
	}
	if !placed {
		out = append(out, routes.Content...)
	}
	body.Content = out
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(body); err != nil {
		return nil, fmt.Errorf("connector %q: write YAML: %w", c.Name, err)
	}
	_ = enc.Close()
	if err := loadable(buf.Bytes(), secrets); err != nil {
		return nil, fmt.Errorf("connector %q: the config made from it does not load (%s); nothing written", c.Name, err)
	}
	return buf.Bytes(), nil
}

// loadable checks that y loads with the secrets set, but for the trust
// and key stores: their files are the Connect worker's paths, read on the
// machine the sink runs on (by sink check), not where it is imported.
func loadable(y []byte, secrets []envSecret) error {
	_, err := config.Parse(y, placeholders(secrets))
	if err == nil {
		return nil
	}
	var kept []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if !storeLine.MatchString(line) {
			kept = append(kept, line)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return errors.New(strings.Join(kept, "; "))
}

// storeLine is a config error about a store's file or password.
var storeLine = regexp.MustCompile(`^config: kafka\.tls\.(truststore_|keystore_|key_password)`)

// writeHeader writes the YAML's opening comment: where it comes from, the
// fate table, the notes, and how many keys are not supported.
func writeHeader(buf *bytes.Buffer, r *Result, c Connector, secrets []envSecret) {
	fmt.Fprintf(buf, "# Imported by `sink import` from Kafka Connect connector %q", c.Name)
	if c.Source != "" {
		fmt.Fprintf(buf, " (%s)", c.Source)
	}
	buf.WriteString(".\n# What became of every key of the connector's config:\n#\n")
	var table bytes.Buffer
	PrintFates(&table, r.Fates)
	for _, line := range strings.Split(strings.TrimRight(table.String(), "\n"), "\n") {
		buf.WriteString("#   " + strings.TrimRight(line, " ") + "\n")
	}
	for _, n := range r.Notes {
		buf.WriteString("#\n# Note: " + n + "\n")
	}
	if u := r.Unsupported(); len(u) > 0 {
		fmt.Fprintf(buf, "#\n# %d key(s) NOT SUPPORTED: this config does not do everything the connector did.\n", len(u))
	}
	if len(secrets) > 0 {
		buf.WriteString("#\n# Passwords are never written here. Before `sink check` or `sink run`, set:\n")
		for _, s := range secrets {
			fmt.Fprintf(buf, "#   %s (or %s_file: a file holding it)\n", s.env, s.key)
		}
	}
	buf.WriteString("#\n# Every other key, with its default: config/example.yaml. Before the switch: sink check --config this-file.\n\n")
}

// routesOf returns the routes kept beside the document.
func routesOf(doc *omap) []*omap {
	if r, ok := doc.vals["routes"].([]*omap); ok {
		return r
	}
	return nil
}

// envSecret is a secret the YAML needs but leaves to the environment: its
// key (whose _file key is the other way to set it) and the variable.
type envSecret struct{ key, env string }

// envSecrets lists the secrets the config requires that the import never
// writes: a PLAIN or SCRAM password, an OAuth client secret, a registry
// user's password.
func envSecrets(doc *omap) []envSecret {
	var out []envSecret
	switch doc.get("kafka.sasl.mechanism") {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		out = append(out, envSecret{"kafka.sasl.password", config.EnvPrefix + "KAFKA__SASL__PASSWORD"})
	case "OAUTHBEARER":
		out = append(out, envSecret{"kafka.sasl.oauth.client_secret", config.EnvPrefix + "KAFKA__SASL__OAUTH__CLIENT_SECRET"})
	}
	if doc.get("schema_registry.username") != nil {
		out = append(out, envSecret{"schema_registry.password", config.EnvPrefix + "SCHEMA_REGISTRY__PASSWORD"})
	}
	return out
}

// placeholders is an environment that sets each of the secrets, so that
// the YAML is checked as it will load once they are set.
func placeholders(secrets []envSecret) []string {
	var env []string
	for _, s := range secrets {
		env = append(env, s.env+"=set-from-the-environment")
	}
	return env
}

// get returns the value at a dotted path, nil when nothing is set there.
func (m *omap) get(path string) any {
	head, rest, nested := strings.Cut(path, ".")
	v, ok := m.vals[head]
	if !ok {
		return nil
	}
	if !nested {
		return v
	}
	sub, ok := v.(*omap)
	if !ok {
		return nil
	}
	return sub.get(rest)
}
