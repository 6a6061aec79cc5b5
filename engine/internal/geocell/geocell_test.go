package geocell

import (
	"math/rand/v2"
	"testing"
)

// Every cell inside another has its ID in the other's Range, and no cell
// outside does: a range scan of a cell finds exactly its descendants.
func TestDescendantsLieInTheRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		lon, lat := r.Float64()*360-180, r.Float64()*180-90
		leaf := Leaf(lon, lat)
		if leaf.Level() != MaxLevel {
			t.Fatalf("leaf level %d", leaf.Level())
		}
		anc := leaf.Ancestors()
		if len(anc) != MaxLevel || anc[0] != ID(1)<<60 {
			t.Fatalf("ancestors of %x: %d, first %x", leaf, len(anc), anc[0])
		}
		for i, a := range anc {
			if a.Level() != i {
				t.Fatalf("ancestor %d has level %d", i, a.Level())
			}
			lo, hi := a.Range()
			if leaf < lo || leaf > hi {
				t.Fatalf("leaf %x outside its ancestor %x's range", leaf, a)
			}
			// A sibling of the ancestor holds none of it.
			if i > 0 {
				other := Leaf(-lon, -lat)
				if oa := other.Ancestors()[i]; oa != a {
					olo, ohi := oa.Range()
					if lo <= ohi && olo <= hi {
						t.Fatalf("cells %x and %x overlap", a, oa)
					}
				}
			}
		}
	}
}

// A box's covering holds every position of the box, in few cells.
func TestCoverHoldsTheBox(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		w, s := r.Float64()*300-180, r.Float64()*150-90
		b := Box{w, s, w + r.Float64()*(180-w)*0.5, s + r.Float64()*(90-s)*0.5}
		cells := Cover(b, 8)
		if len(cells) == 0 || len(cells) > 8 {
			t.Fatalf("%+v: %d cells", b, len(cells))
		}
		for range 50 {
			leaf := Leaf(b.West+r.Float64()*(b.East-b.West), b.South+r.Float64()*(b.North-b.South))
			found := false
			for _, c := range cells {
				if lo, hi := c.Range(); leaf >= lo && leaf <= hi {
					found = true
				}
			}
			if !found {
				t.Fatalf("%+v: a position outside its covering %x", b, cells)
			}
		}
	}
	if c := Cover(Box{-180, -90, 180, 90}, 8); len(c) != 4 || c[0].Level() != 1 {
		t.Errorf("the world: %x", c)
	}
}
