package engine

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
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

// sharedState is the engine's state for a shared store.
type sharedState struct {
	store storage.Shared
	// version is the catalog version the cache was loaded at.
	version atomic.Pointer[[]byte]
	// lock is the batch holding the store's catalog lock while catMu is
	// held for writing (guarded by catMu).
	lock storage.SharedBatch
	// finished is the highest LSN this engine has finished, which a
	// change-feed read waits for the watermark to cover.
	finished atomic.Uint64
	// open holds the batches of numbers allocated outside partitions, by
	// number, until finish.
	open sync.Map
	// newest is the highest LSN this engine has handed out and inflight
	// how many of its LSNs are handed out and not finished, for Stats: the
	// other gateways' are not known here.
	newest   atomic.Uint64
	inflight atomic.Int64
	// placer and placements: the store's places and where the ranges
	// live, when it has several (engine/placement.go); finishedAt is
	// finished per place (an LSN's place is the LSN mod the places).
	placer     placer
	placements *placements
	finishedAt []atomic.Uint64
	// onSettleWait, when set (by tests), is called each time a
	// change-feed read waits for the watermark to cover what it must show.
	onSettleWait func()
}

// handedOut notes LSN n given to a write of this engine, which finishes
// with done.
func (s *sharedState) handedOut(n uint64) {
	s.inflight.Add(1)
	for {
		old := s.newest.Load()
		if n <= old || s.newest.CompareAndSwap(old, n) {
			return
		}
	}
}

func (s *sharedState) done() { s.inflight.Add(-1) }

func newSharedState(store storage.Store) *sharedState {
	s, ok := store.(storage.Shared)
	if !ok {
		return nil
	}
	seam := &sharedState{store: s}
	if p, ok := store.(placer); ok && p.Places() > 1 {
		seam.placer, seam.placements = p, &placements{n: p.Places()}
		seam.finishedAt = make([]atomic.Uint64, p.Places())
		p.SetRouter(seam.placements)
	}
	empty := []byte{}
	seam.version.Store(&empty)
	return seam
}

// catalogVersion reads the store's catalog version through r.
func catalogVersion(ctx context.Context, r storage.Reader) ([]byte, error) {
	v, err := r.Get(ctx, keys.MetaCatalogVersion)
	if errors.Is(err, storage.ErrNotFound) {
		return []byte{}, nil
	}
	return v, err
}

// cachedContainerShared is cachedContainer on a shared store.
func (e *Engine) cachedContainerShared(ctx context.Context, db, name string) (*Container, []byte, error) {
	e.catMu.mu.RLock()
	c, err := e.lookupContainer(db, name)
	version := *e.shared.version.Load()
	e.catMu.mu.RUnlock()
	if err == nil {
		return c, version, nil
	}
	if err := e.catMu.RLockCurrent(ctx); err != nil {
		return nil, nil, err
	}
	defer e.catMu.RUnlock()
	c, err = e.lookupContainer(db, name)
	if err != nil {
		return nil, nil, err
	}
	return c, *e.shared.version.Load(), nil
}

// catalogMoved reloads the catalog, which the store says is at version v,
// unless the cache is there already.
func (e *Engine) catalogMoved(ctx context.Context, v []byte) error {
	e.catMu.mu.Lock()
	defer e.catMu.mu.Unlock()
	return e.reloadCatalogLocked(ctx, v)
}

