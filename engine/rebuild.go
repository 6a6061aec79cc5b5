package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// An index is rebuilt from the container's items when an engine opens a
// store whose indexes are in another format (indexFormat), and when a replace
// changes a container's indexing policy. A replace marks the container in the
// batch that stores the new policy (indexRebuildKey) and the rebuild's last
// batch removes the mark, so a rebuild a crash cut short is finished at the
// next Open.

// rebuilder builds indexes again from a container's items: the index and
// the expiry index, at Open (an upgrade, or a rebuild a crash cut short)
// and after a replace of a container. It holds what it needs: the store,
// the catalog (to visit every container at Open), the seam (to tell other
// gateways), the partition locks and the logger.
type rebuilder struct {
	store   storage.Store
	catalog *catalog
	seam    seam
	log     *slog.Logger
	// locks are the engine's partition write locks (Engine.locks, not
	// a copy): lockAllPartitions takes them all.
	locks []sync.Mutex
}

// upgradeIndexes runs at Open, before the store is used otherwise: it
// rebuilds every container's index when the store's are in another format,
// else those a crash left half rebuilt.
func (r *rebuilder) upgradeIndexes(ctx context.Context) error {
	v, err := r.store.Get(ctx, keys.MetaIndexFormat)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	var stored uint64
	if err == nil && len(v) == 8 {
		stored = binary.BigEndian.Uint64(v)
	}
	current := stored == indexFormat
	for _, db := range r.catalog.dbs {
		for _, c := range db.colls {
			if current {
				_, err := r.store.Get(ctx, keys.IndexRebuild(c.rid))
				if errors.Is(err, storage.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
			} else {
				if err := rebuildOrder(ctx, r.store, c); err != nil {
					return err
				}
				if stored == 2 {
					// Format 2's index entries are format 3's: only the
					// order keys were missing, unless a rebuild was cut short.
					_, err := r.store.Get(ctx, keys.IndexRebuild(c.rid))
					if errors.Is(err, storage.ErrNotFound) {
						continue
					}
					if err != nil {
						return err
					}
				} else if err := dropLegacyIndex(ctx, r.store, c.rid); err != nil {
					return err
				}
			}
			if err := r.rebuildIndex(ctx, c); err != nil {
				return err
			}
		}
	}
	if current {
		return nil
	}
	b := r.store.NewBatch()
	defer b.Close()
	if err := b.Set(keys.MetaIndexFormat, binary.BigEndian.AppendUint64(nil, indexFormat)); err != nil {
		return err
	}
	return b.Commit(ctx)
}

// dropLegacyIndex deletes the index entries of format 1, which shared the
// expiry index's prefix: X<rid> then a path length (a uvarint, at least 1)
// where expiry entries have their kind (0 or 1). A length of 1 is the path
// "/", so its entries go on with '/' where an expiry time has 0x00.
func dropLegacyIndex(ctx context.Context, s storage.Store, collRID []byte) error {
	p := keys.ExpiryPrefix(collRID)
	if err := purgeRange(ctx, s, append(slices.Clone(p), 2), storage.PrefixEnd(p)); err != nil {
		return err
	}
	root := append(slices.Clone(p), 1, '/')
	return purgeRange(ctx, s, root, storage.PrefixEnd(root))
}

// rebuildIndex replaces every index entry of c with those its items and
// indexing policy give, a chunk of items per batch. Nothing may write c's
// items meanwhile, and no query may use c's index before it returns.
func (r *rebuilder) rebuildIndex(ctx context.Context, c *Container) error {
	if err := purgePrefix(ctx, r.store, keys.IndexPrefix(c.rid)); err != nil {
		return err
	}
	prefix := keys.ItemContainerPrefix(c.rid)
	lower, upper := prefix, storage.PrefixEnd(prefix)
	start, lastLog := time.Now(), time.Now()
	items := 0
	for chunks := 1; ; chunks++ {
		next, n, err := r.indexChunk(ctx, c, lower, upper)
		items += n
		if err != nil || next == nil {
			if err == nil && chunks > 1 {
				r.log.Info("index rebuilt", "database", c.db.ID, "container", c.ID, "items", items, "took", time.Since(start).Round(time.Millisecond))
			}
			return err
		}
		if time.Since(lastLog) > rebuildLogEvery {
			lastLog = time.Now()
			r.log.Info("rebuilding index", "database", c.db.ID, "container", c.ID, "items so far", items)
		}
		lower = next
	}
}

// rebuildLogEvery is how often a long index rebuild logs its progress.
const rebuildLogEvery = 5 * time.Second

// indexChunk indexes up to rebuildChunk items from lower on, and returns the
// key to go on from, nil after the last chunk (whose batch also removes the
// container's rebuild mark), and how many items it indexed.
func (r *rebuilder) indexChunk(ctx context.Context, c *Container, lower, upper []byte) (next []byte, n int, err error) {
	it, err := r.store.NewIterator(ctx, lower, upper, false)
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	b := r.store.NewBatch()
	defer b.Close()
	for ; it.Next(); n++ {
		if n == rebuildChunk {
			next = bytes.Clone(it.Key())
			break
		}
		key := bytes.Clone(it.Key())
		item, err := decodeItem(key, it.Value())
		if err != nil {
			return nil, n, err
		}
		entries, err := c.indexEntries(item.doc, key)
		if err != nil {
			return nil, n, err
		}
		for _, k := range entries {
			if err := b.Set(k, nil); err != nil {
				return nil, n, err
			}
		}
	}
	if err := it.Err(); err != nil {
		return nil, n, err
	}
	if next == nil {
		if err := b.Delete(keys.IndexRebuild(c.rid)); err != nil {
			return nil, n, err
		}
		// Other gateways, on a shared store, reload the catalog and
		// query the index again.
		if err := r.seam.catalogChanged(b); err != nil {
			return nil, n, err
		}
	}
	return next, n, b.Commit(ctx)
}

// lockAllPartitions takes every partition write lock, in order, so that no
// item is written until the returned function releases them.
func (r *rebuilder) lockAllPartitions() (unlock func()) {
	for i := range r.locks {
		r.locks[i].Lock()
	}
	return func() {
		for i := range r.locks {
			r.locks[i].Unlock()
		}
	}
}

// rebuildExpiry replaces c's expiry index with the entries its items and
// defaultTtl give, a chunk of items per batch, the last of which removes
// the container's keys.ExpiryRebuild mark. Nothing may write c's items
// meanwhile.
func (r *rebuilder) rebuildExpiry(ctx context.Context, c *Container) error {
	if err := purgePrefix(ctx, r.store, keys.ExpiryPrefix(c.rid)); err != nil {
		return err
	}
	prefix := keys.ItemContainerPrefix(c.rid)
	lower, upper := prefix, storage.PrefixEnd(prefix)
	if expiryModeOf(c.ttl) == expiryOff {
		lower = upper // nothing to index: the last batch removes the mark
	}
	for {
		next, err := r.expiryChunk(ctx, c, lower, upper)
		if err != nil || next == nil {
			return err
		}
		lower = next
	}
}

// expiryChunk writes the expiry entries of up to rebuildChunk items from
// lower on, and returns the key to go on from, nil after the last chunk
// (whose batch also removes the container's mark).
func (r *rebuilder) expiryChunk(ctx context.Context, c *Container, lower, upper []byte) (next []byte, err error) {
	b := r.store.NewBatch()
	defer b.Close()
	if bytes.Compare(lower, upper) < 0 {
		it, err := r.store.NewIterator(ctx, lower, upper, false)
		if err != nil {
			return nil, err
		}
		defer it.Close()
		for n := 0; it.Next(); n++ {
			if n == rebuildChunk {
				next = bytes.Clone(it.Key())
				break
			}
			item, err := decodeItem(it.Key(), it.Value())
			if err != nil {
				return nil, err
			}
			if k := c.expiryKeyOf(item); k != nil {
				if err := b.Set(k, bytes.Clone(it.Key())); err != nil {
					return nil, err
				}
			}
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	if next == nil {
		if err := b.Delete(keys.ExpiryRebuild(c.rid)); err != nil {
			return nil, err
		}
	}
	return next, b.Commit(ctx)
}

// upgradeExpiry runs at Open once the catalog is loaded: in a store of a
// layout before format 3, which kept an expiry entry for every item that
// may expire, it drops the entries the containers' defaultTtl does not keep
// (idempotent: engines opening one shared store at once may both run it)
// and records the format; then it finishes the builds a crash cut short.
func (r *rebuilder) upgradeExpiry(ctx context.Context, stored uint64) error {
	for _, db := range r.catalog.dbs {
		for _, c := range db.colls {
			if stored < 3 {
				var drop []byte
				switch expiryModeOf(c.ttl) {
				case expiryOff:
					drop = keys.ExpiryPrefix(c.rid)
				case expiryDeadlines:
					drop = keys.ExpiryKindPrefix(c.rid, keys.ExpiryByModified)
				}
				if drop != nil {
					if err := purgePrefix(ctx, r.store, drop); err != nil {
						return err
					}
				}
			}
			_, err := r.store.Get(ctx, keys.ExpiryRebuild(c.rid))
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if err := r.rebuildExpiry(ctx, c); err != nil {
				return err
			}
		}
	}
	if stored >= keys.Format {
		return nil
	}
	b := r.store.NewBatch()
	defer b.Close()
	if err := b.Set(keys.MetaFormat, binary.BigEndian.AppendUint64(nil, keys.Format)); err != nil {
		return err
	}
	return b.Commit(ctx)
}
