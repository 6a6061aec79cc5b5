package engine

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// checkItemIDAsTheRules holds validItemID to validItemIDSlow (the rules as
// written: path characters mapped, then validID) on id.
func checkItemIDAsTheRules(t *testing.T, id string) {
	t.Helper()
	got, want := validItemID(id), validItemIDSlow(id)
	if (got == nil) != (want == nil) || got != nil && (got.Status != want.Status || got.Message != want.Message || got.Code != want.Code) {
		t.Fatalf("%q: validItemID %v, the rules %v", id, got, want)
	}
}

// TestAnItemIDIsRefusedExactlyAsTheRulesRefuseIt: validItemID's one look
// at an ASCII id answers as validID's rules (empty, over 1,023 bytes, not
// UTF-8, blank), with the same error: ids of ASCII spaces and controls,
// path characters, the non-ASCII spaces U+0085, U+00A0 and U+3000, other
// UTF-8 and invalid bytes, at lengths 0 to 3 and about 1,023.
func TestAnItemIDIsRefusedExactlyAsTheRulesRefuseIt(t *testing.T) {
	pieces := []string{"a", "Z", "0", " ", "\t", "\n", "\v", "\f", "\r", "\x00", "\x1f", "\x7f", "/", "\\", "?", "#", "_", "\u0085", "\u00a0", "\u3000", "é", "\xff", "\xc3"}
	r := rand.New(rand.NewPCG(42, 5))
	refused := 0
	for range 200000 {
		var b strings.Builder
		n := r.IntN(4)
		if r.IntN(10) == 0 {
			n = 1020 + r.IntN(6)
			b.WriteString(strings.Repeat(pieces[r.IntN(len(pieces))], 1016))
		}
		for range n {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		id := b.String()
		checkItemIDAsTheRules(t, id)
		if validItemIDSlow(id) != nil {
			refused++
		}
	}
	if refused < 10000 {
		t.Fatalf("only %d ids refused", refused)
	}
}

// FuzzAnItemIDIsRefusedExactlyAsTheRulesRefuseIt is its test's fuzz twin.
func FuzzAnItemIDIsRefusedExactlyAsTheRulesRefuseIt(f *testing.F) {
	for _, s := range []string{"", " ", "a", "a/b", " \t", "\u00a0", "\xff", strings.Repeat("x", 1024)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		checkItemIDAsTheRules(t, id)
	})
}
