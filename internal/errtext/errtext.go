// Package errtext bounds the length of error texts before they are logged
// or put in a dead-letter record's header. An error can quote its input,
// or a parser repeat itself at every level of nesting (14 KB of "cannot
// parse array value: …" for a 2,000-deep JSON array), and such a text is
// useless in a log line or a header; its start (what failed, and where: the record's topic,
// partition and offset come first in the sink's errors) and its end (the
// innermost cause) are what a reader needs. Redact takes the values an
// error text quotes out of it, for a reader who may see the errors but not
// the data (GET /status).
//
// Concurrency: the functions are pure and safe from any goroutine.
package errtext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Max is the length, in bytes, that the sink's error texts are cut to.
const Max = 1024

// Cap returns s unchanged when it is at most max bytes long; otherwise
// its start and its end, cut on UTF-8 character boundaries, joined by a
// marker that says how many bytes were left out, in at most max bytes.
// About three quarters of the room go to the start. A max too small for
// the marker gives just the start.
func Cap(s string, max int) string {
	if len(s) <= max {
		return s
	}
	if max <= 0 {
		return ""
	}
	// The marker's digits depend on the count cut, which depends on the
	// marker's length: the count's digits are at most len(s)'s.
	markerLen := len(" … [ bytes cut] … ") + len(strconv.Itoa(len(s)))
	room := max - markerLen
	if room < 8 {
		return s[:runeStart(s, max)]
	}
	head := runeStart(s, room*3/4)
	tail := runeEnd(s, len(s)-(room-head))
	return s[:head] + " … [" + strconv.Itoa(tail-head) + " bytes cut] … " + s[tail:]
}

// Head is b as text for a message that quotes it: at most max bytes of it,
// cut on a UTF-8 character boundary and marked with "…" where it was cut.
func Head(b []byte, max int) string {
	if len(b) <= max {
		return string(b)
	}
	n := max
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}

// runeStart is the largest i <= n at which a UTF-8 character of s begins
// (so s[:i] ends on a whole character).
func runeStart(s string, n int) int {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// runeEnd is the smallest i >= n at which a UTF-8 character of s begins
// (so s[i:] starts on a whole character).
func runeEnd(s string, n int) int {
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return n
}

// Marshal is zerolog's ErrorMarshalFunc for the sink's loggers: every
// error a log line carries is cut to Max.
func Marshal(err error) any { return Of(err) }

// Of is Cap(err.Error(), Max), or "" for a nil err.
func Of(err error) string {
	if err == nil {
		return ""
	}
	return Cap(err.Error(), Max)
}

// Redacted is what Redact puts where a value was.
const Redacted = "…"

// Redact returns s with the values an error text can quote replaced by
// Redacted: the content of each single- or double-quoted span (backslash
// escapes included; one left open runs to the end), and what follows
// ClickHouse's "Column values: " up to the end of its sentence. ClickHouse
// quotes a row's text in single quotes ("Cannot parse input: expected ','
// before: '…'"), and Go's %q quotes a record's value in double quotes.
// Error codes, names in backquotes and the words stay, so the kind of
// error and where it happened can still be read. A single quote after a
// letter or digit is an apostrophe ("table's"), not a quote.
func Redact(s string) string {
	var b []byte
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || (c == '\'' && (i == 0 || !wordByte(s[i-1]))):
			end := closingQuote(s, i+1, c)
			b = append(append(append(b, c), Redacted...), s[end:min(end+1, len(s))]...)
			i = end + 1
		case strings.HasPrefix(s[i:], columnValues):
			b = append(append(b, columnValues...), Redacted...)
			i = sentenceEnd(s, i+len(columnValues))
		default:
			b = append(b, c)
			i++
		}
	}
	return string(b)
}

// columnValues starts the list of a row's values in ClickHouse's
// constraint errors ("Column values: x = -5.").
const columnValues = "Column values: "

// closingQuote is the index of the quote q that closes the span starting
// at from, skipping backslash escapes; len(s) when none does.
func closingQuote(s string, from int, q byte) int {
	for i := from; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i
		}
	}
	return len(s)
}

// sentenceEnd is where the sentence that goes on at from ends: at ". ",
// a line break, or the end of s.
func sentenceEnd(s string, from int) int {
	for i := from; i < len(s); i++ {
		if s[i] == '\n' || (s[i] == '.' && (i+1 == len(s) || s[i+1] == ' ')) {
			return i
		}
	}
	return len(s)
}

// wordByte reports whether c is an ASCII letter or digit, or part of a
// multi-byte character (a letter of another script).
func wordByte(c byte) bool {
	return c >= 0x80 || (c|0x20 >= 'a' && c|0x20 <= 'z') || (c >= '0' && c <= '9')
}
