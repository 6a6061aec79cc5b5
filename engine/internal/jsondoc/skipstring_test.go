package jsondoc

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// skipStringBefore is SkipString as it was before it looked at eight
// bytes at a time: the byte loop over a string's first 17 bytes, then
// bytes.IndexByte. SkipString must answer as it does on every input.
func skipStringBefore(b []byte, i int) int {
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
		i += e + 2
	}
	return i
}

// TestSkipStringAnswersAsTheByteLoop: on random byte strings dense in
// quotes and backslashes (escapes at every offset of an eight-byte word,
// strings that end at the input's end, unterminated ones, a backslash as
// the last byte, bytes 0x80 and up, whose borrow marks bytes past a zero
// byte), SkipString ends where the code it replaced ended, from every
// start.
func TestSkipStringAnswersAsTheByteLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 25))
	alphabet := []byte{'"', '\\', 'x', 0, 0x80, 0xff, '!', ']', '#', '"' ^ 0x80, '\\' ^ 0x80}
	for n := 0; n < 200000; n++ {
		b := make([]byte, rng.IntN(90))
		// Mostly plain bytes, so that strings run over several words.
		dense := rng.IntN(4)
		for k := range b {
			if rng.IntN(16) < dense {
				b[k] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[k] = byte(rng.IntN(256))
			}
		}
		for i := range b {
			if got, want := SkipString(b, i), skipStringBefore(b, i); got != want {
				t.Fatalf("SkipString(%q, %d) = %d, the byte loop %d", b, i, got, want)
			}
		}
	}
}

// FuzzSkipStringAnswersAsTheByteLoop is TestSkipStringAnswersAsTheByteLoop
// on the fuzzer's inputs.
func FuzzSkipStringAnswersAsTheByteLoop(f *testing.F) {
	f.Add([]byte(`"abc"`))
	f.Add([]byte(`"ab\"cdefghijklmnopqrstuvwxyz\\"`))
	f.Add([]byte(`"` + strings.Repeat("x", 40) + `\`))
	f.Add([]byte(`"0123456789abcdef\`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range b {
			if got, want := SkipString(b, i), skipStringBefore(b, i); got != want {
				t.Fatalf("SkipString(%q, %d) = %d, the byte loop %d", b, i, got, want)
			}
		}
	})
}

// BenchmarkSkipString skips the strings of a stored item shaped as the
// server benchmark's: its names, short values and the 200-byte text.
func BenchmarkSkipString(b *testing.B) {
	doc := []byte(`{"id":"r1","pk":"p1","n":1,"tags":["a","b","c"],"nested":{"x":1,"y":"yy"},"payload":"` + strings.Repeat("x", 200) +
		`","_rid":"AAAAAAAAAAABAAAAAAAAAA==","_self":"dbs/AAAAAA==/colls/AAAAAAAAAAA=/docs/AAAAAAAAAAABAAAAAAAAAA==/","_etag":"\"00000000-0000-0000-0000-000000000001\"","_attachments":"attachments/","_ts":1767322000}`)
	var starts []int
	for i := 0; i < len(doc); {
		if doc[i] == '"' {
			starts = append(starts, i)
			i = skipStringBefore(doc, i)
			continue
		}
		i++
	}
	b.ResetTimer()
	for range b.N {
		for _, i := range starts {
			_ = SkipString(doc, i)
		}
	}
}

// TestSkipNameIsSkipStringAndIsPlainName: on random byte strings (names
// plain and not: escapes, control bytes, 0x7f, bytes 0x80 and up, names
// that run past a word or to the input's end, a start that is no quote),
// skipName answers as SkipString followed by isPlainName, the two scans
// ParseNamed made of each name.
func TestSkipNameIsSkipStringAndIsPlainName(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 41))
	alphabet := []byte{'"', '\\', 0x7f, 0x1f, 0x20, 0, 0x80, 0xff, 0x7e, '"' ^ 0x80, 0x7f ^ 0x80}
	plains := 0
	for n := 0; n < 200000; n++ {
		b := make([]byte, rng.IntN(40))
		dense := rng.IntN(4)
		for k := range b {
			switch {
			case rng.IntN(12) == 0:
				b[k] = '"' // names of every length
			case rng.IntN(16) < dense:
				b[k] = alphabet[rng.IntN(len(alphabet))]
			case rng.IntN(4) == 0:
				b[k] = byte(rng.IntN(256))
			default:
				b[k] = byte('a' + rng.IntN(26))
			}
		}
		for i := range b {
			end, plain := skipName(b, i)
			wantEnd := SkipString(b, i)
			if wantPlain := isPlainName(b, i, wantEnd); end != wantEnd || plain != wantPlain {
				t.Fatalf("skipName(%q, %d) = %d, %v; SkipString and isPlainName: %d, %v", b, i, end, plain, wantEnd, wantPlain)
			}
			if plain {
				plains++
			}
		}
	}
	if plains < 10000 {
		t.Fatalf("only %d plain names among the inputs", plains)
	}
}

