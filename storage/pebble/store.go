package pebble

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/orrery-db/orrery/storage"
)

// Sizes chosen for a small machine: the block cache and the memtables are the
// bulk of a store's memory, and both are only touched as they fill. Reads that
// miss the block cache still hit the operating system's page cache.
const (
	// DefaultCacheSize is the block cache size when Options.CacheSize is 0:
	// room for blocks of tables, besides the memtables (see cacheFor).
	DefaultCacheSize = 32 << 20
	// DefaultMemTableSize is the memtable size when Options.MemTableSize is 0.
	DefaultMemTableSize = 16 << 20
	// indexBlockSize is the size a table's index block may reach before
	// Pebble splits it into a two-level index (see Open).
	indexBlockSize = 256 << 10
)

// ownerFile names, in the data directory, the file holding the process id
// of the process that has the store open.
const ownerFile = "owner.pid"

// Options configures Open.
type Options struct {
	// NoSync makes Commit return once the batch is in the write-ahead log,
	// without waiting for an fsync: a crash of the machine (not of the
	// process) may lose the last commits. For tests and throwaway data.
	NoSync bool
	// InMemory keeps every file in memory instead of under dir, which is
	// then only a name. Nothing survives Close. For tests.
	InMemory bool
	// CacheSize is the block cache size in bytes (DefaultCacheSize if 0),
	// for blocks of tables: the memtables' memory comes on top.
	CacheSize int64
	// MemTableSize is the size in bytes of one memtable
	// (DefaultMemTableSize if 0).
	MemTableSize uint64
	// WALMinSyncInterval is the least time between two syncs of the
	// write-ahead log while commits are concurrent (Pebble's
	// Options.WALMinSyncInterval): a commit that asks for a sync sooner
	// after the previous one waits for the rest of the interval, so that
	// the commits arriving meanwhile share its sync. It applies after a
	// sync only when more than one commit was waiting for a sync as it
	// ended (see Store.minSyncInterval): a lone writer's commits sync at
	// once. Every commit still returns only once it is synced. 0 (the
	// default): every sync at once. It trades latency under concurrent
	// writes for CPU: in BenchmarkCommitPipelined (32 writers) 0.5 ms
	// halved the syncs per commit and cut the CPU per commit by ~15%, and
	// the commits per second by ~37%.
	WALMinSyncInterval time.Duration
	// Logger receives Pebble's messages: informational ones at debug level,
	// errors at error level. Nil discards them.
	Logger *slog.Logger

	// fs, when set, replaces the file system (tests count its fsyncs).
	fs vfs.FS
	// dirCheck is how often the store checks that its directory is still
	// there (dirCheckInterval when 0, never when negative).
	dirCheck time.Duration
	// tune, when set, adjusts Pebble's options before Open (benchmarks
	// compare settings with it).
	tune func(*pebbledb.Options)
}

// memTablesReserved is how many memtables Pebble holds at most before writes
// wait (its MemTableStopWritesThreshold), so how many memtables' sizes it may
// hold reserved in its block cache at once: one filling and one flushing or
// kept for reuse.
const memTablesReserved = 2

// cacheFor is the cache size to give Pebble for a block cache of blocks
// bytes beside memtables of memTableSize bytes. Pebble reserves each
// memtable's size in its block cache, so a cache the size of the memtables
// leaves no room for blocks: every read of a table then reads its index,
// filter and data blocks from the file and decompresses them again (at
// 32 MiB for both, 19% of block lookups hit under a load of upserts).
func cacheFor(blocks int64, memTableSize uint64) int64 {
	return blocks + memTablesReserved*int64(memTableSize)
}

// dirCheckInterval is how often a store on disk checks that its directory
// has not been removed or replaced under it.
const dirCheckInterval = time.Second

