package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/placed"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// storageEnv picks the store of the tests' engines: memory, shared
// (memory.NewShared), postgres, or (unset) every pass, one after the other
// (TestMain).
const storageEnv = "ORRERY_TEST_STORAGE"

// testOnPostgres is set by TestMain for the PostgreSQL pass, testOnShared
// for the pass on shared memory storage.
var testOnPostgres, testOnShared bool

// testOnPlaced is set for the pass on a store over two places
// (storage/placed over two shared memory stores): ranges on two
// databases.
var testOnPlaced bool

// newPlacedTest is a store over two fresh shared memory places, and open,
// which opens another handle on the same places.
func newPlacedTest(t testing.TB) (storage.Shared, func() storage.Shared) {
	a, b := memory.NewShared(), memory.NewShared()
	s := placed.New(a, b)
	t.Cleanup(func() { s.Close() })
	return s, func() storage.Shared {
		o := placed.New(a.Open(), b.Open())
		t.Cleanup(func() { o.Close() })
		return o
	}
}

// newTestStore returns the store a test's engine runs on: memory storage
// in the first pass, a PostgreSQL store on a database of the test's own in
// the second. It is closed when the test ends (closing it earlier too is
// fine).
func newTestStore(t testing.TB) storage.Store {
	t.Helper()
	if testOnPlaced {
		s, _ := newPlacedTest(t)
		return s
	}
	if testOnShared {
		s := memory.NewShared()
		t.Cleanup(func() { s.Close() })
		return s
	}
	if !testOnPostgres {
		s := memory.New()
		t.Cleanup(func() { s.Close() })
		return s
	}
	url := pgtest.URL(t)
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatalf("opening PostgreSQL store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// skipOnPostgres leaves a test out of the PostgreSQL pass; why says what
// makes it a test of the single-process embedded store only.
func skipOnPostgres(t testing.TB, why string) {
	t.Helper()
	if testOnPostgres || testOnShared || testOnPlaced {
		t.Skipf("memory pass only: %s", why)
	}
}

// skipOnPlaced leaves a test out of the pass over two places; why says
// what it assumes of one database's numbers.
func skipOnPlaced(t testing.TB, why string) {
	t.Helper()
	if testOnPlaced {
		t.Skipf("one database only: %s", why)
	}
}

// NewTestStore and SkipOnPostgres are newTestStore and skipOnPostgres for
// the package's external tests (package engine_test).
var (
	NewTestStore   = newTestStore
	SkipOnPostgres = skipOnPostgres
)

// holdLSN opens a write transaction in logical partition pk of container
// coll of database "db" that takes its LSN and stays open, as a slow
// writer's would, until release (or the test's end): on memory storage an
// LSN of the engine's sequencer, on PostgreSQL a transaction id of an open
// transaction. It returns the LSN.
func holdLSN(t testing.TB, e *Engine, coll, pk string) (lsn uint64, release func()) {
	ctx := t.Context()
	t.Helper()
	c, err := e.Container(ctx, "db", coll)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan uint64, 1)
	ended := make(chan error, 1)
	free := make(chan struct{})
	go func() {
		ended <- e.seam.inPartition(ctx, c, StringKey(pk), nil, txnFunc(func(tx *txn) error {
			if err := tx.allocate(ctx); err != nil {
				return err
			}
			held <- tx.lsn
			<-free
			return nil
		}))
	}()
	select {
	case lsn = <-held:
	case err := <-ended:
		t.Fatalf("holding an LSN: %v", err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(free)
			if err := <-ended; err != nil {
				t.Errorf("the transaction holding LSN %d: %v", lsn, err)
			}
		})
	}
	t.Cleanup(release)
	return lsn, release
}

// forEngine returns s for an engine to open: on a shared store (the
// PostgreSQL pass) a wrapper that is shared too, so that the engine takes
// its shared path, and counts the shared batches' commits as well.
func (s *countingStore) forEngine() storage.Store {
	sh, ok := s.Store.(storage.Shared)
	if !ok {
		return s
	}
	return &countingShared{countingStore: s, shared: sh}
}

type countingShared struct {
	*countingStore
	shared storage.Shared
}

func (s *countingShared) NewSharedBatch(ctx context.Context) (storage.SharedBatch, error) {
	b, err := s.shared.NewSharedBatch(ctx)
	if err != nil {
		return nil, err
	}
	return &countingSharedBatch{SharedBatch: b, c: countingBatch{Batch: b, s: s.countingStore}}, nil
}

func (s *countingShared) Watermark(ctx context.Context) (uint64, error) {
	return s.shared.Watermark(ctx)
}

func (s *countingShared) Lead(ctx context.Context, duty string) (<-chan struct{}, func(), error) {
	return s.shared.Lead(ctx, duty)
}

// NextSequence passes on the store's numbering outside batches, which the
// engine looks for (sequenceSource).
func (s *countingShared) NextSequence(ctx context.Context) (uint64, error) {
	if src, ok := s.shared.(sequenceSource); ok {
		return src.NextSequence(ctx)
	}
	b, err := s.shared.NewSharedBatch(ctx)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	return b.Sequence(ctx)
}

type countingSharedBatch struct {
	storage.SharedBatch
	c countingBatch
}

func (b *countingSharedBatch) Commit(ctx context.Context) error {
	b.c.note()
	return b.SharedBatch.Commit(ctx)
}

func (b *countingSharedBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	b.c.note()
	return b.SharedBatch.CommitPipelined(ctx)
}

// newTestShared returns a shared store for tests of several engines as
// gateways, and open, which opens another handle of it (another gateway's
// connection): in-process shared memory storage in the first pass, a
// PostgreSQL database of the test's own in the second. Every handle is
// closed when the test ends.
func newTestShared(t testing.TB) (store storage.Shared, open func() storage.Shared) {
	t.Helper()
	if testOnPlaced {
		return newPlacedTest(t)
	}
	if !testOnPostgres {
		s := memory.NewShared()
		t.Cleanup(func() { s.Close() })
		return s, func() storage.Shared {
			o := s.Open()
			t.Cleanup(func() { o.Close() })
			return o
		}
	}
	url := pgtest.URL(t)
	open = func() storage.Shared {
		s, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatalf("opening PostgreSQL store: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open
}
