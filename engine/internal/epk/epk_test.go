package epk

import (
	"fmt"
	"testing"
)

// TestHashMatchesCosmos checks each component kind against the effective
// partition keys Cosmos DB computes for the same values.
func TestHashMatchesCosmos(t *testing.T) {
	tests := []struct {
		name string
		kind Kind
		s    string
		num  float64
		want string
	}{
		{`""`, String, "", 0, "32E9366E637A71B4E710384B2F4970A0"},
		{`"a"`, String, "a", 0, "3A5381E1114EB8D3FCC90795045B49B7"},
		{`"b"`, String, "b", 0, "195644569A78B1E22D200348AF9416CE"},
		{`"redmond"`, String, "redmond", 0, "22E342F38A486A088463DFF7838A5963"},
		{`5`, Number, "", 5, "19C08621B135968252FB34B4CF66F811"},
		{`true`, True, "", 0, "0E711127C5B5A8E4726AC6DD306A3E59"},
		{`null`, Null, "", 0, "378867E4430E67857ACE5C908374FE16"},
		{`undefined`, Undefined, "", 0, "11622DAA78F835834610ABE56EFF5CB5"},
	}
	for _, tt := range tests {
		h := Hash(tt.kind, tt.s, tt.num)
		if got := Hex(h[:]); got != tt.want {
			t.Errorf("Hash(%s) = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestHashReadsOnlyItsKindsValue checks that a component hashes its own
// value alone: a number ignores s, a string ignores num, a marker both.
func TestHashReadsOnlyItsKindsValue(t *testing.T) {
	if Hash(Number, "x", 5) != Hash(Number, "", 5) {
		t.Error("a number's hash reads the string")
	}
	if Hash(String, "a", 7) != Hash(String, "a", 0) {
		t.Error("a string's hash reads the number")
	}
	if Hash(Null, "a", 7) != Hash(Null, "", 0) {
		t.Error("null's hash reads a value")
	}
	if Hash(Number, "", 5) == Hash(Number, "", 6) || Hash(String, "a", 0) == Hash(String, "b", 0) {
		t.Error("different values hash alike")
	}
}

// TestHashClearsTheTopBits checks that every hash is below 0x40 in its first
// byte, as Cosmos's version 2 hashes are.
func TestHashClearsTheTopBits(t *testing.T) {
	for i := range 1000 {
		if h := Hash(String, fmt.Sprint(i), 0); h[0] > 0x3F {
			t.Fatalf("Hash(%d) = %X: top bits set", i, h)
		}
	}
}

// TestMurmur3MatchesReference checks MurmurHash3 x64 128 (seed 0) against
// the reference implementation's published digests: empty input, a tail
// shorter than 8 bytes, and whole blocks with a tail longer than 8.
func TestMurmur3MatchesReference(t *testing.T) {
	tests := []struct {
		in     string
		h1, h2 uint64
	}{
		{"", 0, 0},
		{"hello", 0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19},
		{"The quick brown fox jumps over the lazy dog", 0xe34bbc7bbc071b6c, 0x7a433ca9c49a9347},
	}
	for _, tt := range tests {
		h1, h2 := murmur3x64([]byte(tt.in))
		if h1 != tt.h1 || h2 != tt.h2 {
			t.Errorf("murmur3x64(%q) = %016x %016x, want %016x %016x", tt.in, h1, h2, tt.h1, tt.h2)
		}
	}
}
