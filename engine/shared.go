package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// When the store implements storage.Shared, several engines (one per
// gateway process) run on it as one database, and what one engine does in
// process on its own store goes through the store instead:
//
//   - A logical partition's writers are ordered by a lock of the store
//     (SharedBatch.Lock), held by the transaction's batch until it commits,
//     not by a mutex of the process.
//   - A write's sequence number (LSN) is its batch's Sequence, taken after
//     the lock, and the change feed reads up to the store's Watermark, so
//     no reader, on any gateway, passes over a write that commits late.
//     A change-feed read waits, for a bounded time, until the watermark
//     covers every write that had ended, on any gateway, when the read
//     began (storage.Ended, told by its first snapshot): a write
//     acknowledged on one gateway is in the next page read on another,
//     though an older transaction was still open.
//   - The presence filter is off: it knows only this process's writes, and
//     would let a create miss an item another gateway wrote.
//   - The catalog cache follows the store: every catalog change bumps a
//     version key in its own transaction, under the store's catalog lock;
//     each lookup reads the version (one point read) and reloads the
//     catalog when it moved; every write takes the catalog lock shared and
//     checks the version in its transaction, so no write lands in a
//     container another gateway has just deleted or changed. Item requests
//     pay no round trip for this: they look the container up in the cache
//     alone (CachedContainer; a miss checks the store), and a point read
//     reads the version in the same statement as the item
//     (Shared.GetAll), a write under its locks in the same round trip as
//     the locks (SharedBatch.Begin); a version that moved reloads the
//     catalog and the request starts again.
//   - An item request's session token is the watermark read with its item
//     (GetAll) or with its COMMIT (SharedBatch.CommitWatermark), not by a
//     round trip of its own (ItemResult.SessionLSN).
//   - The TTL sweep runs on one gateway at a time, the holder of the duty
//     "ttl" (Shared.Lead).
//
// Without storage.Shared none of this runs: the in-process paths are as
// they were.

// sharedSeam is the seam of an engine sharing its store with others: the
// store holds the locks and hands out the LSNs, and every read checks the
// catalog cache against the store's catalog version in its own round trip.
//
// It holds the parts it uses, not the engine; Open builds it.
type sharedSeam struct {
	store storage.Store
	// state is what the engine keeps of the shared store: its LSNs,
	// watermark, catalog version and places (sharedstate.go).
	state   *sharedState
	catalog *catalog
	// search is the containers' search indexes (the engine's).
	search *searchIndexes
	// sweeper is the TTL sweep, which runs through this seam.
	sweeper *sweeper
	log     *slog.Logger
	now     func() time.Time
	// stop, ctx and bg are Close's signal and the background work's
	// context and wait group (the engine's).
	stop stopSignal
	ctx  context.Context
	bg   *sync.WaitGroup
	// noCreationOrder makes the transactions write no order key (only the
	// benchmark of creation order sets it: withoutCreationOrder).
	noCreationOrder bool
}

func (s *sharedSeam) containerMoved(ctx context.Context, db, coll string, c *Container) (bool, error) {
	cur, err := s.catalog.Container(ctx, db, coll)
	if err != nil {
		return false, err
	}
	return cur != c, nil
}

func (*sharedSeam) snapshotSession(watermark uint64) uint64 { return watermark }

// absent is false: another gateway may have written the key.
func (*sharedSeam) absent(*Container, []byte) bool { return false }

func (*sharedSeam) notePresent(*Container, []byte) {}

func (*sharedSeam) catalogChanged(b storage.Batch) error {
	return b.Set(keys.MetaCatalogVersion, randomBytes(16))
}

func (s *sharedSeam) placeRanges(rec *containerRecord, rid []byte) { s.state.placeRanges(rec, rid) }

func (s *sharedSeam) notePlacement(c *Container) { s.state.notePlacement(c) }

func (s *sharedSeam) placeCount() int { return s.state.placeCount() }