// Store is a storage.Store on a Pebble database. It is safe for concurrent
// use.
type Store struct {
	db    *pebbledb.DB
	write *pebbledb.WriteOptions

	// mu guards closed: every operation holds it shared, so Close waits for
	// the ones in flight and later ones fail with storage.ErrClosed instead of
	// reaching a closed database.
	mu     sync.RWMutex
	closed bool

	stalls *stalls
	// failure is the error (wrapping storage.ErrUnavailable) the store
	// failed with, nil while it works; failed is closed when it is set.
	failure  atomic.Pointer[error]
	failed   chan struct{}
	failOnce sync.Once
	opened   atomic.Bool // Open has returned the store
	// syncWaiters is the number of commits that asked for a sync and have
	// not yet seen it end (see minSyncInterval), counted only when
	// spacedSyncs (Options.WALMinSyncInterval set): nothing else reads it.
	syncWaiters atomic.Int64
	spacedSyncs bool
	stop        chan struct{} // closed by Close: ends the directory check
}

var _ storage.Store = (*Store)(nil)

// Open opens the database in dir, creating it if it does not exist.
func Open(dir string, opts Options) (*Store, error) {
	fs := opts.fs
	switch {
	case fs != nil:
	case opts.InMemory:
		fs = vfs.NewMem()
	default:
		fs = vfs.Default
	}
	cacheSize := opts.CacheSize
	if cacheSize <= 0 {
		cacheSize = DefaultCacheSize
	}
	memTableSize := opts.MemTableSize
	if memTableSize == 0 {
		memTableSize = DefaultMemTableSize
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{failed: make(chan struct{}), stop: make(chan struct{}), stalls: &stalls{}}
	pfs := fs
	if !opts.InMemory || opts.fs != nil {
		// Logs written ahead with zeros: a sync then carries no new file
		// size (see walFile).
		pfs = walFS{FS: fs}
	}
	popts := &pebbledb.Options{
		FS:           pfs,
		CacheSize:    cacheFor(cacheSize, memTableSize),
		MemTableSize: memTableSize,
		// At most two memtables (one filling, one flushing) before writes
		// wait: bounds memory under a burst of writes.
		MemTableStopWritesThreshold: memTablesReserved,
		Logger:                      slogLogger{l: logger, fail: s.fail},
		FormatMajorVersion:          pebbledb.FormatNewest,
		// One compaction at a time: a small machine has few cores to spare.
		CompactionConcurrencyRange: func() (int, int) { return 1, 1 },
	}
	if d := opts.WALMinSyncInterval; d > 0 {
		s.spacedSyncs = true
		popts.WALMinSyncInterval = func() time.Duration { return s.minSyncInterval(d) }
	}
	el := s.stalls.listener()
	popts.EventListener = &el
	popts.Experimental.FileCacheShards = 2
	// Bloom filters on every level but the last: creates and point reads of
	// keys that do not exist (every create checks its id first) then skip
	// most tables. Pebble's Get never reads a last-level table's filter
	// (only iterators asking for them do, and the store opens none), so
	// the last level has none: every compaction into it would build one
	// for nothing.
	//
	// One index block per table up to tables of about 30 MB (the store's
	// are a few MB: Pebble's target is 2 MB in L0, 4 MB in the first level
	// it compacts into) rather than Pebble's two-level index past 4 KB of
	// index: a Get then looks up one index block per table it reads, not
	// two (BenchmarkItemGet: one block cache lookup fewer per table).
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		popts.Levels[i].IndexBlockSize = indexBlockSize
	}
	popts.Levels[len(popts.Levels)-1].FilterPolicy = pebbledb.NoFilterPolicy
	if opts.tune != nil {
		opts.tune(popts)
	}
	db, err := pebbledb.Open(dir, popts)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		// Another process holds the directory's lock: say which, when it
		// left its process id.
		owner := "another process"
		if pid, rerr := os.ReadFile(filepath.Join(dir, ownerFile)); rerr == nil {
			owner = "PID " + strings.TrimSpace(string(pid))
		}
		return nil, fmt.Errorf("storage/pebble: the data directory %s is in use by %s", dir, owner)
	}
	if err != nil {
		return nil, fmt.Errorf("storage/pebble: opening %s: %w", dir, err)
	}
	if fs == vfs.Default {
		// Best effort: only the message above reads it.
		_ = os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	}
	s.db, s.write = db, pebbledb.Sync
	if opts.NoSync {
		s.write = pebbledb.NoSync
	}
	if opts.fs == nil && !opts.InMemory && opts.dirCheck >= 0 {
		if err := s.watchDir(dir, cmp.Or(opts.dirCheck, dirCheckInterval)); err != nil {
			db.Close()
			return nil, err
		}
	}
	s.opened.Store(true)
	return s, nil
}

