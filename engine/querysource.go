package engine

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/storage"
)

// source is where a query reads its candidate items: a scan of the item keys
// under its scope, or the index entries of one of its filters, restricted to
// the scope.
type source struct {
	scope  []byte       // item key prefix
	bounds epkBounds    // the effective partition keys in scope
	index  *indexSource // nil: scan the scope
	// order, when set and index is nil, is the prefix of the keys that list
	// the scope's items in creation order (see orderScope); nil: scan the
	// items in key order.
	order []byte
	// narrowed, when set and index is nil, scans in place of the source:
	// it reads only the items of the scope that can pass the query's
	// required full-text conjuncts (fullTextCandidates), at the positions
	// and in the order the source's own scan would read them.
	narrowed func(ctx context.Context, r storage.Reader, src source, start []byte, now int64, yield func(candidate, error) bool)
	// stats records what the scan reads and how long it takes; may be nil.
	stats *QueryMetrics
}

// candidate is an item and its position in the source.
type candidate struct {
	pos  []byte
	item *storedItem
}

// contains reports whether a continuation position belongs to the source.
func (src source) contains(pos []byte) bool {
	if src.index == nil && src.order != nil {
		return bytes.HasPrefix(pos, src.order)
	}
	if src.index == nil {
		return bytes.HasPrefix(pos, src.scope)
	}
	for _, r := range src.index.ranges {
		if bytes.Compare(pos, r.lower) >= 0 && bytes.Compare(pos, r.upper) < 0 {
			return true
		}
	}
	return false
}

// scan yields the live candidates of a source in order, from position start
// (nil: the beginning).
func (c *Container) scan(ctx context.Context, r storage.Reader, src source, start []byte, now int64) iter.Seq2[candidate, error] {
	return func(yield func(candidate, error) bool) { c.scanEach(ctx, r, src, start, now, yield) }
}

// scanEach is scan calling yield itself: a caller that keeps its state in
// one place hands it a method value rather than ranging over an iterator,
// whose loop body and captured variables each cost an allocation.
func (c *Container) scanEach(ctx context.Context, r storage.Reader, src source, start []byte, now int64, yield func(candidate, error) bool) {
	if src.narrowed != nil && src.index == nil {
		src.narrowed(ctx, r, src, start, now, yield)
		return
	}
	var ranges []keyRange
	reverse := false
	if src.index != nil {
		ranges, reverse = src.index.ranges, src.index.reverse
	} else {
		// The scope's range, read only without an index.
		lower, upper := c.keyRange(src.scope, src.bounds)
		if src.order != nil {
			lower, upper = src.order, storage.PrefixEnd(src.order)
		}
		ranges = []keyRange{{lower, upper}}
	}
	if reverse {
		for i := len(ranges) - 1; i >= 0; i-- {
			if !c.scanRange(ctx, r, src, ranges[i].lower, ranges[i].upper, true, now, yield) {
				return
			}
		}
		return
	}
	for _, rg := range ranges {
		lower := rg.lower
		if start != nil {
			if bytes.Compare(start, rg.upper) >= 0 {
				continue
			}
			if bytes.Compare(start, lower) > 0 {
				lower = start
			}
		}
		if !c.scanRange(ctx, r, src, lower, rg.upper, false, now, yield) {
			return
		}
	}
}

// scanRange yields the candidates of one key range; false means stop.
func (c *Container) scanRange(ctx context.Context, r storage.Reader, src source, lower, upper []byte, reverse bool, now int64, yield func(candidate, error) bool) bool {
	it, err := r.NewIterator(ctx, lower, upper, reverse)
	if err != nil {
		return yield(candidate{}, err)
	}
	defer it.Close()
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	if src.index != nil || src.order != nil {
		return c.scanKeys(ctx, r, it, src, m, now, yield)
	}
	// The key range of a V1 container's range is its whole scope (see
	// keyRange): its items are picked by their V1 hashes here.
	filter := c.hashV1() && !src.bounds.unbounded()
	for {
		t0 := time.Now()
		if !it.Next() {
			break
		}
		if filter && !c.inBounds(src.bounds, it.Key()) {
			continue
		}
		if !c.yieldItem(m, t0, it.Key(), it.Key(), it.Value(), now, yield) {
			return false
		}
	}
	if err := it.Err(); err != nil {
		return yield(candidate{}, err)
	}
	return true
}

// yieldItem decodes the item under key and yields it at position pos
// unless it has expired, recording the load from t0; false means stop.
func (c *Container) yieldItem(m *QueryMetrics, t0 time.Time, pos, key, val []byte, now int64, yield func(candidate, error) bool) bool {
	s, err := decodeItem(key, val)
	m.DocumentLoadTime += time.Since(t0)
	if err != nil {
		return yield(candidate{}, err)
	}
	m.RetrievedDocumentCount++
	m.RetrievedDocumentSize += int64(len(s.doc))
	if c.expired(s, now) {
		return true
	}
	return yield(candidate{pos: pos, item: s}, nil)
}

// scanKeys yields the items that the index or order entries of it name,
// in the entries' order, reading them a chunk at a time; false means stop.
func (c *Container) scanKeys(ctx context.Context, r storage.Reader, it storage.Iterator, src source, m *QueryMetrics, now int64, yield func(candidate, error) bool) bool {
	var positions, keys [][]byte
	for first, more := true, true; more; first = false {
		positions, keys = positions[:0], keys[:0]
		t0 := time.Now()
		for n := feed.ChunkSize(r, first); len(keys) < n; {
			if !it.Next() {
				more = false
				break
			}
			m.IndexLookups++
			pos := it.Key()
			var key []byte
			if src.index != nil {
				key = c.indexedItemKey(pos, src.index.base)
			} else {
				key = bytes.Clone(it.Value())
			}
			if !bytes.HasPrefix(key, src.scope) || !c.inBounds(src.bounds, key) {
				continue
			}
			positions = append(positions, bytes.Clone(pos))
			keys = append(keys, key)
		}
		if err := it.Err(); err != nil {
			return yield(candidate{}, err)
		}
		t1 := time.Now()
		m.IndexLookupTime += t1.Sub(t0)
		if len(keys) == 0 {
			continue
		}
		values, err := storage.GetMany(ctx, r, keys)
		if err != nil {
			return yield(candidate{}, err)
		}
		for i, v := range values {
			if v == nil {
				return yield(candidate{}, fmt.Errorf("engine: index entry without its item: %w", storage.ErrNotFound))
			}
			if !c.yieldItem(m, t1, positions[i], keys[i], v, now, yield) {
				return false
			}
			t1 = time.Now()
		}
	}
	return true
}