// cachedContainer is CachedContainer on a shared store, with the catalog
// version the cache was at when it answered.
func (s *sharedSeam) cachedContainer(ctx context.Context, db, name string) (*Container, []byte, error) {
	s.catalog.catMu.mu.RLock()
	c, err := s.catalog.lookupContainer(db, name)
	version := *s.state.version.Load()
	s.catalog.catMu.mu.RUnlock()
	if err == nil {
		return c, version, nil
	}
	if err := s.catalog.catMu.RLockCurrent(ctx); err != nil {
		return nil, nil, err
	}
	defer s.catalog.catMu.RUnlock()
	c, err = s.catalog.lookupContainer(db, name)
	if err != nil {
		return nil, nil, err
	}
	return c, *s.state.version.Load(), nil
}

// catalogMoved reloads the catalog, which the store says is at version v,
// unless the cache is there already.
func (s *sharedSeam) catalogMoved(ctx context.Context, v []byte) error {
	s.catalog.catMu.mu.Lock()
	defer s.catalog.catMu.mu.Unlock()
	return s.reloadCatalogLocked(ctx, v)
}

// readItem is ReadItem on a shared store: the item, the catalog
// version and the watermark in one round trip. If the version is not the
// one the container was looked up at, the catalog is reloaded and the read
// made again by the container's current rules.
func (s *sharedSeam) readItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	// A container the caller resolved is checked at the version it was
	// resolved at, as a lookup here would be.
	resolved := req.resolved()
	for {
		c, version, err := resolved.c, resolved.version, error(nil)
		if c == nil {
			c, version, err = s.cachedContainer(ctx, req.Database, req.Container)
		}
		resolved = ContainerRef{}
		if err != nil {
			return nil, err
		}
		if !req.HasPartitionKey {
			return nil, errPartitionKeyRequired
		}
		p, perr := c.partition(req.PartitionKey)
		if perr != nil {
			// Refused by the cached container's partition key: only if
			// the cache is current.
			cur, err := s.catalog.Container(ctx, req.Database, req.Container)
			if err != nil {
				return nil, err
			}
			if cur != c {
				continue
			}
			return nil, perr
		}
		if verr := validItemID(req.ID); verr != nil {
			return nil, verr
		}
		key := p.itemKey(req.ID)
		values, w, err := s.state.storeFor(c, p).GetAll(ctx, [][]byte{keys.MetaCatalogVersion, key})
		if err != nil {
			return nil, err
		}
		v := values[0]
		if v == nil {
			v = []byte{}
		}
		if !bytes.Equal(v, version) {
			if err := s.catalogMoved(ctx, v); err != nil {
				return nil, err
			}
			continue
		}
		session := sessionLSN(w)
		notFound := func() error {
			nf := NotFound(msgNotFound)
			nf.SessionLSN = session
			return nf
		}
		if values[1] == nil {
			return nil, notFound()
		}
		it, err := decodeItem(key, values[1])
		if err != nil {
			return nil, err
		}
		if c.expired(it, s.now().Unix()) {
			return nil, notFound()
		}
		res := readResult(it, req.IfNoneMatch, session)
		return &res, nil
	}
}

// refreshCatalog reloads the catalog when the store's version differs from
// the cache's. A store error leaves the cache as it is and is returned
// (RLock ignores it: its request then meets the store's error itself;
// RLockCurrent returns it).
func (s *sharedSeam) refreshCatalog(ctx context.Context) error {
	v, err := catalogVersion(ctx, s.store)
	if err != nil {
		return err
	}
	if bytes.Equal(v, *s.state.version.Load()) {
		return nil
	}
	s.catalog.catMu.mu.Lock()
	defer s.catalog.catMu.mu.Unlock()
	return s.reloadCatalogLocked(ctx, v)
}