// waitingForSync counts a commit that asks for a sync (+1) or has seen it
// end (-1), when the store spaces its syncs (see minSyncInterval).
func (s *Store) waitingForSync(delta int64) {
	if s.spacedSyncs {
		s.syncWaiters.Add(delta)
	}
}

// minSyncInterval is the least time from a sync of the write-ahead log,
// which has just ended, to the next: d when commits are concurrent (more
// than one asked for a sync and has not yet seen it end: those arriving
// within d will share the next sync), else 0 (a lone writer's next commit
// syncs at once, as waiting would gather nobody). Pebble calls it after
// each sync, from the goroutine that syncs, before the commits the sync
// held count themselves done: a lone writer's commit is the one waiter.
func (s *Store) minSyncInterval(d time.Duration) time.Duration {
	if s.syncWaiters.Load() < 2 {
		return 0
	}
	return d
}

// watchDir fails the store when dir is removed or replaced: Pebble would
// go on writing to files no longer reachable, and fail (see
// slogLogger.Fatalf) only at its next new file.
func (s *Store) watchDir(dir string, every time.Duration) error {
	orig, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("storage/pebble: %w", err)
	}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-s.failed:
				return
			case <-tick.C:
			}
			if now, err := os.Stat(dir); err != nil || !os.SameFile(orig, now) {
				s.fail(fmt.Errorf("the data directory %s was removed or replaced", dir))
				return
			}
		}
	}()
	return nil
}

// fail marks the store failed with cause, once: from then on every
// operation returns an error wrapping storage.ErrUnavailable. It reports
// whether Open had returned the store.
func (s *Store) fail(cause error) bool {
	s.failOnce.Do(func() {
		err := fmt.Errorf("%w: %w", storage.ErrUnavailable, cause)
		s.failure.Store(&err)
		close(s.failed)
	})
	return s.opened.Load()
}

// Failed is closed when the store has failed beyond repair (Err says why).
// Pebble's state is then unknown and one of its goroutines may be parked
// for good: the process should stop, without Close.
func (s *Store) Failed() <-chan struct{} { return s.failed }

// Err is the error the store failed with (wrapping storage.ErrUnavailable),
// nil while it works.
func (s *Store) Err() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// acquire holds the store open until release; it fails once it is closed
// or has failed.
func (s *Store) acquire() error {
	if err := s.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return storage.ErrClosed
	}
	if err := s.Err(); err != nil {
		s.mu.RUnlock()
		return err
	}
	return nil
}

// orFail runs op, a call into Pebble that may wait behind a writer parked by
// Fatalf, and returns its error, or the store's failure as soon as the store
// fails; op is then abandoned to Pebble (abandoned is true) and what it uses
// must not be released.
func (s *Store) orFail(op func() error) (err error, abandoned bool) {
	if err := s.Err(); err != nil {
		return err, false
	}
	done := make(chan error, 1)
	go func() { done <- op() }()
	err, abandoned = await(s, done)
	if abandoned {
		return s.Err(), true
	}
	return err, false
}

