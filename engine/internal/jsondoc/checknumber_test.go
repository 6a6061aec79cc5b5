package jsondoc

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
)

// checkNumberBefore is checkNumber as it was, its exponent found by
// bytes.IndexAny.
func checkNumberBefore(n []byte) error {
	if len(n) <= 16 && bytes.IndexAny(n, "eE") < 0 {
		return nil
	}
	if _, err := strconv.ParseFloat(string(n), 64); errors.Is(err, strconv.ErrRange) {
		shown := string(n)
		if len(shown) > 24 {
			shown = shown[:20] + "..." + " (" + strconv.Itoa(len(n)) + " characters)"
		}
		return checkError("the number %s is outside the range of a double-precision number (about ±1.8e308).", shown)
	}
	return nil
}

// TestANumberIsRefusedExactlyAsBefore: checkNumber's byte loop for an
// exponent refuses the numbers, and with the same words, that its
// IndexAny did: 200,000 random numbers of JSON's grammar, 1 to 30 bytes,
// with 'e' and 'E' exponents small and past a double's range.
func TestANumberIsRefusedExactlyAsBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 6))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	refused := 0
	for range 200000 {
		s := ""
		if r.IntN(2) == 0 {
			s = "-"
		}
		s += strconv.Itoa(1+r.IntN(9)) + digits(r.IntN(20))
		if r.IntN(2) == 0 {
			s += "." + digits(1+r.IntN(5))
		}
		if r.IntN(2) == 0 {
			s += string("eE"[r.IntN(2)]) + []string{"", "+", "-"}[r.IntN(3)] + strconv.Itoa(r.IntN(400))
		}
		got, want := checkNumber([]byte(s)), checkNumberBefore([]byte(s))
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Fatalf("%s: %v, before %v", s, got, want)
		}
		if want != nil {
			refused++
		}
	}
	if refused < 1000 {
		t.Fatalf("only %d numbers refused", refused)
	}
}
