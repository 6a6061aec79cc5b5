package placed

import (
	"slices"
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/storagetest"
)

// byParity puts a key in the place its last byte's parity names: two
// places, every span in both. The conformance suite's batches write keys
// that end alike (x/1, y/1, z/1), as a transaction of one range writes
// keys of one place.
type byParity struct{}

func (byParity) Key(key, _ []byte) int {
	if len(key) == 0 {
		return 0
	}
	return int(key[len(key)-1] % 2)
}

func (byParity) Span([]byte, []byte) int { return Anywhere }

func twoPlaces(a, b storage.Shared) *Store {
	s := New(a, b)
	s.SetRouter(byParity{})
	return s
}

// inPlaceOne puts every key in place 1 and asks every place for every
// span: a batch is atomic only within a place, and the store contract's
// batches write keys that would fall in both under byParity.
type inPlaceOne struct{}

func (inPlaceOne) Key([]byte, []byte) int  { return 1 }
func (inPlaceOne) Span([]byte, []byte) int { return Anywhere }

// A store over two places keeps the contract of one store: its reads merge
// the places (here one empty) and its writes go to the key's place.
func TestTwoPlacesActAsOneStore(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		s := New(memory.NewShared(), memory.NewShared())
		s.SetRouter(inPlaceOne{})
		return s
	})
}

// everywhereA keeps keys starting with 'a' in every place, the rest by
// parity.
type everywhereA struct{ byParity }

func (r everywhereA) Key(key, value []byte) int {
	if len(key) > 0 && key[0] == 'a' {
		return Everywhere
	}
	return r.byParity.Key(key, value)
}

// Keys of both places come out of one iterator in key order, forward and
// backward, a key kept everywhere once; each place holds its keys only.
func TestKeysOfBothPlacesMergeInOrderOnce(t *testing.T) {
	ctx := t.Context()
	a, b := memory.NewShared(), memory.NewShared()
	s := New(a, b)
	s.SetRouter(everywhereA{})
	want := []string{"a", "b1", "b2", "b3", "c1", "c2"}
	for _, k := range want {
		bt := s.NewBatch()
		if err := bt.Set([]byte(k), []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
		if err := bt.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, reverse := range []bool{false, true} {
		it, err := s.NewIterator(ctx, nil, nil, reverse)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for it.Next() {
			if string(it.Value()) != "v"+string(it.Key()) {
				t.Fatalf("%s holds %s", it.Key(), it.Value())
			}
			got = append(got, string(it.Key()))
		}
		it.Close()
		w := slices.Clone(want)
		if reverse {
			slices.Reverse(w)
		}
		if !slices.Equal(got, w) {
			t.Errorf("reverse=%v: %v, want %v", reverse, got, w)
		}
	}
	for i, p := range []storage.Store{a, b} {
		for _, k := range want {
			_, err := p.Get(ctx, []byte(k))
			if in := err == nil; in != (k == "a" || int(k[len(k)-1]%2) == i) {
				t.Errorf("place %d holds %s: %v", i, k, in)
			}
		}
	}
}

// A place's numbers stay above what RaiseFloor was given, keep rising, and
// its watermark covers only what committed.
func TestRaisedFloorLiftsAPlacesNumbers(t *testing.T) {
	ctx := t.Context()
	s := New(memory.NewShared(), memory.NewShared())
	seq := func() uint64 {
		b, err := s.Place(1).NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.Begin(ctx, nil, nil, true); err != nil {
			t.Fatal(err)
		}
		n, err := b.Sequence(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n%2 != 1 {
			t.Fatalf("place 1 numbered %d", n)
		}
		return n
	}
	before := seq()
	if err := s.RaiseFloor(ctx, 1, 1_000_001); err != nil {
		t.Fatal(err)
	}
	after := seq()
	if after <= 1_000_001 || after <= before {
		t.Fatalf("numbers %d then %d after raising the floor above 1000001", before, after)
	}
	w, err := s.Place(1).Watermark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w <= after || w > after+4 {
		t.Fatalf("watermark %d after %d, want just above it", w, after)
	}
	if next := seq(); next <= after {
		t.Fatalf("number %d after %d", next, after)
	}
}

// Through a Store over two places, two openers of the same places share
// locks, sequence numbers and watermarks as one shared store.
func TestTwoPlacesActAsOneSharedStore(t *testing.T) {
	storagetest.RunShared(t, func(t *testing.T) (storage.Shared, storage.Shared, func(storage.Shared)) {
		a, b := memory.NewShared(), memory.NewShared()
		return twoPlaces(a, b), twoPlaces(a.Open(), b.Open()), func(s storage.Shared) {
			for _, p := range s.(*Store).places {
				p.(*memory.SharedStore).Sever()
			}
		}
	})
}
