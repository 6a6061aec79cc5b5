package pkey

import (
	"encoding/json"
	"fmt"
	"strings"
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

// TestKeyEPKConcatenatesComponentHashes checks that a key's EPK is its
// components' hashes in order, so that a hierarchical key's prefix is a
// prefix of its EPK, and that an empty key has none.
func TestKeyEPKConcatenatesComponentHashes(t *testing.T) {
	if got := Key(nil).EPK(); got != nil {
		t.Errorf("empty key EPK = %x, want nil", got)
	}
	ab := Key{StringValue("a"), StringValue("b")}
	want := "3A5381E1114EB8D3FCC90795045B49B7195644569A78B1E22D200348AF9416CE"
	if got := Hex(ab.EPK()); got != want {
		t.Errorf("EPK([a,b]) = %s, want %s", got, want)
	}
	if a := Hex(StringKey("a").EPK()); a != want[:32] {
		t.Errorf("EPK([a]) = %s is not the prefix of EPK([a,b])", a)
	}
}

// TestParseHeaderShortcutAgreesWithDecoder checks that the header fast path
// gives the key the JSON decoder gives, and leaves escapes to the decoder.
func TestParseHeaderShortcutAgreesWithDecoder(t *testing.T) {
	for _, h := range []string{`["a"]`, `["tenant-42"]`, `["a\"b"]`, `["\u00e9"]`, `["a\\b"]`} {
		fast, err := ParseHeader(h)
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		var s []string
		if err := json.Unmarshal([]byte(h), &s); err != nil {
			t.Fatal(err)
		}
		if !fast.Equal(StringKey(s[0])) {
			t.Errorf("ParseHeader(%s) = %s, want %q", h, fast, s[0])
		}
	}
}

// TestEncodeParsesBack checks that the canonical JSON of every kind of
// value parses back to the same key.
func TestEncodeParsesBack(t *testing.T) {
	for _, h := range []string{`["a",5,true,false,null,{}]`, `[-0.5]`, `[1e+300]`, `[]`} {
		pk, err := ParseHeader(h)
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		back, err := ParseHeader(pk.String())
		if err != nil || !back.Equal(pk) {
			t.Errorf("%s: encoded %s parsed back as %v (%v)", h, pk, back, err)
		}
	}
}

// TestExtractReadsNestedEscapedPaths checks that a document's key follows
// nested paths with JSON Pointer escapes, gives undefined for a missing
// property, and refuses an object.
func TestExtractReadsNestedEscapedPaths(t *testing.T) {
	doc := map[string]any{"a": map[string]any{"b/c": "x", "d~e": 3.0}, "o": map[string]any{"k": 1.0}, "none": map[string]any{}}
	pk, err := Extract([]string{"/a/b~1c", "/a/d~0e", "/missing"}, doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := pk.String(); got != `["x",3,{}]` {
		t.Errorf("Extract = %s, want %s", got, `["x",3,{}]`)
	}
	if _, err := Extract([]string{"/o"}, doc); err == nil {
		t.Error("an object was taken as a partition key value")
	}
	// {} is the SDKs' undefined component (NonePartitionKey): an item
	// holding it is in the undefined partition.
	if pk, err := Extract([]string{"/none", "/a/b~1c"}, doc); err != nil || pk.String() != `[{},"x"]` {
		t.Errorf("Extract of {} = %v, %v; want [{},\"x\"]", pk, err)
	}
	long := strings.Repeat("x", MaxValueBytes+1)
	if _, err := Extract([]string{"/s"}, map[string]any{"s": long}); err == nil {
		t.Error("a value over MaxValueBytes was taken")
	}
}

// TestEncodeWritesStringsAsEncodingJSON checks that the canonical form
// writes a string value byte for byte as encoding/json does (the storage
// keys of existing items are made of it), the plain ones without it
// included, and that AppendEncode appends to what it is given.
func TestEncodeWritesStringsAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "tenant-42", "a b~", "a<b", "x>y", "x&y", `q"q`, `b\s`, "tab\t", "nl\n", "del\x7f",
		"\u00e9", "\u2028\u2029", "bad\xffutf8", "\x00"} {
		m, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want := "[" + string(m) + "," + string(m) + "]"
		if got := string(Key{StringValue(s), StringValue(s)}.Encode()); got != want {
			t.Errorf("Encode(%q) = %s, want %s", s, got, want)
		}
		if got := string(Key{StringValue(s), StringValue(s)}.AppendEncode([]byte("head"))); got != "head"+want {
			t.Errorf("AppendEncode(head, %q) = %s, want head%s", s, got, want)
		}
	}
}
