package memory

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/google/btree"

	"github.com/orrery-db/orrery/storage"
)

// degree is the B-tree's branching factor: wide enough to keep the tree
// shallow, small enough that a copy-on-write node copy stays cheap.
const degree = 32

// entry is one key and its value. In a batch overlay, deleted marks a
// pending deletion of the key.
type entry struct {
	key     []byte
	value   []byte
	deleted bool
	// fresh marks a pending key written as new (storage.Inserter).
	fresh bool
}

func lessEntry(a, b entry) bool { return bytes.Compare(a.key, b.key) < 0 }

func newTree() *btree.BTreeG[entry] { return btree.NewG(degree, lessEntry) }

// Store is an in-memory storage.Store. It is safe for concurrent use.
type Store struct {
	// mu guards tree and closed. Commits and clones take it exclusively
	// (a clone marks the shared nodes read-only); point reads share it.
	mu     sync.RWMutex
	tree   *btree.BTreeG[entry]
	closed bool
}

var _ storage.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{tree: newTree()}
}

// Get returns a copy of the value stored under key, or storage.ErrNotFound.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, storage.ErrClosed
	}
	return getCopy(s.tree, key)
}

// ctxErr is the error of a call made with a done ctx: the memory store's
// calls do not wait, so ctx is looked at once, when they start.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return nil
}

func getCopy(tree *btree.BTreeG[entry], key []byte) ([]byte, error) {
	e, ok := tree.Get(entry{key: key})
	if !ok {
		return nil, storage.ErrNotFound
	}
	return bytes.Clone(nonNil(e.value)), nil
}

// nonNil turns a nil value into an empty one, so that a copy of an empty
// value is never mistaken for a missing one.
func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// clone returns a read-only, point-in-time copy of the committed tree.
func (s *Store) clone() (*btree.BTreeG[entry], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, storage.ErrClosed
	}
	return s.tree.Clone(), nil
}

// NewIterator iterates over a point-in-time view of the committed keys in
// [lower, upper).
func (s *Store) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	tree, err := s.clone()
	if err != nil {
		return nil, err
	}
	return newTreeIterator(tree, lower, upper, reverse), nil
}

// NewBatch starts a batch over the store's latest committed state.
func (s *Store) NewBatch() storage.Batch {
	return &batch{store: s, pending: newTree()}
}

// NewSnapshot returns a consistent view of the store as it is now.
func (s *Store) NewSnapshot(ctx context.Context) (storage.Snapshot, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	tree, err := s.clone()
	if err != nil {
		return nil, err
	}
	return &snapshot{tree: tree}, nil
}

// Close drops the store's contents. Later operations fail with
// storage.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	s.closed = true
	s.tree = nil
	return nil
}

// apply writes the pending entries of a batch into the tree, all under one
// lock, so that no reader sees part of them.
func (s *Store) apply(pending *btree.BTreeG[entry]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	// A key written as new that exists fails the batch, before any of it
	// is applied.
	var exists []byte
	pending.Ascend(func(e entry) bool {
		if e.fresh && s.tree.Has(e) {
			exists = e.key
			return false
		}
		return true
	})
	if exists != nil {
		return fmt.Errorf("memory: key %q: %w", exists, storage.ErrExists)
	}
	pending.Ascend(func(e entry) bool {
		e.fresh = false
		if e.deleted {
			s.tree.Delete(e)
		} else {
			s.tree.ReplaceOrInsert(e)
		}
		return true
	})
	return nil
}

// snapshot is a read-only view of a cloned tree.
type snapshot struct {
	mu   sync.Mutex
	tree *btree.BTreeG[entry]
	err  error // storage.ErrClosed once closed
}

func (s *snapshot) view() (*btree.BTreeG[entry], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree, s.err
}

// Get returns a copy of the value under key as of the snapshot.
func (s *snapshot) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	tree, err := s.view()
	if err != nil {
		return nil, err
	}
	return getCopy(tree, key)
}

// NewIterator iterates over the snapshot's keys in [lower, upper).
func (s *snapshot) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	tree, err := s.view()
	if err != nil {
		return nil, err
	}
	return newTreeIterator(tree, lower, upper, reverse), nil
}

// Close releases the snapshot.
func (s *snapshot) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.tree, s.err = nil, storage.ErrClosed
	return nil
}
