package kafkaauth

// AWS_MSK_IAM cannot run here (it needs MSK itself): these tests check that
// what franz-go sends a broker is built from the credentials the AWS SDK's
// chain finds. A kfake broker answers the SASL handshake and records the
// client-first message of every authentication; the signature in it is
// checked against the SDK's own SigV4 presigner with the secret key the
// chain was given.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/config"
)

// iamBroker is a kfake cluster that accepts AWS_MSK_IAM and keeps each
// client-first message, parsed.
type iamBroker struct {
	c        *kfake.Cluster
	lifetime int64 // SessionLifetimeMillis of each authentication
	mu       sync.Mutex
	msgs     []map[string]string
}

func newIAMBroker(t *testing.T, lifetimeMillis int64) *iamBroker {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := &iamBroker{c: c, lifetime: lifetimeMillis}
	c.ControlKey(int16(kmsg.SASLHandshake), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.SASLHandshakeRequest)
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{"AWS_MSK_IAM"}
		if r.Mechanism != "AWS_MSK_IAM" {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.SASLAuthenticateRequest)
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		var m map[string]string
		if err := json.Unmarshal(r.SASLAuthBytes, &m); err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			resp.ErrorMessage = kmsg.StringPtr("not JSON: " + err.Error())
			return resp, nil, true
		}
		b.mu.Lock()
		b.msgs = append(b.msgs, m)
		b.mu.Unlock()
		resp.SASLAuthBytes = []byte(`{"version":"2020_10_22","request-id":"test"}`)
		resp.SessionLifetimeMillis = b.lifetime
		return resp, nil, true
	})
	return b
}

func (b *iamBroker) messages() []map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]string(nil), b.msgs...)
}

// connect makes a client of the broker with k's mechanism and asks for
// metadata once.
func (b *iamBroker) connect(t *testing.T, k config.Kafka) *kgo.Client {
	t.Helper()
	m, err := Mechanism(k)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.c.ListenAddrs()...), kgo.SASL(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatalf("metadata through AWS_MSK_IAM: %v", err)
	}
	return cl
}

// isolateAWS clears every variable the SDK's chain reads and points its
// files at an empty directory, so that only what a test sets is found.
func isolateAWS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS"} {
		t.Setenv(v, "")
		_ = os.Unsetenv(v) // the SDK treats some set-but-empty variables as set
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return dir
}

func iamKafka(t *testing.T, a config.AWS) config.Kafka {
	k := config.Kafka{ClientID: "sink-" + strings.ReplaceAll(t.Name(), "/", "-"), RequestTimeout: 10 * time.Second}
	k.SASL.Mechanism = config.SASLAWSMSKIAM
	k.SASL.AWS = a
	return k
}

// checkSigned checks one client-first message: the action, the host, the
// credential scope of accessKey in region, the session token, and the
// signature, recomputed by the SDK's presigner with secret.
func checkSigned(t *testing.T, m map[string]string, accessKey, secret, session, region string) {
	t.Helper()
	date, err := time.Parse("20060102T150405Z", m["x-amz-date"])
	if err != nil {
		t.Fatalf("x-amz-date: %v in %v", err, m)
	}
	scope := fmt.Sprintf("%s/%s/%s/kafka-cluster/aws4_request", accessKey, date.Format("20060102"), region)
	if m["action"] != "kafka-cluster:Connect" || m["host"] != "127.0.0.1" || m["version"] != "2020_10_22" ||
		m["x-amz-credential"] != scope || m["x-amz-security-token"] != session || m["x-amz-algorithm"] != "AWS4-HMAC-SHA256" {
		t.Fatalf("client-first message %v; want credential %s, security token %q", m, scope, session)
	}
	req, err := http.NewRequest(http.MethodGet, "https://127.0.0.1/?Action=kafka-cluster%3AConnect&X-Amz-Expires="+m["x-amz-expires"], nil)
	if err != nil {
		t.Fatal(err)
	}
	const emptyPayload = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	creds := awssdk.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret, SessionToken: session}
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, emptyPayload, "kafka-cluster", region, date)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(signed, "X-Amz-Signature="+m["x-amz-signature"]) {
		t.Fatalf("signature %s is not the SDK's for the same request:\n%s", m["x-amz-signature"], signed)
	}
}

