package postgres_test

import (
	"context"
	"testing"

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
