package engine

import (
	"context"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// seam is what differs between an engine alone on its store (localSeam)
// and one of several engines sharing a store (sharedSeam, on a
// storage.Shared such as PostgreSQL). Open picks one; the rest of the
// engine calls through it and never asks which it has.
type seam interface {
	// inPartition runs fn in a transaction of the logical partition pk of
	// c, holding the partition's write lock. ids names items fn reads
	// first: a shared store reads them with the locks, in one round trip.
	inPartition(ctx context.Context, c *Container, pk PartitionKey, ids []string, fn func(t *txn) error) error
	// containerMoved reports, after a partition transaction failed before
	// it began, whether db/coll is no longer c (replaced or deleted on
	// another gateway): the request is then made again.
	containerMoved(ctx context.Context, db, coll string, c *Container) (bool, error)
	// readItem is ReadItem.
	readItem(ctx context.Context, req *ItemRequest) (*ItemResult, error)
	// cachedContainer is CachedContainer with the catalog version the
	// cache answered at (nil on a local store).
	cachedContainer(ctx context.Context, db, name string) (*Container, []byte, error)
	// itemsSnapshot is Engine.itemsSnapshot.
	itemsSnapshot(ctx context.Context, db, name string, extra func(c *Container) [][]byte, settle time.Duration) (*Container, storage.Snapshot, [][]byte, uint64, error)
	// containerScripts is Engine.containerScripts.
	containerScripts(ctx context.Context, db, coll string, kind ScriptKind, ids []string) (*Container, []map[string]any, error)
	// snapshotSession is the session LSN a read answers with, given the
	// watermark its snapshot came with: 0 when the caller asks SessionLSN.
	snapshotSession(watermark uint64) uint64
	// absent reports whether an item key was certainly never written
	// (the presence filter); notePresent records a key written.
	absent(c *Container, key []byte) bool
	notePresent(c *Container, key []byte)
	// refreshCatalog reloads the catalog cache if the store's moved.
	refreshCatalog(ctx context.Context) error
	// lockCatalog and unlockCatalog take and release the catalog for a
	// change (catMu.Lock, catMu.Unlock).
	lockCatalog(ctx context.Context) error
	unlockCatalog()
	// catalogBatch starts a batch of catalog changes; catalogChanged
	// records in b that other engines must reload the catalog.
	catalogBatch() (storage.Batch, error)
	catalogChanged(b storage.Batch) error
	// sweepLoop runs the TTL sweeper every interval until Close.
	sweepLoop(interval time.Duration)
}

// lsnSource hands out LSNs and publishes the watermark: the sequencer of
// a local store, the shared store's transaction ids on a shared one.
type lsnSource interface {
	allocate(ctx context.Context) (uint64, error)
	finish(n uint64)
	pending() (newest uint64, inflight int)
	// watermark and settle fail when the store cannot tell its watermark
	// (a shared store unreachable): never 0 for an error.
	watermark(ctx context.Context) (uint64, error)
	settle(ctx context.Context, timeout time.Duration) (uint64, error)
}

// localSeam is the seam of an engine alone on its store: locks are
// mutexes of this process, LSNs come from the sequencer, the catalog cache
// is the catalog.
type localSeam struct{ e *Engine }

func (l localSeam) inPartition(ctx context.Context, c *Container, pk PartitionKey, _ []string, fn func(t *txn) error) error {
	return l.e.inPartitionLocal(ctx, c, pk, fn)
}

func (localSeam) containerMoved(context.Context, string, string, *Container) (bool, error) {
	return false, nil
}

func (l localSeam) readItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return l.e.readItemLocal(ctx, req)
}

func (l localSeam) cachedContainer(ctx context.Context, db, name string) (*Container, []byte, error) {
	c, err := l.e.Container(ctx, db, name)
	return c, nil, err
}

