package connectimport

import (
	"reflect"
	"strings"
	"testing"

	"sink/config"
)

func TestParseJAAS(t *testing.T) {
	for _, tc := range []struct {
		in     string
		module string
		opts   map[string]string
		err    string
	}{
		{`org.apache.kafka.common.security.scram.ScramLoginModule required username="sink" password="p w";`,
			"org.apache.kafka.common.security.scram.ScramLoginModule", map[string]string{"username": "sink", "password": "p w"}, ""},
		{"  " + oauthLoginModule + "  Required\n  clientId='a'  clientSecret=\"s\\\"e;c\"\textension_logicalCluster=lkc-1 scope=\"\" ;  ",
			oauthLoginModule, map[string]string{"clientId": "'a'", "clientSecret": `s"e;c`, "extension_logicalCluster": "lkc-1", "scope": ""}, ""},
		{iamLoginModule + " required;", iamLoginModule, map[string]string{}, ""},
		{iamLoginModule + ` required awsRoleArn=arn:aws:iam::1:role/x awsDebugCreds=true;`, iamLoginModule,
			map[string]string{"awsRoleArn": "arn:aws:iam::1:role/x", "awsDebugCreds": "true"}, ""},
		{`m required token=YWJj==;`, "m", map[string]string{"token": "YWJj=="}, ""},
		{`m required a="b"`, "", nil, "no ';' at the end"},
		{`m required a="b;`, "", nil, "unterminated quoted value"},
		{`m;`, "", nil, "want a login module class and a control flag"},
		{`m sometimes;`, "", nil, "want a login module class and a control flag"},
		{`m required a;`, "", nil, `"a" is not NAME=VALUE`},
		{`m required a= b;`, "", nil, "option a: no value"},
		{`m required "a"=b;`, "", nil, `is not NAME=VALUE`},
		{`m required a=b; n required c=d;`, "", nil, "a second login module"},
	} {
		module, opts, err := parseJAAS(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseJAAS(%q) error %v; want one containing %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || module != tc.module || !reflect.DeepEqual(opts, tc.opts)):
			t.Errorf("parseJAAS(%q) = %q %v %v; want %q %v", tc.in, module, opts, err, tc.module, tc.opts)
		}
	}
}

// FuzzParseJAAS: no input panics, and what parses has a module and
// options with names.
func FuzzParseJAAS(f *testing.F) {
	f.Add(oauthLoginModule + ` required clientId="a" clientSecret="b\"c" extension_x=y;`)
	f.Add(`m required a=b c="d e";`)
	f.Add(`m r "`)
	f.Fuzz(func(t *testing.T, s string) {
		module, opts, err := parseJAAS(s)
		if err != nil {
			return
		}
		if module == "" {
			t.Fatalf("parseJAAS(%q): no module", s)
		}
		for name := range opts {
			if name == "" || strings.ContainsAny(name, " \t\r\n\";=") {
				t.Fatalf("parseJAAS(%q): option name %q", s, name)
			}
		}
	})
}

