package memory

import (
	"bytes"
	"context"

	"github.com/google/btree"

	"github.com/orrery-db/orrery/storage"
)

// batch is a storage.Batch of the memory store. Its writes wait in a sorted
// overlay until Commit. Like every storage.Batch, it is used by one goroutine
// at a time.
type batch struct {
	store   *Store
	pending *btree.BTreeG[entry] // nil once committed or closed
	count   int
	closed  bool
}

// Set records that key is to hold value.
func (b *batch) Set(key, value []byte) error { return b.set(key, value, false) }

// Insert records that key, declared new, is to hold value: Commit fails
// with storage.ErrExists, applying nothing, if the store holds key then.
func (b *batch) Insert(key, value []byte) error { return b.set(key, value, true) }

func (b *batch) set(key, value []byte, insert bool) error {
	if b.pending == nil {
		return storage.ErrClosed
	}
	e := entry{key: bytes.Clone(key), value: bytes.Clone(nonNil(value)), fresh: insert}
	if old, replaced := b.pending.ReplaceOrInsert(e); replaced && old.fresh != e.fresh {
		// Declared new by the batch's first write of the key only
		// (storage.Inserter).
		e.fresh = old.fresh
		b.pending.ReplaceOrInsert(e)
	}
	b.count++
	return nil
}

// Delete records that key is to be removed.
func (b *batch) Delete(key []byte) error {
	if b.pending == nil {
		return storage.ErrClosed
	}
	b.pending.ReplaceOrInsert(entry{key: bytes.Clone(key), deleted: true})
	b.count++
	return nil
}

// Count is the number of Set and Delete operations recorded.
func (b *batch) Count() int { return b.count }

// Get returns a copy of the value under key as the batch sees it: its own
// pending write if it has one, else the store's latest committed value.
func (b *batch) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if b.pending == nil {
		return nil, storage.ErrClosed
	}
	if e, ok := b.pending.Get(entry{key: key}); ok {
		if e.deleted {
			return nil, storage.ErrNotFound
		}
		return bytes.Clone(e.value), nil
	}
	return b.store.Get(ctx, key)
}

// NewIterator iterates over the batch's view of [lower, upper): the store's
// committed keys as of now, under the batch's writes made so far.
func (b *batch) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if b.pending == nil {
		return nil, storage.ErrClosed
	}
	base, err := b.store.NewIterator(ctx, lower, upper, reverse)
	if err != nil {
		return nil, err
	}
	return storage.NewOverlayIterator(base, writesIn(b.pending, lower, upper), lower, upper, reverse), nil
}

// Commit applies every pending write to the store at once.
func (b *batch) Commit(ctx context.Context) error {
	if b.pending == nil {
		return storage.ErrClosed
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := b.store.apply(b.pending); err != nil {
		return err
	}
	b.pending = nil
	return nil
}

// CommitPipelined is Commit: memory has nothing to wait for.
func (b *batch) CommitPipelined(ctx context.Context) (func() error, error) {
	return storage.CommitDurable(ctx, b.Commit)
}

// Close discards the batch; its uncommitted writes are dropped.
func (b *batch) Close() error {
	if b.closed {
		return storage.ErrClosed
	}
	b.pending = nil
	b.closed = true
	return nil
}
