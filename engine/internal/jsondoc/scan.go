package jsondoc

import (
	"bytes"
	"encoding/json"
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
// It looks for the closing quote with bytes.IndexByte, not byte by byte:
// most strings hold no escape, and the long ones (an item's text) are
// most of a document's bytes, which every parse of it skips.
func SkipString(b []byte, i int) int {
	// A short string (a name, an id) ends before IndexByte pays for its
	// call: its first bytes are looked at one by one.
	n := min(len(b), i+17)
	for i++; i < n; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
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

// AppendString appends s as a JSON string literal: its bytes between quotes
// when they are printable ASCII other than '"' and '\\', else as
// json.Marshal writes it.
func AppendString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			q, _ := json.Marshal(s)
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
