package pebble

import (
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/storage"
)

// TestIteratorsOpenedTogetherKeepTheirOwnBounds: each iterator holds its
// own Pebble options (allocated with it); iterators of the store, a
// snapshot and a batch opened together and stepped in turn each list
// exactly their own range, and opening one costs one allocation of ours.
func TestIteratorsOpenedTogetherKeepTheirOwnBounds(t *testing.T) {
	ctx := t.Context()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	for i := range 100 {
		if err := b.Set(fmt.Appendf(nil, "k%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := s.NewSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	rb := s.NewBatch()
	readers := []storage.Reader{s, snap, rb}
	type open struct {
		it           storage.Iterator
		lower, upper int
		reverse      bool
		got          []string
	}
	var its []*open
	for n := range 12 {
		lo := (n * 7) % 90
		o := &open{lower: lo, upper: lo + 3 + n, reverse: n%2 == 1}
		lower, upper := fmt.Appendf(nil, "k%02d", o.lower), fmt.Appendf(nil, "k%02d", o.upper)
		if o.it, err = readers[n%3].NewIterator(ctx, lower, upper, o.reverse); err != nil {
			t.Fatal(err)
		}
		// The caller may reuse its bound buffers once the iterator is open.
		copy(lower, "zzz")
		copy(upper, "aaa")
		its = append(its, o)
	}
	for more := true; more; {
		more = false
		for _, o := range its {
			if o.it.Next() {
				o.got = append(o.got, string(o.it.Key()))
				more = true
			}
		}
	}
	for n, o := range its {
		var want []string
		for i := o.lower; i < o.upper && i < 100; i++ {
			want = append(want, fmt.Sprintf("k%02d", i))
		}
		if o.reverse {
			for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
				want[i], want[j] = want[j], want[i]
			}
		}
		if fmt.Sprint(o.got) != fmt.Sprint(want) {
			t.Errorf("iterator %d over [k%02d, k%02d): %v, want %v", n, o.lower, o.upper, o.got, want)
		}
		if err := o.it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	lower, upper := []byte("k10"), []byte("k20")
	allocs := testing.AllocsPerRun(200, func() {
		it, err := newIterator(snap.(*snapshot).snap, lower, upper, false)
		if err != nil {
			t.Fatal(err)
		}
		it.Close()
	})
	if allocs > 1 {
		t.Errorf("opening an iterator allocates %v times, want 1", allocs)
	}
}
