package engine

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/orrery-db/orrery/storage"
)

// The catalog cache's lock and the lookups that go through the seam: what
// every engine does, whichever seam it has.

// catalogMutex guards the catalog cache (Engine.catMu). Without a shared
// store it is a sync.RWMutex and nothing more. On a shared store RLock
// first reloads the catalog if another gateway changed it, and Lock first
// takes the store's catalog lock (so that no writer of any gateway holds it
// shared, and no other gateway changes the catalog) and reloads the catalog
// if it moved; Unlock releases both. Every catalog reader and writer gets
// this by taking catMu as before.
type catalogMutex struct {
	mu sync.RWMutex
	e  *Engine // set by Open
}

// RLock takes the cache for reading, reloading it first if it is stale.
func (m *catalogMutex) RLock(ctx context.Context) {
	m.e.seam.refreshCatalog(ctx)
	m.mu.RLock()
}

// RLockCurrent is RLock for a request that answers from the cache alone
// (a read of a database, a container, an offer): on a shared store, when
// the store's catalog version cannot be read (the store is unreachable) or
// the catalog cannot be reloaded, it returns that error without taking the
// cache, so that such a request fails as a read of the store would,
// instead of answering from a cache that may be stale.
func (m *catalogMutex) RLockCurrent(ctx context.Context) error {
	if err := m.e.seam.refreshCatalog(ctx); err != nil {
		return err
	}
	m.mu.RLock()
	return nil
}

// CatalogCurrent reports whether the catalog cache can be trusted now: nil
// without a shared store, else the store's error when the catalog's
// version cannot be read or the catalog cannot be reloaded.
func (e *Engine) CatalogCurrent(ctx context.Context) error {
	if err := e.catMu.RLockCurrent(ctx); err != nil {
		return err
	}
	e.catMu.RUnlock()
	return nil
}

// CachedContainer is Container without the store: on a shared store it
// answers from the catalog cache when the cache knows the container, for a
// caller whose next step checks the catalog version in the store itself
// (an item read or write does, in its own round trip), and checks the
// store as Container does when the cache does not know it (a container
// just created on another gateway). Without a shared store it is
// Container.
func (e *Engine) CachedContainer(ctx context.Context, db, name string) (*Container, error) {
	c, _, err := e.cachedContainer(ctx, db, name)
	return c, err
}

// cachedContainer is CachedContainer, with the catalog version the cache
// was at when it answered (nil without a shared store).
func (e *Engine) cachedContainer(ctx context.Context, db, name string) (*Container, []byte, error) {
	return e.seam.cachedContainer(ctx, db, name)
}

// RUnlock releases RLock.
func (m *catalogMutex) RUnlock() { m.mu.RUnlock() }

// Lock takes the cache, and the store's catalog lock, for a change. On a
// shared store it fails with the store's error (or ctx's) when the catalog
// lock cannot be taken; nothing is held then.
func (m *catalogMutex) Lock(ctx context.Context) error { return m.e.seam.lockCatalog(ctx) }

// Unlock releases Lock.
func (m *catalogMutex) Unlock() { m.e.seam.unlockCatalog() }

// catalogBatch starts a batch of catalog changes. On a shared store it
// bumps the catalog version in the same batch. The caller holds catMu for
// writing.
func (e *Engine) catalogBatch() (storage.Batch, error) { return e.seam.catalogBatch() }

// itemsSnapshot looks container db/name up and opens the snapshot that a
// read of its items (a query page, a change-feed page) runs in, with the
// store's watermark as of that snapshot (without a shared store: 0, or with
// settle, one above the sequencer's settled watermark, read before the
// snapshot is taken). On a
// shared store the container comes from the cache and the round trip that
// opens the snapshot checks the catalog version and reads the watermark
// (Shared.SnapshotAll), along with the keys extra names for the container
// (values[i] is extra's i-th key's value, nil when absent; without a
// shared store they are read from the snapshot); if the version moved, the
// catalog is reloaded and the container looked up again, so that a
// container deleted or changed on another gateway is seen at once. With
// settle, the snapshot is taken again, for at most settle, until its
// watermark covers every write this engine has finished and, where the
// store's first snapshot tells it (storage.Ended), every write any gateway
// had finished when the read began.
func (e *Engine) itemsSnapshot(ctx context.Context, db, name string, extra func(c *Container) [][]byte, settle time.Duration) (c *Container, snap storage.Snapshot, values [][]byte, watermark uint64, err error) {
	return e.seam.itemsSnapshot(ctx, db, name, extra, settle)
}

// randomBytes is n random bytes: a new catalog version on a shared store.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("engine: crypto/rand failed: " + err.Error())
	}
	return b
}
