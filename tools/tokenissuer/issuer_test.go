package main

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func newTestIssuer(t *testing.T) (*issuer, *httptest.Server) {
	t.Helper()
	is, err := newIssuer("http://issuer.test", []string{"kafka"}, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	is.clients["sink"] = client{Secret: "pw"}
	srv := httptest.NewServer(is.routes())
	t.Cleanup(srv.Close)
	return is, srv
}

func getJSON(t *testing.T, resp *http.Response, err error, v any) int {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

func postToken(t *testing.T, srv *httptest.Server, id, secret string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if id != "" {
		req.SetBasicAuth(id, secret)
	}
	var out map[string]any
	resp, err := http.DefaultClient.Do(req)
	return getJSON(t, resp, err, &out), out
}

// verify checks tok's RS256 signature against the issuer's JWKS and
// returns its header and claims.
func verify(t *testing.T, srv *httptest.Server, tok string) (header, claims map[string]any) {
	t.Helper()
	var jwks struct {
		Keys []struct{ Kid, N, E string }
	}
	resp, err := http.Get(srv.URL + "/jwks")
	getJSON(t, resp, err, &jwks)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS: %q", tok)
	}
	dec := func(s string, v any) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err == nil && v != nil {
			err = json.Unmarshal(b, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	dec(parts[0], &header)
	dec(parts[1], &claims)
	for _, k := range jwks.Keys {
		if k.Kid != header["kid"] {
			continue
		}
		n, _ := base64.RawURLEncoding.DecodeString(k.N)
		e, _ := base64.RawURLEncoding.DecodeString(k.E)
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
			t.Fatalf("signature: %v", err)
		}
		return header, claims
	}
	t.Fatalf("kid %v not in the JWKS", header["kid"])
	return nil, nil
}

func TestIssuerToken(t *testing.T) {
	_, srv := newTestIssuer(t)
	grant := url.Values{"grant_type": {"client_credentials"}}
	code, out := postToken(t, srv, "sink", "pw", url.Values{"grant_type": {"client_credentials"}, "scope": {"kafka"}})
	if code != 200 || out["token_type"] != "Bearer" || out["expires_in"] != float64(3600) {
		t.Fatalf("token: %d %v", code, out)
	}
	h, c := verify(t, srv, out["access_token"].(string))
	if h["alg"] != "RS256" || c["iss"] != "http://issuer.test" || c["sub"] != "sink" || c["scope"] != "kafka" ||
		c["aud"].([]any)[0] != "kafka" || c["exp"].(float64)-c["iat"].(float64) != 3600 {
		t.Fatalf("header %v claims %v", h, c)
	}
	// Without a scope there is no scope claim (Kafka refuses an empty one).
	_, out = postToken(t, srv, "sink", "pw", grant)
	if _, c := verify(t, srv, out["access_token"].(string)); c["scope"] != nil {
		t.Fatalf("claims %v", c)
	}
	// client_secret_post works too.
	code, _ = postToken(t, srv, "", "", url.Values{"grant_type": {"client_credentials"}, "client_id": {"sink"}, "client_secret": {"pw"}})
	if code != 200 {
		t.Fatalf("client_secret_post: %d", code)
	}
	for _, tc := range []struct {
		id, secret string
		form       url.Values
		code       int
		err        string
	}{
		{"sink", "wrong", grant, 401, "invalid_client"},
		{"nobody", "pw", grant, 401, "invalid_client"},
		{"sink", "pw", url.Values{"grant_type": {"password"}}, 400, "unsupported_grant_type"},
		{"sink", "pw", url.Values{"grant_type": {"client_credentials"}, "scope": {"forbidden"}}, 400, "invalid_scope"},
	} {
		code, out := postToken(t, srv, tc.id, tc.secret, tc.form)
		if code != tc.code || out["error"] != tc.err {
			t.Errorf("%s/%s %v: %d %v; want %d %s", tc.id, tc.secret, tc.form, code, out, tc.code, tc.err)
		}
	}
}

// TestIssuerControl: clients with their own audience, lifetime or failure;
// a rotation signs with the key published before as the next one (or, told
// so, with one published only now) and keeps the old keys published unless
// told to drop them; the issued tokens are counted per key.
func TestIssuerControl(t *testing.T) {
	_, srv := newTestIssuer(t)
	put := func(body string) int {
		resp, err := http.Post(srv.URL+"/control/clients", "application/json", strings.NewReader(body))
		var out map[string]any
		return getJSON(t, resp, err, &out)
	}
	if put(`{"id":"short","secret":"s","audience":["other"],"lifetime":"20s"}`) != 200 || put(`{"id":"down","secret":"s","fail_status":503}`) != 200 {
		t.Fatal("registering clients failed")
	}
	if put(`{"id":"x","secret":"s","lifetime":"soon"}`) != 400 || put(`{"secret":"s"}`) != 400 {
		t.Fatal("a bad client spec was accepted")
	}
	grant := url.Values{"grant_type": {"client_credentials"}}
	_, out := postToken(t, srv, "short", "s", grant)
	if _, c := verify(t, srv, out["access_token"].(string)); c["aud"].([]any)[0] != "other" || out["expires_in"] != float64(20) {
		t.Fatalf("short: %v %v", out, c)
	}
	if code, out := postToken(t, srv, "down", "s", grant); code != 503 || out["error"] != "server_error" {
		t.Fatalf("down: %d %v", code, out)
	}

	var keys struct {
		Keys         []string
		Active, Next string
	}
	listKeys := func() {
		t.Helper()
		resp, err := http.Get(srv.URL + "/control/keys")
		getJSON(t, resp, err, &keys)
	}
	rotate := func(query string) string {
		t.Helper()
		var rot map[string]string
		resp, err := http.Post(srv.URL+"/control/rotate"+query, "", nil)
		getJSON(t, resp, err, &rot)
		return rot["kid"]
	}
	signedBy := func() any {
		t.Helper()
		_, out := postToken(t, srv, "sink", "pw", grant)
		h, _ := verify(t, srv, out["access_token"].(string))
		return h["kid"]
	}
	// The key that signs next is published before it signs.
	listKeys()
	first, next := keys.Active, keys.Next
	if len(keys.Keys) != 2 || keys.Keys[0] != first || keys.Keys[1] != next || signedBy() != first {
		t.Fatalf("at start: %+v", keys)
	}
	if kid := rotate(""); kid != next || signedBy() != next {
		t.Fatalf("rotate: now %s, want the announced %s", kid, next)
	}
	listKeys()
	if len(keys.Keys) != 3 || keys.Keys[0] != first || keys.Active != next {
		t.Fatalf("after rotate: %+v", keys)
	}
	announced := keys.Next
	abrupt := rotate("?unannounced=true")
	listKeys()
	if abrupt == announced || keys.Active != abrupt || keys.Next != announced || signedBy() != abrupt {
		t.Fatalf("unannounced rotate: signing %s, keys %+v", abrupt, keys)
	}
	rotate("?drop_old=true")
	listKeys()
	if len(keys.Keys) != 2 || keys.Active != announced {
		t.Fatalf("after drop_old: %+v", keys)
	}
	var issued struct{ Issued map[string]int }
	resp, err := http.Get(srv.URL + "/control/issued/sink")
	getJSON(t, resp, err, &issued)
	if issued.Issued[first] != 1 || issued.Issued[next] != 1 || issued.Issued[abrupt] != 1 || len(issued.Issued) != 3 {
		t.Fatalf("issued to sink: %v (first key %s)", issued.Issued, first)
	}
}

// TestIssuerOwnKeys: a client with keys of its own rotates them without
// touching the keys other clients sign with; the JWKS has both; an
// announced rotation waits until the next key has been published for the
// announce time.
func TestIssuerOwnKeys(t *testing.T) {
	is, srv := newTestIssuer(t)
	is.announce = 300 * time.Millisecond
	resp, err := http.Post(srv.URL+"/control/clients", "application/json", strings.NewReader(`{"id":"mine","secret":"s","own_keys":true}`))
	var out map[string]any
	if getJSON(t, resp, err, &out) != 200 {
		t.Fatal(out)
	}
	grant := url.Values{"grant_type": {"client_credentials"}}
	kidOf := func(id, secret string) any {
		t.Helper()
		_, out := postToken(t, srv, id, secret, grant)
		h, _ := verify(t, srv, out["access_token"].(string)) // verified against the one JWKS
		return h["kid"]
	}
	sharedBefore, mineBefore := kidOf("sink", "pw"), kidOf("mine", "s")
	if sharedBefore == mineBefore {
		t.Fatalf("the client with own keys signs with the issuer's %v", sharedBefore)
	}
	// The client's first next key was published when it was made, and
	// making it waited out the announce time: this rotation need not wait.
	// It publishes a fresh next key, which the next announced rotation may
	// sign with only once that key has been published for 300ms.
	var rot map[string]string
	resp, err = http.Post(srv.URL+"/control/rotate?client=mine", "", nil)
	getJSON(t, resp, err, &rot)
	is.mu.Lock()
	published := is.ringOf("mine").nextPublished
	is.mu.Unlock()
	resp, err = http.Post(srv.URL+"/control/rotate?client=mine", "", nil)
	getJSON(t, resp, err, &rot)
	if early := published.Add(is.announce).Sub(time.Now()); early > 0 {
		t.Fatalf("announced rotation signed with a key published %v ago; want it to wait until the key was published for %v", is.announce-early, is.announce)
	}
	if kidOf("mine", "s") != rot["kid"] || kidOf("mine", "s") == mineBefore || kidOf("sink", "pw") != sharedBefore {
		t.Fatalf("after rotating mine: mine %v (want %s), shared %v (want %v)", kidOf("mine", "s"), rot["kid"], kidOf("sink", "pw"), sharedBefore)
	}
	resp, err = http.Post(srv.URL+"/control/rotate?client=mine&unannounced=true", "", nil)
	getJSON(t, resp, err, &rot)
	if kidOf("mine", "s") != rot["kid"] || kidOf("sink", "pw") != sharedBefore {
		t.Fatalf("after an unannounced rotation of mine: %v, shared %v", kidOf("mine", "s"), kidOf("sink", "pw"))
	}
}