// convertSecret converts c and loads the YAML with the secret the import
// leaves out set in the environment, as the operator will.
func convertSecret(t *testing.T, c Connector, env ...string) (*Result, *config.Config) {
	t.Helper()
	r, err := Convert(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(r.YAML, env)
	if err != nil {
		t.Fatalf("the YAML does not load: %v\n%s", err, r.YAML)
	}
	if len(r.Fates) != len(c.Config) {
		t.Fatalf("%d fates for %d keys", len(r.Fates), len(c.Config))
	}
	return r, cfg
}

// TestOAuthOverrides: Connect's OAUTHBEARER client-credentials settings,
// in the JAAS options and as Kafka 4's own keys, become kafka.sasl.oauth;
// the client secret is named, never written.
func TestOAuthOverrides(t *testing.T) {
	const secret = "cs-very-secret"
	p := "consumer.override."
	r, cfg := convertSecret(t, base(
		p+"security.protocol", "SASL_SSL", p+"sasl.mechanism", "OAUTHBEARER",
		p+"sasl.oauthbearer.token.endpoint.url", "https://idp.example.com/oauth2/token",
		p+"sasl.login.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
		p+"sasl.login.refresh.buffer.seconds", "60",
		p+"sasl.jaas.config", oauthLoginModule+` required clientId="sink-app" clientSecret="`+secret+`" scope="kafka" extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2";`,
	), "SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET=x")
	o := cfg.Kafka.SASL.OAuth
	if cfg.Kafka.SASL.Mechanism != "OAUTHBEARER" || !cfg.Kafka.TLS.Enabled || o.TokenEndpoint != "https://idp.example.com/oauth2/token" ||
		o.ClientID != "sink-app" || o.Scope != "kafka" || !reflect.DeepEqual(o.Extensions, map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}) {
		t.Fatalf("kafka %+v", cfg.Kafka)
	}
	if strings.Contains(string(r.YAML), secret) {
		t.Fatalf("the YAML holds the client secret:\n%s", r.YAML)
	}
	checkFates(t, r, []fateWant{
		{p + "sasl.mechanism", Carried, "kafka.sasl.mechanism"},
		{p + "sasl.oauthbearer.token.endpoint.url", Carried, "kafka.sasl.oauth.token_endpoint"},
		{p + "sasl.login.callback.handler.class", NotNeeded, "the sink gets OAUTHBEARER tokens itself"},
		{p + "sasl.login.refresh.buffer.seconds", NotNeeded, "80% of its lifetime"},
		{p + "sasl.jaas.config", Carried, "kafka.sasl.oauth.client_id, SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET, kafka.sasl.oauth.extensions.identityPoolId"},
		{p + "sasl.jaas.config", Carried, "secret is never written"},
	})
	if f := fate(r, p+"sasl.jaas.config"); f.Value != "***" {
		t.Fatalf("the fate table shows the JAAS config: %q", f.Value)
	}

	// Kafka 4's keys instead of the JAAS options.
	r, cfg = convertSecret(t, base(
		p+"sasl.mechanism", "oauthbearer", p+"sasl.oauthbearer.token.endpoint.url", "https://idp/token",
		p+"sasl.oauthbearer.client.credentials.client.id", "sink-4", p+"sasl.oauthbearer.client.credentials.client.secret", secret,
		p+"sasl.oauthbearer.scope", "a b", p+"sasl.jaas.config", oauthLoginModule+" required ;",
	), "SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET=x")
	if o := cfg.Kafka.SASL.OAuth; o.ClientID != "sink-4" || o.Scope != "a b" || strings.Contains(string(r.YAML), secret) {
		t.Fatalf("oauth %+v\n%s", o, r.YAML)
	}
	checkFates(t, r, []fateWant{
		{p + "sasl.oauthbearer.client.credentials.client.secret", Carried, "secret is never written"},
		{p + "sasl.oauthbearer.client.credentials.client.id", Carried, "kafka.sasl.oauth.client_id"},
	})

	// What has no counterpart.
	r, err := Convert(base(
		p+"sasl.oauthbearer.token.endpoint.url", "file:///var/token.jwt",
		p+"sasl.login.callback.handler.class", "com.example.MyLogin",
		p+"sasl.client.callback.handler.class", "com.example.MyClient",
		p+"sasl.jaas.config", oauthLoginModule+` required unsecuredLoginStringClaim_sub="admin";`,
	), Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkFates(t, r, []fateWant{
		{p + "sasl.oauthbearer.token.endpoint.url", Unsupported, "a token read from a file"},
		{p + "sasl.login.callback.handler.class", Unsupported, "custom login callback handler"},
		{p + "sasl.client.callback.handler.class", Unsupported, "custom client callback handler"},
		{p + "sasl.jaas.config", Unsupported, "unsecuredLoginStringClaim_sub have no counterpart"},
	})
}

// TestIAMOverrides: MSK's IAM settings become kafka.sasl.aws; credentials
// the module would take itself are NOT SUPPORTED with a hint.
func TestIAMOverrides(t *testing.T) {
	p := "consumer.override."
	r, cfg := convertSecret(t, base(
		p+"security.protocol", "SASL_SSL", p+"sasl.mechanism", "AWS_MSK_IAM",
		p+"sasl.client.callback.handler.class", iamCallbackHandler,
		p+"sasl.jaas.config", iamLoginModule+` required awsProfileName="msk" awsRoleArn="arn:aws:iam::123456789012:role/msk-reader" awsRoleSessionName="orders" awsStsRegion="eu-west-1" awsDebugCreds=true;`,
	))
	a := cfg.Kafka.SASL.AWS
	if cfg.Kafka.SASL.Mechanism != "AWS_MSK_IAM" || a != (config.AWS{Profile: "msk", RoleARN: "arn:aws:iam::123456789012:role/msk-reader", RoleSessionName: "orders", Region: "eu-west-1"}) {
		t.Fatalf("kafka %+v", cfg.Kafka)
	}
	checkFates(t, r, []fateWant{
		{p + "sasl.client.callback.handler.class", NotNeeded, "franz-go and the AWS SDK"},
		{p + "sasl.jaas.config", Carried, "kafka.sasl.aws.profile, kafka.sasl.aws.role_arn, kafka.sasl.aws.role_session_name, kafka.sasl.aws.region"},
	})
	r, _ = convertSecret(t, base(p+"security.protocol", "SASL_SSL", p+"sasl.mechanism", "AWS_MSK_IAM", p+"sasl.jaas.config", iamLoginModule+" required;"))
	checkFates(t, r, []fateWant{{p + "sasl.jaas.config", NotNeeded, "AWS SDK's default chain"}})
	r, err := Convert(base(p+"sasl.jaas.config", iamLoginModule+` required awsRoleAccessKeyId="AKIA" awsRoleSecretAccessKey="s";`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkFates(t, r, []fateWant{{p + "sasl.jaas.config", Unsupported, "awsRoleAccessKeyId, awsRoleSecretAccessKey have no counterpart: give the credentials to the AWS SDK's chain"}})
}
