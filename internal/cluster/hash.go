package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"sink/internal/chschema"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/cespare/xxhash/v2"
	"github.com/go-faster/city"
	"github.com/spaolacci/murmur3"
)

// The values of a route's sharding_hash: the ClickHouse function whose
// result, modulo the cluster's total weight, picks a row's shard.
const (
	HashCity     = "cityHash64"
	HashXX       = "xxHash64"
	HashMurmur   = "murmurHash3_64"
	HashInt      = "intHash64"
	HashIdentity = "identity"
)

// Hashes lists the supported sharding_hash values.
var Hashes = []string{HashCity, HashXX, HashMurmur, HashInt, HashIdentity}

// keyType is what a sharding key column's ClickHouse type means to the
// hash functions: bytes (String, FixedString), or an integer of width bytes.
type keyType struct {
	str    bool
	width  int
	signed bool
}

// parseKeyType accepts the column types a sharding key may have: String,
// FixedString(N), LowCardinality of those, the integers up to 64 bits,
// Date (days, UInt16) and DateTime (seconds, UInt32).
func parseKeyType(typ string) (keyType, error) {
	t := strings.TrimSpace(typ)
	if strings.HasPrefix(t, "LowCardinality(") && strings.HasSuffix(t, ")") {
		t = t[len("LowCardinality(") : len(t)-1]
	}
	switch {
	case t == "String", strings.HasPrefix(t, "FixedString("):
		return keyType{str: true}, nil
	case t == "Date":
		return keyType{width: 2}, nil
	case t == "DateTime", strings.HasPrefix(t, "DateTime("):
		return keyType{width: 4}, nil
	}
	ints := map[string]keyType{
		"Int8": {width: 1, signed: true}, "Int16": {width: 2, signed: true}, "Int32": {width: 4, signed: true}, "Int64": {width: 8, signed: true},
		"UInt8": {width: 1}, "UInt16": {width: 2}, "UInt32": {width: 4}, "UInt64": {width: 8},
	}
	if k, ok := ints[t]; ok {
		return k, nil
	}
	return keyType{}, fmt.Errorf("type %s cannot be a sharding key (String, FixedString, the integers up to 64 bits, Date and DateTime can; not Nullable)", typ)
}

// KeyHash computes, per row, the value the Distributed engine divides by the
// total weight: the sharding_hash of the key column, as ClickHouse computes
// it for the column's type, or the column's value itself for identity.
type KeyHash struct {
	fn  string
	typ keyType
}

// NewKeyHash returns the hash fn of a key column of ClickHouse type typ, or
// why that combination is not possible (identity and intHash64 take
// integers only, as in ClickHouse).
func NewKeyHash(fn, typ string) (*KeyHash, error) {
	k, err := parseKeyType(typ)
	if err != nil {
		return nil, err
	}
	switch fn {
	case HashCity, HashXX, HashMurmur:
	case HashInt, HashIdentity:
		if k.str {
			return nil, fmt.Errorf("sharding_hash %s takes an integer column, not %s", fn, typ)
		}
	default:
		return nil, fmt.Errorf("sharding_hash %q is not one of %s", fn, strings.Join(Hashes, ", "))
	}
	return &KeyHash{fn: fn, typ: k}, nil
}

// Expr is the sharding expression a Distributed table would name for this
// hash of column col: cityHash64(col), or col itself for identity.
func (h *KeyHash) Expr(col string) string {
	if h.fn == HashIdentity {
		return col
	}
	return h.fn + "(" + col + ")"
}

// Sum returns the sharding value of every row of data, a key column as the
// decoder hands it to the driver (decode.Block.ColumnData: []string,
// []int8 … []uint64, []time.Time for Date, []int64 seconds for DateTime).
func (h *KeyHash) Sum(data any) ([]uint64, error) {
	if h.typ.str {
		ss, ok := data.([]string)
		if !ok {
			return nil, fmt.Errorf("sharding key: expected string values, got %T", data)
		}
		out := make([]uint64, len(ss))
		for i, s := range ss {
			out[i] = h.bytes([]byte(s))
		}
		return out, nil
	}
	bits, err := intBits(data)
	if err != nil {
		return nil, err
	}
	for i, b := range bits {
		bits[i] = h.sumBits(b)
	}
	return bits, nil
}

