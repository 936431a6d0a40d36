package main

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"
)

// client is one registered OAuth client and what its tokens carry.
type client struct {
	Secret   string        `json:"secret"`
	Audience []string      `json:"audience"` // the aud claim; empty: the issuer's default
	Lifetime time.Duration `json:"-"`        // 0: the issuer's default
	// FailStatus, when set, is the HTTP status every token request of
	// this client gets (a provider in trouble), with error server_error.
	FailStatus int `json:"fail_status"`
}

// signingKey is an RSA key and its key id (the JWS kid header).
type signingKey struct {
	kid string
	key *rsa.PrivateKey
}

// issuer is the state of the token issuer: its keys and its clients. As
// providers that rotate well do, it publishes the key it will sign with
// next before it signs with it, so that a broker that refreshes its JWKS
// regularly knows the key before it meets a token signed by it. One mutex
// guards the state; the handlers run on net/http's goroutines.
type issuer struct {
	url      string // the iss claim, and the base of the endpoints
	audience []string
	lifetime time.Duration
	now      func() time.Time

	mu      sync.Mutex
	keys    []signingKey // published, oldest first
	active  string       // kid of the key that signs
	next    string       // kid of the published key that signs after the next rotation
	clients map[string]client
	serial  int
	issued  map[string]map[string]int // client id -> signing key id -> tokens
}

func newIssuer(url string, audience []string, lifetime time.Duration) (*issuer, error) {
	is := &issuer{url: strings.TrimSuffix(url, "/"), audience: audience, lifetime: lifetime, now: time.Now, clients: map[string]client{}, issued: map[string]map[string]int{}}
	first, err := is.newKey()
	if err != nil {
		return nil, err
	}
	next, err := is.newKey()
	if err != nil {
		return nil, err
	}
	is.keys, is.active, is.next = []signingKey{first, next}, first.kid, next.kid
	return is, nil
}

// maxKeys is how many keys stay published: a rotation keeps the old ones
// (tokens they signed stay valid until they expire, as with a real
// provider), up to this many.
const maxKeys = 6

func (is *issuer) newKey() (signingKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return signingKey{}, err
	}
	is.mu.Lock()
	is.serial++
	n := is.serial
	is.mu.Unlock()
	sum := sha256.Sum256(key.N.Bytes())
	return signingKey{kid: fmt.Sprintf("k%d-%x", n, sum[:4]), key: key}, nil
}

