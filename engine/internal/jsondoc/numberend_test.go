package jsondoc

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// numberGrammarBefore is engine/index.go's own copy of JSON's number
// grammar as it was (kept here to hold NumberEnd to its answers).
func numberGrammarBefore(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(b)
}

// TestNumberEndIsJSONsNumberGrammar: on random strings of a number's bytes
// (and a few others), NumberEnd(b, 0) == len(b) exactly when the index's
// old copy of the grammar accepted b, and exactly when b is a JSON text
// that is a number (json.Valid, for b without spaces); and the
// validator still accepts a document exactly when json.Valid does.
func TestNumberEndIsJSONsNumberGrammar(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 2))
	const alphabet = "-+0123456789.eE x\"1"
	numbers := 0
	for n := 0; n < 300000; n++ {
		b := make([]byte, rng.IntN(10))
		for k := range b {
			b[k] = alphabet[rng.IntN(len(alphabet))]
		}
		got := NumberEnd(b, 0) == len(b)
		if want := numberGrammarBefore(b); got != want {
			t.Fatalf("%q: NumberEnd says %v, the grammar %v", b, got, want)
		}
		if want := json.Valid(b) && len(b) > 0 && (b[0] == '-' || '0' <= b[0] && b[0] <= '9'); got != want && !strings.Contains(string(b), " ") {
			t.Fatalf("%q: NumberEnd says %v, json.Valid %v", b, got, want)
		}
		if got {
			numbers++
		}
		doc := append([]byte(`[`), b...)
		doc = append(doc, ']')
		if v, _ := Validate(doc); v != json.Valid(doc) || Valid(doc) != v {
			t.Fatalf("%s: Validate and Valid say %v, %v, json.Valid %v", doc, v, Valid(doc), !v)
		}
	}
	if numbers < 10000 {
		t.Fatalf("only %d numbers", numbers)
	}
}

// BenchmarkNumberEnd validates a document of numbers, and tells a stored
// value a number by NumberEnd and by the index's copy from before.
func BenchmarkNumberEnd(b *testing.B) {
	doc := []byte(`{"a":1,"b":-12.5,"c":1e10,"d":0,"e":[1,2,3,4.25,-0.5e-3],"f":1700000000}`)
	nums := [][]byte{[]byte("1"), []byte("-12.5"), []byte("1e10"), []byte("1700000000"), []byte(`"x"`)}
	b.Run("validate", func(b *testing.B) {
		for range b.N {
			Validate(doc)
		}
	})
	b.Run("grammar", func(b *testing.B) {
		for range b.N {
			for _, n := range nums {
				_ = NumberEnd(n, 0) == len(n)
			}
		}
	})
	b.Run("grammar-before", func(b *testing.B) {
		for range b.N {
			for _, n := range nums {
				_ = numberGrammarBefore(n)
			}
		}
	})
}
