package engine

import (
	"context"
	"crypto/rand"
	"sync"
)

// The catalog cache's lock. It holds no *Engine: what differs on a shared
// store (a reload when another gateway changed the catalog, the store's
// catalog lock) comes through the seam's catalogLocker.

// catalogLocker is the seam's part of the catalog cache's lock.
type catalogLocker interface {
	// refreshCatalog reloads the catalog cache if the store's moved.
	refreshCatalog(ctx context.Context) error
	// lockCatalog and unlockCatalog take and release the catalog for a
	// change (catMu.Lock, catMu.Unlock).
	lockCatalog(ctx context.Context) error
	unlockCatalog()
}

// catalogMutex guards the catalog cache (Engine.catMu). Without a shared
// store it is a sync.RWMutex and nothing more. On a shared store RLock
// first reloads the catalog if another gateway changed it, and Lock first
// takes the store's catalog lock (so that no writer of any gateway holds it
// shared, and no other gateway changes the catalog) and reloads the catalog
// if it moved; Unlock releases both. Every catalog reader and writer gets
// this by taking catMu as before.
type catalogMutex struct {
	mu   sync.RWMutex
	seam catalogLocker // set by Open
}

// RLock takes the cache for reading, reloading it first if it is stale.
func (m *catalogMutex) RLock(ctx context.Context) {
	m.seam.refreshCatalog(ctx)
	m.mu.RLock()
}

// RLockCurrent is RLock for a request that answers from the cache alone
// (a read of a database, a container, an offer): on a shared store, when
// the store's catalog version cannot be read (the store is unreachable) or
// the catalog cannot be reloaded, it returns that error without taking the
// cache, so that such a request fails as a read of the store would,
// instead of answering from a cache that may be stale.
func (m *catalogMutex) RLockCurrent(ctx context.Context) error {
	if err := m.seam.refreshCatalog(ctx); err != nil {
		return err
	}
	m.mu.RLock()
	return nil
}

// RUnlock releases RLock.
func (m *catalogMutex) RUnlock() { m.mu.RUnlock() }

// Lock takes the cache, and the store's catalog lock, for a change. On a
// shared store it fails with the store's error (or ctx's) when the catalog
// lock cannot be taken; nothing is held then.
func (m *catalogMutex) Lock(ctx context.Context) error { return m.seam.lockCatalog(ctx) }

// Unlock releases Lock.
func (m *catalogMutex) Unlock() { m.seam.unlockCatalog() }

// randomBytes is n random bytes: a new catalog version on a shared store.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("engine: crypto/rand failed: " + err.Error())
	}
	return b
}