// sumBits is the sharding value of an integer key whose bits are b,
// zero-extended from the key's width.
func (h *KeyHash) sumBits(b uint64) uint64 {
	switch h.fn {
	case HashCity:
		// ClickHouse's cityHash64 of a number is intHash64 of its
		// bytes, zero-extended to 64 bits (use_int_hash_for_pods).
		return IntHash64(b)
	case HashInt:
		// intHash64 takes a UInt64: a signed value converts to it
		// sign-extended, as C++ converts.
		return IntHash64(h.extend(b))
	case HashIdentity:
		// The engine takes a signed key as the unsigned integer of
		// the same width (createBlockSelector): the bits as they are.
		return b
	}
	var le [8]byte
	binary.LittleEndian.PutUint64(le[:], b)
	return h.bytes(le[:h.typ.width])
}

func (h *KeyHash) bytes(b []byte) uint64 {
	switch h.fn {
	case HashCity:
		return city.CH64(b)
	case HashXX:
		return xxhash.Sum64(b)
	default: // HashMurmur: MurmurHash3_x64_128, seed 0, the halves xor'ed
		h1, h2 := murmur3.Sum128(b)
		return h1 ^ h2
	}
}

// extend sign-extends b, a value of the key's width, to 64 bits.
func (h *KeyHash) extend(b uint64) uint64 {
	if !h.typ.signed || h.typ.width == 8 {
		return b
	}
	shift := 64 - 8*h.typ.width
	return uint64(int64(b<<shift) >> shift)
}