// readItemShared is ReadItem on a shared store: the item, the catalog
// version and the watermark in one round trip. If the version is not the
// one the container was looked up at, the catalog is reloaded and the read
// made again by the container's current rules.
func (e *Engine) readItemShared(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	for {
		c, version, err := e.cachedContainer(ctx, req.Database, req.Container)
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
			cur, err := e.Container(ctx, req.Database, req.Container)
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
		values, w, err := e.shared.storeFor(c, p).GetAll(ctx, [][]byte{keys.MetaCatalogVersion, key})
		if err != nil {
			return nil, err
		}
		v := values[0]
		if v == nil {
			v = []byte{}
		}
		if !bytes.Equal(v, version) {
			if err := e.catalogMoved(ctx, v); err != nil {
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
		if c.expired(it, e.now().Unix()) {
			return nil, notFound()
		}
		return readResult(it, req.IfNoneMatch, session), nil
	}
}

// sessionLSN is the session token's LSN for a store watermark w: the
// highest LSN at or below which every write has finished (0: unknown).
func sessionLSN(w uint64) uint64 {
	if w == 0 {
		return 0
	}
	return w - 1
}

// refreshCatalog reloads the catalog when the store's version differs from
// the cache's. A store error leaves the cache as it is and is returned
// (RLock ignores it: its request then meets the store's error itself;
// RLockCurrent returns it).
func (e *Engine) refreshCatalog(ctx context.Context) error {
	v, err := catalogVersion(ctx, e.store)
	if err != nil {
		return err
	}
	if bytes.Equal(v, *e.shared.version.Load()) {
		return nil
	}
	e.catMu.mu.Lock()
	defer e.catMu.mu.Unlock()
	return e.reloadCatalogLocked(ctx, v)
}

// reloadCatalogLocked reloads the catalog, which was at another version
// than v. The caller holds catMu for writing. On failure the cache stays
// as it was, at its old version, and the error is returned.
func (e *Engine) reloadCatalogLocked(ctx context.Context, v []byte) error {
	if bytes.Equal(v, *e.shared.version.Load()) {
		return nil
	}
	old, oldOffers := e.dbs, e.offers
	e.dbs, e.offers = map[string]*Database{}, map[string][]byte{}
	err := e.loadCatalog(ctx)
	if err == nil {
		err = e.loadOffers(ctx)
	}
	if err != nil {
		if ctx.Err() == nil { // a request that went away is no failure of the store
			e.log.Warn("reloading the catalog failed", "error", err)
		}
		e.dbs, e.offers = old, oldOffers
		return err
	}
	// A container whose index another gateway is rebuilding for a new
	// policy is queried by scanning until the rebuild's last batch (which
	// bumps the version again) removes the mark.
	for _, db := range e.dbs {
		for _, c := range db.colls {
			if _, err := e.store.Get(ctx, keys.IndexRebuild(c.rid)); err == nil {
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
	e.search.forgetDeleted(e.dbs)
	e.shared.version.Store(&v)
	return nil
}

// lockCatalog is catMu.Lock on a shared store.
func (e *Engine) lockCatalog(ctx context.Context) error {
	b, err := e.shared.store.NewSharedBatch(ctx)
	if err != nil {
		return err
	}
	if err := b.Lock(ctx, keys.CatalogLock, true); err != nil {
		b.Close()
		return err
	}
	e.catMu.mu.Lock()
	e.shared.lock = b
	if v, err := catalogVersion(ctx, b); err == nil {
		e.reloadCatalogLocked(ctx, v)
	}
	return nil
}

// unlockCatalog releases what lockCatalog took.
func (e *Engine) unlockCatalog() {
	if e.shared.lock != nil {
		e.shared.lock.Close()
		e.shared.lock = nil
	}
	e.catMu.mu.Unlock()
}

// catalogBatchShared is catalogBatch on a shared store.
func (e *Engine) catalogBatchShared() (storage.Batch, error) {
	v := randomBytes(16)
	b := e.store.NewBatch()
	if err := b.Set(keys.MetaCatalogVersion, v); err != nil {
		b.Close()
		return nil, err
	}
	return &versionBatch{Batch: b, seam: e.shared, version: v}, nil
}

// versionBatch is a catalog batch: once committed, the cache (updated by
// the caller under catMu) is at its version.
type versionBatch struct {
	storage.Batch
	seam    *sharedState
	version []byte
}

func (b *versionBatch) Commit(ctx context.Context) error {
	if err := b.Batch.Commit(ctx); err != nil {
		return err
	}
	b.seam.version.Store(&b.version)
	return nil
}

func (b *versionBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	return storage.CommitDurable(ctx, b.Commit)
}

// beginShared starts a transaction on partition p of c in shared mode: the
// catalog lock shared, the partition's lock exclusive, and a check that the
// catalog has not moved under c, all in one round trip with the
// transaction's sequence number and the reads of keys reads
// (SharedBatch.Begin). A transaction that writes nothing (one refused
// by a precondition, say) then has a number it does not use, which only
// costs the server a transaction id. stale reports that the catalog had
// moved (it is reloaded; the caller looks c up again).
func (e *Engine) beginShared(ctx context.Context, c *Container, p *partition, reads [][]byte) (b storage.SharedBatch, pre *prefetched, stale bool, err error) {
	b, err = e.shared.storeFor(c, p).NewSharedBatch(ctx)
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
	if !bytes.Equal(v, *e.shared.version.Load()) {
		b.Close()
		e.catalogMoved(ctx, v)
		return nil, nil, true, nil
	}
	// The cache may have been reloaded, retiring c, after the caller
	// looked c up: the version matches the reloaded cache, not c.
	if c.retired.Load() {
		b.Close()
		return nil, nil, true, nil
	}
	if len(reads) > 0 {
		pre = &prefetched{values: make(map[string][]byte, len(reads))}
		for i, key := range reads {
			pre.values[string(key)] = values[1+i]
		}
	}
	return b, pre, false, nil
}

// prefetched is the keys a shared transaction read as it began, under its
// partition's lock, and their values (nil: absent), for its first read of
// each: no other transaction can change an item of the partition before it
// ends.
type prefetched struct {
	values map[string][]byte
}

// prefetchedValue returns the value key had as the transaction began, if
// it was read then and the transaction has not written it since (put and
// remove forget it: the batch's own write is the answer then).
func (t *txn) prefetchedValue(key []byte) (value []byte, ok bool) {
	if t.pre == nil {
		return nil, false
	}
	value, ok = t.pre.values[string(key)]
	return value, ok
}

// forgetPrefetched drops key's prefetched value, which the transaction's
// write of key makes stale.
func (t *txn) forgetPrefetched(key []byte) {
	if t.pre != nil {
		delete(t.pre.values, string(key))
	}
}

// sharedWatermark is the highest LSN at or below which every write has
// finished, on every gateway.
func (s *sharedState) watermark(ctx context.Context) (uint64, error) {
	w, err := s.store.Watermark(ctx)
	if err != nil {
		return 0, err
	}
	if w == 0 {
		return 0, nil
	}
	return w - 1, nil
}

// settleShared waits, at most timeout, until the watermark covers every
// write this engine has finished, and returns it.
func (s *sharedState) settle(ctx context.Context, timeout time.Duration) (uint64, error) {
	target := s.finished.Load()
	deadline := time.Now().Add(timeout)
	for {
		w, err := s.watermark(ctx)
		if err != nil {
			return 0, err
		}
		if w >= target || time.Now().After(deadline) || ctx.Err() != nil {
			return w, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// sharedSweepLoop runs the TTL sweep while this engine holds the duty
// "ttl", taking it again whenever it is lost.
func (e *Engine) sharedSweepLoop(interval time.Duration) {
	defer e.bg.Done()
	ctx := e.bgCtx
	for !e.stopping() {
		lost, release, err := e.shared.store.Lead(ctx, "ttl")
		if err != nil {
			if e.stopping() || e.storeClosed(ctx, err) {
				// A closed store does not open again: nothing to sweep.
				return
			}
			e.log.Warn("taking the TTL sweep duty failed", "error", err)
			select {
			case <-e.stop:
				return
			case <-time.After(time.Second):
			}
			continue
		}
		e.sweepWhileLeading(ctx, interval, lost)
		release()
	}
}

func (e *Engine) sweepWhileLeading(ctx context.Context, interval time.Duration, lost <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-lost:
			return
		case <-tick.C:
			if _, err := e.sweep(ctx); err != nil && e.storeClosed(ctx, err) {
				return // then Lead fails with it too, and the loop ends
			} else if err != nil && ctx.Err() == nil { // Close ends a sweep: no failure
				e.log.Warn("the TTL sweep failed", "error", err)
			}
		}
	}
}

// inPartitionShared is inPartition on a shared store: the transaction is a
// shared batch holding the partition's lock (and the catalog's, shared)
// until it commits, and its LSN is the batch's sequence number. ids names
// the items the transaction reads: they are read as it begins, in the same
// round trip.
func (e *Engine) inPartitionShared(ctx context.Context, c *Container, pk PartitionKey, ids []string, fn func(t *txn) error) error {
	for {
		p, perr := c.partition(pk)
		if perr != nil {
			return perr
		}
		if !c.retired.Load() {
			reads := make([][]byte, 0, len(ids))
			for _, id := range ids {
				if id != "" {
					reads = append(reads, p.itemKey(id))
				}
			}
			b, pre, stale, err := e.beginShared(ctx, c, p, reads)
			if err != nil {
				return err
			}
			// The version check alone misses a c retired while this
			// writer waited for the locks: a replace on this gateway, or
			// a reload by another writer, that left the cache at the
			// store's version. Both retire c before they let go.
			if !stale && !c.retired.Load() {
				return e.runShared(ctx, b, p, pre, fn)
			}
			if !stale {
				b.Close()
			}
		}
		// The catalog moved (here or on another gateway): write by the
		// container's current rules.
		next, err := e.successor(ctx, c)
		if err != nil {
			return err
		}
		c = next
	}
}

func (e *Engine) runShared(ctx context.Context, b storage.SharedBatch, p *partition, pre *prefetched, fn func(t *txn) error) error {
	defer b.Close()
	t := &txn{e: e, p: p, b: b, sb: b, now: e.now(), pre: pre}
	defer func() {
		if t.lsn != 0 {
			e.shared.done()
		}
	}()
	if err := fn(t); err != nil {
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
		e.shared.noteFinished(t.lsn)
	}
	return nil
}

// sequenceSource is implemented by shared stores that hand out a sequence
// number without a batch (storage/postgres: a transaction id taken by a
// statement of its own, on no held connection).
type sequenceSource interface {
	NextSequence(ctx context.Context) (uint64, error)
}

// allocate hands out a number outside a partition transaction: catalog
// changes, which number their ETags and RIDs with it and write no
// change-feed entries, so the watermark may pass it before they commit.
// The number comes from the store without holding a connection: a
// catalog change holds the catalog lock while writers wait for it holding
// theirs, and must not wait for one of them.
func (s *sharedState) allocate(ctx context.Context) (uint64, error) {
	if src, ok := s.store.(sequenceSource); ok {
		n, err := src.NextSequence(ctx)
		if err == nil {
			s.handedOut(n)
		}
		return n, err
	}
	b, err := s.store.NewSharedBatch(ctx)
	if err != nil {
		return 0, err
	}
	n, err := b.Sequence(ctx)
	if err != nil {
		b.Close()
		return 0, err
	}
	s.open.Store(n, b)
	s.handedOut(n)
	return n, nil
}

func (s *sharedState) finish(n uint64) {
	if b, ok := s.open.LoadAndDelete(n); ok {
		b.(storage.SharedBatch).Close()
	}
	s.done()
	s.noteFinished(n)
}

func (s *sharedState) noteFinished(n uint64) {
	if s.finishedAt != nil {
		at := &s.finishedAt[n%uint64(len(s.finishedAt))]
		for {
			f := at.Load()
			if n <= f || at.CompareAndSwap(f, n) {
				break
			}
		}
	}
	for {
		f := s.finished.Load()
		if n <= f || s.finished.CompareAndSwap(f, n) {
			return
		}
	}
}

// itemsSnapshotShared is itemsSnapshot on a shared store.
func (e *Engine) itemsSnapshotShared(ctx context.Context, db, name string, extra func(c *Container) [][]byte, settle time.Duration) (c *Container, snap storage.Snapshot, values [][]byte, watermark uint64, err error) {
	deadline := time.Now().Add(settle)
	// ended is the highest sequence number that had ended, on any
	// gateway, when the first snapshot was taken: every write acknowledged
	// before this read began is at or below it. Fixed at the first
	// snapshot, so that writes committing meanwhile do not move it.
	var ended uint64
	first := true
	for {
		c, version, err := e.cachedContainer(ctx, db, name)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		reads := [][]byte{keys.MetaCatalogVersion}
		if extra != nil {
			reads = append(reads, extra(c)...)
		}
		snap, values, w, err := e.shared.store.SnapshotAll(ctx, reads)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		v := values[0]
		if v == nil {
			v = []byte{}
		}
		if !bytes.Equal(v, version) {
			snap.Close()
			if err := e.catalogMoved(ctx, v); err != nil {
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
		if settle > 0 && !e.shared.covers(snap, w, ended) && time.Now().Before(deadline) {
			// An older transaction, on some gateway, is still open below
			// a write acknowledged before this read, on this gateway or
			// another.
			snap.Close()
			if h := e.shared.onSettleWait; h != nil {
				h()
			}
			time.Sleep(time.Millisecond)
			continue
		}
		return c, snap, values[1:], w, nil
	}
}

// pending is sequencer.pending on a shared store: this engine's LSNs only.
func (s *sharedState) pending() (newest uint64, inflight int) {
	return s.newest.Load(), int(s.inflight.Load())
}

// covers reports whether a snapshot with watermark w covers every write
// this engine has finished, and every write any gateway had finished when
// the read began (ended, of the store's first snapshot: storage.Ended): on
// several places, each place's own watermark covers what this engine
// finished there (their numbers are not one sequence, and the lowest of
// them would wait on an idle place).
func (s *sharedState) covers(snap storage.Snapshot, w, ended uint64) bool {
	pw, ok := snap.(placeWatermark)
	if s.finishedAt == nil || !ok {
		return sessionLSN(w) >= max(s.finished.Load(), ended)
	}
	for i := range s.finishedAt {
		if f := s.finishedAt[i].Load(); f != 0 && sessionLSN(pw.PlaceWatermark(i)) < f {
			return false
		}
	}
	return true
}
