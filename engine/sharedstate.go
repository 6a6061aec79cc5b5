package engine

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/pkranges"
	"github.com/orrery-db/orrery/storage"
)

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

func newSharedState(store storage.Shared) *sharedState {
	seam := &sharedState{store: store}
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

// sessionLSN is the session token's LSN for a store watermark w: the
// highest LSN at or below which every write has finished (0: unknown).
func sessionLSN(w uint64) uint64 {
	if w == 0 {
		return 0
	}
	return w - 1
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

// placeRanges gives a new container's ranges their places, when the store
// has several.
func (s *sharedState) placeRanges(rec *containerRecord, rid []byte) {
	if s.placements == nil || s.placements.n < 2 {
		return
	}
	set := rec.Ranges
	if set == nil {
		set = pkranges.Single
	}
	next := *set
	next.Ranges = append([]PartitionKeyRange(nil), set.Ranges...)
	h := fnv.New32a()
	h.Write(rid)
	start := int(h.Sum32() % uint32(s.placements.n))
	for i := range next.Ranges {
		next.Ranges[i].Place = (start + i) % s.placements.n
		if propsHashV1(rec.Props) {
			// A V1 container's ranges are not spans of its item keys:
			// they all live in one place.
			next.Ranges[i].Place = start
		}
	}
	rec.Ranges = &next
}

// notePlacement records where c's ranges live, for the store's router.
func (s *sharedState) notePlacement(c *Container) {
	if s.placements != nil {
		s.placements.note(c)
	}
}

// storeFor is the store a transaction or point read of partition p of c
// runs on: its range's place, or the store.
func (s *sharedState) storeFor(c *Container, p *partition) storage.Shared {
	if s.placements == nil {
		return s.store
	}
	v, ok := s.placements.by.Load(string(c.rid))
	if !ok {
		s.placements.note(c)
		v, _ = s.placements.by.Load(string(c.rid))
	}
	return s.placer.Place(v.(*containerPlacement).placeOfEPK(c.itemEPK(p.prefix)))
}

// scopePlace is the one place a change-feed scope's items live in, or -1
// when they span several.
func (s *sharedState) scopePlace(c *Container, scope *feed.Scope) int {
	if s.placements == nil {
		return -1
	}
	if scope.Prefix != nil {
		return s.placements.itemPlace(scope.Prefix)
	}
	place := -1
	for _, r := range c.ranges().Ranges {
		lo, _ := parseEPKBound(r.MinInclusive, "min")
		var hi []byte
		if r.MaxExclusive != "FF" {
			hi, _ = parseEPKBound(r.MaxExclusive, "max")
		}
		if scope.Max != nil && lo != nil && bytes.Compare(lo, scope.Max) >= 0 ||
			scope.Min != nil && hi != nil && bytes.Compare(hi, scope.Min) <= 0 {
			continue // no overlap
		}
		switch {
		case place < 0:
			place = r.Place % s.placements.n
		case place != r.Place%s.placements.n:
			return -1
		}
	}
	return place
}

// scopeWatermark is the watermark of the one place a change-feed scope's
// items live in, from the page's snapshot; 0 when the store has one place
// or the scope spans several.
func (s *sharedState) scopeWatermark(c *Container, snap storage.Snapshot, scope *feed.Scope) uint64 {
	if s == nil || s.placements == nil {
		return 0
	}
	pw, ok := snap.(placeWatermark)
	if !ok {
		return 0
	}
	if i := s.scopePlace(c, scope); i >= 0 {
		return pw.PlaceWatermark(i)
	}
	return 0
}

// placeCount is the number of places of the store, 1 for most.
func (s *sharedState) placeCount() int {
	if s.placements == nil {
		return 1
	}
	return s.placements.n
}

// moveRange copies the keys of c's items whose effective partition key is
// in b from place from to place to: the items and their order, index,
// unique-key, feed, RID, expiry and change-log entries. It then raises the
// new place's floor above the old place's watermark, so that the range's
// change feed goes on rising there and a continuation of it stays valid.
// The caller holds the catalog for a change (every place's catalog lock,
// so no writer of any range is open) and flips the range's place in the
// catalog before it calls finish, which deletes the old copy. A crash
// between leaves a copy that reads pass over (it is not where the range
// map says), and the space it holds. The move is logged to log.
func (s *sharedState) moveRange(ctx context.Context, c *Container, b epkBounds, from, to int, log *slog.Logger) (finish func(context.Context) error, err error) {
	began := time.Now()
	src, dst := s.placer.Place(from), s.placer.Place(to)
	copied, dropped := dst.NewBatch(), src.NewBatch()
	defer func() {
		if err != nil {
			copied.Close()
			dropped.Close()
		}
	}()
	in := func(itemKey []byte) bool { return c.inBounds(b, itemKey) }
	for _, prefix := range [][]byte{keys.ItemContainerPrefix(c.rid), keys.OrderPrefix(c.rid), keys.IndexPrefix(c.rid),
		keys.UniquePrefix(c.rid), keys.FeedPrefix(c.rid), keys.RIDPrefix(c.rid), keys.ExpiryPrefix(c.rid), keys.VersionPrefix(c.rid)} {
		it, err := src.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
		if err != nil {
			return nil, err
		}
		for it.Next() {
			k, v := it.Key(), it.Value()
			var itemKey []byte
			switch prefix[0] {
			case keys.Item, keys.Order:
				itemKey = k
			case keys.Index:
				if start, ok := keys.IndexEntryValueStart(k); ok && start < len(k) {
					itemKey = c.indexedItemKey(k, start)
				}
			case keys.Version:
				if rec, err := feed.DecodeRecord(0, v); err == nil {
					itemKey = rec.ItemKey
				}
			default:
				itemKey = v
			}
			if itemKey == nil || !in(itemKey) {
				continue
			}
			k = append([]byte(nil), k...)
			if err := copied.Set(k, append([]byte(nil), v...)); err != nil {
				it.Close()
				return nil, err
			}
			if err := dropped.Delete(k); err != nil {
				it.Close()
				return nil, err
			}
		}
		if err := it.Close(); err != nil {
			return nil, err
		}
	}
	n := copied.Count()
	if err := copied.Commit(ctx); err != nil {
		return nil, err
	}
	w, err := src.Watermark(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.placer.RaiseFloor(ctx, to, w); err != nil {
		return nil, err
	}
	log.Info("partition key range moved", "database", c.db.ID, "container", c.ID, "from", from, "to", to, "keys", n, "took", time.Since(began).Round(time.Millisecond))
	return func(ctx context.Context) error {
		defer dropped.Close()
		return dropped.Commit(ctx)
	}, nil
}
