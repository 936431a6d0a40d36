package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"time"
)

// maxKeys is how many keys of a ring stay published: a rotation keeps the
// old ones (tokens they signed stay valid until they expire, as with a
// real provider), up to this many.
const maxKeys = 6

// signingKey is an RSA key and its key id (the JWS kid header).
type signingKey struct {
	kid string
	key *rsa.PrivateKey
}

// newKey makes an RSA key with the key id k<serial>-<hash>.
func newKey(serial int) (signingKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return signingKey{}, err
	}
	sum := sha256.Sum256(key.N.Bytes())
	return signingKey{kid: fmt.Sprintf("k%d-%x", serial, sum[:4]), key: key}, nil
}

// ring is a set of keys that rotate together: the published ones, the one
// that signs, and the one published to sign next. As providers that rotate
// well do, a ring publishes the key it will sign with next before it signs
// with it, so that a broker that refreshes its JWKS regularly knows the key
// before it meets a token signed by it. The issuer's mutex guards it.
type ring struct {
	keys          []signingKey // published, oldest first
	active, next  string       // key ids
	nextPublished time.Time
}

func newRing(first, next signingKey, now time.Time) *ring {
	return &ring{keys: []signingKey{first, next}, active: first.kid, next: next.kid, nextPublished: now}
}

// rotate signs from now on with the key published as the next one, and
// publishes fresh as the new next key; the old keys stay published unless
// dropOld. unannounced signs instead with fresh, which nobody has seen in
// the JWKS yet, as a provider that rotates abruptly does.
func (r *ring) rotate(fresh signingKey, unannounced, dropOld bool, now time.Time) string {
	if dropOld {
		var keep []signingKey
		for _, k := range r.keys {
			if k.kid == r.next {
				keep = append(keep, k)
			}
		}
		r.keys = keep
	}
	r.keys = append(r.keys, fresh)
	if unannounced {
		r.active = fresh.kid
	} else {
		r.active, r.next, r.nextPublished = r.next, fresh.kid, now
	}
	if len(r.keys) > maxKeys {
		r.keys = r.keys[len(r.keys)-maxKeys:]
	}
	return r.active
}

// signing is the active key.
func (r *ring) signing() signingKey {
	for _, k := range r.keys {
		if k.kid == r.active {
			return k
		}
	}
	return r.keys[len(r.keys)-1]
}

func (r *ring) ids() []string {
	ids := make([]string, 0, len(r.keys))
	for _, k := range r.keys {
		ids = append(ids, k.kid)
	}
	return ids
}
