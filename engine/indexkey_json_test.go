package engine

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// indexKeyOfJSONByDecoding is how indexRanges encoded a filter's value
// before indexKeyOfJSON: decoded into any, then appendIndexValue.
func indexKeyOfJSONByDecoding(base, raw []byte) ([]byte, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	return appendIndexValue(append([]byte(nil), base...), v)
}

func randomFilterJSON(r *rand.Rand) string {
	switch r.IntN(6) {
	case 0:
		return []string{"null", "true", "false", "nul", "True", "nulll", " null", "true ", "", `""`, `"`, `[1]`, `{"a":1}`, "[]", "{}"}[r.IntN(15)]
	case 1: // numbers, well and badly formed
		parts := []string{"-", "0", "1", "9", "00", "12", ".", ".5", "e", "E", "+", "-", "3", "x", "_", " ", "Inf", "NaN", "e400", "e-400", "0x1p3"}
		var b strings.Builder
		for range 1 + r.IntN(5) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		return b.String()
	case 2:
		return strconv.FormatFloat(r.NormFloat64()*1e6, 'g', -1, 64)
	case 3:
		return strconv.FormatFloat(r.Float64()*float64(r.IntN(1000)), []byte("efg")[r.IntN(3)], r.IntN(20)-1, 64)
	default: // strings of random bytes, escapes, invalid UTF-8, zero bytes
		pieces := []string{"a", "é", "\U0001F600", "\\\"", "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "\xff", "\xc3", "\x00", "\x1f", "\t", "\"", " ", "\u2028", "\\u0000", "zz"}
		var b strings.Builder
		b.WriteByte('"')
		for range r.IntN(8) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		if r.IntN(4) == 0 {
			b.WriteString(strings.Repeat("long", r.IntN(200)))
		}
		if r.IntN(20) != 0 {
			b.WriteByte('"')
		}
		return b.String()
	}
}

// TestAFilterValuesIndexKeyIsTheKeyOfItsDecodedValue holds the index keys
// a query's filter values are looked up by (indexKeyOfJSON, which encodes
// plain literals from their bytes) to those of the values json.Unmarshal
// decodes: the same key, or refused alike, over random well and badly
// formed JSON.
func TestAFilterValuesIndexKeyIsTheKeyOfItsDecodedValue(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 41))
	base := []byte("base\x00prefix")
	fixed := []string{"0", "-0", "1e400", "-1e400", "1e-400", "9007199254740993", "0.1", "1E+2", "01", "1.", "-", `"a\u0000b"`, "\"\xed\xa0\x80\"", `"\/"`}
	n := 100000
	if testing.Short() {
		n = 10000
	}
	for i := 0; i < n+len(fixed); i++ {
		raw := []byte(nil)
		if i < len(fixed) {
			raw = []byte(fixed[i])
		} else {
			raw = []byte(randomFilterJSON(r))
		}
		got, gotOK := indexKeyOfJSON(base, raw)
		want, wantOK := indexKeyOfJSONByDecoding(base, raw)
		if gotOK != wantOK || gotOK && !bytes.Equal(got, want) {
			t.Fatalf("%q: key %x (%v), decoded value's %x (%v)", raw, got, gotOK, want, wantOK)
		}
	}
}