// FuzzSkipNameIsSkipStringAndIsPlainName is
// TestSkipNameIsSkipStringAndIsPlainName on the fuzzer's inputs.
func FuzzSkipNameIsSkipStringAndIsPlainName(f *testing.F) {
	f.Add([]byte(`"name":1`))
	f.Add([]byte(`"a long property name\u0041":1`))
	f.Add([]byte("\"nam\x7fe\":1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range b {
			end, plain := skipName(b, i)
			wantEnd := SkipString(b, i)
			if wantPlain := isPlainName(b, i, wantEnd); end != wantEnd || plain != wantPlain {
				t.Fatalf("skipName(%q, %d) = %d, %v; SkipString and isPlainName: %d, %v", b, i, end, plain, wantEnd, wantPlain)
			}
		}
	})
}

// BenchmarkParseNamed parses a stored item shaped as the server
// benchmark's with the names of the body that replaces it, as a replace
// parses the version it replaces (txn.parsePrev).
func BenchmarkParseNamed(b *testing.B) {
	doc := []byte(`{"id":"r1","pk":"p1","n":1,"tags":["a","b","c"],"nested":{"x":1,"y":"yy"},"payload":"` + strings.Repeat("x", 200) +
		`","_rid":"AAAAAAAAAAABAAAAAAAAAA==","_self":"dbs/AAAAAA==/colls/AAAAAAAAAAA=/docs/AAAAAAAAAAABAAAAAAAAAA==/","_etag":"\"00000000-0000-0000-0000-000000000001\"","_attachments":"attachments/","_ts":1767322000}`)
	body := doc[:bytes.Index(doc, []byte(`,"_rid"`))]
	body = append(body[:len(body):len(body)], '}')
	names, err := ParseInto(nil, body, 8)
	if err != nil {
		b.Fatal(err)
	}
	dst := make(Object, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		if obj, err := ParseNamed(dst, doc, 16, names); err != nil || len(obj) != 11 {
			b.Fatal(err, len(obj))
		}
	}
}

// TestLazyObjectNamesAreDecodesNames: the names DecodeLazy lists for an
// object (plain ones taken as skipName told them, others decoded) are the
// names Decode lists, which decodes each, for random objects whose names
// are plain, escaped, non-ASCII, hold 0x7f or a quote, and of every length
// around a word's.
func TestLazyObjectNamesAreDecodesNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 41))
	parts := []string{"a", "b", "_", "\x7f", `\"`, `\\`, `\u0041`, "é", "漢", " ", "~", "/", "12345678"}
	plain := 0
	for n := 0; n < 20000; n++ {
		var s strings.Builder
		s.WriteByte('{')
		fields := rng.IntN(6)
		for k := range fields {
			if k > 0 {
				s.WriteByte(',')
			}
			s.WriteByte('"')
			for range rng.IntN(12) {
				if rng.IntN(5) == 0 {
					s.WriteString(parts[rng.IntN(len(parts))])
				} else {
					s.WriteByte(byte('a' + rng.IntN(26)))
				}
			}
			s.WriteString(`":` + strconv.Itoa(k))
		}
		s.WriteByte('}')
		b := []byte(s.String())
		lazy, err := DecodeLazy(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		full, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		got, want := lazy.(*Members).Names, full.(*Members).Names
		if !slices.Equal(got, want) {
			t.Fatalf("%s: DecodeLazy's names %q, Decode's %q", b, got, want)
		}
		for _, name := range got {
			if end, ok := skipName([]byte(strconv.Quote(name)), 0); ok && end > 9 {
				plain++
			}
		}
	}
	if plain < 1000 {
		t.Fatalf("only %d plain names longer than a word", plain)
	}
}