// TestIAMFromEnvironment: keys, session token and region from the
// environment.
func TestIAMFromEnvironment(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT0001")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	t.Setenv("AWS_SESSION_TOKEN", "env-session")
	t.Setenv("AWS_REGION", "eu-west-1")
	b := newIAMBroker(t, 0)
	b.connect(t, iamKafka(t, config.AWS{}))
	msgs := b.messages()
	if len(msgs) == 0 {
		t.Fatal("no authentication reached the broker")
	}
	checkSigned(t, msgs[0], "AKIAENVIRONMENT0001", "env-secret", "env-session", "eu-west-1")

	// What sink check prints: where they came from, never the secret.
	r, err := Probe(context.Background(), iamKafka(t, config.AWS{}))
	if err != nil || r.What != `credentials from EnvConfigCredentials (access key …0001), region "eu-west-1"` {
		t.Fatalf("Probe = %+v, %v", r, err)
	}
}

// TestIAMFromProfile: a named profile of the shared files gives the keys
// and the region (the broker's host name carries none), which the
// signature then uses.
func TestIAMFromProfile(t *testing.T) {
	dir := isolateAWS(t)
	writeFile(t, filepath.Join(dir, "config"), "[profile msk]\nregion = ap-southeast-2\n")
	writeFile(t, filepath.Join(dir, "credentials"), "[msk]\naws_access_key_id = AKIAPROFILE00000002\naws_secret_access_key = profile-secret\n")
	b := newIAMBroker(t, 0)
	b.connect(t, iamKafka(t, config.AWS{Profile: "msk"}))
	checkSigned(t, b.messages()[0], "AKIAPROFILE00000002", "profile-secret", "", "ap-southeast-2")
	if os.Getenv("AWS_REGION") != "ap-southeast-2" {
		t.Fatalf("AWS_REGION = %q; want the profile's region for franz-go's signature", os.Getenv("AWS_REGION"))
	}

	// The region of the config wins over the profile's.
	b = newIAMBroker(t, 0)
	b.connect(t, iamKafka(t, config.AWS{Profile: "msk", Region: "ca-central-1"}))
	checkSigned(t, b.messages()[0], "AKIAPROFILE00000002", "profile-secret", "", "ca-central-1")

	// A profile that does not exist fails when the mechanism is made.
	_, err := Mechanism(iamKafka(t, config.AWS{Profile: "nope"}))
	if Classify(err) != NoCredentials || !strings.Contains(err.Error(), "kafka.sasl.aws: no AWS credentials: ") || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing profile: %v", err)
	}
}

// TestIAMRefreshed: credentials from the container endpoint (EKS Pod
// Identity, ECS task roles) that expire are fetched again by the SDK's
// cache, and the next authentication, when the broker asks for one
// (session lifetime), is signed with the new ones, on the same client.
func TestIAMRefreshed(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_REGION", "us-east-2")
	var served atomic.Int32
	creds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "pod-identity-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		n := served.Add(1)
		// The SDK's cache treats them as expired 5 minutes early: these
		// last about one second.
		exp := time.Now().Add(5*time.Minute + time.Second).UTC().Format(time.RFC3339)
		fmt.Fprintf(w, `{"AccessKeyId":"ASIACONTAINER000%03d","SecretAccessKey":"container-secret-%d","Token":"container-session-%d","Expiration":%q}`, n, n, n, exp)
	}))
	t.Cleanup(creds.Close)
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", creds.URL+"/v1/credentials")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "pod-identity-token")

	b := newIAMBroker(t, 1500) // re-authenticate about every 0.5 s
	cl := b.connect(t, iamKafka(t, config.AWS{}))
	deadline := time.Now().Add(20 * time.Second)
	for served.Load() < 3 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	seen := map[string]bool{}
	for _, m := range b.messages() {
		key, _, _ := strings.Cut(m["x-amz-credential"], "/")
		if !seen[key] {
			seen[key] = true
			n := strings.TrimLeft(strings.TrimPrefix(key, "ASIACONTAINER"), "0")
			checkSigned(t, m, key, "container-secret-"+n, "container-session-"+n, "us-east-2")
		}
	}
	if len(seen) < 3 {
		t.Fatalf("%d authentications signed with %d different credentials (%v); want the refreshed ones too", len(b.messages()), len(seen), seen)
	}
}

