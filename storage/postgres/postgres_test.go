package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
	"github.com/orrery-db/orrery/storage/storagetest"
)

// TestMain stops pgtest's shared server when the tests end.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return open(t, pgtest.URL(t)) })
}

// A range longer than a page is read whole, in order, both ways, and within
// bounds that fall between keys.
func TestIteratorReadsRangesLongerThanAPage(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgtest.URL(t))
	defer s.Close()
	const n = 1000
	b := s.NewBatch()
	for i := range n {
		if err := b.Set(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "v%d", i)); err != nil {
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
	for _, r := range []storage.Reader{s, snap} {
		for _, reverse := range []bool{false, true} {
			it, err := r.NewIterator(ctx, []byte("k0010"), []byte("k0990x"), reverse)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for it.Next() {
				keys = append(keys, string(it.Key()))
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			it.Close()
			if len(keys) != 981 {
				t.Fatalf("reverse=%v: %d keys, want 981", reverse, len(keys))
			}
			for i, k := range keys {
				want := 10 + i
				if reverse {
					want = 990 - i
				}
				if k != fmt.Sprintf("k%04d", want) {
					t.Fatalf("reverse=%v: key %d is %q, want k%04d", reverse, i, k, want)
				}
			}
		}
	}
}

// A database written by a newer version is refused at Open with an error
// that says so; one at the current version opens.
func TestOpenRefusesANewerSchema(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url)
	if _, err := s.Pool().Exec(context.Background(), `UPDATE orrery_meta SET value = $1 WHERE name = 'schema_version'`, fmt.Sprint(postgres.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want an error about a newer schema", err)
	}
	fresh := pgtest.URL(t)
	for range 2 { // created, then found at the current version
		open(t, fresh).Close()
	}
}

func TestSharedConformance(t *testing.T) {
	storagetest.RunShared(t, func(t *testing.T) (storage.Shared, storage.Shared, func(storage.Shared)) {
		url := pgtest.URL(t)
		a, b := open(t, url), open(t, url)
		return a, b, func(s storage.Shared) {
			pgtest.Terminate(t, url, s.(*postgres.Store).LeadPIDs())
		}
	})
}

// smallPool opens a store with a pool of four connections, closed with the
// test, holding 600 keys k0000…k0599: more than a page of an iterator.
func smallPool(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := s.NewBatch()
	for i := range 600 {
		b.Set(fmt.Appendf(nil, "k%04d", i), []byte("v"))
	}
	if err := b.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// Shared batches and snapshots hold connections only up to a bound below
// the pool's size: with every slot taken, point reads and long ranges still
// run (they use the reserve or the batch's own connection), and another
// batch waits for a slot rather than for the pool.
func TestHeldConnectionsLeaveReadsAConnection(t *testing.T) {
	ctx := t.Context()
	s := smallPool(t)
	var held []storage.SharedBatch
	for range 2 {
		sb, err := s.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		held = append(held, sb)
	}
	for _, sb := range held {
		if err := sb.Lock(ctx, []byte(fmt.Sprint(sb)), true); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, []byte("k0001")); err != nil {
			t.Fatalf("a point read with every slot held: %v", err)
		}
		sb.Set([]byte("k0500x"), []byte("mine"))
		it, err := sb.NewIterator(ctx, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.Next() {
			n++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		if n != 601 {
			t.Fatalf("a shared batch's scan over three pages saw %d keys, want 601", n)
		}
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := s.NewSharedBatch(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third shared batch with two slots: %v, want to wait until its deadline", err)
	}
	held[0].Close()
	sb, err := s.NewSharedBatch(ctx)
	if err != nil {
		t.Fatalf("a shared batch after one closed: %v", err)
	}
	sb.Close()
}

// While the server is stopped every operation fails with
// storage.ErrUnavailable, transient: once it is back the same store
// serves again, its pool connecting anew, with every commit kept.
func TestAStoppedServerIsUnavailableThenServesAgain(t *testing.T) {
	pg := pgtest.NewServer(t, pgtest.Options{})
	s := open(t, pg.URL(t))
	defer s.Close()
	ctx := context.Background()
	b := s.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pg.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	checks := map[string]func() error{
		"Get": func() error { _, err := s.Get(ctx, []byte("k")); return err },
		"NewIterator": func() error {
			it, err := s.NewIterator(ctx, nil, nil, false)
			if err == nil {
				it.Close()
			}
			return err
		},
		"Commit": func() error {
			b := s.NewBatch()
			b.Set([]byte("k2"), []byte("v"))
			return b.Commit(ctx)
		},
		"NewSharedBatch and Lock": func() error {
			sb, err := s.NewSharedBatch(ctx)
			if err != nil {
				return err
			}
			defer sb.Close()
			return sb.Lock(ctx, []byte("x"), true)
		},
		"Watermark": func() error { _, err := s.Watermark(ctx); return err },
		"NewSnapshot": func() error {
			snap, err := s.NewSnapshot(ctx)
			if err == nil {
				snap.Close()
			}
			return err
		},
	}
	for name, check := range checks {
		if err := check(); !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("%s with the server stopped: %v, want storage.ErrUnavailable", name, err)
		}
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	var v []byte
	var err error
	for range 20 { // a pooled connection from before may fail once
		if v, err = s.Get(ctx, []byte("k")); !errors.Is(err, storage.ErrUnavailable) {
			break
		}
	}
	if err != nil || string(v) != "v" {
		t.Fatalf("Get after the server came back: %q, %v; want \"v\"", v, err)
	}
}

// acquiredWithin waits up to a bound for the pool to have at most want
// connections in use, collecting garbage meanwhile when gc is set, and
// returns how many are.
func acquiredWithin(s *postgres.Store, want int32, gc bool) int32 {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if gc {
			runtime.GC()
		}
		n := s.Pool().Stat().AcquiredConns()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An iterator of the store holds a connection only while it has pages left
// to read in its snapshot: none for a range that fits in a page, one for a
// longer range until it is read to its end, fails or is closed, and none
// once an iterator that was never closed is garbage collected; a pool of
// four connections serves any number of such iterators one after another.
func TestIteratorsGiveBackTheirConnections(t *testing.T) {
	ctx := t.Context()
	s := smallPool(t)
	long := func(t *testing.T) storage.Iterator {
		t.Helper()
		it, err := s.NewIterator(ctx, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if !it.Next() {
			t.Fatalf("an empty range: %v", it.Err())
		}
		return it
	}

	it, err := s.NewIterator(ctx, []byte("k0010"), []byte("k0020"), false)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Pool().Stat().AcquiredConns(); n != 0 {
		t.Errorf("an open iterator over one page holds %d connections, want 0", n)
	}
	it.Close()

	it = long(t)
	if n := s.Pool().Stat().AcquiredConns(); n != 1 {
		t.Errorf("an open iterator over three pages holds %d connections, want 1", n)
	}
	for it.Next() {
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if n := s.Pool().Stat().AcquiredConns(); n != 0 {
		t.Errorf("an iterator read to its end, not closed yet, holds %d connections, want 0", n)
	}
	it.Close()

	long(t).Close()
	if n := s.Pool().Stat().AcquiredConns(); n != 0 {
		t.Errorf("an iterator closed after its first key holds %d connections, want 0", n)
	}

	start := time.Now()
	for i := range 8 { // twice the pool
		long(t) // never closed: a leak of its user
		if n := acquiredWithin(s, 0, true); n != 0 {
			t.Fatalf("after leaking iterator %d and collecting garbage, %d connections are still held", i, n)
		}
	}
	t.Logf("8 leaked iterators given back in %v", time.Since(start))
	if _, err := s.Get(ctx, []byte("k0001")); err != nil {
		t.Fatalf("a point read after the leaks: %v", err)
	}
}
