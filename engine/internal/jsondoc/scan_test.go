package jsondoc

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAppendStringReadsBackAsTheString: every valid UTF-8 string written
// by AppendString decodes to itself; printable ASCII is written as its bytes
// between quotes, which is what IsPlainString and PlainString recognise,
// and anything else as json.Marshal writes it.
func TestAppendStringReadsBackAsTheString(t *testing.T) {
	for _, s := range []string{"", "id-1", "a b~/c<&>", `q"uote`, `back\slash`, "tab\t", "\x00", "\x7f", "é漢字😀", "bad\xffutf8"} {
		got := AppendString([]byte("x"), s)
		if got[0] != 'x' {
			t.Fatalf("%q: the buffer's start was overwritten", s)
		}
		lit := got[1:]
		var back string
		if err := json.Unmarshal(lit, &back); err != nil {
			t.Fatalf("%q: wrote %s, not a JSON string: %v", s, lit, err)
		}
		marshaled, _ := json.Marshal(s)
		plain := true
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
				plain = false
			}
		}
		switch {
		case plain && string(lit) != `"`+s+`"`:
			t.Errorf("%q: wrote %s, want its bytes quoted", s, lit)
		case !plain && string(lit) != string(marshaled):
			t.Errorf("%q: wrote %s, json.Marshal writes %s", s, lit, marshaled)
		case back != s && utf8.ValidString(s):
			t.Errorf("%q: reads back as %q", s, back)
		}
		if IsPlainString(lit) != plain {
			t.Errorf("%q: IsPlainString(%s) is %v", s, lit, !plain)
		}
		if v, ok := PlainString(lit); plain && (!ok || v != s) {
			t.Errorf("%q: PlainString(%s) is %q, %v", s, lit, v, ok)
		}
	}
}

// TestSkipValueEndsWhereTheValueEnds: SkipValue stops just past each kind
// of value, brackets and quotes inside strings included, and SkipSpace
// past JSON whitespace only.
func TestSkipValueEndsWhereTheValueEnds(t *testing.T) {
	for _, v := range []string{`"a\"b]}"`, `{"a":["}",{"b":"\\"}]}`, `[1,[2],{"c":"]"}]`, `-1.5e3`, `true`, `null`} {
		b := []byte(v + ` ,"next"`)
		if end := SkipValue(b, 0); end != len(v) {
			t.Errorf("%s: ends at %d, want %d", v, end, len(v))
		}
	}
	if i := SkipSpace([]byte(" \t\r\n\v1"), 0); i != 4 {
		t.Errorf("SkipSpace stopped at %d, want 4 (\\v is no JSON whitespace)", i)
	}
}

// TestSkipStringEndsWhereTheStringDoes: for strings of every mix of
// escapes (an escaped quote, an escaped backslash before a quote, \u
// escapes, long runs without any), SkipString stops where encoding/json
// says the string ends, whatever follows it.
func TestSkipStringEndsWhereTheStringDoes(t *testing.T) {
	parts := []string{`a`, `\"`, `\\`, `\\\"`, `\u0022`, `\/`, `\n`, strings.Repeat("x", 70), `é`, `]}`, `'`}
	rng := rand.New(rand.NewPCG(1, 1))
	for n := 0; n < 3000; n++ {
		var s strings.Builder
		s.WriteByte('"')
		for range rng.IntN(8) {
			s.WriteString(parts[rng.IntN(len(parts))])
		}
		s.WriteByte('"')
		lit := s.String()
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		for _, tail := range []string{``, `,"b":"c"}`, `"`, `\"x"`} {
			b := []byte(`{"k":` + lit + tail)
			if end := SkipString(b, 5); end != 5+len(lit) {
				t.Fatalf("%s followed by %s: ends at %d, want %d", lit, tail, end-5, len(lit))
			}
			if end := SkipValue(b, 5); end != 5+len(lit) {
				t.Fatalf("%s followed by %s: SkipValue ends at %d, want %d", lit, tail, end-5, len(lit))
			}
		}
	}
	// An unterminated string ends at the end of the input.
	for _, b := range []string{`"abc`, `"ab\"`, `"`} {
		if end := SkipString([]byte(b), 0); end < len(b) {
			t.Errorf("%s: ends at %d, inside the input", b, end)
		}
	}
}

// BenchmarkParseItem parses a stored item shaped as the server
// benchmark's (cmd/orrery's benchDoc, a 200-byte string among a few short
// properties, and the system properties), and the body it was written
// with.
func BenchmarkParseItem(b *testing.B) {
	doc := []byte(`{"id":"r1","pk":"p1","n":1,"tags":["a","b","c"],"nested":{"x":1,"y":"yy"},"payload":"` + strings.Repeat("x", 200) +
		`","_rid":"AAAAAAAAAAABAAAAAAAAAA==","_self":"dbs/AAAAAA==/colls/AAAAAAAAAAA=/docs/AAAAAAAAAAABAAAAAAAAAA==/","_etag":"\"00000000-0000-0000-0000-000000000001\"","_attachments":"attachments/","_ts":1767322000}`)
	body := doc[:bytes.Index(doc, []byte(`,"_rid"`))]
	body = append(body[:len(body):len(body)], '}')
	for _, c := range []struct {
		name         string
		doc          []byte
		room, fields int
	}{{"stored", doc, 8, 11}, {"stored-sized", doc, 16, 11}, {"body", body, 8, 6}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if obj, err := ParseSized(c.doc, c.room); err != nil || len(obj) != c.fields {
					b.Fatal(err, len(obj))
				}
			}
		})
	}
}
