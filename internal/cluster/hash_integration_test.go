//go:build integration

package cluster

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"sink/internal/testenv"
)

// keyCase is one key column type with random values in the form the decoder
// hands columns to the driver, and in the form the driver inserts them.
type keyCase struct {
	typ    string
	data   any   // what KeyHash.Sum is given (decode.Block.ColumnData's form)
	insert []any // one value per row, for the driver's batch
}

// randomKeys makes n random values of every supported key type, the
// boundaries (0, -1, min, max) first.
func randomKeys(r *rand.Rand, n int) []keyCase {
	ints := func(lo, hi int64) []int64 {
		v := []int64{0, -1, 1, lo, hi, lo + 1, hi - 1}
		for len(v) < n {
			v = append(v, lo+int64(r.Uint64N(uint64(hi-lo))))
		}
		return v
	}
	uints := func(hi uint64) []uint64 {
		v := []uint64{0, 1, hi, hi - 1, min(255, hi), min(256, hi)}
		for len(v) < n {
			if hi == math.MaxUint64 {
				v = append(v, r.Uint64())
			} else {
				v = append(v, r.Uint64N(hi+1))
			}
		}
		return v
	}
	var cases []keyCase
	i8, i16, i32, i64 := ints(math.MinInt8, math.MaxInt8), ints(math.MinInt16, math.MaxInt16), ints(math.MinInt32, math.MaxInt32), ints(math.MinInt64, math.MaxInt64)
	u8, u16, u32, u64 := uints(math.MaxUint8), uints(math.MaxUint16), uints(math.MaxUint32), uints(math.MaxUint64)
	cases = append(cases,
		mkCase("Int8", i8, func(x int64) int8 { return int8(x) }),
		mkCase("Int16", i16, func(x int64) int16 { return int16(x) }),
		mkCase("Int32", i32, func(x int64) int32 { return int32(x) }),
		mkCase("Int64", i64, func(x int64) int64 { return x }),
		mkCase("UInt8", u8, func(x uint64) uint8 { return uint8(x) }),
		mkCase("UInt16", u16, func(x uint64) uint16 { return uint16(x) }),
		mkCase("UInt32", u32, func(x uint64) uint32 { return uint32(x) }),
		mkCase("UInt64", u64, func(x uint64) uint64 { return x }),
	)
	// Strings of every length class CityHash64 treats differently (0–16,
	// 17–32, 33–64, longer), of arbitrary bytes.
	var strs, fixed []string
	for i := range n {
		b := make([]byte, r.IntN(200))
		if i < 70 {
			b = make([]byte, i)
		}
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		strs = append(strs, string(b))
		f := make([]byte, 8)
		copy(f, b)
		fixed = append(fixed, string(f))
	}
	cases = append(cases, mkCase("String", strs, func(s string) string { return s }),
		mkCase("FixedString(8)", fixed, func(s string) string { return s }))
	// Date: days up to 2149 (UInt16); DateTime: seconds up to 2106 (UInt32).
	var dates []time.Time
	var secs []int64
	for range n {
		dates = append(dates, time.Unix(int64(r.IntN(65535))*86400, 0).UTC())
		secs = append(secs, int64(r.Uint32()))
	}
	dc := keyCase{typ: "Date", data: dates}
	for _, d := range dates {
		dc.insert = append(dc.insert, d)
	}
	tc := keyCase{typ: "DateTime", data: secs}
	for _, s := range secs {
		tc.insert = append(tc.insert, time.Unix(s, 0))
	}
	return append(cases, dc, tc)
}

func mkCase[S, T any](typ string, src []S, f func(S) T) keyCase {
	data := make([]T, len(src))
	c := keyCase{typ: typ}
	for i, s := range src {
		data[i] = f(s)
		c.insert = append(c.insert, data[i])
	}
	c.data = data
	return c
}

