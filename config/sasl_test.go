package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// kafkaBase is a valid config whose kafka section the tests continue.
const kafkaBase = `
name: t
routes:
  - {topic: orders, table: orders}
kafka:
  topics: [orders]`

// TestValidateSASLManaged: kafka.sasl.oauth and kafka.sasl.aws are checked
// with one precise line per problem, and keys of another mechanism are
// refused instead of ignored.
func TestValidateSASLManaged(t *testing.T) {
	secretFile := writeFile(t, "secret", "s3cret\n")
	emptyFile := writeFile(t, "empty", "\n")
	missing := filepath.Join(t.TempDir(), "missing")
	f := func(yaml string, env []string, wantErr string) {
		t.Helper()
		_, err := Parse([]byte(kafkaBase+yaml), env)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("%s %q: unexpected error: %v", yaml, env, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), "config: "+wantErr) {
			t.Fatalf("%s %q: error:\n%v\nwant it to contain:\nconfig: %s", yaml, env, err, wantErr)
		}
	}
	const oauth = `
  sasl:
    mechanism: OAUTHBEARER
    oauth:
      token_endpoint: https://idp.example.com/realms/kafka/protocol/openid-connect/token
      client_id: sink
`
	secret := []string{"SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET=s3cret"}
	f(oauth, secret, "")
	f(oauth, []string{"SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET_FILE=" + secretFile}, "")
	f(oauth+"      scope: kafka openid\n      extensions: {logicalCluster: lkc-abc12, identityPoolId: pool-Xy9}\n", secret, "")
	f(oauth, []string{"SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT=http://127.0.0.1:9096/token", secret[0]}, "")
	f(oauth, []string{"SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT=http://localhost/token", secret[0]}, "")
	f(oauth, nil, "kafka.sasl.oauth.client_secret: required with kafka.sasl.mechanism OAUTHBEARER: set SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET or kafka.sasl.oauth.client_secret_file")
	f(oauth, append(secret, "SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET_FILE="+secretFile), "kafka.sasl.oauth.client_secret_file: set together with kafka.sasl.oauth.client_secret; set only one")
	f(oauth, []string{"SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET_FILE=" + missing}, "kafka.sasl.oauth.client_secret_file: open "+missing+": no such file or directory")
	f(oauth, []string{"SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET_FILE=" + emptyFile}, "kafka.sasl.oauth.client_secret_file: "+emptyFile+" is empty")
	f(oauth, append(secret, "SINK_KAFKA__SASL__OAUTH__CLIENT_ID="), "kafka.sasl.oauth.client_id: required with kafka.sasl.mechanism OAUTHBEARER")
	f(oauth, append(secret, "SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT="), "kafka.sasl.oauth.token_endpoint: required with kafka.sasl.mechanism OAUTHBEARER (the identity provider's token URL")
	f(oauth, append(secret, "SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT=idp.example.com/token"), `kafka.sasl.oauth.token_endpoint: "idp.example.com/token" is not an http(s) URL with a host`)
	f(oauth, append(secret, "SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT=ftp://idp.example.com/token"), `kafka.sasl.oauth.token_endpoint: "ftp://idp.example.com/token" is not an http(s) URL with a host`)
	f(oauth, append(secret, "SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT=http://idp.example.com/token"),
		"kafka.sasl.oauth.token_endpoint: http://idp.example.com/token would send the client secret unencrypted; use https (http is accepted only for a loopback host)")
	f(oauth, append(secret, "SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT=https://sink:pw@idp.example.com/token"),
		"kafka.sasl.oauth.token_endpoint: the URL carries credentials; the client secret goes in kafka.sasl.oauth.client_secret")
	f(oauth+"      scope: 'kafka \"all\"'\n", secret, `kafka.sasl.oauth.scope: "\"all\"" is not a scope (RFC 6749`)
	f(oauth+"      extensions: {auth: x}\n", secret, "kafka.sasl.oauth.extensions.auth: the name Kafka gives the token itself")
	f(oauth+"      extensions: {logical_cluster: x}\n", secret, "kafka.sasl.oauth.extensions.logical_cluster: an extension name is letters only (Kafka's rule)")
	f(oauth+"      extensions: {logicalCluster: \"\"}\n", secret, "kafka.sasl.oauth.extensions.logicalCluster: the value must be printable ASCII, not empty (Kafka's rule)")
	f(oauth, append(secret, "SINK_KAFKA__SASL__USERNAME=u"), "kafka.sasl.username: set, but kafka.sasl.mechanism is OAUTHBEARER, which authenticates with kafka.sasl.oauth")
	f(oauth, append(secret, "SINK_KAFKA__SASL__AWS__REGION=us-east-1"), "kafka.sasl.aws.region: set, but kafka.sasl.mechanism is OAUTHBEARER")

	const iam = `
  tls: {enabled: true}
  sasl:
    mechanism: aws_msk_iam
`
	f(iam, nil, "")
	f(iam+"    aws: {region: eu-west-1, profile: msk, role_arn: 'arn:aws:iam::123456789012:role/sink-msk', role_session_name: events}\n", nil, "")
	f(iam, []string{"SINK_KAFKA__SASL__AWS__ROLE_ARN=arn:aws-us-gov:iam::123456789012:role/path/sink"}, "")
	f(iam, []string{"SINK_KAFKA__TLS__ENABLED=false"}, "kafka.tls.enabled: AWS_MSK_IAM needs TLS (MSK's IAM listeners, ports 9098 and 9198, speak only TLS); set kafka.tls.enabled: true")
	f(iam, []string{"SINK_KAFKA__SASL__AWS__REGION=Europe"}, `kafka.sasl.aws.region: "Europe" is not an AWS region (e.g. us-east-1)`)
	f(iam, []string{"SINK_KAFKA__SASL__AWS__PROFILE=my profile"}, `kafka.sasl.aws.profile: "my profile" is not a profile name`)
	f(iam, []string{"SINK_KAFKA__SASL__AWS__ROLE_ARN=sink-msk"}, `kafka.sasl.aws.role_arn: "sink-msk" is not an IAM role ARN (arn:aws:iam::123456789012:role/NAME)`)
	f(iam, []string{"SINK_KAFKA__SASL__AWS__ROLE_SESSION_NAME=x"}, "kafka.sasl.aws.role_session_name: set, but no kafka.sasl.aws.role_arn to assume")
	f(iam, []string{"SINK_KAFKA__SASL__PASSWORD=p"}, "kafka.sasl.password: set, but kafka.sasl.mechanism is AWS_MSK_IAM, which authenticates with kafka.sasl.aws")
	f(iam, []string{"SINK_KAFKA__SASL__OAUTH__CLIENT_ID=x"}, "kafka.sasl.oauth.client_id: set, but kafka.sasl.mechanism is AWS_MSK_IAM")

	// The keys of the managed mechanisms are refused without one.
	f("", []string{"SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT=https://idp/token"}, "kafka.sasl.oauth.token_endpoint: set, but kafka.sasl.mechanism is empty, so SASL is off")
	f("", []string{"SINK_KAFKA__SASL__AWS__PROFILE=p"}, "kafka.sasl.aws.profile: set, but kafka.sasl.mechanism is empty, so SASL is off")
	f("", []string{"SINK_KAFKA__SASL__MECHANISM=PLAIN", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD=p", "SINK_KAFKA__SASL__OAUTH__SCOPE=s"},
		"kafka.sasl.oauth.scope: set, but kafka.sasl.mechanism is PLAIN")
}

