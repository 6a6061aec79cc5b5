package rids

import (
	"bytes"
	"strings"
	"testing"
)

// TestEncodeIsURLSafeAndRoundTrips checks that a RID holding base64's '/'
// is written with '-' and decodes back to its bytes.
func TestEncodeIsURLSafeAndRoundTrips(t *testing.T) {
	b := []byte{0xFF, 0xFF, 0xFE} // base64 "///+"
	s := Encode(b)
	if s != "---+" {
		t.Fatalf("Encode(%x) = %q, want %q", b, s, "---+")
	}
	got, ok := Decode(s, 3)
	if !ok || !bytes.Equal(got, b) {
		t.Fatalf("Decode(%q) = %x, %v", s, got, ok)
	}
}

// TestDecodeRefusesOtherLengths checks that a RID of one resource type is
// not taken for another's, and that a name is not taken for a RID.
func TestDecodeRefusesOtherLengths(t *testing.T) {
	db := Encode([]byte{1, 2, 3, 4})
	if _, ok := Decode(db, 8); ok {
		t.Errorf("a database RID %q decoded as a container's", db)
	}
	for _, name := range []string{"", "orders", "a b", "!!!!", "abcd"} {
		if _, ok := Decode(name, 4); ok {
			t.Errorf("the name %q decoded as a RID", name)
		}
	}
}

// TestChildrenNestAndSortBySuffix checks that a child's RID starts with its
// parent's and that children sort by their suffix.
func TestChildrenNestAndSortBySuffix(t *testing.T) {
	parent := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	a, b := Child(parent, 1), Child(parent, 256)
	if len(a) != 16 || !bytes.HasPrefix(a, parent) {
		t.Fatalf("Child = %x: not 16 bytes under %x", a, parent)
	}
	if bytes.Compare(a, b) >= 0 {
		t.Errorf("Child(1) = %x does not sort before Child(256) = %x", a, b)
	}
}

// TestRandomNestsAndLeavesItsParentAlone checks that a random RID starts
// with its parent's, has its length, does not share the parent's array,
// and differs from draw to draw.
func TestRandomNestsAndLeavesItsParentAlone(t *testing.T) {
	parent := make([]byte, 4, 64)
	copy(parent, []byte{9, 9, 9, 9})
	seen := map[string]bool{}
	for range 100 {
		r := Random(parent, 4)
		if len(r) != 8 || !bytes.HasPrefix(r, parent) {
			t.Fatalf("Random = %x: not 8 bytes under %x", r, parent)
		}
		seen[string(r)] = true
	}
	if got := parent[:8]; !bytes.Equal(got[4:], make([]byte, 4)) {
		t.Errorf("Random wrote into its parent's spare capacity: %x", got)
	}
	if len(seen) < 90 {
		t.Errorf("100 random RIDs gave %d distinct", len(seen))
	}
	if s := Encode(Random(nil, 3)); strings.ContainsRune(s, '/') {
		t.Errorf("an offer RID %q holds '/'", s)
	}
}

func TestAppendWritesWhatEncodeReturns(t *testing.T) {
	for _, b := range [][]byte{{}, {0xff, 0xff, 0xff}, {0xfb, 0xef, 0xbe, 1, 2, 3, 4, 5}, Child([]byte{0xfc, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, 1<<63)} {
		if got, want := string(Append([]byte("x"), b)), "x"+Encode(b); got != want {
			t.Errorf("Append(%x) = %q, want %q", b, got, want)
		}
	}
}
