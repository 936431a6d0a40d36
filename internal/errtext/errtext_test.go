package errtext

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCap(t *testing.T) {
	long := "decode topic \"t\" partition 3 offset 1234567: " + strings.Repeat("cannot parse array value: ", 550) + "unexpected end"
	cases := []struct {
		name       string
		in         string
		max        int
		want       string // exact result, when not ""
		head, tail string // or: the result starts and ends with these
	}{
		{name: "short unchanged", in: "bad record", max: 1024, want: "bad record"},
		{name: "exactly max unchanged", in: strings.Repeat("x", 1024), max: 1024, want: strings.Repeat("x", 1024)},
		{name: "empty", in: "", max: 10, want: ""},
		{name: "nested JSON error keeps coordinates and innermost cause", in: long, max: 1024,
			head: "decode topic \"t\" partition 3 offset 1234567: cannot parse array value", tail: "unexpected end"},
		{name: "one byte over", in: strings.Repeat("a", 1025), max: 1024, head: "aaaa", tail: "aaaa"},
		{name: "multibyte characters at both cuts", in: strings.Repeat("é", 600) + strings.Repeat("日", 400), max: 100,
			head: "éé", tail: "日日"},
		{name: "max too small for the marker gives the start", in: strings.Repeat("é", 50), max: 9, want: "éééé"},
		{name: "zero max", in: "abc", max: 0, want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Cap(c.in, c.max)
			if len(got) > c.max {
				t.Fatalf("%d bytes, more than max %d", len(got), c.max)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("not valid UTF-8: %q", got)
			}
			if c.want != "" || c.head == "" {
				if got != c.want {
					t.Fatalf("got %q, want %q", got, c.want)
				}
				return
			}
			if !strings.HasPrefix(got, c.head) || !strings.HasSuffix(got, c.tail) {
				t.Fatalf("got %q; want it to start with %q and end with %q", got, c.head, c.tail)
			}
			if !strings.Contains(got, " bytes cut] … ") {
				t.Fatalf("got %q: no marker of what was cut", got)
			}
			if len(got) < c.max-8 {
				t.Fatalf("%d bytes: wastes the room (max %d)", len(got), c.max)
			}
		})
	}
}

// The count in the marker is the number of bytes left out.
func TestCapCountsWhatItCuts(t *testing.T) {
	in := strings.Repeat("0123456789", 300)
	got := Cap(in, 200)
	i, j := strings.Index(got, " … ["), strings.Index(got, " bytes cut] … ")
	if i < 0 || j < 0 {
		t.Fatalf("no marker in %q", got)
	}
	kept := len(got[:i]) + len(got[j+len(" bytes cut] … "):])
	if want := len(in) - kept; got[i+len(" … ["):j] != strconv.Itoa(want) {
		t.Fatalf("marker says %s bytes cut, %d were", got[i+len(" … ["):j], want)
	}
}

func TestOf(t *testing.T) {
	if Of(nil) != "" {
		t.Fatal("Of(nil) not empty")
	}
}

func FuzzCap(f *testing.F) {
	f.Add("decode: cannot parse", 10)
	f.Add(strings.Repeat("日本", 100), 50)
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max % 4096
		if max < 0 {
			max = -max
		}
		got := Cap(s, max)
		if len(got) > max {
			t.Fatalf("Cap(%q, %d) = %d bytes", s, max, len(got))
		}
		if len(s) <= max && got != s {
			t.Fatalf("Cap changed a text that fits")
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Cap(%q, %d) = %q: not valid UTF-8", s, max, got)
		}
	})
}

func TestHead(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 8, "short"},
		{"exactly8", 8, "exactly8"},
		{"longer than eight", 8, "longer t…"},
		{"ab\u00e9cd", 3, "ab…"}, // é is two bytes: not split
		{"", 0, ""},
	} {
		if got := Head([]byte(c.in), c.max); got != c.want {
			t.Errorf("Head(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"code: 252, message: Too many parts (300). Merges are processing significantly slower than inserts",
			"code: 252, message: Too many parts (300). Merges are processing significantly slower than inserts"},
		{"code: 27, message: Cannot parse input: expected ',' before: 'secret, 42\\'s text': (at row 1)",
			"code: 27, message: Cannot parse input: expected '…' before: '…': (at row 1)"},
		{`record t[0]@5: column "n": "4111-1111-1111-1111" is not a number`,
			`record t[0]@5: column "…": "…" is not a number`},
		{`value "a \"quoted\" word" here`, `value "…" here`},
		{"Code: 469. DB::Exception: Constraint `positive` for table `db`.`t` is violated at row 1. Expression: (x > 0). Column values: x = -5, name = alice. (VIOLATED_CONSTRAINT)",
			"Code: 469. DB::Exception: Constraint `positive` for table `db`.`t` is violated at row 1. Expression: (x > 0). Column values: …. (VIOLATED_CONSTRAINT)"},
		{"Column values: x = -5", "Column values: …"},
		{"the table's columns don't match", "the table's columns don't match"},
		{"an open 'quote runs to the end", "an open '…"},
		{"Missing columns: 'foo' while processing", "Missing columns: '…' while processing"},
		{"né's 'x'", "né's '…'"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRedact: no text panics Redact, and nothing between quotes survives
// it: what it returns has no more bytes outside Redacted than the input's
// unquoted part.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"'a'", `"b"`, "x 'y", `"\`, "Column values: 1. z", "it's 'v'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Redact(s)
		if len(got) > len(s)+len(Redacted)*(strings.Count(s, "'")+strings.Count(s, `"`)+strings.Count(s, "Column values: ")) {
			t.Fatalf("Redact(%q) = %q: longer than its input allows", s, got)
		}
		if Redact(got) != got {
			t.Fatalf("Redact is not stable on %q: %q then %q", s, got, Redact(got))
		}
	})
}