// await returns what a goroutine calling into Pebble sends on done, or
// abandoned as soon as s fails first (see orFail).
func await[T any](s *Store, done <-chan T) (v T, abandoned bool) {
	select {
	case v := <-done:
		return v, false
	case <-s.failed:
		select {
		case v := <-done:
			return v, false
		default:
			return v, true
		}
	}
}

// failWith marks the store failed by a write that Pebble could not apply or
// make durable (after a failed fsync nothing it wrote can be trusted) and
// returns the store's failure.
func (s *Store) failWith(op string, err error) error {
	s.fail(fmt.Errorf("%s: %w", op, err))
	return s.Err()
}

func (s *Store) release() { s.mu.RUnlock() }

// getter is what Get needs of a Pebble database, batch or snapshot.
type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// getCopy reads key from g and returns a copy of its value.
func getCopy(g getter, key []byte) ([]byte, error) {
	v, closer, err := g.Get(key)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage/pebble: get: %w", err)
	}
	out := make([]byte, len(v))
	copy(out, v)
	return out, closer.Close()
}

// Get returns a copy of the value stored under key, or storage.ErrNotFound.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := usable(ctx, s.acquire); err != nil {
		return nil, err
	}
	defer s.release()
	return getCopy(s.db, key)
}

// iterable is what NewIterator needs of a Pebble database, batch or snapshot.
type iterable interface {
	NewIter(o *pebbledb.IterOptions) (*pebbledb.Iterator, error)
}

// NewIterator iterates over a consistent view of the committed keys in
// [lower, upper).
func (s *Store) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if err := usable(ctx, s.acquire); err != nil {
		return nil, err
	}
	defer s.release()
	return newIterator(s.db, lower, upper, reverse)
}

// NewBatch starts a batch, which reads its own writes over the store's
// latest committed state (indexed when it first needs to be: see batch).
func (s *Store) NewBatch() storage.Batch {
	if err := s.acquire(); err != nil {
		return &batch{store: s} // every use but Close fails with storage.ErrClosed
	}
	defer s.release()
	return &batch{store: s, b: s.db.NewBatch()}
}

// NewSnapshot returns a consistent view of the store as it is now.
func (s *Store) NewSnapshot(ctx context.Context) (storage.Snapshot, error) {
	if err := usable(ctx, s.acquire); err != nil {
		return nil, err
	}
	defer s.release()
	return &snapshot{store: s, snap: s.db.NewSnapshot()}, nil
}

// Close flushes and closes the database. Batches, snapshots and iterators
// must be closed first.
//
// Close of a failed store returns its failure and closes nothing: Pebble
// cannot be closed in an unknown state.
func (s *Store) Close() error {
	if err := s.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	s.closed = true
	close(s.stop)
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("storage/pebble: close: %w", err)
	}
	return nil
}

// snapshot is a storage.Snapshot on a Pebble snapshot; snap is nil once
// closed.
type snapshot struct {
	store *Store
	mu    sync.RWMutex
	snap  *pebbledb.Snapshot
}

// Get returns a copy of the value under key as of the snapshot.
func (s *snapshot) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := usable(ctx, s.store.acquire); err != nil {
		return nil, err
	}
	defer s.store.release()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.snap == nil {
		return nil, storage.ErrClosed
	}
	return getCopy(s.snap, key)
}

// NewIterator iterates over the snapshot's keys in [lower, upper).
func (s *snapshot) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if err := usable(ctx, s.store.acquire); err != nil {
		return nil, err
	}
	defer s.store.release()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.snap == nil {
		return nil, storage.ErrClosed
	}
	return newIterator(s.snap, lower, upper, reverse)
}

// Close releases the snapshot.
func (s *snapshot) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return storage.ErrClosed
	}
	snap := s.snap
	s.snap = nil
	if err := snap.Close(); err != nil {
		return fmt.Errorf("storage/pebble: closing snapshot: %w", err)
	}
	return nil
}
