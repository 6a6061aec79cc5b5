package storage

import (
	"context"
	"errors"
)

// ErrNotFound is returned by Get when the key does not exist.
var ErrNotFound = errors.New("storage: key not found")

// ErrClosed is returned by operations on a closed store or batch.
var ErrClosed = errors.New("storage: closed")

// ErrUnavailable is returned (wrapped) by every operation of a store that
// has failed beyond repair, say because its data directory was removed or
// its disk fails writes: nothing more can be read or made durable, and the
// process should stop; or, for a store on a database server, that the
// server cannot be reached for now (the store recovers on its own when it
// is back, and the process goes on).
var ErrUnavailable = errors.New("storage: unavailable")

// ErrExists is returned (wrapped) by the Commit of a batch that wrote a key
// with Insert, declaring it new, when the store already holds that key: the
// batch was not applied, none of it.
var ErrExists = errors.New("storage: a key written as new exists")

// Every call that may do I/O takes a context. A ctx that is done before the
// call starts makes it fail with an error wrapping ctx.Err() and do nothing;
// one that is done while it runs makes a backend that waits on another
// process (PostgreSQL) give up the wait and return such an error promptly.
// What a cancel means for a commit is told at Batch.Commit.

// Reader reads keys, in byte order.
type Reader interface {
	// Get returns a copy of the value stored under key, or ErrNotFound.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// NewIterator iterates over the keys k with lower <= k < upper (a nil
	// bound is unbounded), ascending, or descending when reverse is true.
	// The caller must Close it. ctx bounds the iterator's reads, its later
	// pages included: once ctx is done, Next returns false and Err an error
	// wrapping ctx.Err() where the backend has more to fetch.
	//
	// An iterator of a Store, a Snapshot or a Batch is a point-in-time view,
	// however long the range and however long it stays open: it sees the
	// keys committed when NewIterator was called (a Snapshot's, for a
	// snapshot) and, for a batch, under the batch's writes made before it,
	// and a batch committed meanwhile is seen wholly or not at all. A
	// SharedBatch's iterator is read-committed instead (see Shared).
	NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (Iterator, error)
}

// MultiGetter is implemented by readers that read several keys in one go
// (PostgreSQL's: in one round trip, where a Get each would cost one each).
type MultiGetter interface {
	// GetMany reads keys as Get does, all as of one moment: values[i] is
	// a copy of keys[i]'s value, nil when it is absent.
	GetMany(ctx context.Context, keys [][]byte) (values [][]byte, err error)
}

// GetMany reads keys through r: in one call when r is a MultiGetter, else
// one Get each. values[i] is keys[i]'s value, nil when it is absent.
func GetMany(ctx context.Context, r Reader, keys [][]byte) ([][]byte, error) {
	if m, ok := r.(MultiGetter); ok {
		return m.GetMany(ctx, keys)
	}
	values := make([][]byte, len(keys))
	for i, k := range keys {
		v, err := r.Get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if v == nil {
			v = []byte{}
		}
		values[i] = v
	}
	return values, nil
}

// Inserter is implemented by batches that write a key the caller knows is
// new more cheaply than Set (PostgreSQL's: a plain INSERT, where Set is an
// INSERT … ON CONFLICT DO UPDATE, a speculative insertion and its
// confirmation per key).
type Inserter interface {
	// Insert is Set of a key the caller declares absent from the store:
	// if the store holds key when the batch commits, Commit applies none
	// of the batch and returns an error wrapping ErrExists; it never
	// overwrites key. A key the batch itself wrote before (Set, Delete)
	// is not declared: Insert is then Set. A Set after Insert keeps the
	// declaration, a Delete drops it.
	Insert(key, value []byte) error
}

// Insert writes key through b as new: with b's Insert when b is an
// Inserter, else with Set (a store that does not check: Pebble's, whose
// writer already knows the key is new, pays no read for it).
func Insert(b Batch, key, value []byte) error {
	if i, ok := b.(Inserter); ok {
		return i.Insert(key, value)
	}
	return b.Set(key, value)
}

