package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSchemaRegistryConfig(t *testing.T) {
	pki := newTestPKI(t)
	pwFile := writeFile(t, "pw", "s3cret\n")
	missing := filepath.Join(t.TempDir(), "missing")

	// f parses base with env and checks the error ("" = valid).
	f := func(env []string, wantErr string) {
		t.Helper()
		_, err := Parse([]byte(base), env)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("env %q: unexpected error: %v", env, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), "config: "+wantErr) {
			t.Fatalf("env %q: error:\n%v\nwant it to contain:\nconfig: %s", env, err, wantErr)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("the error repeats the password: %v", err)
		}
	}
	env := func(kv ...string) []string { return kv }
	const urls = "SINK_SCHEMA_REGISTRY__URLS="

	// Off by default; on with URLs, plain or with auth and TLS.
	f(nil, "")
	f(env(urls+"http://127.0.0.1:8081"), "")
	f(env(urls+"http://a:8081/apis/ccompat/v7, http://b:8081/apis/ccompat/v7"), "")
	f(env(urls+"https://registry.example", "SINK_SCHEMA_REGISTRY__USERNAME=key", "SINK_SCHEMA_REGISTRY__PASSWORD=p"), "")
	f(env(urls+"https://registry.example", "SINK_SCHEMA_REGISTRY__USERNAME=key", "SINK_SCHEMA_REGISTRY__PASSWORD_FILE="+pwFile), "")
	f(env(urls+"https://registry.example", "SINK_SCHEMA_REGISTRY__TLS__ENABLED=true", "SINK_SCHEMA_REGISTRY__TLS__CA_FILE="+pki.ca,
		"SINK_SCHEMA_REGISTRY__TLS__CERT_FILE="+pki.cert, "SINK_SCHEMA_REGISTRY__TLS__KEY_FILE="+pki.key), "")

	// URLs.
	f(env(urls+"registry:8081"), `schema_registry.urls[0]: "registry:8081" must start with http:// or https://`)
	f(env(urls+"http://"), `schema_registry.urls[0]: "http://" is not a URL such as http://registry:8081`)
	f(env(urls+"http://ok:1,ftp://x"), `schema_registry.urls[1]: "ftp://x" must start with http:// or https://`)
	f(env(urls+"http://u:hunter2@registry:8081"), `schema_registry.urls[0]: "http://u:xxxxx@registry:8081" carries credentials; set schema_registry.username and the password instead`)
	f(env(urls+"http://registry:8081/?x=1"), `schema_registry.urls[0]: "http://registry:8081/?x=1" must not have a query or fragment`)
	f(env(urls+"http://registry:8081", "SINK_SCHEMA_REGISTRY__TLS__ENABLED=true"),
		`schema_registry.urls[0]: "http://registry:8081" is http://, but schema_registry.tls is enabled; use https://`)

	// Subject strategies.
	for _, s := range []string{"any", "topic_name", "topic_record_name"} {
		f(env(urls+"http://r:1", "SINK_SCHEMA_REGISTRY__SUBJECT_STRATEGY="+s), "")
	}
	f(env(urls+"http://r:1", "SINK_SCHEMA_REGISTRY__SUBJECT_STRATEGY=TopicNameStrategy"),
		`schema_registry.subject_strategy: "TopicNameStrategy" is not one of any, topic_name, topic_record_name`)
	if c, err := Parse([]byte(base), nil); err != nil {
		t.Fatal(err)
	} else if c.SchemaRegistry.SubjectStrategy != SubjectAny {
		t.Fatalf("subject_strategy by default: %q, want any", c.SchemaRegistry.SubjectStrategy)
	}

	// Auth.
	f(env(urls+"http://r:1", "SINK_SCHEMA_REGISTRY__USERNAME=key"),
		"schema_registry.password: required with schema_registry.username: set SINK_SCHEMA_REGISTRY__PASSWORD or schema_registry.password_file")
	f(env(urls+"http://r:1", "SINK_SCHEMA_REGISTRY__PASSWORD=hunter2"), "schema_registry.username: required with a password (HTTP basic auth)")
	f(env(urls+"http://r:1", "SINK_SCHEMA_REGISTRY__USERNAME=key", "SINK_SCHEMA_REGISTRY__PASSWORD=hunter2", "SINK_SCHEMA_REGISTRY__PASSWORD_FILE="+pwFile),
		"schema_registry.password_file: set together with schema_registry.password; set only one")
	f(env(urls+"http://r:1", "SINK_SCHEMA_REGISTRY__USERNAME=key", "SINK_SCHEMA_REGISTRY__PASSWORD_FILE="+missing),
		"schema_registry.password_file: open "+missing+": no such file or directory")

	// Settings without URLs would silently do nothing.
	f(env("SINK_SCHEMA_REGISTRY__USERNAME=key"), "schema_registry.username: set, but schema_registry.urls is empty, so there is no registry")
	f(env("SINK_SCHEMA_REGISTRY__PASSWORD=hunter2"), "schema_registry.password: set, but schema_registry.urls is empty")
	f(env("SINK_SCHEMA_REGISTRY__TLS__ENABLED=true"), "schema_registry.tls.enabled: set, but schema_registry.urls is empty")

	// TLS problems are reported like kafka.tls's.
	f(env(urls+"https://r:1", "SINK_SCHEMA_REGISTRY__TLS__CA_FILE="+pki.ca), "schema_registry.tls.ca_file: set, but TLS is off (set enabled: true)")
	f(env(urls+"https://r:1", "SINK_SCHEMA_REGISTRY__TLS__ENABLED=true", "SINK_SCHEMA_REGISTRY__TLS__CA_FILE="+pki.junk),
		"schema_registry.tls.ca_file: "+pki.junk+" holds no PEM certificate")
}

