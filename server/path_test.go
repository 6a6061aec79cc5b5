package server

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// A path splits into the segments strings.Split gives between its outer
// slashes, however many there are (an array of eight holds the common
// ones), and appending to them never writes into the array they were
// split into.
func TestPathSplitsIntoItsSegments(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"/", "/", "dbs", "db", "colls", "c", "docs", "r1", "", "a?b", "%2F", "é"}
	for range 5000 {
		var b strings.Builder
		for range r.IntN(24) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		p := b.String()
		var want []string
		if trimmed := strings.Trim(p, "/"); trimmed != "" {
			want = strings.Split(trimmed, "/")
		}
		var buf [8]string
		got := splitPathInto(buf[:0], p)
		if !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("%q: %q, want %q", p, got, want)
		}
		if cap(got) != len(got) {
			t.Fatalf("%q: %d segments of capacity %d: an append to them would write into the array", p, len(got), cap(got))
		}
	}
}
