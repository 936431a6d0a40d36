package config

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// ByteSize is a number of bytes. In YAML and environment variables it is
// written either as a plain integer (bytes) or as a number with a unit:
// "512KiB", "32MiB", "1.5GiB" (IEC, powers of 1024) or "1KB", "500MB", "2GB"
// (SI, powers of 1000). Units are case-insensitive.
type ByteSize int64

// Byte-size units. Kafka and ClickHouse both think in powers of two, so the
// defaults in this package are written with these.
const (
	KiB ByteSize = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

// byteUnits maps a lower-cased unit suffix to its multiplier. Single letters
// ("K", "M", "G") are deliberately absent: "64M" means 64×10^6 to some tools
// and 64×2^20 to others, and a silent factor of 1.05 in a memory budget is
// the kind of error nobody finds.
var byteUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
	// Kubernetes spells IEC units without the trailing B; they are as
	// unambiguous as the long forms and people paste them from manifests.
	"ki": 1 << 10,
	"mi": 1 << 20,
	"gi": 1 << 30,
	"ti": 1 << 40,
}

// ParseByteSize parses s as described on ByteSize.
func ParseByteSize(s string) (ByteSize, error) {
	orig := s
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("invalid byte size \"\": empty")
	}
	// Split at the first character that cannot belong to the number.
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == '-' || s[i] == '+') {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	if num == "" {
		return 0, fmt.Errorf("invalid byte size %q: want a number with an optional unit, e.g. \"32MiB\"", orig)
	}
	mult, err := byteUnit(orig, unit, s[i:])
	if err != nil {
		return 0, err
	}
	return scaleBytes(orig, num, mult)
}

// byteUnit is the multiplier of unit (lower-cased; as written: given), or
// an error that names it for ParseByteSize's input orig.
func byteUnit(orig, unit, given string) (int64, error) {
	if mult, ok := byteUnits[unit]; ok {
		return mult, nil
	}
	switch unit {
	case "k", "m", "g", "t":
		u := strings.ToUpper(unit)
		return 0, fmt.Errorf("invalid byte size %q: unit %q is ambiguous, write %sB (powers of 1000) or %siB (powers of 1024)", orig, given, u, u)
	}
	return 0, fmt.Errorf("invalid byte size %q: unknown unit %q (want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)", orig, given)
}

// scaleBytes is the number num times mult, which must be a whole,
// non-negative number of bytes that fits in an int64 (orig is
// ParseByteSize's input, for the error).
func scaleBytes(orig, num string, mult int64) (ByteSize, error) {
	// big.Rat keeps "1.5GiB" exact; float64 would be exact here too, but
	// not for every decimal a user can write, and exactness is what lets
	// us reject fractional bytes instead of rounding them.
	r, ok := new(big.Rat).SetString(num)
	if !ok || strings.Count(num, ".") > 1 {
		return 0, fmt.Errorf("invalid byte size %q: %q is not a number", orig, num)
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("invalid byte size %q: must not be negative", orig)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid byte size %q: not a whole number of bytes", orig)
	}
	n := r.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("invalid byte size %q: too large", orig)
	}
	return ByteSize(n.Int64()), nil
}

// String prints the size in IEC units with at most two decimals when that is
// exact ("32MiB", "1.5GiB"), otherwise in bytes ("1000000B"), so that the
// output always parses back to the same value.
func (b ByteSize) String() string {
	if b < 0 {
		return strconv.FormatInt(int64(b), 10) + "B"
	}
	for _, u := range []struct {
		name string
		size ByteSize
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if b < u.size {
			continue
		}
		if b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
		// Exact with two decimals iff b*100 is a multiple of the unit.
		// Exact with two decimals iff the remainder is a multiple of
		// size/100; size is a power of two, so that means size/4.
		if rem := b % u.size; rem%(u.size/4) == 0 {
			frac := strings.TrimSuffix(strconv.FormatInt(int64(rem*100/u.size), 10), "0")
			return strconv.FormatInt(int64(b/u.size), 10) + "." + frac + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// MarshalText lets ByteSize print readably in YAML and JSON output.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText accepts everything ParseByteSize does.
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}
