package pkey

import (
	"encoding/json"
	"strings"
	"testing"
)

// The V1 effective partition keys the JavaScript SDK computes for the same
// values (utils/hashing/v1 of @azure/cosmos 4.9): the service's ranges of a
// V1 container are cut in this space, so a key must land where the SDKs
// route it.
func TestV1EffectivePartitionKeyMatchesTheSDKs(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{`"sample1"`, "05C1EDB91DD9F80874626E716D663200"},
		{`""`, "05C1CF33970FF80800"},
		{`"` + strings.Repeat("x", 150) + `"`, "05C1DD45A3938C08" + strings.Repeat("79", 100) + "00"},
		{`"é€😀漢"`, "05C1E121D155B208C4AAE383ADF1A09981E7BDA300"},
		{`"` + strings.Repeat("😀", 60) + `"`, "05C1DDEBD72DF008" + strings.Repeat("F1A09981", 50) + "00"},
		// The JavaScript SDK drops zero bytes from the value's encoding (0
		// and negative numbers); the hash before it, which places the key
		// in a range, is the same.
		{`0`, "05C1BF6DA11560058000"},
		{`1`, "05C1ED172B6B2605BFF0"},
		{`-1`, "05C1D1A5BDDF9C05400FFFFFFFFFFFFFFE"},
		{`3.5`, "05C1E321B369D805C00C"},
		{`10000000000`, "05C1E70B0FEF5A05C2035117E4"},
		{`true`, "05C1D7C5A903D803"},
		{`false`, "05C1DB857D857C02"},
		{`null`, "05C1ED45D7475601"},
		{`{}`, "05C1D529E345DC00"},
	} {
		v, err := ParseValue(json.RawMessage(c.value))
		if err != nil {
			t.Fatalf("%s: %v", c.value, err)
		}
		if got := Hex(Key{v}.EPKV1()); got != c.want {
			t.Errorf("V1 EPK of %s = %s, want %s", c.value, got, c.want)
		}
	}
	// The service's boundaries: i·⌊(2³²−1)/n⌋ as V1 numbers.
	for h, want := range map[uint32]string{858993459: "05C1C9CD673398", 2147483646: "05C1DFFFFFFFF8", 2576980377: "05C1E399CD6732"} {
		if got := Hex(V1Boundary(h)); got != want {
			t.Errorf("V1 boundary %d = %s, want %s", h, got, want)
		}
	}
}

func TestV1BoundaryHashReadsWhatV1BoundaryWrites(t *testing.T) {
	for _, h := range []uint32{0, 1, 2, 127, 128, 1073741823, 1431655765, 2147483647, 4294967294, 4294967295} {
		got, ok := V1BoundaryHash(Hex(V1Boundary(h)))
		if !ok || got != h {
			t.Errorf("V1BoundaryHash(V1Boundary(%d)) = %d, %v", h, got, ok)
		}
	}
	for _, s := range []string{"", "FF"} {
		if _, ok := V1BoundaryHash(s); !ok {
			t.Errorf("V1BoundaryHash(%q) refused", s)
		}
	}
	for _, s := range []string{"05", "0G", "06C1D5AB55AB54", "05C1D5AB55AB5", "05C1D5", "05BFF0000000000000"} {
		if h, ok := V1BoundaryHash(s); ok {
			t.Errorf("V1BoundaryHash(%q) = %d, want refused", s, h)
		}
	}
}