// TestOAuthSecretNeverPrints: the client secret is refused in the file,
// masked wherever the config is printed, and the extensions keep the case
// they were written in.
func TestOAuthSecretNeverPrints(t *testing.T) {
	const secret = "client-secret-very-secret"
	const doc = kafkaBase + `
  sasl:
    mechanism: OAUTHBEARER
    oauth:
      token_endpoint: https://idp.example.com/token
      client_id: sink
      extensions: {logicalCluster: lkc-abc12}
`
	_, err := Parse([]byte(doc+"      client_secret: "+secret+"\n"), nil)
	if err == nil || strings.Contains(err.Error(), secret) ||
		!strings.Contains(err.Error(), "config: kafka.sasl.oauth.client_secret: a password may not be written in the config file; set SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET or kafka.sasl.oauth.client_secret_file") {
		t.Fatalf("client_secret in the file: %v", err)
	}
	c, err := Parse([]byte(doc), []string{"SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET=" + secret})
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{
		"String": c.String(), "%+v": fmt.Sprintf("%+v", *c), "%#v": fmt.Sprintf("%#v", *c), "json": string(js),
	} {
		if strings.Contains(out, secret) || !strings.Contains(out, "******") {
			t.Errorf("%s shows the client secret or no mask:\n%s", name, out)
		}
	}
	if v, err := c.Kafka.SASL.OAuth.ClientSecretValue(); err != nil || v != secret {
		t.Fatalf("ClientSecretValue = %q, %v", v, err)
	}
	if want := map[string]string{"logicalCluster": "lkc-abc12"}; !reflect.DeepEqual(c.Kafka.SASL.OAuth.Extensions, want) {
		t.Fatalf("extensions = %v, want %v", c.Kafka.SASL.OAuth.Extensions, want)
	}
	red := c.Redacted()
	red.Kafka.SASL.OAuth.Extensions["logicalCluster"] = "changed"
	if c.Kafka.SASL.OAuth.Extensions["logicalCluster"] != "lkc-abc12" {
		t.Fatal("Redacted shares the extensions map with the original")
	}
}
