package engine

import (
	"bytes"
	"context"
	"sync"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/engine/internal/keys"
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

// placeWatermark is what a snapshot of several places says of one.
type placeWatermark interface {
	PlaceWatermark(i int) uint64
}