func (l localSeam) itemsSnapshot(ctx context.Context, db, name string, extra func(c *Container) [][]byte, settle time.Duration) (c *Container, snap storage.Snapshot, values [][]byte, watermark uint64, err error) {
	e := l.e
	if c, err = e.Container(ctx, db, name); err != nil {
		return nil, nil, nil, 0, err
	}
	if settle > 0 {
		// Settled before the snapshot, which then holds every write
		// below the watermark.
		w, err := e.seq.settle(ctx, settle)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		watermark = w + 1
	}
	if snap, err = e.store.NewSnapshot(ctx); err != nil {
		return nil, nil, nil, 0, err
	}
	if extra != nil {
		if values, err = storage.GetMany(ctx, snap, extra(c)); err != nil {
			snap.Close()
			return nil, nil, nil, 0, err
		}
	}
	return c, snap, values, watermark, nil
}

func (l localSeam) containerScripts(ctx context.Context, db, coll string, kind ScriptKind, ids []string) (*Container, []map[string]any, error) {
	c, err := l.e.Container(ctx, db, coll)
	if err != nil {
		return nil, nil, err
	}
	props := make([]map[string]any, len(ids))
	for i, id := range ids {
		if props[i], _, err = l.e.readScript(ctx, c, kind, id); err != nil {
			return nil, nil, err
		}
	}
	return c, props, nil
}

func (localSeam) snapshotSession(uint64) uint64 { return 0 }

func (l localSeam) absent(c *Container, key []byte) bool { return l.e.absentHere(c, key) }

func (l localSeam) notePresent(c *Container, key []byte) { l.e.presenceOf(c).add(key) }

func (localSeam) refreshCatalog(context.Context) error { return nil }

func (l localSeam) lockCatalog(context.Context) error {
	l.e.catMu.mu.Lock()
	return nil
}

func (l localSeam) unlockCatalog() { l.e.catMu.mu.Unlock() }

func (l localSeam) catalogBatch() (storage.Batch, error) { return l.e.store.NewBatch(), nil }

func (localSeam) catalogChanged(storage.Batch) error { return nil }

func (l localSeam) sweepLoop(interval time.Duration) { l.e.sweepLoop(interval) }

// sharedSeam is the seam of an engine sharing its store with others: the
// store holds the locks and hands out the LSNs, and every read checks the
// catalog cache against the store's catalog version in its own round trip.
type sharedSeam struct{ e *Engine }

func (s sharedSeam) inPartition(ctx context.Context, c *Container, pk PartitionKey, ids []string, fn func(t *txn) error) error {
	return s.e.inPartitionShared(ctx, c, pk, ids, fn)
}

func (s sharedSeam) containerMoved(ctx context.Context, db, coll string, c *Container) (bool, error) {
	cur, err := s.e.Container(ctx, db, coll)
	if err != nil {
		return false, err
	}
	return cur != c, nil
}

func (s sharedSeam) readItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return s.e.readItemShared(ctx, req)
}

func (s sharedSeam) cachedContainer(ctx context.Context, db, name string) (*Container, []byte, error) {
	return s.e.cachedContainerShared(ctx, db, name)
}

func (s sharedSeam) itemsSnapshot(ctx context.Context, db, name string, extra func(c *Container) [][]byte, settle time.Duration) (*Container, storage.Snapshot, [][]byte, uint64, error) {
	return s.e.itemsSnapshotShared(ctx, db, name, extra, settle)
}

func (s sharedSeam) containerScripts(ctx context.Context, db, coll string, kind ScriptKind, ids []string) (*Container, []map[string]any, error) {
	return s.e.containerScriptsShared(ctx, db, coll, kind, ids)
}

func (sharedSeam) snapshotSession(watermark uint64) uint64 { return watermark }

// absent is false: another gateway may have written the key.
func (sharedSeam) absent(*Container, []byte) bool { return false }

func (sharedSeam) notePresent(*Container, []byte) {}

func (s sharedSeam) refreshCatalog(ctx context.Context) error { return s.e.refreshCatalog(ctx) }

func (s sharedSeam) lockCatalog(ctx context.Context) error { return s.e.lockCatalog(ctx) }

func (s sharedSeam) unlockCatalog() { s.e.unlockCatalog() }

func (s sharedSeam) catalogBatch() (storage.Batch, error) { return s.e.catalogBatchShared() }

func (sharedSeam) catalogChanged(b storage.Batch) error {
	return b.Set(keys.MetaCatalogVersion, randomBytes(16))
}

func (s sharedSeam) sweepLoop(interval time.Duration) { s.e.sharedSweepLoop(interval) }
