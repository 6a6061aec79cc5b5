package engine

import (
	"context"
	"time"

	"github.com/orrery-db/orrery/storage"
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