// reloadCatalogLocked reloads the catalog, which was at another version
// than v. The caller holds catMu for writing. On failure the cache stays
// as it was, at its old version, and the error is returned.
func (s *sharedSeam) reloadCatalogLocked(ctx context.Context, v []byte) error {
	if bytes.Equal(v, *s.state.version.Load()) {
		return nil
	}
	old, oldOffers := s.catalog.dbs, s.catalog.offers
	s.catalog.dbs, s.catalog.offers = map[string]*Database{}, map[string][]byte{}
	err := s.catalog.loadCatalog(ctx)
	if err == nil {
		err = s.catalog.loadOffers(ctx)
	}
	if err != nil {
		if ctx.Err() == nil { // a request that went away is no failure of the store
			s.log.Warn("reloading the catalog failed", "error", err)
		}
		s.catalog.dbs, s.catalog.offers = old, oldOffers
		return err
	}
	// A container whose index another gateway is rebuilding for a new
	// policy is queried by scanning until the rebuild's last batch (which
	// bumps the version again) removes the mark.
	for _, db := range s.catalog.dbs {
		for _, c := range db.colls {
			if _, err := s.store.Get(ctx, keys.IndexRebuild(c.rid)); err == nil {
				c.indexRetired.Store(true)
			}
		}
	}
	// Writers holding an old Container look it up again (see inPartition).
	for _, db := range old {
		for _, c := range db.colls {
			c.retired.Store(true)
		}
	}
	s.search.forgetDeleted(s.catalog.dbs)
	s.state.version.Store(&v)
	return nil
}

// lockCatalog is catMu.Lock on a shared store.
func (s *sharedSeam) lockCatalog(ctx context.Context) error {
	b, err := s.state.store.NewSharedBatch(ctx)
	if err != nil {
		return err
	}
	if err := b.Lock(ctx, keys.CatalogLock, true); err != nil {
		b.Close()
		return err
	}
	s.catalog.catMu.mu.Lock()
	s.state.lock = b
	if v, err := catalogVersion(ctx, b); err == nil {
		s.reloadCatalogLocked(ctx, v)
	}
	return nil
}

// unlockCatalog releases what lockCatalog took.
func (s *sharedSeam) unlockCatalog() {
	if s.state.lock != nil {
		s.state.lock.Close()
		s.state.lock = nil
	}
	s.catalog.catMu.mu.Unlock()
}

// catalogBatch is Engine.catalogBatch on a shared store.
func (s *sharedSeam) catalogBatch() (storage.Batch, error) {
	v := randomBytes(16)
	b := s.store.NewBatch()
	if err := b.Set(keys.MetaCatalogVersion, v); err != nil {
		b.Close()
		return nil, err
	}
	return &versionBatch{Batch: b, seam: s.state, version: v}, nil
}