// rotate signs from now on with the key published as the next one, and
// publishes a new next key; the old keys stay published (so tokens they
// signed stay valid until they expire) unless dropOld. unannounced signs
// instead with a brand-new key nobody has seen in the JWKS yet, as a
// provider that rotates abruptly does.
func (is *issuer) rotate(unannounced, dropOld bool) (string, error) {
	fresh, err := is.newKey()
	if err != nil {
		return "", err
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if dropOld {
		var keep []signingKey
		for _, k := range is.keys {
			if k.kid == is.next {
				keep = append(keep, k)
			}
		}
		is.keys = keep
	}
	is.keys = append(is.keys, fresh)
	if unannounced {
		is.active = fresh.kid
	} else {
		is.active, is.next = is.next, fresh.kid
	}
	if len(is.keys) > maxKeys {
		is.keys = is.keys[len(is.keys)-maxKeys:]
	}
	return is.active, nil
}

// signing is the active key.
func (is *issuer) signing() signingKey {
	for _, k := range is.keys {
		if k.kid == is.active {
			return k
		}
	}
	return is.keys[len(is.keys)-1]
}

// routes are the issuer's endpoints.
func (is *issuer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("GET /jwks", is.jwks)
	mux.HandleFunc("POST /token", is.token)
	mux.HandleFunc("POST /control/clients", is.putClient)
	mux.HandleFunc("POST /control/rotate", is.rotateHandler)
	mux.HandleFunc("GET /control/keys", is.keyIDs)
	mux.HandleFunc("GET /control/issued/{id}", is.issuedTo)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError answers with an RFC 6749 section 5.2 error object.
func oauthError(w http.ResponseWriter, status int, code, description string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
	}
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

func (is *issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                is.url,
		"token_endpoint":                        is.url + "/token",
		"jwks_uri":                              is.url + "/jwks",
		"grant_types_supported":                 []string{"client_credentials"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwks publishes every key (RFC 7517).
func (is *issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	keys := make([]map[string]string, 0, len(is.keys))
	for _, k := range is.keys {
		pub := k.key.PublicKey
		keys = append(keys, map[string]string{
			"kty": "RSA", "use": "sig", "alg": "RS256", "kid": k.kid,
			"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
		})
	}
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

// token is the client-credentials grant (RFC 6749 section 4.4): client
// authentication by HTTP Basic or by client_id and client_secret in the
// form, then a JWT signed with the newest key.
func (is *issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if g := r.PostForm.Get("grant_type"); g != "client_credentials" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("grant_type %q is not client_credentials", g))
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	is.mu.Lock()
	c, known := is.clients[id]
	is.mu.Unlock()
	switch {
	case !known || c.Secret != secret:
		oauthError(w, http.StatusUnauthorized, "invalid_client", "Invalid client or Invalid client credentials")
		return
	case c.FailStatus != 0:
		oauthError(w, c.FailStatus, "server_error", "the issuer was told to fail for this client")
		return
	}
	scope := r.PostForm.Get("scope")
	if strings.Contains(scope, "forbidden") {
		oauthError(w, http.StatusBadRequest, "invalid_scope", fmt.Sprintf("scope %q is not allowed for client %s", scope, id))
		return
	}
	tok, life, err := is.sign(id, c, scope)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(life / time.Second), "scope": scope,
	})
}

// sign makes a JWS (RFC 7515, RS256) of the claims Kafka's broker
// validator reads: iss, sub, aud, iat, exp, scope.
func (is *issuer) sign(id string, cl client, scope string) (string, time.Duration, error) {
	life, aud := cl.Lifetime, cl.Audience
	if life <= 0 {
		life = is.lifetime
	}
	if len(aud) == 0 {
		aud = is.audience
	}
	is.mu.Lock()
	k := is.signing()
	if is.issued[id] == nil {
		is.issued[id] = map[string]int{}
	}
	is.issued[id][k.kid]++
	is.mu.Unlock()
	now := is.now()
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": k.kid})
	c := map[string]any{
		"iss": is.url, "sub": id, "aud": aud, "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(life).Unix(), "jti": fmt.Sprintf("%s-%d", id, now.UnixNano()),
	}
	if scope != "" { // Kafka's validator refuses an empty scope claim
		c["scope"] = scope
	}
	claims, _ := json.Marshal(c)
	signing := b64(header) + "." + b64(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", 0, err
	}
	return signing + "." + b64(sig), life, nil
}

// clientSpec is the body of POST /control/clients.
type clientSpec struct {
	ID string `json:"id"`
	client
	Lifetime string `json:"lifetime"` // a Go duration, e.g. "20s"
}

// putClient registers or replaces a client (test-only control).
func (is *issuer) putClient(w http.ResponseWriter, r *http.Request) {
	var s clientSpec
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil || s.ID == "" || s.Secret == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("want {\"id\", \"secret\", \"audience\", \"lifetime\", \"fail_status\"}: %v", err)})
		return
	}
	if s.Lifetime != "" {
		d, err := time.ParseDuration(s.Lifetime)
		if err != nil || d <= 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("lifetime %q: want a positive duration", s.Lifetime)})
			return
		}
		s.client.Lifetime = d
	}
	is.mu.Lock()
	is.clients[s.ID] = s.client
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"id": s.ID})
}

// rotateHandler rotates the signing key (test-only control): to the key
// published as the next one, or with ?unannounced=true to a key published
// only now; ?drop_old=true unpublishes the old keys at once.
func (is *issuer) rotateHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kid, err := is.rotate(q.Get("unannounced") == "true", q.Get("drop_old") == "true")
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"kid": kid})
}

// keyIDs lists the published key ids, the signing one and the next one.
func (is *issuer) keyIDs(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	ids := make([]string, 0, len(is.keys))
	for _, k := range is.keys {
		ids = append(ids, k.kid)
	}
	active, next := is.active, is.next
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"keys": ids, "active": active, "next": next})
}

// issuedTo counts the tokens issued to a client, per signing key id.
func (is *issuer) issuedTo(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	out := map[string]int{}
	for kid, n := range is.issued[r.PathValue("id")] {
		out[kid] = n
	}
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"issued": out})
}
