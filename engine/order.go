package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// rebuildChunk is how many items one batch of a rebuild (the index's,
// rebuild.go, or the creation order's) writes.
const rebuildChunk = 500

// Creation order. Without ORDER BY the service returns the documents of a
// physical partition in resource-id order, which is the order they were
// created in: a replace keeps an item's place, a delete and re-create moves
// it to the end. An item's RID here is the sequence number of the write that
// created it (see txn.put), so the RID index
//
//	R<coll rid 8><item rid 8> → item key
//
// already lists a container's items in creation order, logical partitions
// interleaved, and is what container-wide and range-scoped scans walk. A
// query scoped to one logical partition must not walk the whole container,
// so each item also has an order key in its partition
//
//	N<coll rid 8><epk><pk len 2><pk><item rid 8> → item key
//
// written when the item is created, kept by replaces (neither its partition
// nor its RID changes), removed with the item. That is one more key per
// create and per delete, none per replace or patch.

// orderScope is the prefix of the keys that list, in creation order, the
// items under an item key prefix (a container, a logical partition, or on a
// hierarchical key a prefix of one): the RID index for a whole container,
// else the order keys of the partitions under it.
func (c *Container) orderScope(scope []byte) []byte {
	if bytes.Equal(scope, keys.ItemContainerPrefix(c.rid)) {
		return keys.RIDPrefix(c.rid)
	}
	return keys.OrderScope(scope)
}

// partialScope reports whether an item key prefix is a prefix of a
// hierarchical partition key: more than the container, less than one
// logical partition. Its order keys list its partitions one after another,
// not interleaved as created.
func (c *Container) partialScope(scope []byte) bool {
	base := 1 + len(c.rid)
	return len(scope) > base && len(scope) < base+c.epkLen()
}

// rebuildOrder writes the order key of every item of c: stores written
// before creation order existed have none. Nothing may write c's items
// meanwhile.
func rebuildOrder(ctx context.Context, s storage.Store, c *Container) error {
	if err := purgePrefix(ctx, s, keys.OrderPrefix(c.rid)); err != nil {
		return err
	}
	prefix := keys.ItemContainerPrefix(c.rid)
	lower, upper := prefix, storage.PrefixEnd(prefix)
	for {
		next, err := orderChunk(ctx, s, c, lower, upper)
		if err != nil || next == nil {
			return err
		}
		lower = next
	}
}

// orderChunk writes the order keys of up to rebuildChunk items from lower
// on, and returns the key to go on from, nil after the last chunk.
func orderChunk(ctx context.Context, s storage.Store, c *Container, lower, upper []byte) ([]byte, error) {
	it, err := s.NewIterator(ctx, lower, upper, false)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	b := s.NewBatch()
	defer b.Close()
	var next []byte
	for n := 0; it.Next(); n++ {
		if n == rebuildChunk {
			next = bytes.Clone(it.Key())
			break
		}
		key := bytes.Clone(it.Key())
		item, err := decodeItem(key, it.Value())
		if err != nil {
			return nil, err
		}
		id, _, ok := c.splitItemKey(key)
		if !ok {
			return nil, fmt.Errorf("engine: malformed item key %x", key)
		}
		if err := b.Set(keys.OrderKey(key[:len(key)-len(id)], item.rid), key); err != nil {
			return nil, err
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	return next, b.Commit(ctx)
}

// Bounds of the candidates an index-served query sorts into creation order
// (see creationOrdered); past them it streams in index order.
const (
	maxOrderedCandidates = 5000
	maxOrderedBytes      = 8 << 20
)

// creationOrdered returns the candidates of an index source (or of a scope
// that is a prefix of a hierarchical key) in creation order, from position
// start on, for a query without ORDER BY: the service returns them so. It
// loads every candidate the source yields and sorts them
// by RID; their positions are RID index keys, so a continuation resumes
// after the same items even when others are written meanwhile. A query
// whose first page finds more than maxOrderedCandidates candidates (or
// maxOrderedBytes of them) is left in index order (ok false), and so are
// its later pages, whose positions are index keys. Each page of an ordered
// query loads all its candidates again: that is the price, bounded on the
// first page.
func (c *Container) creationOrdered(ctx context.Context, r storage.Reader, src source, start []byte, now int64) ([]candidate, bool, error) {
	return c.creationOrderedIn(new(orderedLoad), ctx, r, src, start, now)
}

// creationOrderedIn is creationOrdered keeping its state in *o, made for
// this one call (its candidates are what it returns).
func (c *Container) creationOrderedIn(o *orderedLoad, ctx context.Context, r storage.Reader, src source, start []byte, now int64) ([]candidate, bool, error) {
	resuming := start != nil
	if resuming && !bytes.HasPrefix(start, keys.RIDPrefix(c.rid)) {
		return nil, false, nil
	}
	// The source read in its own key order (order keys would list a
	// prefix's partitions one after another).
	*o = orderedLoad{c: c, copy: src.index == nil, resuming: resuming}
	c.scanEach(ctx, r, source{scope: src.scope, bounds: src.bounds, index: src.index, narrowed: src.narrowed, stats: src.stats}, nil, now, o.add)
	if o.err != nil {
		return nil, false, o.err
	}
	if o.over {
		return nil, false, nil
	}
	cands := o.cands
	slices.SortFunc(cands, func(a, b candidate) int { return bytes.Compare(a.pos, b.pos) })
	if start != nil {
		// The candidates before start, all at the front once sorted.
		i := 0
		for i < len(cands) && bytes.Compare(cands[i].pos, start) < 0 {
			i++
		}
		cands = cands[i:]
	}
	return cands, true, nil
}

// orderedLoad gathers creationOrdered's candidates.
type orderedLoad struct {
	c        *Container
	copy     bool // the candidates are read straight from an iterator
	resuming bool
	cands    []candidate
	held     int
	over     bool // past the bounds of a first page
	err      error
}

func (o *orderedLoad) add(cand candidate, err error) bool {
	if err != nil {
		o.err = err
		return false
	}
	if !o.resuming && (len(o.cands) == maxOrderedCandidates || o.held > maxOrderedBytes) {
		o.over = true
		return false
	}
	o.held += len(cand.item.doc)
	if o.copy {
		// Read straight from the iterator, which reuses its buffers.
		item := *cand.item
		item.key, item.doc = bytes.Clone(item.key), bytes.Clone(item.doc)
		cand.item = &item
	}
	var rid [8]byte
	binary.BigEndian.PutUint64(rid[:], cand.item.rid)
	cand.pos = keys.RIDKey(o.c.rid, rid[:])
	o.cands = append(o.cands, cand)
	return true
}
