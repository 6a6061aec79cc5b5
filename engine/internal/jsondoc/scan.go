package jsondoc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
)

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index just past the string starting at b[i] == '"'.
// Its first bytes are looked at eight at a time (quoteOrBackslash8): a
// name or a short value ends in one or two words, without a byte loop or a
// call. Past skipWordsFirst words it looks for the closing quote with
// bytes.IndexByte: most strings hold no escape, and the long ones (an
// item's text) are most of a document's bytes, which every parse of it
// skips. A string that does not end (b is not valid JSON) ends at len(b),
// or len(b)+1 when b's last byte is a backslash within 17 bytes of b[i], as
// the byte loop this replaced answered.
func SkipString(b []byte, i int) int {
	start := i
	lim := i + 1 + 8*skipWordsFirst
	for i++; i+8 <= len(b); {
		if i >= lim {
			return skipStringLong(b, i)
		}
		t := quoteOrBackslash8(binary.LittleEndian.Uint64(b[i:]))
		if t == 0 {
			i += 8
			continue
		}
		i += bits.TrailingZeros64(t) >> 3
		if b[i] == '"' {
			return i + 1
		}
		i += 2 // past the escape and the byte it escapes
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	if i > len(b) && start+17 < len(b) {
		return len(b)
	}
	return i
}

// skipWordsFirst is how many eight-byte words SkipString looks at before
// it calls bytes.IndexByte.
const skipWordsFirst = 4

// skipStringLong is SkipString from b[i], inside the string, by
// bytes.IndexByte.
func skipStringLong(b []byte, i int) int {
	for i < len(b) {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		e := bytes.IndexByte(b[i:i+q], '\\')
		if e < 0 {
			return i + q + 1
		}
		i += e + 2 // past the escape and the byte it escapes
	}
	return i
}

// quoteOrBackslash8 marks (its byte's high bit) each of the eight bytes of
// x, little-endian, that is a quote or a backslash. The first marked byte
// is the first such byte: the test of a zero byte is exact up to the first
// it finds (a borrow may mark bytes past it).
func quoteOrBackslash8(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q, bs := x^(lo*'"'), x^(lo*'\\')
	return ((q-lo)&^q | (bs-lo)&^bs) & hi
}

// SkipValue returns the index just past the JSON value starting at b[i].
func SkipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = SkipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i
			}
			i++
		}
		return i
	}
}

// IsPlainString reports whether b is a JSON string literal of printable
// ASCII without escapes, which is what AppendString writes for it.
func IsPlainString(b []byte) bool {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return false
	}
	for _, c := range b[1 : len(b)-1] {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			return false
		}
	}
	return true
}

// IsPlainText reports whether s is printable ASCII without '"' or '\\':
// IsPlainString of s between quotes, without making that literal.
func IsPlainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			return false
		}
	}
	return true
}

// PlainString returns the value of a JSON string without escapes, which is
// its bytes between the quotes; ok is false for anything else. raw must be
// valid JSON.
func PlainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// plainByte tells the bytes AppendString writes as they are: printable
// ASCII other than '"' and '\\' (one load a byte, not four tests; the
// names of every record and patched item are written through it).
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string literal: its bytes between quotes
// when they are printable ASCII other than '"' and '\\', else as
// json.Marshal writes it.
func AppendString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			q, _ := json.Marshal(s)
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
