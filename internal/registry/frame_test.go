package registry

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"sink/config"
)

func TestParseFrame(t *testing.T) {
	f := func(in []byte, wantID int, wantPayload string, wantErr string) {
		t.Helper()
		id, payload, err := ParseFrame(in)
		if wantErr != "" {
			if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("ParseFrame(%x): error %v; want a bad record containing %q", in, err, wantErr)
			}
			return
		}
		if err != nil || id != wantID || string(payload) != wantPayload {
			t.Fatalf("ParseFrame(%x) = %d, %q, %v; want %d, %q", in, id, payload, err, wantID, wantPayload)
		}
	}
	f([]byte{0, 0, 0, 0, 1, 'a', 'b'}, 1, "ab", "")
	f([]byte{0, 0, 0, 0, 1}, 1, "", "")                         // empty payload: Avro's empty record
	f([]byte{0, 0x7f, 0xff, 0xff, 0xff, 'x'}, 1<<31-1, "x", "") // largest id
	f([]byte{0, 0x12, 0x34, 0x56, 0x78}, 0x12345678, "", "")
	f(nil, 0, "", "empty value")
	f([]byte{'{', '"', 'a', '"'}, 0, "", "first byte is 0x7b, not the registry wire format's magic byte 0")
	f([]byte{1, 0, 0, 0, 1}, 0, "", "first byte is 0x01")
	f([]byte{0, 0, 0, 1}, 0, "", "4 bytes is shorter than the registry wire format's 5-byte header")
}

func TestParseProtobufFrame(t *testing.T) {
	f := func(in []byte, wantID int, wantIdx []int, wantPayload string, wantErr string) {
		t.Helper()
		id, idx, payload, err := ParseProtobufFrame(in, make([]int, 0, 4))
		if wantErr != "" {
			if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("ParseProtobufFrame(%x): error %v; want a bad record containing %q", in, err, wantErr)
			}
			return
		}
		if err != nil || id != wantID || !slices.Equal(idx, wantIdx) || string(payload) != wantPayload {
			t.Fatalf("ParseProtobufFrame(%x) = %d, %v, %q, %v; want %d, %v, %q", in, id, idx, payload, err, wantID, wantIdx, wantPayload)
		}
	}
	hdr := func(id byte, rest ...byte) []byte { return append([]byte{0, 0, 0, 0, id}, rest...) }
	// Zig-zag varints: 0 -> 0, 1 -> 2, 2 -> 4, 3 -> 6, 64 -> 0x80 0x01.
	f(hdr(7, 0, 0x08, 0x96, 0x01), 7, []int{0}, "\x08\x96\x01", "") // the [0] shorthand
	f(hdr(7, 2, 2, 0x08), 7, []int{1}, "\x08", "")                  // [1]
	f(hdr(7, 4, 2, 0, 0x08), 7, []int{1, 0}, "\x08", "")            // [1, 0]: nested
	f(hdr(7, 6, 0x80, 0x01, 4, 0), 7, []int{64, 2, 0}, "", "")
	f(hdr(7, 2, 0), 7, []int{0}, "", "") // [0] written out in full
	f(hdr(7), 0, nil, "", "truncated or overlong Protobuf message index count")
	f(hdr(7, 4, 2), 0, nil, "", "truncated or overlong Protobuf message index")
	f(hdr(7, 1), 0, nil, "", "Protobuf message index count -1 is not in 1..32")
	f(hdr(7, 0x82, 0x01), 0, nil, "", "Protobuf message index count 65 is not in 1..32")
	// A count of 2^62: franz-go's DecodeIndex would try to allocate it.
	f(hdr(7, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), 0, nil, "", "is not in 1..32")
	f(hdr(7, 2, 1), 0, nil, "", "Protobuf message index -1 is out of range")
	f(hdr(7, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), 0, nil, "", "truncated or overlong")
	f([]byte{0, 0, 0}, 0, nil, "", "shorter than the registry wire format's 5-byte header")
}

