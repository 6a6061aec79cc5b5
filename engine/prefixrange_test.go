package engine

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// TestAPrefixRangeIsItsKeyAndTheKeysPrefixEnd: prefixRange(k) is {k,
// storage.PrefixEnd(k)} for random keys (runs of 0xff, empty, all 0xff)
// and random spare capacity, and neither bound grows into the other: an
// append to the lower bound leaves the upper as it was.
func TestAPrefixRangeIsItsKeyAndTheKeysPrefixEnd(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 25))
	for range 100000 {
		n := r.IntN(12)
		k := make([]byte, n, n+r.IntN(2*n+3))
		for i := range k {
			switch r.IntN(3) {
			case 0:
				k[i] = 0xff
			case 1:
				k[i] = 0
			default:
				k[i] = byte(r.IntN(256))
			}
		}
		orig := bytes.Clone(k)
		want := storage.PrefixEnd(orig)
		got := prefixRange(k)
		if !bytes.Equal(got.lower, orig) || !bytes.Equal(got.upper, want) || (got.upper == nil) != (want == nil) {
			t.Fatalf("prefixRange(%x) = {%x, %x}, want {%x, %x}", orig, got.lower, got.upper, orig, want)
		}
		upper := bytes.Clone(got.upper)
		_ = append(got.lower, 0xaa, 0xbb, 0xcc)
		if !bytes.Equal(got.upper, upper) {
			t.Fatalf("prefixRange(%x): appending to the lower bound changed the upper: %x, was %x", orig, got.upper, upper)
		}
		_ = append(got.upper, 0xaa)
		if !bytes.Equal(got.lower, orig) {
			t.Fatalf("prefixRange(%x): appending to the upper bound changed the lower: %x", orig, got.lower)
		}
	}
}

// TestTheChosenIndexsBaseIsItsPathsIndexPrefix: chooseIndex takes the
// length of the index key prefix from indexRanges, which built it, rather
// than building it again; it is the prefix of the chosen filter's path, and
// the ranges are those indexRanges gives that filter.
func TestTheChosenIndexsBaseIsItsPathsIndexPrefix(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	c, _ := e.Container(ctx, "db", "c")
	for _, text := range []string{
		"SELECT * FROM c WHERE c.a = 1",
		"SELECT * FROM c WHERE c.a > 1 AND c.bb = 'x'",
		"SELECT * FROM c WHERE c.a IN (1, 2, 1) AND c.b.c.d = 'x'",
		"SELECT * FROM c WHERE STARTSWITH(c.name, 'ab')",
		"SELECT * FROM c WHERE c['a long property name with spaces'] = true",
		"SELECT * FROM c WHERE c.x = null",
	} {
		q, err := query.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := q.Plan(nil)
		if err != nil {
			t.Fatal(err)
		}
		ix, ok := c.chooseIndex(plan)
		if !ok {
			t.Fatalf("%s: no index chosen", text)
		}
		f := ix.filters[0]
		if want := len(keys.IndexPathPrefix(c.rid, indexpolicy.Path(f.Path))); ix.base != want {
			t.Errorf("%s: base %d, want %d", text, ix.base, want)
		}
		ranges, _, _ := c.indexRanges(f.Path, f.Op, f.Values)
		if len(ranges) != len(ix.ranges) {
			t.Fatalf("%s: %d ranges, indexRanges %d", text, len(ix.ranges), len(ranges))
		}
		for i := range ranges {
			if !bytes.Equal(ranges[i].lower, ix.ranges[i].lower) || !bytes.Equal(ranges[i].upper, ix.ranges[i].upper) {
				t.Errorf("%s: range %d {%x, %x}, indexRanges {%x, %x}", text, i, ix.ranges[i].lower, ix.ranges[i].upper, ranges[i].lower, ranges[i].upper)
			}
		}
	}
}