// IntHash64 is ClickHouse's intHash64 function (IntHash64Impl): the
// 64-bit finalizer of MurmurHash3 of x xor'ed with a constant.
func IntHash64(x uint64) uint64 {
	x ^= 0x4CF2D2BAAE6DA887
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// intBits returns the values of an integer column as their bits,
// zero-extended from the column's width to 64.
func intBits(data any) ([]uint64, error) {
	switch v := data.(type) {
	case []int8:
		return conv(v, func(x int8) uint64 { return uint64(uint8(x)) }), nil
	case []int16:
		return conv(v, func(x int16) uint64 { return uint64(uint16(x)) }), nil
	case []int32:
		return conv(v, func(x int32) uint64 { return uint64(uint32(x)) }), nil
	case []int64:
		// Int64, and DateTime (seconds, a UInt32 to the server).
		return conv(v, func(x int64) uint64 { return uint64(x) }), nil
	case []uint8:
		return conv(v, func(x uint8) uint64 { return uint64(x) }), nil
	case []uint16:
		return conv(v, func(x uint16) uint64 { return uint64(x) }), nil
	case []uint32:
		return conv(v, func(x uint32) uint64 { return uint64(x) }), nil
	case []uint64:
		return append([]uint64(nil), v...), nil
	case []time.Time: // Date: days since the epoch, a UInt16
		return conv(v, func(x time.Time) uint64 { return uint64(uint16(x.Unix() / 86400)) }), nil
	}
	return nil, fmt.Errorf("sharding key: unexpected column data %T", data)
}

func conv[T any](v []T, f func(T) uint64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

// Placement puts rows on shards as the Distributed engine does: the key's
// sharding value modulo the total weight is a slot, and slots belong to
// shards by cumulative weight ranges (Topology.Slots).
type Placement struct {
	slots  []int
	hash   *KeyHash
	shards int
}

// NewPlacement places rows of key hash h on topology t's shards.
func NewPlacement(t *Topology, h *KeyHash) (*Placement, error) {
	slots := t.Slots()
	if len(slots) == 0 {
		return nil, fmt.Errorf("cluster %s: every shard has weight 0", t.Name)
	}
	return &Placement{slots: slots, hash: h, shards: len(t.Shards)}, nil
}

// Shards returns, per row of the key column data, the index of its shard.
func (p *Placement) Shards(data any) ([]int, error) {
	sums, err := p.hash.Sum(data)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(sums))
	n := uint64(len(p.slots))
	for i, s := range sums {
		out[i] = p.slots[s%n]
	}
	return out, nil
}

// Hash is the key hash the placement uses.
func (p *Placement) Hash() *KeyHash { return p.hash }

// ShardCount is the number of shards the placement places rows on (the
// topology's, weight 0 or not); chschema.Placer.
func (p *Placement) ShardCount() int { return p.shards }

// PlaceBits is the shard index of a row whose integer key has the bits b,
// zero-extended from the key's width (Date: its days, DateTime: its
// seconds); chschema.Placer.
func (p *Placement) PlaceBits(b uint64) int {
	return p.slots[p.hash.sumBits(b)%uint64(len(p.slots))]
}

// PlaceBytes is the shard index of a row whose String or FixedString key
// is b; chschema.Placer.
func (p *Placement) PlaceBytes(b []byte) int {
	return p.slots[p.hash.bytes(b)%uint64(len(p.slots))]
}

// Same reports whether q places every row where p does: the same hash of
// the same key type over the same slots.
func (p *Placement) Same(q *Placement) bool {
	return q != nil && *p.hash == *q.hash && p.shards == q.shards && slices.Equal(p.slots, q.slots)
}

// CheckHash compares h with the server's own function on a few values of
// the key's type, so that a server without the function (18.16 has no
// xxHash64) or one that computes it otherwise refuses the route at once
// instead of placing rows where a Distributed table would not look.
func CheckHash(ctx context.Context, conn driver.Conn, h *KeyHash, typ string) error {
	var (
		lits []string
		data any
	)
	if h.typ.str {
		vals := []string{"", "a", "sink", "0123456789abcdef0123456789", strings.Repeat("cluster-", 12)}
		if n, ok := fixedLen(typ); ok {
			for i, v := range vals {
				if len(v) > n {
					v = v[:n]
				}
				vals[i] = v + strings.Repeat("\x00", n-len(v))
			}
		}
		for _, v := range vals {
			lits = append(lits, chschema.QuoteString(strings.TrimRight(v, "\x00")))
		}
		data = vals
	} else {
		nums := []int64{0, 1, 2, 100, 127}
		for _, n := range nums {
			lits = append(lits, strconv.FormatInt(n, 10))
		}
		data = typedInts(h.typ, typ, nums)
	}
	expr := "toUInt64(" + h.Expr("k") + ")"
	if h.fn == HashIdentity {
		expr = "toUInt64(toUInt" + strconv.Itoa(8*h.typ.width) + "(k))"
	}
	q := "SELECT " + expr + " FROM (SELECT CAST(v AS " + typ + ") AS k FROM (SELECT arrayJoin([" + strings.Join(lits, ", ") + "]) AS v))"
	rows, err := conn.Query(ctx, q)
	if err != nil {
		if strings.Contains(err.Error(), "code: 46,") {
			return fmt.Errorf("sharding_hash %s: the server has no such function (%v), so no Distributed table can shard by it; choose another", h.fn, err)
		}
		return fmt.Errorf("sharding_hash %s: checking it against the server: %w", h.fn, err)
	}
	defer rows.Close()
	var got []uint64
	for rows.Next() {
		var v uint64
		if err := rows.Scan(&v); err != nil {
			return fmt.Errorf("sharding_hash %s: checking it against the server: %w", h.fn, err)
		}
		got = append(got, v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sharding_hash %s: checking it against the server: %w", h.fn, err)
	}
	want, err := h.Sum(data)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("sharding_hash %s of %s: the server computes %v for %v, the sink %v; not placing rows by it", h.fn, typ, got, lits, want)
	}
	return nil
}

func fixedLen(typ string) (int, bool) {
	t := strings.TrimSuffix(strings.TrimPrefix(typ, "LowCardinality("), ")")
	if !strings.HasPrefix(t, "FixedString(") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(t, "FixedString("), ")"))
	return n, err == nil && n > 0
}

// typedInts is nums in the column data form of an integer key type.
func typedInts(k keyType, typ string, nums []int64) any {
	switch {
	case typ == "Date":
		return conv2(nums, func(n int64) time.Time { return time.Unix(n*86400, 0).UTC() })
	case strings.HasPrefix(typ, "DateTime"):
		return nums
	}
	switch k.width<<1 | map[bool]int{true: 1}[k.signed] {
	case 1<<1 | 1:
		return conv2(nums, func(n int64) int8 { return int8(n) })
	case 2<<1 | 1:
		return conv2(nums, func(n int64) int16 { return int16(n) })
	case 4<<1 | 1:
		return conv2(nums, func(n int64) int32 { return int32(n) })
	case 8<<1 | 1:
		return nums
	case 1 << 1:
		return conv2(nums, func(n int64) uint8 { return uint8(n) })
	case 2 << 1:
		return conv2(nums, func(n int64) uint16 { return uint16(n) })
	case 4 << 1:
		return conv2(nums, func(n int64) uint32 { return uint32(n) })
	}
	return conv2(nums, func(n int64) uint64 { return uint64(n) })
}

func conv2[T any](v []int64, f func(int64) T) []T {
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}
