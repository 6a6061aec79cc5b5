package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres"
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

// Point reads beyond the few round trips in flight that the store allows
// wait and go together, in one statement and one round trip, each read
// answered with its own keys' values (an absent key nil, a key two reads
// share given to both); a read whose caller goes away while it waits
// returns at once, with its context's error, and leaves the others'
// answers whole.
func TestPointReadsBeyondTheRoundTripsInFlightShareOne(t *testing.T) {
	// settle lets goroutines reach the call they block in; patience
	// bounds every wait that must end (long, for a loaded machine).
	const settle, patience = 300 * time.Millisecond, 30 * time.Second
	ctx := t.Context()
	raw := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, raw))
	s, err := postgres.Open(context.Background(), proxy.URL(t, raw), postgres.Options{MaxConns: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	b.Set([]byte("version"), []byte("7"))
	for i := range 40 {
		b.Set(fmt.Appendf(nil, "item/%02d", i), fmt.Appendf(nil, "value %d", i))
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// More reads than any machine's round trips in flight (the store's
	// bound is the gateway's CPUs, at least two).
	reads := max(2, runtime.GOMAXPROCS(0)) + 12
	type answer struct {
		values [][]byte
		err    error
	}
	answers := make([]chan answer, reads)
	gone, leave := context.WithCancel(ctx)
	defer leave()
	leaver := reads - 1 // the last read's caller goes away while it waits
	proxy.StartLog()
	proxy.SetBlocked(true)
	for i := range reads {
		answers[i] = make(chan answer, 1)
		keys := [][]byte{[]byte("version"), fmt.Appendf(nil, "item/%02d", i), []byte("absent")}
		rctx := ctx
		if i == leaver {
			rctx = gone
		}
		go func() {
			values, _, err := s.GetAll(rctx, keys)
			answers[i] <- answer{values, err}
		}()
		if i == 0 {
			time.Sleep(settle) // the first reads hold the round trips in flight
		}
	}
	time.Sleep(settle) // every read waits, in flight or in a group
	leave()
	select {
	case a := <-answers[leaver]:
		if !errors.Is(a.err, context.Canceled) {
			t.Fatalf("the read whose caller went away returned %q, %v, want context.Canceled", a.values, a.err)
		}
	case <-time.After(patience):
		t.Fatal("the read whose caller went away did not return")
	}
	proxy.SetBlocked(false)
	for i := range reads {
		if i == leaver {
			continue
		}
		var a answer
		select {
		case a = <-answers[i]:
		case <-time.After(patience):
			t.Fatalf("read %d did not return", i)
		}
		want := fmt.Sprintf("value %d", i)
		if a.err != nil || len(a.values) != 3 || string(a.values[0]) != "7" || string(a.values[1]) != want || a.values[2] != nil {
			t.Fatalf("read %d: %q, %v, want [7 %q nil]", i, a.values, a.err, want)
		}
	}
	statements := 0
	for _, trip := range proxy.Log() {
		for _, st := range trip.Statements {
			if strings.Contains(st, "WITH ORDINALITY") {
				statements++
			}
		}
	}
	if statements == 0 || statements >= reads {
		t.Errorf("%d point reads sent %d statements, want fewer (the reads beyond those in flight together)", reads, statements)
	}
}
