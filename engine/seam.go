package engine

import (
	"context"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/presence"
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

func (l localSeam) notePresent(c *Container, key []byte) { l.e.presenceOf(c).Add(key) }

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

// Every create must prove its id free in its logical partition, and on an
// LSM store a read of a key that is not there still visits every memtable
// and every level: it was a quarter of the CPU of a create. A presence
// filter is a Bloom filter, per container, of every item key ever written:
// when it says a key was never written, the read is skipped. It never
// forgets a key (deletes are not removed), so "absent" is always true; a
// "maybe" costs the read it would have cost anyway.
//
// A container's filter (engine/internal/presence) is made at its first item write after Open and
// filled in the background from a snapshot of its items; until then every
// check reads the store. Writers add the keys they write from the moment the
// filter exists, so none written meanwhile is missed (see buildPresence).

// presenceOf returns the container's presence filter, making it (and
// starting its build) when there is none.
func (e *Engine) presenceOf(c *Container) *presence.Filter {
	if pf := c.presence.Load(); pf != nil {
		return pf
	}
	f, loaded := e.presence.LoadOrStore(string(c.rid), presence.New())
	pf := f.(*presence.Filter)
	c.presence.Store(pf)
	if !loaded {
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			e.buildPresence(e.bgCtx, c.rid, pf)
		}()
	}
	return pf
}

// buildPresence adds every item key of the container to f and marks it
// ready. Writers add their keys from the moment f is published; a writer
// that looked before holds its partition lock until its write is applied,
// so taking and releasing every lock once, after publishing, waits for the
// last of them, and the snapshot taken then holds their writes.
func (e *Engine) buildPresence(ctx context.Context, collRID []byte, f *presence.Filter) {
	for i := range e.locks {
		e.locks[i].Lock()
		e.locks[i].Unlock()
	}
	snap, err := e.store.NewSnapshot(ctx)
	if err != nil {
		return // never ready: every check reads the store
	}
	defer snap.Close()
	prefix := keys.ItemContainerPrefix(collRID)
	it, err := snap.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
	if err != nil {
		return // never ready: every check reads the store
	}
	defer it.Close()
	for n := 0; it.Next(); n++ {
		if n%4096 == 0 && e.stopping() {
			return
		}
		f.Add(it.Key())
	}
	if it.Err() == nil {
		f.SetReady()
	}
}

// absent reports whether the item key was certainly never written.
// On a shared store nothing is: another gateway may have written it.
func (e *Engine) absent(c *Container, key []byte) bool { return e.seam.absent(c, key) }

// absentHere is absent for an engine alone on its store.
func (e *Engine) absentHere(c *Container, key []byte) bool {
	f := e.presenceOf(c)
	return f.Ready() && !f.MayContain(key)
}

// readItemLocal is ReadItem on a store of this process alone.
func (e *Engine) readItemLocal(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	c := req.resolved().c
	if c == nil || c.retired.Load() {
		// Not resolved, or replaced or deleted since.
		var err error
		if c, err = e.Container(ctx, req.Database, req.Container); err != nil {
			return nil, err
		}
	}
	if !req.HasPartitionKey {
		return nil, errPartitionKeyRequired
	}
	p, perr := c.partition(req.PartitionKey)
	if perr != nil {
		return nil, perr
	}
	if verr := validItemID(req.ID); verr != nil {
		return nil, verr
	}
	it, err := e.pointRead(ctx, c, p.itemKey(req.ID))
	if err != nil {
		return nil, err
	}
	return readResult(it, req.IfNoneMatch, 0), nil
}