func TestSchemaRegistryFromFile(t *testing.T) {
	c, err := Parse([]byte(base+`
schema_registry:
  urls: [http://127.0.0.1:8081/apis/ccompat/v7]
  username: key
`), []string{"SINK_SCHEMA_REGISTRY__PASSWORD=hunter2"})
	if err != nil {
		t.Fatal(err)
	}
	r := c.SchemaRegistry
	if !r.Enabled() || !reflect.DeepEqual(r.URLs, []string{"http://127.0.0.1:8081/apis/ccompat/v7"}) || r.Username != "key" {
		t.Fatalf("schema_registry = %+v", r)
	}
	if pw, err := r.PasswordValue(); err != nil || pw != "hunter2" {
		t.Fatalf("PasswordValue = %q, %v", pw, err)
	}
	// Printing masks the password, and the copy shares no URL list.
	s := c.String()
	if strings.Contains(s, "hunter2") || !strings.Contains(s, "password: '******'") {
		t.Fatalf("String() leaks or lacks the masked registry password:\n%s", s)
	}
	red := c.Redacted()
	red.SchemaRegistry.URLs[0] = "changed"
	if c.SchemaRegistry.URLs[0] == "changed" || red.SchemaRegistry.Password.Reveal() != "******" {
		t.Fatal("Redacted shares the URL list or keeps the password")
	}

	// A password in the file is refused without repeating it.
	_, err = Parse([]byte(base+"schema_registry: {urls: [http://r:1], username: u, password: hunter2}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "config: schema_registry.password: a password may not be written in the config file; set SINK_SCHEMA_REGISTRY__PASSWORD or schema_registry.password_file") ||
		strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("password in file: %v", err)
	}
}

// TestRegistryFormatsNeedARegistry: a route whose records are
// registry-framed is refused without schema_registry.urls, in one line
// naming the route; with a registry every such format is accepted, and
// debezium-avro takes debezium-json's version and delete-marker defaults.
func TestRegistryFormatsNeedARegistry(t *testing.T) {
	const cfg = "name: t\nkafka: {brokers: [k:9092], topics: [a]}\nroutes: [{topic: a, table: a, format: %s}]\n"
	for _, f := range []string{"avro", "protobuf", "json-schema", "debezium-avro"} {
		_, err := Parse([]byte(fmt.Sprintf(cfg, f)), nil)
		want := "config: routes[0].format: " + f + " records name their schema by registry id, so schema_registry.urls is required"
		if err == nil || err.Error() != want {
			t.Errorf("format %s without a registry: %v\nwant: %s", f, err, want)
		}
		c, err := Parse([]byte(fmt.Sprintf(cfg, f)), []string{"SINK_SCHEMA_REGISTRY__URLS=http://127.0.0.1:8081"})
		if err != nil {
			t.Errorf("format %s with a registry: %v", f, err)
			continue
		}
		if r := c.Routes[0]; f == "debezium-avro" && (r.VersionColumn != "_version" || r.DeletedColumn != "_deleted" || r.Mapping()["_version"] != "$version") {
			t.Errorf("debezium-avro route %+v: want the CDC defaults", r)
		}
	}
}
