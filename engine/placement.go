package engine

import (
	"bytes"
	"context"
	"hash/fnv"
	"sync"
	"time"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/pkranges"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/placed"
)

// Ranges over several databases. A shared store may be spread over
// several (storage/placed: a PostgreSQL database each), its places. The
// catalog lives in place 0, with a copy of its version in every place; each
// partition key range of a container lives in one place, recorded in the
// range (PartitionKeyRange.Place), and everything of the range (its items,
// index entries, change-feed entries, unique keys, locks) lives there:
// a transaction of one logical partition runs on its range's place alone.
//
// Placement: a container's range i goes to place (h+i) mod n, h a hash of
// the container's RID, so that containers of one range spread too; a
// split's first child stays on its parent's place and the second moves to
// the next place (moveRange), online: writers wait on the catalog lock
// for the copy.
//
// The engine tells the store where keys live (placementRouter): the
// catalog's families in place 0; the catalog version and lock everywhere
// (a catalog change locks and bumps them in every place, in place order,
// and a writer checks its place's copy in the round trip that takes its
// locks, as on one database); an item's keys in its range's place, found
// from its effective partition key, or for entries keyed otherwise (feed,
// RID, expiry) from the item key they hold.

// placer is a shared store over several places (storage/placed).
type placer interface {
	Places() int
	Place(i int) storage.Shared
	SetRouter(placed.Router)
	RaiseFloor(ctx context.Context, i int, above uint64) error
}

// placements is where each container's ranges live, by container RID:
// what the router reads without the catalog lock, which the store's
// callers may hold.
type placements struct {
	n  int
	by sync.Map // string(collRID) → *containerPlacement
}

// containerPlacement is one container's ranges' lower bounds and places.
type containerPlacement struct {
	epkLen int
	lows   [][]byte // nil: the start of the key space
	places []int
}

// note records c's placement.
func (p *placements) note(c *Container) {
	set := c.ranges()
	cp := &containerPlacement{epkLen: c.epkLen()}
	for _, r := range set.Ranges {
		lo, _ := parseEPKBound(r.MinInclusive, "min")
		cp.lows = append(cp.lows, lo)
		cp.places = append(cp.places, r.Place%p.n)
	}
	p.by.Store(string(c.rid), cp)
}

// placeOfEPK is the place of the range holding epk.
func (cp *containerPlacement) placeOfEPK(epk []byte) int {
	place := cp.places[0]
	for i, lo := range cp.lows {
		if lo != nil && bytes.Compare(epk, lo) < 0 {
			break
		}
		place = cp.places[i]
	}
	return place
}

// itemPlace is the place of an item key (or of a key laid out like one
// after its family byte, an order key), or Anywhere.
func (p *placements) itemPlace(key []byte) int {
	if len(key) < 9 {
		return placed.Anywhere
	}
	v, ok := p.by.Load(string(key[1:9]))
	if !ok {
		return placed.Anywhere
	}
	cp := v.(*containerPlacement)
	if len(key) < 9+cp.epkLen {
		return placed.Anywhere
	}
	return cp.placeOfEPK(key[9 : 9+cp.epkLen])
}

// Key is placed.Router's.
func (p *placements) Key(key, value []byte) int {
	if len(key) == 0 {
		return 0
	}
	switch key[0] {
	case keys.Meta:
		if bytes.Equal(key, keys.MetaCatalogVersion) || bytes.Equal(key, keys.CatalogLock) {
			return placed.Everywhere
		}
		return 0
	case keys.Item, keys.Order:
		return p.itemPlace(key)
	case keys.Index:
		return p.indexPlace(key)
	case keys.Feed, keys.RID, keys.Expiry, keys.Unique:
		if len(value) > 0 && value[0] == keys.Item {
			return p.itemPlace(value)
		}
		return placed.Anywhere
	case keys.Version:
		if rec, err := feed.DecodeRecord(0, value); err == nil && value != nil {
			return p.itemPlace(rec.ItemKey)
		}
		return placed.Anywhere
	}
	return 0 // the catalog's families
}

// indexPlace is the place of an index entry: its item's.
func (p *placements) indexPlace(key []byte) int {
	start, ok := keys.IndexEntryValueStart(key)
	if !ok || start >= len(key) {
		return placed.Anywhere
	}
	rest := key[start:]
	suffix := rest[indexValueLen(rest):]
	return p.itemPlace(keys.ItemKeyFromSuffix(key[1:9], suffix))
}

// Span is placed.Router's: the catalog's families are in place 0, a span
// of one effective partition key in its range's place, anything else
// anywhere.
func (p *placements) Span(lower, upper []byte) int {
	if len(lower) == 0 || len(upper) == 0 {
		return placed.Anywhere
	}
	switch f := lower[0]; f {
	case keys.Database, keys.Container, keys.Child, keys.Offer, keys.User, keys.Permission, keys.PrincipalRID:
		if upper[0] == f || len(upper) == 1 && upper[0] == f+1 {
			return 0
		}
	case keys.Item, keys.Order:
		if upper[0] != f || len(lower) < 9 || len(upper) < 9 || !bytes.Equal(lower[1:9], upper[1:9]) {
			return placed.Anywhere
		}
		v, ok := p.by.Load(string(lower[1:9]))
		if !ok {
			return placed.Anywhere
		}
		cp := v.(*containerPlacement)
		end := 9 + cp.epkLen
		if len(lower) >= end && len(upper) >= end && bytes.Equal(lower[9:end], upper[9:end]) {
			return cp.placeOfEPK(lower[9:end])
		}
	}
	return placed.Anywhere
}

// placeRanges gives a new container's ranges their places, when the store
// has several.
func (e *Engine) placeRanges(rec *containerRecord, rid []byte) {
	if e.shared == nil || e.shared.placements == nil || e.shared.placements.n < 2 {
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
	start := int(h.Sum32() % uint32(e.shared.placements.n))
	for i := range next.Ranges {
		next.Ranges[i].Place = (start + i) % e.shared.placements.n
		if !hashV2(rec.Props) {
			// A V1 container's ranges are not spans of its item keys:
			// they all live in one place.
			next.Ranges[i].Place = start
		}
	}
	rec.Ranges = &next
}

// notePlacement records where c's ranges live, for the store's router.
func (e *Engine) notePlacement(c *Container) {
	if e.shared != nil && e.shared.placements != nil {
		e.shared.placements.note(c)
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

// placeWatermark is what a snapshot of several places says of one.
type placeWatermark interface {
	PlaceWatermark(i int) uint64
}

// placeCount is the number of places of the store, 1 for most.
func (e *Engine) placeCount() int {
	if e.shared == nil || e.shared.placements == nil {
		return 1
	}
	return e.shared.placements.n
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
// map says), and the space it holds.
func (e *Engine) moveRange(ctx context.Context, c *Container, b epkBounds, from, to int) (finish func(context.Context) error, err error) {
	began := time.Now()
	src, dst := e.shared.placer.Place(from), e.shared.placer.Place(to)
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
	if err := e.shared.placer.RaiseFloor(ctx, to, w); err != nil {
		return nil, err
	}
	e.log.Info("partition key range moved", "database", c.db.ID, "container", c.ID, "from", from, "to", to, "keys", n, "took", time.Since(began).Round(time.Millisecond))
	return func(ctx context.Context) error {
		defer dropped.Close()
		return dropped.Commit(ctx)
	}, nil
}
