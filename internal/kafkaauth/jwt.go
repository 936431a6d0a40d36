package kafkaauth

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"time"
)

// jwtExpiry reads the exp claim (RFC 7519 section 4.1.4, seconds since the
// epoch) of a JWS-serialized token, without verifying anything: the
// brokers verify; the sink only needs to know when to fetch the next one.
// ok is false for anything that is not a JWT with a usable exp.
func jwtExpiry(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	exp := *claims.Exp
	// Before 2001 or after 9999: not a time this token could mean.
	if math.IsNaN(exp) || exp < 978307200 || exp > 253402300799 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(exp)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}
