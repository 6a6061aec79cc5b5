package pebble

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/orrery-db/orrery/storage"
)

// Sizes chosen for a small machine: the block cache and the memtables are the
// bulk of a store's memory, and both are only touched as they fill. Reads that
// miss the block cache still hit the operating system's page cache.
const (
	// DefaultCacheSize is the block cache size when Options.CacheSize is 0.
	DefaultCacheSize = 32 << 20
	// DefaultMemTableSize is the memtable size when Options.MemTableSize is 0.
	DefaultMemTableSize = 16 << 20
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
	// CacheSize is the block cache size in bytes (DefaultCacheSize if 0).
	CacheSize int64
	// MemTableSize is the size in bytes of one memtable
	// (DefaultMemTableSize if 0).
	MemTableSize uint64
	// Logger receives Pebble's messages: informational ones at debug level,
	// errors at error level. Nil discards them.
	Logger *slog.Logger

	// fs, when set, replaces the file system (tests count its fsyncs).
	fs vfs.FS
}

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
	popts := &pebbledb.Options{
		FS:           fs,
		CacheSize:    cacheSize,
		MemTableSize: memTableSize,
		// At most two memtables (one filling, one flushing) before writes
		// wait: bounds memory under a burst of writes.
		MemTableStopWritesThreshold: 2,
		Logger:                      slogLogger{logger},
		FormatMajorVersion:          pebbledb.FormatNewest,
		// One compaction at a time: a small machine has few cores to spare.
		CompactionConcurrencyRange: func() (int, int) { return 1, 1 },
	}
	st := &stalls{}
	el := st.listener()
	popts.EventListener = &el
	popts.Experimental.FileCacheShards = 2
	// Bloom filters on every level: creates and point reads of keys that do
	// not exist (every create checks its id first) then skip most tables.
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
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
	write := pebbledb.Sync
	if opts.NoSync {
		write = pebbledb.NoSync
	}
	return &Store{db: db, write: write, stalls: st}, nil
}

// acquire holds the store open until release; it fails once it is closed.
func (s *Store) acquire() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return storage.ErrClosed
	}
	return nil
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
func (s *Store) Get(key []byte) ([]byte, error) {
	if err := s.acquire(); err != nil {
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
func (s *Store) NewIterator(lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	return newIterator(s.db, lower, upper, reverse)
}

// NewBatch starts an indexed batch, which reads its own writes over the
// store's latest committed state.
func (s *Store) NewBatch() storage.Batch {
	if err := s.acquire(); err != nil {
		return &batch{store: s} // every use but Close fails with storage.ErrClosed
	}
	defer s.release()
	return &batch{store: s, b: s.db.NewIndexedBatch()}
}

// NewSnapshot returns a consistent view of the store as it is now.
func (s *Store) NewSnapshot() storage.Snapshot {
	if err := s.acquire(); err != nil {
		return &snapshot{store: s}
	}
	defer s.release()
	return &snapshot{store: s, snap: s.db.NewSnapshot()}
}

// Close flushes and closes the database. Batches, snapshots and iterators
// must be closed first.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("storage/pebble: close: %w", err)
	}
	return nil
}

// snapshot is a storage.Snapshot on a Pebble snapshot; snap is nil once
// closed, or when the store was closed before it was taken.
type snapshot struct {
	store *Store
	mu    sync.RWMutex
	snap  *pebbledb.Snapshot
}

// Get returns a copy of the value under key as of the snapshot.
func (s *snapshot) Get(key []byte) ([]byte, error) {
	if err := s.store.acquire(); err != nil {
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
func (s *snapshot) NewIterator(lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if err := s.store.acquire(); err != nil {
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
