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

// issuer is the state of the token issuer: its keys and its clients. The
// keys are in rings that rotate together (ring.go): the issuer's own, and
// one per client that asked for keys of its own (own_keys), so that a test
// rotating its client's keys does not change the keys other tests'
// clients sign with; the JWKS publishes every ring. One mutex guards the
// state; the handlers run on net/http's goroutines.
type issuer struct {
	url      string // the iss claim, and the base of the endpoints
	audience []string
	lifetime time.Duration
	// announce is how long a key is published before an announced
	// rotation signs with it: longer than the brokers' JWKS refresh.
	announce time.Duration
	now      func() time.Time

	mu        sync.Mutex
	global    *ring
	rings     map[string]*ring // client id -> its own keys
	ringOrder []string         // client ids with rings, oldest first
	clients   map[string]client
	jwksAt    time.Time // when the JWKS was last served (a broker's refresh)
	serial    int
	issued    map[string]map[string]int // client id -> signing key id -> tokens
}

// maxRings is how many clients' own key rings stay published; the oldest
// goes first.
const maxRings = 32

func newIssuer(url string, audience []string, lifetime, announce time.Duration) (*issuer, error) {
	is := &issuer{url: strings.TrimSuffix(url, "/"), audience: audience, lifetime: lifetime, announce: announce, now: time.Now,
		rings: map[string]*ring{}, clients: map[string]client{}, issued: map[string]map[string]int{}}
	r, err := is.newRing()
	if err != nil {
		return nil, err
	}
	is.global = r
	return is, nil
}

// key makes a key with the next serial number.
func (is *issuer) key() (signingKey, error) {
	is.mu.Lock()
	is.serial++
	n := is.serial
	is.mu.Unlock()
	return newKey(n)
}

func (is *issuer) newRing() (*ring, error) {
	first, err := is.key()
	if err != nil {
		return nil, err
	}
	next, err := is.key()
	if err != nil {
		return nil, err
	}
	return newRing(first, next, is.now()), nil
}

// ringOf is the ring client id signs with; the caller holds the mutex.
func (is *issuer) ringOf(id string) *ring {
	if r, ok := is.rings[id]; ok {
		return r
	}
	return is.global
}

// rotate rotates the ring of client id ("" or a client without keys of
// its own: the issuer's), waiting first, for an announced rotation, until
// the next key has been published for announce. It returns the key id
// that signs now.
func (is *issuer) rotate(id string, unannounced, dropOld bool) (string, error) {
	fresh, err := is.key()
	if err != nil {
		return "", err
	}
	if !unannounced {
		is.mu.Lock()
		wait := is.ringOf(id).nextPublished.Add(is.announce).Sub(is.now())
		is.mu.Unlock()
		if wait > 0 {
			time.Sleep(wait)
		}
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.ringOf(id).rotate(fresh, unannounced, dropOld, is.now()), nil
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

// jwks publishes every key of every ring (RFC 7517).
func (is *issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	is.jwksAt = is.now()
	var keys []map[string]string
	for _, r := range append([]*ring{is.global}, is.ownRings()...) {
		for _, k := range r.keys {
			pub := k.key.PublicKey
			keys = append(keys, map[string]string{
				"kty": "RSA", "use": "sig", "alg": "RS256", "kid": k.kid,
				"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
			})
		}
	}
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

// ownRings are the clients' rings in the order they were made; the
// caller holds the mutex.
func (is *issuer) ownRings() []*ring {
	out := make([]*ring, 0, len(is.ringOrder))
	for _, id := range is.ringOrder {
		out = append(out, is.rings[id])
	}
	return out
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
	k := is.ringOf(id).signing()
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
	// OwnKeys gives the client a key ring of its own, which
	// /control/rotate?client=ID rotates; the answer comes once its keys
	// have been published for announce.
	OwnKeys bool `json:"own_keys"`
}

// putClient registers or replaces a client (test-only control).
func (is *issuer) putClient(w http.ResponseWriter, r *http.Request) {
	var s clientSpec
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil || s.ID == "" || s.Secret == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("want {\"id\", \"secret\", \"audience\", \"lifetime\", \"fail_status\", \"own_keys\"}: %v", err)})
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
	var own *ring
	if s.OwnKeys {
		var err error
		if own, err = is.newRing(); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
	}
	is.mu.Lock()
	is.clients[s.ID] = s.client
	_, had := is.rings[s.ID]
	if own != nil && !had {
		is.addRing(s.ID, own)
	}
	is.mu.Unlock()
	if own != nil && !had {
		// A new ring's keys are announced like a rotation's: published
		// for announce before the client's first token is signed.
		time.Sleep(is.announce)
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": s.ID})
}

// addRing gives client id its ring, dropping the oldest beyond maxRings;
// the caller holds the mutex.
func (is *issuer) addRing(id string, r *ring) {
	is.rings[id] = r
	is.ringOrder = append(is.ringOrder, id)
	if len(is.ringOrder) > maxRings {
		delete(is.rings, is.ringOrder[0])
		is.ringOrder = is.ringOrder[1:]
	}
}

// rotateHandler rotates a ring's signing key (test-only control): the
// issuer's, or with ?client=ID that client's own. It signs then with the
// key published as the next one (after it has been published for
// announce), or with ?unannounced=true with a key published only now;
// ?drop_old=true unpublishes the ring's old keys at once.
func (is *issuer) rotateHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kid, err := is.rotate(q.Get("client"), q.Get("unannounced") == "true", q.Get("drop_old") == "true")
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"kid": kid})
}

// keyIDs lists a ring's published key ids, the signing one and the next
// one: the issuer's, or with ?client=ID the one that client signs with;
// and how long ago the JWKS was last served (-1: never).
func (is *issuer) keyIDs(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	rg := is.ringOf(r.URL.Query().Get("client"))
	out := map[string]any{"keys": rg.ids(), "active": rg.active, "next": rg.next, "jwks_served_ms_ago": -1}
	if !is.jwksAt.IsZero() {
		out["jwks_served_ms_ago"] = is.now().Sub(is.jwksAt).Milliseconds()
	}
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
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
