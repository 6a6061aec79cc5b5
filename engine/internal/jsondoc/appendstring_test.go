package jsondoc

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// appendStringBefore is AppendString as it was, four tests a byte.
func appendStringBefore(buf []byte, s string) []byte {
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

// TestAppendStringWritesWhatItsFourTestsWrote: AppendString, its bytes
// told plain by a table, writes what the four tests a byte wrote: every
// byte value alone and inside a name, and 200,000 random strings of 0 to
// 40 bytes (plain ASCII mostly, a byte of any value now and then).
func TestAppendStringWritesWhatItsFourTestsWrote(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := AppendString([]byte("x"), s), appendStringBefore([]byte("x"), s); string(got) != string(want) {
			t.Fatalf("%q: wrote %s, before %s", s, got, want)
		}
	}
	for c := range 256 {
		check(string([]byte{byte(c)}))
		check("name" + string([]byte{byte(c)}) + "s")
	}
	r := rand.New(rand.NewPCG(42, 7))
	for range 200000 {
		b := make([]byte, r.IntN(41))
		for i := range b {
			if r.IntN(30) == 0 {
				b[i] = byte(r.IntN(256))
			} else {
				b[i] = byte(0x20 + r.IntN(0x5f))
			}
		}
		check(string(b))
	}
}

// BenchmarkAppendStringNames writes a stored item's names, as a record's
// encoding and a patched item's do, now and before.
func BenchmarkAppendStringNames(b *testing.B) {
	names := []string{"id", "pk", "n", "payload", "nested", "_rid", "_self", "_etag", "_attachments", "_ts"}
	buf := make([]byte, 0, 256)
	for _, c := range []struct {
		name string
		f    func([]byte, string) []byte
	}{{"now", AppendString}, {"before", appendStringBefore}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				buf = buf[:0]
				for _, n := range names {
					buf = c.f(buf, n)
				}
			}
		})
	}
}
