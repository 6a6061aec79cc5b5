package vector

import (
	"bytes"
	"context"
	"sync"

	"github.com/google/btree"
)

// Reader reads an index's keyspace. Keys are relative to the keyspace (the
// engine lays the keyspace under a prefix of its own).
type Reader interface {
	// Get returns the value stored under key, or nil when there is none.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Scan calls fn for every key k with lower <= k < upper, ascending (a
	// nil upper is unbounded). key and value are valid only during the call.
	Scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error
}

// Writer takes an index's changes to its keyspace; the engine's Writer puts
// them in the storage transaction of the item they come from.
type Writer interface {
	Set(key, value []byte) error
	Delete(key []byte) error
}

// MemStore is an ordered in-memory keyspace, for tests and benchmarks. It is
// safe for concurrent use; its writes apply at once (it has no transactions).
type MemStore struct {
	mu   sync.RWMutex
	keys *btree.BTreeG[string]
	vals map[string][]byte
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{keys: btree.NewOrderedG[string](32), vals: map[string][]byte{}}
}

// Get implements Reader.
func (s *MemStore) Get(_ context.Context, key []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.vals[string(key)]
	if !ok {
		return nil, nil
	}
	return bytes.Clone(v), nil
}

// Scan implements Reader.
func (s *MemStore) Scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error {
	s.mu.RLock()
	var keys []string
	s.keys.AscendGreaterOrEqual(string(lower), func(k string) bool {
		if upper != nil && k >= string(upper) {
			return false
		}
		keys = append(keys, k)
		return true
	})
	s.mu.RUnlock()
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.RLock()
		v, ok := s.vals[k]
		s.mu.RUnlock()
		if !ok {
			continue
		}
		if err := fn([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}

// Set implements Writer.
func (s *MemStore) Set(key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := string(key)
	if _, ok := s.vals[k]; !ok {
		s.keys.ReplaceOrInsert(k)
	}
	s.vals[k] = bytes.Clone(value)
	return nil
}

// Delete implements Writer.
func (s *MemStore) Delete(key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := string(key)
	if _, ok := s.vals[k]; !ok {
		return nil
	}
	delete(s.vals, k)
	s.keys.Delete(k)
	return nil
}

// Len returns the number of keys.
func (s *MemStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.vals)
}

// Batch is a Writer that holds writes until Apply, for tests that model a
// transaction: the writes of an aborted transaction are simply dropped.
type Batch struct {
	ops []batchOp
}

type batchOp struct {
	key, val []byte
	del      bool
}

// Set implements Writer.
func (b *Batch) Set(key, value []byte) error {
	b.ops = append(b.ops, batchOp{key: bytes.Clone(key), val: bytes.Clone(value)})
	return nil
}

// Delete implements Writer.
func (b *Batch) Delete(key []byte) error {
	b.ops = append(b.ops, batchOp{key: bytes.Clone(key), del: true})
	return nil
}

// Apply writes the batch to w in order.
func (b *Batch) Apply(w Writer) error {
	for _, op := range b.ops {
		var err error
		if op.del {
			err = w.Delete(op.key)
		} else {
			err = w.Set(op.key, op.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Bytes returns the bytes of keys and values the batch writes.
func (b *Batch) Bytes() int {
	n := 0
	for _, op := range b.ops {
		n += len(op.key) + len(op.val)
	}
	return n
}
