package jsonscan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fastjson"
)

// The scanner reads strings eight bytes at a time; these tests put the
// bytes it looks for ('"', '\\') and the escapes Unescape reads at every
// position of the words around them, and check the results against
// fastjson (the grammar's reference) and a byte-by-byte search.

// pieces are what a string is built of: plain text, every escape (good
// and bad), multi-byte and invalid UTF-8, control bytes.
var pieces = []string{
	"a", "bc", "defghij", "klmnopqrstuvw", `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0041`, `\u00e9`, `\u20ac`,
	`\ud83d\ude00`, `\ud800`, `\udc00x`, `\ud800\u0041`, `\u12`, `\uZZZZ`, `\x`, "é", "€", "\xff", "\xc3", "\x01", "\x1f", "\x7f", " ",
}

// strs are string contents: each piece after 0..17 bytes of text, before
// 0..9 bytes of text, and pairs of pieces.
func strs() []string {
	var out []string
	for _, p := range pieces {
		for pre := 0; pre <= 17; pre++ {
			for post := 0; post <= 9; post++ {
				out = append(out, strings.Repeat("p", pre)+p+strings.Repeat("q", post))
			}
		}
		for _, p2 := range pieces {
			out = append(out, p+p2, p+"0123456"+p2)
		}
	}
	return out
}

func TestStringsAtEveryWordPosition(t *testing.T) {
	var s Scanner
	for _, str := range strs() {
		for _, tail := range []string{"", "}", `,"k":1}`, "                "} {
			doc := `{"` + str + `":"` + str + `"` + tail
			if tail == "" || tail[0] == ' ' {
				doc = `"` + str + `"` + tail
			}
			_, err := s.Scan([]byte(doc))
			v, rerr := fastjson.ParseBytes([]byte(doc))
			if (err == nil) != (rerr == nil) {
				t.Fatalf("%q: scanner error %v, fastjson error %v", doc, err, rerr)
			}
			if err != nil {
				continue
			}
			want := v.GetStringBytes()
			if v.Type() == fastjson.TypeObject {
				if s.Esc != strings.Contains(str, `\`) {
					t.Fatalf("%q: Esc %v", doc, s.Esc)
				}
				m := s.Members[0]
				if m.Plain == strings.Contains(str, `\`) || string(s.Doc[m.Val.Start+1:m.Val.End-1]) != str {
					t.Fatalf("%q: member %+v", doc, m)
				}
				o, _ := v.Object()
				first := true
				o.Visit(func(_ []byte, x *fastjson.Value) {
					if first {
						want, _ = x.StringBytes()
						first = false
					}
				})
			}
			if got := s.Unescape([]byte(str)); !bytes.Equal(got, want) {
				t.Fatalf("%q: Unescape %q, fastjson %q", str, got, want)
			}
		}
	}
}

func TestUnterminatedStrings(t *testing.T) {
	var s Scanner
	for _, str := range strs() {
		for _, doc := range []string{`"` + str, `"` + str + `\`, `{"` + str, `["` + str + `\"`} {
			if _, err := s.Scan([]byte(doc)); err == nil {
				if _, rerr := fastjson.Parse(doc); rerr != nil {
					t.Fatalf("%q: accepted, fastjson: %v", doc, rerr)
				}
			}
		}
	}
}

func TestIndexBackslash(t *testing.T) {
	for n := 0; n <= 24; n++ {
		for at := -1; at < n; at++ {
			b := bytes.Repeat([]byte{'"'}, n)
			if at >= 0 {
				b[at] = '\\'
				if at+1 < n {
					b[at+1] = '\\'
				}
			}
			if got := indexBackslash(b); got != at {
				t.Fatalf("%q: %d, want %d", b, got, at)
			}
		}
	}
}
