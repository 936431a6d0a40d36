package connectimport

import (
	"bytes"
	"strings"
	"testing"
)

// documentedPasswords are the keys Kafka's clients (kafka-clients 4.4's
// ConfigDef, Type.PASSWORD), Confluent's schema registry serializers
// (AbstractKafkaSchemaSerDeConfig, Type.PASSWORD, and the registry client's
// SSL keys under schema.registry.) and the ClickHouse sink define as
// passwords, and the Apicurio converter's credentials.
var documentedPasswords = []string{
	"ssl.key.password", "ssl.keystore.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
	"ssl.truststore.password", "ssl.truststore.certificates", "sasl.jaas.config",
	"sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.assertion.private.key.passphrase",
	"basic.auth.user.info", "schema.registry.basic.auth.user.info", "bearer.auth.token", "bearer.auth.client.secret",
	"schema.registry.ssl.key.password", "schema.registry.ssl.keystore.password", "schema.registry.ssl.keystore.key",
	"schema.registry.ssl.keystore.certificate.chain", "schema.registry.ssl.truststore.password",
	"schema.registry.ssl.truststore.certificates",
	"password", "apicurio.auth.password", "apicurio.auth.client.secret",
}

// connectorPrefixes are what a connector config puts before a client's or
// a converter's key.
var connectorPrefixes = []string{"", "consumer.override.", "producer.override.", "admin.override.",
	"value.converter.", "key.converter.", "header.converter.", "consumer."}

func TestSecretKeys(t *testing.T) {
	for _, k := range documentedPasswords {
		for _, p := range connectorPrefixes {
			if !secretKey(p + k) {
				t.Errorf("%s%s is a password, not treated as secret", p, k)
			}
		}
	}
	for _, k := range []string{"value.converter.request.header.Authorization", "jdbcConnectionProperties",
		"value.converter.bearer.auth.credentials.source", "aws.secret.access.key", "Password", "SSL.KEY.PASSWORD", "value.converter.access.token", "delegation.token.secret.key"} {
		if !secretKey(k) {
			t.Errorf("%s can hold a secret, not treated as one", k)
		}
	}
	for _, k := range []string{"topics", "hostname", "username", "ssl", "ssl.keystore.location", "ssl.truststore.type",
		"ssl.truststore.location", "value.converter.schema.registry.url", "value.converter.bearer.auth.issuer.endpoint.url",
		"value.converter.bearer.auth.client.id", "consumer.override.sasl.mechanism", "key.converter", "topic2TableMap",
		"consumer.override.sasl.oauthbearer.token.endpoint.url"} {
		if secretKey(k) {
			t.Errorf("%s holds no secret, but is masked", k)
		}
	}
}

// secretConfig is a connector config that sets every documented password
// key under every prefix, an Authorization header and JDBC properties with
// a password, each to a value holding "s3cR".
func secretConfig() Connector {
	kv := []string{"value.converter.request.header.Authorization", "Bearer s3cR-header",
		"jdbcConnectionProperties", "?user=u&password=s3cR-jdbc"}
	for _, k := range documentedPasswords {
		for _, p := range connectorPrefixes {
			v := "s3cR-" + p + k
			switch k {
			case "sasl.jaas.config":
				v = `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cR-jaas";`
			case "basic.auth.user.info", "schema.registry.basic.auth.user.info":
				v = "u:s3cR-userinfo"
			}
			kv = append(kv, p+k, v)
		}
	}
	return base(kv...)
}

// TestSecretsNeverShown: with every secret-bearing key set, neither the
// fate table sink import prints and writes at the YAML's top nor the YAML
// shows any part of a secret; every such key's value reads "***".
func TestSecretsNeverShown(t *testing.T) {
	_, r, err := mapKeys(secretConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	PrintFates(&table, r.Fates)
	noSecret(t, "fate table", table.String())
	for _, f := range r.Fates {
		if secretKey(f.Key) && f.Value != "***" {
			t.Errorf("%s: value %q, want ***", f.Key, f.Value)
		}
	}
	// The YAML: every key the import does not carry into kafka.sasl or
	// schema_registry (a YAML with those does not load without the
	// passwords, which are never written, so the import refuses it).
	c := secretConfig()
	for k := range c.Config {
		if strings.HasSuffix(k, "jaas.config") || strings.HasSuffix(k, "user.info") {
			delete(c.Config, k)
		}
	}
	res, err := Convert(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "YAML", string(res.YAML))
}

// noSecret fails with the line of text that shows a part of a secret.
func noSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, marker := range []string{"s3cR", "3cR-"} {
		if i := strings.Index(text, marker); i >= 0 {
			line := text[strings.LastIndex(text[:i], "\n")+1:]
			if j := strings.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			t.Errorf("the %s shows a secret: %s", what, line)
		}
	}
}
