package engine

import (
	"context"
)

// The catalog cache's lock and the lookups that go through the seam: what
// every engine does, whichever seam it has.

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

// ResolveContainer looks container db/name up as CachedContainer does, for
// a request that reads the container itself (its RID, its links) and then
// runs an item operation on it: passed as ItemRequest.Resolved, the
// operation does not look it up again.
func (e *Engine) ResolveContainer(ctx context.Context, db, name string) (ContainerRef, error) {
	c, version, err := e.cachedContainer(ctx, db, name)
	if err != nil {
		return ContainerRef{}, err
	}
	return ContainerRef{c: c, version: version}, nil
}

// cachedContainer is CachedContainer, with the catalog version the cache
// was at when it answered (nil without a shared store).
func (e *Engine) cachedContainer(ctx context.Context, db, name string) (*Container, []byte, error) {
	return e.seam.cachedContainer(ctx, db, name)
}