// Iterator walks a key range. Key and Value are valid only until the next call
// to Next; callers that keep them must copy them.
type Iterator interface {
	// Next advances to the next key and reports whether there is one. The
	// first call positions the iterator on the first key of the range.
	Next() bool
	// Key is the current key.
	Key() []byte
	// Value is the current value.
	Value() []byte
	// Err is the first error the iterator met, if any.
	Err() error
	// Close releases the iterator.
	Close() error
}

// Store is an ordered key-value store with atomic, durable batches.
//
// A Store does not serialize conflicting writers itself: two batches that read
// and then write the same keys must be ordered by the caller (the engine holds a
// lock per logical partition). Every committed batch is applied atomically: a
// crash leaves all of it or none of it.
type Store interface {
	Reader
	// NewBatch starts a write batch. Its reads see its own uncommitted writes
	// on top of the store's latest committed state.
	NewBatch() Batch
	// NewSnapshot returns a consistent, read-only view of the store as it is
	// now, or the error that kept it from taking one (the store is closed,
	// unreachable, ctx is done). The caller must Close it.
	NewSnapshot(ctx context.Context) (Snapshot, error)
	// Close flushes and closes the store. Batches and iterators must be closed
	// first.
	Close() error
}

// Batch is a set of writes applied atomically by Commit. A batch is used by
// one goroutine at a time.
type Batch interface {
	Reader
	// Set stores value under key. The batch keeps its own copies.
	Set(key, value []byte) error
	// Delete removes key (deleting a missing key is not an error).
	Delete(key []byte) error
	// Count is the number of Set and Delete operations recorded.
	Count() int
	// Commit applies the batch atomically. When it returns nil the writes are
	// durable (fsynced) unless the store was opened without sync. Concurrent
	// commits are grouped into one sync where the backend can. After Commit
	// (or Close) every method but Close returns ErrClosed.
	//
	// A ctx done before Commit starts makes it write nothing and return an
	// error wrapping ctx.Err(). Once the commit is under way a cancel is not
	// a rollback: a backend in-process finishes it and its sync (others may
	// already build on it); a backend on a database server stops waiting for
	// the answer, and then the outcome is unknown, as when the connection is
	// lost after COMMIT was sent: the error wraps ctx.Err() and the batch may
	// or may not have committed.
	Commit(ctx context.Context) error
	// CommitPipelined applies the batch atomically so that every later read
	// and batch sees it, and returns without waiting for durability; the
	// returned wait blocks until the batch is as durable as Commit would have
	// made it. Batches become durable in the order they were applied, so a
	// batch built on another's effects can never outlive it in a crash. The
	// batch must not be closed before wait returns.
	//
	// ctx is Commit's: done before the batch is applied, nothing is written.
	// The wait does not take it: once the batch is applied, others may build
	// on it, and its durability must be waited for whatever the caller does.
	CommitPipelined(ctx context.Context) (wait func() error, err error)
	// Close releases the batch; an uncommitted batch is discarded.
	Close() error
}

// Snapshot is a read-only, point-in-time view of a Store.
type Snapshot interface {
	Reader
	// Close releases the snapshot.
	Close() error
}

// CommitDurable is CommitPipelined for a batch whose Commit is durable when it
// returns (or that has nothing to wait for): it commits, and the wait it
// returns has nothing left to do.
func CommitDurable(ctx context.Context, commit func(context.Context) error) (wait func() error, err error) {
	if err := commit(ctx); err != nil {
		return nil, err
	}
	return func() error { return nil }, nil
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, for use as an exclusive upper bound; nil when there is none.
func PrefixEnd(prefix []byte) []byte {
	if end := AppendPrefixEnd(nil, prefix); len(end) > 0 {
		return end
	}
	return nil
}

// AppendPrefixEnd appends PrefixEnd(prefix) to dst and returns the
// extended slice (dst itself when prefix has no end: all 0xff or empty).
func AppendPrefixEnd(dst, prefix []byte) []byte {
	n := len(dst)
	dst = append(dst, prefix...)
	for i := len(dst) - 1; i >= n; i-- {
		dst[i]++
		if dst[i] != 0 {
			return dst[:i+1]
		}
	}
	return dst[:n]
}
