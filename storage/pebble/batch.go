package pebble

import (
	"context"
	"fmt"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/orrery-db/orrery/storage"
)

// batch is a storage.Batch on a Pebble batch. Like every storage.Batch, it
// is used by one goroutine at a time.
//
// It starts as a plain batch and becomes an indexed one (which reads its
// own writes) only when it is read after a write or iterated: a write that
// reads before it writes (an item write reads the current record, then sets
// a dozen keys) then pays for no index, whose skiplist insertions and
// merged reads cost more than its reads of the store. A read of a batch
// with no writes yet reads the store: the batch's view is the store's then.
type batch struct {
	store *Store
	b     *pebbledb.Batch // nil when the store was closed at NewBatch
	// indexed: b is an indexed batch.
	indexed   bool
	committed bool
	closed    bool
	// abandoned: a commit or sync of b was left inside a failed Pebble, so
	// b must not be closed.
	abandoned bool
	// A pipelined commit's goroutine stores the apply's outcome in
	// piped[0] and sends on steps, then the fsync's in piped[1] and sends
	// again (one channel of empty tokens: the fewest allocations). syncing:
	// the second token is not received yet; syncErr is the fsync's outcome
	// once it is.
	steps   chan struct{}
	piped   [2]error
	syncing bool
	syncErr error
}

// usable reports storage.ErrClosed once the batch is committed or closed,
// and the store's failure once it has failed.
func (b *batch) usable() error {
	if err := b.store.Err(); err != nil {
		return err
	}
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
func (b *batch) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := usable(ctx, b.usable); err != nil {
		return nil, err
	}
	if err := b.store.acquire(); err != nil {
		return nil, err
	}
	defer b.store.release()
	if !b.indexed {
		if b.b.Empty() {
			return getCopy(b.store.db, key)
		}
		if err := b.index(); err != nil {
			return nil, err
		}
	}
	return getCopy(b.b, key)
}

// index turns b into an indexed batch holding the same writes.
func (b *batch) index() error {
	ib := b.store.db.NewIndexedBatch()
	if err := ib.Apply(b.b, nil); err != nil {
		ib.Close()
		return fmt.Errorf("storage/pebble: indexing batch: %w", err)
	}
	plain := b.b
	b.b, b.indexed = ib, true
	return plain.Close()
}

// NewIterator iterates over the batch's view of [lower, upper): the store's
// committed keys under the batch's writes made so far.
func (b *batch) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if err := usable(ctx, b.usable); err != nil {
		return nil, err
	}
	if err := b.store.acquire(); err != nil {
		return nil, err
	}
	defer b.store.release()
	if !b.indexed {
		if err := b.index(); err != nil {
			return nil, err
		}
	}
	return newIterator(b.b, lower, upper, reverse)
}

// Commit applies the batch atomically and, unless the store was opened with
// NoSync, returns only once it is fsynced. ctx is looked at when it starts:
// once under way, the commit and its sync are finished whatever ctx does.
func (b *batch) Commit(ctx context.Context) error {
	if err := usable(ctx, b.usable); err != nil {
		return err
	}
	if err := b.store.acquire(); err != nil {
		return err
	}
	defer b.store.release()
	err, abandoned := b.store.orFail(func() error {
		if b.store.write.Sync {
			b.store.waitingForSync(1)
			defer b.store.waitingForSync(-1)
		}
		return b.b.Commit(b.store.write)
	})
	if abandoned {
		b.abandoned = true
		return err
	}
	if err != nil {
		return b.store.failWith("commit", err)
	}
	b.committed = true
	return nil
}

// CommitPipelined applies the batch to the memtable, visible at once, and
// returns a wait for its fsync (pebble's ApplyNoSyncWait and SyncWait).
//
// Both run on one goroutine, the apply and then the wait for the fsync
// (a call into Pebble may wait behind a writer parked by Fatalf: see
// orFail), so a write starts one goroutine, not one for each.
func (b *batch) CommitPipelined(ctx context.Context) (func() error, error) {
	if err := usable(ctx, b.usable); err != nil {
		return nil, err
	}
	if !b.store.write.Sync {
		if err := b.Commit(ctx); err != nil {
			return nil, err
		}
		return func() error { return nil }, nil
	}
	if err := b.store.acquire(); err != nil {
		return nil, err
	}
	defer b.store.release()
	b.steps = make(chan struct{}, 2) // never full: an abandoned goroutine does not block
	go b.applyAndSync(b.b)
	if _, abandoned := await(b.store, b.steps); abandoned {
		b.abandoned = true
		return nil, b.store.Err()
	}
	if err := b.piped[0]; err != nil {
		return nil, b.store.failWith("commit", err)
	}
	b.committed = true
	b.syncing = true
	return b.waitSync, nil
}

// applyAndSync is a pipelined commit's goroutine (see batch.steps).
func (b *batch) applyAndSync(pb *pebbledb.Batch) {
	b.store.waitingForSync(1)
	err := b.store.db.ApplyNoSyncWait(pb, b.store.write)
	b.piped[0] = err
	b.steps <- struct{}{}
	if err == nil {
		err = pb.SyncWait()
	}
	b.store.waitingForSync(-1)
	if b.piped[0] == nil {
		b.piped[1] = err
		b.steps <- struct{}{}
	}
}

// waitSync waits for the fsync of a pipelined commit.
func (b *batch) waitSync() error {
	if !b.syncing {
		return b.syncErr
	}
	if _, abandoned := await(b.store, b.steps); abandoned {
		b.abandoned = true
		return b.store.Err()
	}
	b.syncing = false
	err := b.piped[1]
	if err != nil {
		err = b.store.failWith("sync", err)
	}
	b.syncErr = err
	return err
}

// usable is ctx's error when it is done, else check's (which may be the
// store's acquire: it holds the store only when it returns nil). Pebble does
// not wait on another process, so ctx is looked at once, when a call starts.
func usable(ctx context.Context, check func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage/pebble: %w", err)
	}
	return check()
}

// Close releases the batch; an uncommitted batch is discarded.
func (b *batch) Close() error {
	if b.closed {
		return storage.ErrClosed
	}
	b.closed = true
	if b.syncing && !b.abandoned {
		// A pipelined commit's fsync still under way: Pebble's batch is
		// released only after it.
		b.waitSync()
	}
	if b.b == nil || b.abandoned {
		b.b = nil
		return nil
	}
	pb := b.b
	b.b = nil
	if err := pb.Close(); err != nil {
		return fmt.Errorf("storage/pebble: closing batch: %w", err)
	}
	return nil
}
