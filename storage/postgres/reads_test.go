package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// A point read (GetAll of the catalog version and an item, as the engine
// reads an item) allocates what it returns (the values' slice and a copy
// of each value found) and the watch of its caller's context, nothing per
// round trip besides: its trip, reader and parameters are reused.
func TestPointReadAllocatesItsValuesAndItsCallersWatchOnly(t *testing.T) {
	s := open(t, pgtest.URL(t))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := s.NewBatch()
	b.Set([]byte("version"), []byte("1"))
	b.Set([]byte("item"), []byte(`{"id":"item"}`))
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	keys := [][]byte{[]byte("version"), []byte("item")}
	read := func() {
		values, _, err := s.GetAll(ctx, keys)
		if err != nil || string(values[0]) != "1" || string(values[1]) != `{"id":"item"}` {
			t.Fatalf("GetAll: %q, %v", values, err)
		}
	}
	read() // the statement is prepared on the connection
	// The values' slice, two values, the watch of ctx (context.AfterFunc's
	// registration with it and its stop function); ten before the trip,
	// its reader and the keys' array were reused.
	const want = 5
	if n := testing.AllocsPerRun(200, read); n > want {
		t.Errorf("a point read allocates %v times, want at most %v", n, want)
	}
}

// A read of many keys (more than the few compared one by one) puts each
// value at every place its key has in the keys, repeated or not, and
// leaves absent keys nil, in a snapshot and in a shared batch alike.
func TestAReadOfManyKeysPlacesEachValueAtEveryPlaceOfItsKey(t *testing.T) {
	s := open(t, pgtest.URL(t))
	defer s.Close()
	ctx := t.Context()
	b := s.NewBatch()
	for i := range 10 {
		b.Set(fmt.Appendf(nil, "many/%02d", i), fmt.Appendf(nil, "value %d", i))
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	var want []string
	for _, i := range []int{3, 0, 3, 11, 9, 7, 3, 12, 1, 9, 5, 11, 2} {
		keys = append(keys, fmt.Appendf(nil, "many/%02d", i))
		if i < 10 {
			want = append(want, fmt.Sprintf("value %d", i))
		} else {
			want = append(want, "") // absent: nil
		}
	}
	check := func(name string, values [][]byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(values) != len(want) {
			t.Fatalf("%s: %d values for %d keys", name, len(values), len(want))
		}
		for i, v := range values {
			if want[i] == "" && v != nil || want[i] != "" && string(v) != want[i] {
				t.Errorf("%s: %s = %q, want %q", name, keys[i], v, want[i])
			}
		}
	}
	snap, err := s.NewSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	values, err := snap.(storage.MultiGetter).GetMany(ctx, keys)
	check("snapshot", values, err)
	snap.Close()
	sb, err := s.NewSharedBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	values, err = sb.(storage.MultiGetter).GetMany(ctx, keys)
	check("shared batch", values, err)
}