// beginShared starts a transaction on partition p of c in shared mode: the
// catalog lock shared, the partition's lock exclusive, and a check that the
// catalog has not moved under c, all in one round trip with the
// transaction's sequence number and the reads of keys reads
// (SharedBatch.Begin). A transaction that writes nothing (one refused
// by a precondition, say) then has a number it does not use, which only
// costs the server a transaction id. stale reports that the catalog had
// moved (it is reloaded; the caller looks c up again).
func (s *sharedSeam) beginShared(ctx context.Context, c *Container, p *partition, reads [][]byte) (b storage.SharedBatch, pre *prefetched, stale bool, err error) {
	b, err = s.state.storeFor(c, p).NewSharedBatch(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	toRead := append([][]byte{keys.MetaCatalogVersion}, reads...)
	values, err := b.Begin(ctx, []storage.LockRequest{
		{Key: keys.CatalogLock},
		{Key: keys.PartitionLock(c.rid, p.enc), Exclusive: true},
	}, toRead, true)
	if err != nil {
		b.Close()
		return nil, nil, false, err
	}
	v := values[0]
	if v == nil {
		v = []byte{}
	}
	if !bytes.Equal(v, *s.state.version.Load()) {
		b.Close()
		s.catalogMoved(ctx, v)
		return nil, nil, true, nil
	}
	// The cache may have been reloaded, retiring c, after the caller
	// looked c up: the version matches the reloaded cache, not c.
	if c.retired.Load() {
		b.Close()
		return nil, nil, true, nil
	}
	if len(reads) > 0 {
		// reads is the caller's, made for this call: kept, not copied.
		pre = newPrefetched(reads, values[1:])
	}
	return b, pre, false, nil
}

// sweepLoop runs the TTL sweep while this engine holds the duty
// "ttl", taking it again whenever it is lost.
func (s *sharedSeam) sweepLoop(interval time.Duration) {
	defer s.bg.Done()
	ctx := s.ctx
	for !s.stop.closed() {
		lost, release, err := s.state.store.Lead(ctx, "ttl")
		if err != nil {
			if s.stop.closed() || s.sweeper.storeClosed(ctx, err) {
				// A closed store does not open again: nothing to sweep.
				return
			}
			s.log.Warn("taking the TTL sweep duty failed", "error", err)
			select {
			case <-s.stop:
				return
			case <-time.After(time.Second):
			}
			continue
		}
		s.sweepWhileLeading(ctx, interval, lost)
		release()
	}
}

func (s *sharedSeam) sweepWhileLeading(ctx context.Context, interval time.Duration, lost <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-lost:
			return
		case <-tick.C:
			if _, err := s.sweeper.sweep(ctx); err != nil && s.sweeper.storeClosed(ctx, err) {
				return // then Lead fails with it too, and the loop ends
			} else if err != nil && ctx.Err() == nil { // Close ends a sweep: no failure
				s.log.Warn("the TTL sweep failed", "error", err)
			}
		}
	}
}

// inPartition is the partition transaction on a shared store: it is a
// shared batch holding the partition's lock (and the catalog's, shared)
// until it commits, and its LSN is the batch's sequence number. ids names
// the items the transaction reads: they are read as it begins, in the same
// round trip.
func (s *sharedSeam) inPartition(ctx context.Context, c *Container, pk PartitionKey, ids []string, r txnRunner) error {
	err := s.inPartitionAs(ctx, c, pk, ids, r, false)
	if errors.Is(err, storage.ErrExists) {
		// A key the transaction wrote as new (txn.insert) existed:
		// the store applied none of it. Run it again, from its reads
		// under the locks, writing every key by Set: whatever made the
		// key exist is read this time, or is overwritten as it always
		// was (a stale index entry, say).
		s.log.Warn("a write's key declared new existed; the write is run again", "error", err)
		err = s.inPartitionAs(ctx, c, pk, ids, r, true)
	}
	return err
}

// inPartitionAs is inPartition, once; plainSets is the txn's.
func (s *sharedSeam) inPartitionAs(ctx context.Context, c *Container, pk PartitionKey, ids []string, r txnRunner, plainSets bool) error {
	// When the catalog moved (here or on another gateway), onCurrent
	// writes by the container's current rules.
	_, room := r.room()
	return s.catalog.onCurrent(ctx, c, pk, room, func(c *Container, p *partition) (bool, error) {
		if c.retired.Load() {
			return false, nil
		}
		reads := make([][]byte, 0, len(ids))
		for _, id := range ids {
			if id != "" {
				reads = append(reads, p.itemKey(id))
			}
		}
		b, pre, stale, err := s.beginShared(ctx, c, p, reads)
		if err != nil {
			return true, err
		}
		// The version check alone misses a c retired while this
		// writer waited for the locks: a replace on this gateway, or
		// a reload by another writer, that left the cache at the
		// store's version. Both retire c before they let go.
		if !stale && !c.retired.Load() {
			return true, s.runShared(ctx, b, p, pre, r, plainSets)
		}
		if !stale {
			b.Close()
		}
		return false, nil
	})
}

