package kafkaauth

import (
	"encoding/base64"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func oauth2Token(v string, expiry time.Time) *oauth2.Token {
	return &oauth2.Token{AccessToken: v, Expiry: expiry}
}

func TestJWTExpiry(t *testing.T) {
	f := func(tok string, want int64, wantOK bool) {
		t.Helper()
		got, ok := jwtExpiry(tok)
		if ok != wantOK || (ok && got.Unix() != want) {
			t.Fatalf("jwtExpiry(%q) = %v, %v; want %d, %v", tok, got, ok, want, wantOK)
		}
	}
	h := b64(`{"alg":"RS256","kid":"k1"}`)
	f(h+"."+b64(`{"exp":1800000000}`)+".sig", 1800000000, true)
	f(h+"."+b64(`{"exp":1800000000.5,"aud":["a","b"]}`)+".sig", 1800000000, true)
	f(h+"."+b64(`{"exp":1800000000}`)+"==.sig", 1800000000, true) // padded base64url
	f(h+"."+b64(`{"sub":"x"}`)+".sig", 0, false)                  // no exp
	f(h+"."+b64(`{"exp":"1800000000"}`)+".sig", 0, false)         // not a number
	f(h+"."+b64(`{"exp":1e300}`)+".sig", 0, false)                // no such time
	f(h+"."+b64(`{"exp":-1}`)+".sig", 0, false)
	f(h+"."+b64(`{"exp":1800000000}`), 0, false) // two parts
	f(h+".!!!.sig", 0, false)
	f("opaque-token", 0, false)
	f("", 0, false)
}

// FuzzJWTExpiry: no input panics, and an accepted exp is a plausible time.
func FuzzJWTExpiry(f *testing.F) {
	f.Add("a." + b64(`{"exp":1800000000}`) + ".c")
	f.Add("a." + b64(`{"exp":1e999}`) + ".c")
	f.Add("..")
	f.Fuzz(func(t *testing.T, tok string) {
		got, ok := jwtExpiry(tok)
		if ok && (got.Year() < 2001 || got.Year() > 9999) {
			t.Fatalf("jwtExpiry(%q) = %v", tok, got)
		}
	})
}