// AppendFrame writes what the parsers read, and what franz-go's serde
// writes.
func TestAppendFrame(t *testing.T) {
	for _, tc := range []struct {
		protobuf bool
		idx      []int
	}{{false, nil}, {true, nil}, {true, []int{0}}, {true, []int{3}}, {true, []int{1, 0, 5}}} {
		b := AppendFrame([]byte("prefix"), 4242, tc.protobuf, tc.idx...)
		want, _ := new(sr.ConfluentHeader).AppendEncode([]byte("prefix"), 4242, tc.idx)
		if tc.protobuf && len(tc.idx) == 0 {
			want = append([]byte("prefix\x00\x00\x00\x10\x92"), 0)
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("AppendFrame(%v, %v) = %x; want %x", tc.protobuf, tc.idx, b, want)
		}
		b = append(b, "payload"...)[len("prefix"):]
		var id int
		var payload []byte
		var err error
		if tc.protobuf {
			var idx []int
			id, idx, payload, err = ParseProtobufFrame(b, nil)
			wantIdx := tc.idx
			if len(wantIdx) == 0 {
				wantIdx = []int{0}
			}
			if !slices.Equal(idx, wantIdx) {
				t.Fatalf("indexes %v; want %v", idx, wantIdx)
			}
		} else {
			id, payload, err = ParseFrame(b)
		}
		if err != nil || id != 4242 || string(payload) != "payload" {
			t.Fatalf("round trip: %d, %q, %v", id, payload, err)
		}
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	b := AppendFrame(nil, 9, true, 1, 0)
	b = append(b, 0x08, 0x01)
	idx := make([]int, 0, MaxIndexes)
	n := testing.AllocsPerRun(100, func() {
		if _, _, _, err := ParseProtobufFrame(b, idx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ParseFrame(b); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per parse; want 0", n)
	}
}

// FuzzParseProtobufFrame checks that no input panics, that errors are
// always bad records, and that whatever parses agrees with franz-go's
// ConfluentHeader (which the sink does not use on the hot path because it
// allocates, and sizes the allocation from the wire).
func FuzzParseProtobufFrame(f *testing.F) {
	for _, seed := range [][]byte{
		nil, {0}, {0, 0, 0, 0, 1}, {0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 1, 4, 2, 0, 8},
		{0, 0, 0, 0, 1, 0x82, 0x01}, {1, 2, 3, 4, 5, 6}, {0, 0, 0, 0, 1, 2, 0xff, 0xff},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, payload, err := ParseFrame(b)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("ParseFrame error %v is not a bad record", err)
			}
		} else {
			wid, wpayload, werr := new(sr.ConfluentHeader).DecodeID(b)
			if werr != nil || wid != id || !bytes.Equal(wpayload, payload) {
				t.Fatalf("ParseFrame = %d, %x; franz-go = %d, %x, %v", id, payload, wid, wpayload, werr)
			}
		}

		pid, idx, ppayload, perr := ParseProtobufFrame(b, nil)
		if perr != nil {
			if !errors.Is(perr, ErrBadRecord) {
				t.Fatalf("ParseProtobufFrame error %v is not a bad record", perr)
			}
			return
		}
		if err != nil || pid != id || len(idx) == 0 || len(idx) > MaxIndexes {
			t.Fatalf("ParseProtobufFrame = %d, %v after ParseFrame %d, %v", pid, idx, id, err)
		}
		widx, wrest, werr := new(sr.ConfluentHeader).DecodeIndex(payload, MaxIndexes)
		if werr != nil || !slices.Equal(widx, idx) || !bytes.Equal(wrest, ppayload) {
			t.Fatalf("ParseProtobufFrame indexes %v, rest %x; franz-go %v, %x, %v", idx, ppayload, widx, wrest, werr)
		}
		// Re-encoding the indexes gives a frame that parses the same way.
		again := append(AppendFrame(nil, id, true, idx...), ppayload...)
		aid, aidx, apayload, aerr := ParseProtobufFrame(again, nil)
		if aerr != nil || aid != id || !slices.Equal(aidx, idx) || !bytes.Equal(apayload, ppayload) {
			t.Fatalf("re-encoded frame parses as %d, %v, %x, %v", aid, aidx, apayload, aerr)
		}
	})
}

func BenchmarkParseProtobufFrame(b *testing.B) {
	rec := append(AppendFrame(nil, 12, true, 1, 0), make([]byte, 170)...)
	idx := make([]int, 0, MaxIndexes)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := ParseProtobufFrame(rec, idx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSchemaCached is the cost of a schema lookup by a cached id.
func BenchmarkSchemaCached(b *testing.B) {
	reg := srfake.New()
	defer reg.Close()
	c, err := New(config.SchemaRegistry{URLs: []string{reg.URL()}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	id, err := c.Register(ctx, "b-value", sr.TypeAvro, avroA)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Schema(ctx, id); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Schema(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
