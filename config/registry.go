package config

import "net/url"

// SchemaRegistry configures the Confluent-compatible schema registry that
// registry-framed records (Avro, Protobuf, JSON Schema) name their schemas
// in. Empty URLs turn it off.
type SchemaRegistry struct {
	// URLs are the registry's base URLs, tried in order on network errors:
	// the path of its Confluent-compatible API, e.g.
	// http://registry:8081 (Confluent, Redpanda) or
	// http://apicurio:8080/apis/ccompat/v7 (Apicurio Registry).
	URLs []string `koanf:"urls"`
	// Username and Password are HTTP basic auth (Confluent Cloud: the API
	// key and secret). The password comes from the environment
	// (SINK_SCHEMA_REGISTRY__PASSWORD) or PasswordFile, never the file.
	Username     string `koanf:"username"`
	Password     Secret `koanf:"password"`
	PasswordFile string `koanf:"password_file"`
	// TLS is for https:// URLs that need a private CA or a client
	// certificate; https:// with the system's CAs needs no TLS section.
	TLS TLS `koanf:"tls"`
	// SubjectStrategy says which schemas a topic's records may name:
	// SubjectAny (the default) every id the registry serves;
	// SubjectTopicName only schemas registered under the topic's subject
	// (TOPIC-value, TOPIC-key for keys); SubjectTopicRecordName under a
	// subject TOPIC-<record name>. A record naming another is bad.
	SubjectStrategy string `koanf:"subject_strategy"`
}

// Subject naming strategies (schema_registry.subject_strategy), named after
// the producers' serializer settings they match.
const (
	// SubjectAny checks nothing: a record may name any schema id the
	// registry has (what Confluent's and Apicurio's deserializers do; the
	// choice for producers with RecordNameStrategy, whose subjects name a
	// record type that any topic may carry).
	SubjectAny = "any"
	// SubjectTopicName: TopicNameStrategy (Confluent's default,
	// Apicurio's TopicIdStrategy).
	SubjectTopicName = "topic_name"
	// SubjectTopicRecordName: TopicRecordNameStrategy.
	SubjectTopicRecordName = "topic_record_name"
)

var subjectStrategies = []string{SubjectAny, SubjectTopicName, SubjectTopicRecordName}

// Enabled reports whether a registry is configured.
func (s SchemaRegistry) Enabled() bool { return len(s.URLs) > 0 }

// PasswordValue returns the registry password: schema_registry.password, or
// the content of schema_registry.password_file, read now.
func (s SchemaRegistry) PasswordValue() (string, error) {
	return passwordValue(s.Password, s.PasswordFile)
}

func (c *Config) validateSchemaRegistry(p *problems) {
	s := &c.SchemaRegistry
	const key = "schema_registry"
	if !s.Enabled() {
		for _, kv := range [][2]string{{"username", s.Username}, {"password", string(s.Password)}, {"password_file", s.PasswordFile}} {
			if kv[1] != "" {
				p.add("%s.%s: set, but %s.urls is empty, so there is no registry", key, kv[0], key)
			}
		}
		if s.TLS.Enabled {
			p.add("%s.tls.enabled: set, but %s.urls is empty, so there is no registry", key, key)
		}
	}
	for i, raw := range s.URLs {
		if err := checkRegistryURL(raw, s.TLS.Enabled); err != "" {
			p.add("%s.urls[%d]: %q %s", key, i, redactURL(raw), err)
		}
	}
	switch {
	case s.Username == "" && (s.Password != "" || s.PasswordFile != ""):
		p.add("%s.username: required with a password (HTTP basic auth)", key)
	case s.Username != "" && s.Password == "" && s.PasswordFile == "":
		p.add("%s.password: required with %s.username: set %sSCHEMA_REGISTRY__PASSWORD or %s.password_file", key, key, EnvPrefix, key)
	}
	p.password(key, s.Password, s.PasswordFile)
	p.tlsSection(key+".tls", s.TLS)
	p.oneOf(key+".subject_strategy", s.SubjectStrategy, subjectStrategies)
}

// checkRegistryURL returns what is wrong with a registry URL, or "".
func checkRegistryURL(raw string, tlsOn bool) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "is not a URL such as http://registry:8081"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must start with http:// or https://"
	case u.Host == "" || u.Opaque != "":
		return "is not a URL such as http://registry:8081"
	case u.User != nil:
		// A URL is printed and logged; a password in it would leak.
		return "carries credentials; set schema_registry.username and the password instead"
	case u.RawQuery != "" || u.Fragment != "":
		return "must not have a query or fragment (the API paths are appended to it)"
	case tlsOn && u.Scheme == "http":
		return "is http://, but schema_registry.tls is enabled; use https://"
	}
	return ""
}

// redactURL masks a password written into a URL, for error messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}