// TestIAMAssumedRoles: a web identity token (EKS IRSA) and role_arn
// (AssumeRole with the chain's credentials) both go through STS, here a
// fake STS endpoint (AWS_ENDPOINT_URL_STS); the broker gets the role's
// credentials.
func TestIAMAssumedRoles(t *testing.T) {
	dir := isolateAWS(t)
	t.Setenv("AWS_REGION", "eu-central-1")
	var mu sync.Mutex
	var calls []string
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		action := r.PostForm.Get("Action")
		mu.Lock()
		calls = append(calls, action+" "+r.PostForm.Get("RoleArn")+" "+r.PostForm.Get("RoleSessionName")+" "+r.PostForm.Get("WebIdentityToken"))
		mu.Unlock()
		exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<%[1]sResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><%[1]sResult>
<Credentials><AccessKeyId>ASIA%[2]s</AccessKeyId><SecretAccessKey>%[2]s-secret</SecretAccessKey><SessionToken>%[2]s-session</SessionToken><Expiration>%[3]s</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/x/y</Arn><AssumedRoleId>AROA:y</AssumedRoleId></AssumedRoleUser>
</%[1]sResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></%[1]sResponse>`, action, strings.ToUpper(action), exp)
	}))
	t.Cleanup(sts.Close)
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)

	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, "eyJpod-token")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tokenFile)
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/pod-role")
	t.Setenv("AWS_ROLE_SESSION_NAME", "pod")
	b := newIAMBroker(t, 0)
	b.connect(t, iamKafka(t, config.AWS{}))
	checkSigned(t, b.messages()[0], "ASIAASSUMEROLEWITHWEBIDENTITY", "ASSUMEROLEWITHWEBIDENTITY-secret", "ASSUMEROLEWITHWEBIDENTITY-session", "eu-central-1")

	// role_arn: the web identity's credentials assume another role.
	b = newIAMBroker(t, 0)
	b.connect(t, iamKafka(t, config.AWS{RoleARN: "arn:aws:iam::123456789012:role/msk-writer", RoleSessionName: "events"}))
	checkSigned(t, b.messages()[0], "ASIAASSUMEROLE", "ASSUMEROLE-secret", "ASSUMEROLE-session", "eu-central-1")
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"AssumeRoleWithWebIdentity arn:aws:iam::123456789012:role/pod-role pod eyJpod-token",
		"AssumeRoleWithWebIdentity arn:aws:iam::123456789012:role/pod-role pod eyJpod-token",
		"AssumeRole arn:aws:iam::123456789012:role/msk-writer events ",
	}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("STS calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestIAMNoCredentials: with nothing in the chain the error says so, in
// its class, before any broker is asked.
func TestIAMNoCredentials(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_REGION", "us-east-1")
	_, err := Probe(context.Background(), iamKafka(t, config.AWS{}))
	if Classify(err) != NoCredentials || !strings.HasPrefix(err.Error(), "kafka.sasl.aws: no AWS credentials: ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Probe with no credentials: %v (%q)", err, Classify(err))
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