func (s *sharedSeam) runShared(ctx context.Context, b storage.SharedBatch, p *partition, pre *prefetched, r txnRunner, plainSets bool) error {
	defer b.Close()
	t, _ := r.room()
	if t == nil {
		t = new(txn)
	}
	*t = txn{indexes: s.search, presence: s, lsns: s.state, noCreationOrder: s.noCreationOrder, p: p, b: b, sb: b, now: s.now(), pre: pre, plainSets: plainSets}
	defer func() {
		if t.lsn != 0 {
			s.state.done()
		}
	}()
	if err := r.run(t); err != nil {
		return err
	}
	if b.Count() == 0 {
		return nil
	}
	w, err := b.CommitWatermark(ctx)
	if err != nil {
		return err
	}
	t.session = sessionLSN(w)
	if t.lsn != 0 {
		s.state.noteFinished(t.lsn)
	}
	return nil
}

// current is the seam's current on a shared store: never.
func (*sharedSeam) current(*Container) bool { return false }

// itemsSnapshot is seam.itemsSnapshot on a shared store.
func (s *sharedSeam) itemsSnapshot(ctx context.Context, db, name string, extra func(c *Container) [][]byte, settle time.Duration) (c *Container, snap storage.Snapshot, values [][]byte, watermark uint64, err error) {
	deadline := time.Now().Add(settle)
	// ended is the highest sequence number that had ended, on any
	// gateway, when the first snapshot was taken: every write acknowledged
	// before this read began is at or below it. Fixed at the first
	// snapshot, so that writes committing meanwhile do not move it.
	var ended uint64
	first := true
	for {
		c, version, err := s.cachedContainer(ctx, db, name)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		reads := [][]byte{keys.MetaCatalogVersion}
		if extra != nil {
			reads = append(reads, extra(c)...)
		}
		snap, values, w, err := s.state.store.SnapshotAll(ctx, reads)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		v := values[0]
		if v == nil {
			v = []byte{}
		}
		if !bytes.Equal(v, version) {
			snap.Close()
			if err := s.catalogMoved(ctx, v); err != nil {
				return nil, nil, nil, 0, err
			}
			continue
		}
		if settle > 0 && first {
			first = false
			if en, ok := snap.(storage.Ended); ok {
				ended = en.Ended()
			}
		}
		if settle > 0 && !s.state.covers(snap, w, ended) && time.Now().Before(deadline) {
			// An older transaction, on some gateway, is still open below
			// a write acknowledged before this read, on this gateway or
			// another.
			snap.Close()
			if h := s.state.onSettleWait; h != nil {
				h()
			}
			time.Sleep(time.Millisecond)
			continue
		}
		return c, snap, values[1:], w, nil
	}
}

// containerScripts is scriptHost.containerScripts on a shared store.
func (s *sharedSeam) containerScripts(ctx context.Context, db, coll string, kind ScriptKind, ids []string) (*Container, []map[string]any, error) {
	props := make([]map[string]any, len(ids))
	for {
		c, version, err := s.cachedContainer(ctx, db, coll)
		if err != nil {
			return nil, nil, err
		}
		reads := [][]byte{keys.MetaCatalogVersion}
		for _, id := range ids {
			reads = append(reads, keys.ChildKey(c.rid, string(kind), id))
		}
		values, _, err := s.state.store.GetAll(ctx, reads)
		if err != nil {
			return nil, nil, err
		}
		v := values[0]
		if v == nil {
			v = []byte{}
		}
		if !bytes.Equal(v, version) {
			if err := s.catalogMoved(ctx, v); err != nil {
				return nil, nil, err
			}
			continue
		}
		for i, id := range ids {
			if values[1+i] == nil {
				// Absent by id: the id may be the script's RID.
				props[i], _, err = readScript(ctx, s.store, c, kind, id)
			} else {
				props[i], _, err = storedProps(values[1+i], nil, kind.singular(), id)
			}
			if err != nil {
				return nil, nil, err
			}
		}
		return c, props, nil
	}
}