// TestKeyHashEqualsServer inserts random keys of every supported type into
// each server and compares what the server's hash functions return for them
// with KeyHash.Sum, row by row, and the shard the Distributed engine's
// selector would pick (value % total weight, by weight ranges) for weights
// 1,1 and 1,2,3.
func TestKeyHashEqualsServer(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		conn := s.Conn(t)
		db := s.NewDatabase(t)
		ctx := context.Background()
		r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
		seed := r.Uint64()
		t.Logf("random seed %d", seed)
		r = rand.New(rand.NewPCG(seed, 7))
		missing := map[string]int{}
		checked := 0
		for ci, kc := range randomKeys(r, 500) {
			table := fmt.Sprintf("%s.k%d", db, ci)
			testenv.Exec(t, conn, fmt.Sprintf("CREATE TABLE %s (i UInt32, k %s) ENGINE = Memory", table, kc.typ))
			b, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (i, k)")
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range kc.insert {
				if err := b.Append(uint32(i), v); err != nil {
					t.Fatalf("%s: append %v: %v", kc.typ, v, err)
				}
			}
			if err := b.Send(); err != nil {
				t.Fatalf("%s: insert: %v", kc.typ, err)
			}
			for _, fn := range Hashes {
				h, err := NewKeyHash(fn, kc.typ)
				if err != nil {
					if (fn == HashInt || fn == HashIdentity) && (kc.typ == "String" || strings.HasPrefix(kc.typ, "FixedString")) {
						continue // refused for strings, as ClickHouse refuses
					}
					t.Fatalf("%s(%s): %v", fn, kc.typ, err)
				}
				expr := "toUInt64(" + h.Expr("k") + ")"
				if fn == HashIdentity {
					// The Distributed engine reads a signed key as the
					// unsigned integer of its width.
					expr = "toUInt64(toUInt" + fmt.Sprint(8*h.typ.width) + "(k))"
				}
				rows, err := conn.Query(ctx, "SELECT "+expr+" FROM "+table+" ORDER BY i")
				if err != nil && strings.Contains(err.Error(), "code: 46,") && !s.AtLeast(20, 1) {
					// UNKNOWN_FUNCTION: 18.16 has no xxHash64; the sink's
					// start-up check (CheckHash) refuses such a route there.
					if missing[fn] == 0 {
						t.Logf("%s: %v", fn, err)
					}
					missing[fn]++
					continue
				}
				if err != nil {
					t.Fatalf("%s(%s) on %s: %v", fn, kc.typ, s.Label, err)
				}
				var server []uint64
				for rows.Next() {
					var v uint64
					if err := rows.Scan(&v); err != nil {
						t.Fatal(err)
					}
					server = append(server, v)
				}
				rows.Close()
				ours, err := h.Sum(kc.data)
				if err != nil {
					t.Fatal(err)
				}
				if len(server) != len(ours) {
					t.Fatalf("%s(%s): server returned %d rows, we hashed %d", fn, kc.typ, len(server), len(ours))
				}
				bad := 0
				for i := range ours {
					if ours[i] != server[i] {
						if bad < 3 {
							t.Errorf("%s(%s) row %d (%v): server %d, sink %d", fn, kc.typ, i, kc.insert[i], server[i], ours[i])
						}
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("%s(%s): %d of %d rows differ", fn, kc.typ, bad, len(ours))
				}
				checked++
			}
		}
		t.Logf("%d hash/type pairs equal to the server's for 500 rows each; functions the server lacks: %v", checked, missing)
		if checked < 40 {
			t.Errorf("only %d hash/type pairs checked", checked)
		}
	})
}

// TestCheckHash runs the start-up check of every hash and key type on each
// server: it passes where the server has the function and refuses, in one
// line, where it does not (xxHash64 on 18.16).
func TestCheckHash(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		conn := s.Conn(t)
		types := []string{"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "String", "FixedString(3)", "FixedString(64)", "Date", "DateTime", "DateTime('UTC')"}
		if s.AtLeast(20, 1) { // 18.16's LowCardinality is experimental, off by default
			types = append(types, "LowCardinality(String)")
		}
		for _, typ := range types {
			for _, fn := range Hashes {
				h, err := NewKeyHash(fn, typ)
				if err != nil {
					continue
				}
				err = CheckHash(context.Background(), conn, h, typ)
				switch {
				case fn == HashXX && !s.AtLeast(20, 1):
					if err == nil || !strings.Contains(err.Error(), "the server has no such function") {
						t.Errorf("%s(%s) on %s: %v; want the missing function refused", fn, typ, s.Version, err)
					}
				case err != nil:
					t.Errorf("%s(%s): %v", fn, typ, err)
				}
			}
		}
		// A hash that differs from the server's is refused: murmurHash3_64
		// of one byte is not that of eight.
		h, _ := NewKeyHash(HashMurmur, "UInt8")
		if err := CheckHash(context.Background(), conn, h, "UInt64"); err == nil || !strings.Contains(err.Error(), "the server computes") {
			t.Errorf("a wrong hash passed the check: %v", err)
		}
	})
}
