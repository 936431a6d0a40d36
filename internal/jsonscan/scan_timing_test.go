package jsonscan

import (
	"strings"
	"testing"
)

// The scanner's own cost, without a decoder behind it:
//
//	go test ./internal/jsonscan -run '^$' -bench 'Scan|Unescape' -benchmem

// scanDocs are the kinds of record the json formats read: the bench's
// flat event, one with nested objects and arrays, and one whose keys and
// values hold escapes (JSON text carried in a string).
var scanDocs = []struct{ name, doc string }{
	{"flat", `{"id":1234567,"user_id":778812,"ts":"2026-11-30T21:00:00Z","event_type":"click","channel":"web","cost":"12.50","payload":"` + strings.Repeat("x", 80) + `"}`},
	{"nested", `{"id":1,"user":{"name":"ann","tags":["a","b","c"],"geo":{"lat":52.5,"lon":13.4}},"items":[{"sku":"x1","qty":2},{"sku":"y2","qty":1}],"ok":true,"note":null}`},
	{"escaped", `{"id":2,"k\u00e9y":"v","payload":"{\"a\":1,\"b\":\"two\\nlines\",\"c\":[1,2,3]}","name":"caf\u00e9 \ud83d\ude00","path":"C:\\temp\\x"}`},
}

// BenchmarkScan scans one record per op.
func BenchmarkScan(b *testing.B) {
	for _, d := range scanDocs {
		b.Run(d.name, func(b *testing.B) {
			doc := []byte(d.doc)
			var s Scanner
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Scan(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnescape unescapes every string value of the escaped record
// per op.
func BenchmarkUnescape(b *testing.B) {
	var s Scanner
	doc := []byte(scanDocs[2].doc)
	if _, err := s.Scan(doc); err != nil {
		b.Fatal(err)
	}
	var vals [][]byte
	for _, m := range s.Members {
		if v := doc[m.Val.Start:m.Val.End]; v[0] == '"' {
			vals = append(vals, v[1:len(v)-1])
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		s.str = s.str[:0]
		for _, v := range vals {
			s.Unescape(v)
		}
	}
}
