package consumer

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// wireBytes is what a copy's key, value and headers take, without the
// record batch framing that recordOverhead covers.
func wireBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

func TestDLQRecordFitsTheTopicLimit(t *testing.T) {
	src := func(key, value int) *kgo.Record {
		return &kgo.Record{Topic: "src", Partition: 2, Offset: 7, Key: []byte(strings.Repeat("k", key)),
			Value: []byte(strings.Repeat("v", value)), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}},
			Timestamp: time.UnixMilli(1_700_000_000_000)}
	}
	cause := errors.New("decode: invalid JSON")
	tests := []struct {
		name                  string
		rec                   *kgo.Record
		limit                 int
		refOnly               bool
		wantValue             int // bytes of value kept; -1: all
		wantKey               bool
		truncated, keyDropped bool
		valueDropped          bool
	}{
		{name: "small record unchanged", rec: src(2, 100), limit: 1048588, wantValue: -1, wantKey: true},
		{name: "no limit known", rec: src(2, 5_000_000), limit: 0, wantValue: -1, wantKey: true},
		{name: "value at the limit is cut", rec: src(2, 1048588-100), limit: 1048588, wantKey: true, truncated: true},
		{name: "huge key is dropped too", rec: src(2000, 3000), limit: 2000, keyDropped: true, truncated: true},
		{name: "reference only", rec: src(2, 500), limit: 1048588, refOnly: true, wantValue: 0, wantKey: true, valueDropped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := DLQRecord("dlq", "conn", tt.rec, cause, tt.limit, tt.refOnly)
			if out.Topic != "dlq" {
				t.Fatalf("topic %q", out.Topic)
			}
			if tt.limit > 0 && wireBytes(out)+recordOverhead > tt.limit {
				t.Fatalf("copy takes %d bytes + framing; limit %d", wireBytes(out), tt.limit)
			}
			switch {
			case tt.wantValue == -1 && string(out.Value) != string(tt.rec.Value):
				t.Fatalf("value changed: %d bytes of %d", len(out.Value), len(tt.rec.Value))
			case tt.wantValue == 0 && tt.refOnly && out.Value != nil:
				t.Fatalf("reference copy has a value of %d bytes", len(out.Value))
			case tt.truncated && (len(out.Value) == 0 || len(out.Value) >= len(tt.rec.Value) || string(out.Value) != string(tt.rec.Value[:len(out.Value)])):
				t.Fatalf("truncated value has %d bytes of %d; want a non-empty prefix", len(out.Value), len(tt.rec.Value))
			}
			if (len(out.Key) > 0) != tt.wantKey {
				t.Fatalf("key kept = %v; want %v", len(out.Key) > 0, tt.wantKey)
			}
			hs := map[string]string{}
			for _, h := range out.Headers {
				hs[h.Key] = string(h.Value)
			}
			for key, want := range map[string]bool{HeaderValueTruncated: tt.truncated, HeaderKeyDropped: tt.keyDropped, HeaderValueDropped: tt.valueDropped} {
				v, ok := hs[key]
				if ok != want {
					t.Fatalf("header %s present = %v; want %v (headers %v)", key, ok, want, hs)
				}
				orig := len(tt.rec.Value)
				if key == HeaderKeyDropped {
					orig = len(tt.rec.Key)
				}
				if ok && v != strconv.Itoa(orig) {
					t.Fatalf("header %s = %q; want the original length %d", key, v, orig)
				}
			}
			if hs["trace"] != "abc" || hs["sink.source.offset"] != "7" || hs["sink.source.partition"] != "2" || hs["sink.error"] != cause.Error() {
				t.Fatalf("headers %v lack the source's or the sink's", hs)
			}
		})
	}
}

func TestDLQRecordCapsTheErrorHeader(t *testing.T) {
	for _, cause := range []string{strings.Repeat("e", 10_000), "decode topic \"t\" partition 1 offset 9: " + strings.Repeat("é", 5_000) + " the end"} {
		out := DLQRecord("dlq", "conn", &kgo.Record{Value: []byte("x")}, errors.New(cause), 0, false)
		found := false
		for _, h := range out.Headers {
			if h.Key != "sink.error" {
				continue
			}
			found = true
			if len(h.Value) > maxErrorHeader || !utf8.Valid(h.Value) {
				t.Fatalf("sink.error header has %d bytes (valid UTF-8: %v), want at most %d", len(h.Value), utf8.Valid(h.Value), maxErrorHeader)
			}
			if !strings.HasPrefix(string(h.Value), cause[:20]) || !strings.HasSuffix(string(h.Value), cause[len(cause)-7:]) {
				t.Fatalf("sink.error header lost the error's start or end: %q", h.Value)
			}
		}
		if !found {
			t.Fatal("no sink.error header")
		}
	}
}

// The start-up check refuses a missing dead-letter topic with one line, and
// with errors.dlq_create creates it with the source's partition count.
func TestCheckDLQ(t *testing.T) {
	_, cfg := fake(t, "src")
	if _, _, err := ProbeDLQ(context.Background(), cfg); err == nil ||
		err.Error() != `kafka: dead-letter topic "dlq" (errors.dlq_topic) does not exist; create it, or set errors.dlq_create: true` {
		t.Fatalf("missing DLQ: %v", err)
	}
	cfg.Errors.DLQCreate = true
	_, info, err := ProbeDLQ(context.Background(), cfg)
	if err != nil || !info.Created || info.Partitions != 2 || info.MaxMessageBytes <= 0 {
		t.Fatalf("dlq_create: %+v, %v; want created with the source's 2 partitions", info, err)
	}
	_, info, err = ProbeDLQ(context.Background(), cfg)
	if err != nil || info.Created || info.Partitions != 2 {
		t.Fatalf("second check: %+v, %v; want the existing topic", info, err)
	}
}
