package pebble

import (
	"fmt"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/orrery-db/orrery/storage"
)

// batch is a storage.Batch on an indexed Pebble batch. Like every
// storage.Batch, it is used by one goroutine at a time.
type batch struct {
	store     *Store
	b         *pebbledb.Batch // nil when the store was closed at NewBatch
	committed bool
	closed    bool
}

// usable reports storage.ErrClosed once the batch is committed or closed.
func (b *batch) usable() error {
	if b.closed || b.committed || b.b == nil {
		return storage.ErrClosed
	}
	return nil
}

// Set records that key is to hold value; the batch copies both.
func (b *batch) Set(key, value []byte) error {
	if err := b.usable(); err != nil {
		return err
	}
	return b.b.Set(key, value, nil)
}

// Delete records that key is to be removed.
func (b *batch) Delete(key []byte) error {
	if err := b.usable(); err != nil {
		return err
	}
	return b.b.Delete(key, nil)
}

// Count is the number of Set and Delete operations recorded.
func (b *batch) Count() int {
	if b.b == nil || b.closed {
		return 0
	}
	return int(b.b.Count())
}

// Get returns a copy of the value under key as the batch sees it.
func (b *batch) Get(key []byte) ([]byte, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	if err := b.store.acquire(); err != nil {
		return nil, err
	}
	defer b.store.release()
	return getCopy(b.b, key)
}

// NewIterator iterates over the batch's view of [lower, upper): the store's
// committed keys under the batch's writes made so far.
func (b *batch) NewIterator(lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	if err := b.store.acquire(); err != nil {
		return nil, err
	}
	defer b.store.release()
	return newIterator(b.b, lower, upper, reverse)
}

// Commit applies the batch atomically and, unless the store was opened with
// NoSync, returns only once it is fsynced.
func (b *batch) Commit() error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := b.store.acquire(); err != nil {
		return err
	}
	defer b.store.release()
	if err := b.b.Commit(b.store.write); err != nil {
		return fmt.Errorf("storage/pebble: commit: %w", err)
	}
	b.committed = true
	return nil
}

// CommitPipelined applies the batch to the memtable, visible at once, and
// returns a wait for its fsync (pebble's ApplyNoSyncWait and SyncWait).
func (b *batch) CommitPipelined() (func() error, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	if !b.store.write.Sync {
		if err := b.Commit(); err != nil {
			return nil, err
		}
		return func() error { return nil }, nil
	}
	if err := b.store.acquire(); err != nil {
		return nil, err
	}
	defer b.store.release()
	if err := b.store.db.ApplyNoSyncWait(b.b, b.store.write); err != nil {
		return nil, fmt.Errorf("storage/pebble: commit: %w", err)
	}
	b.committed = true
	pb := b.b
	return func() error {
		if err := pb.SyncWait(); err != nil {
			return fmt.Errorf("storage/pebble: sync: %w", err)
		}
		return nil
	}, nil
}

// Close releases the batch; an uncommitted batch is discarded.
func (b *batch) Close() error {
	if b.closed {
		return storage.ErrClosed
	}
	b.closed = true
	if b.b == nil {
		return nil
	}
	pb := b.b
	b.b = nil
	if err := pb.Close(); err != nil {
		return fmt.Errorf("storage/pebble: closing batch: %w", err)
	}
	return nil
}
