package rids

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"
)

// appendBefore is Append as it was: standard base64, then each '/' turned
// into '-' in a second pass.
func appendBefore(dst, b []byte) []byte {
	n := len(dst)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	for i := n; i < len(dst); i++ {
		if dst[i] == '/' {
			dst[i] = '-'
		}
	}
	return dst
}

// checkRIDEncoding holds Append and Encode of b to the old two passes.
func checkRIDEncoding(t *testing.T, prefix, b []byte) {
	t.Helper()
	want := appendBefore(append([]byte(nil), prefix...), b)
	if got := Append(append([]byte(nil), prefix...), b); !bytes.Equal(got, want) {
		t.Fatalf("Append(%q, %x) = %q, before %q", prefix, b, got, want)
	}
	if got, want := Encode(b), strings.ReplaceAll(base64.StdEncoding.EncodeToString(b), "/", "-"); got != want {
		t.Fatalf("Encode(%x) = %q, before %q", b, got, want)
	}
	if got, ok := Decode(Encode(b), len(b)); !ok || !bytes.Equal(got, b) {
		t.Fatalf("Decode(Encode(%x)) = %x, %v", b, got, ok)
	}
}

// TestRIDsAreWrittenAsBase64WithDashesAsBefore: Append and Encode, one pass of
// base64 with '-' in its alphabet, write what base64 then '/' turned into
// '-' wrote: every byte value at every place of a 3-byte group (each of
// the 64 characters, '/' among them), and 100,000 random RIDs of 0 to 24
// bytes after random prefixes.
func TestRIDsAreWrittenAsBase64WithDashesAsBefore(t *testing.T) {
	for v := range 256 {
		for at := range 3 {
			b := make([]byte, 3)
			b[at] = byte(v)
			checkRIDEncoding(t, nil, b)
			checkRIDEncoding(t, []byte("x"), b[:at+1])
		}
	}
	r := rand.New(rand.NewPCG(42, 4))
	for range 100000 {
		prefix := make([]byte, r.IntN(5))
		for i := range prefix {
			prefix[i] = byte(r.Uint32())
		}
		b := make([]byte, r.IntN(25))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		checkRIDEncoding(t, prefix, b)
	}
}

// FuzzRIDsAreWrittenAsBase64WithDashesAsBefore is its test's fuzz twin.
func FuzzRIDsAreWrittenAsBase64WithDashesAsBefore(f *testing.F) {
	f.Add([]byte("x"), []byte{0xff, 0xff, 0xfe})
	f.Add([]byte{}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, prefix, b []byte) {
		checkRIDEncoding(t, prefix, b)
	})
}

// BenchmarkAppend writes an item's RID (its container's 8 bytes and its
// own 8) as put does, and as it did before.
func BenchmarkAppend(b *testing.B) {
	rid := []byte{0x1f, 0x2e, 0xff, 0x00, 0x10, 0x20, 0x30, 0x40, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56}
	buf := make([]byte, 0, 64)
	b.Run("now", func(b *testing.B) {
		for range b.N {
			buf = Append(buf[:0], rid)
		}
	})
	b.Run("before", func(b *testing.B) {
		for range b.N {
			buf = appendBefore(buf[:0], rid)
		}
	})
}
