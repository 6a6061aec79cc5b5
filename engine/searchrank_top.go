package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/searchindex"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// rankTop gives rankQuery the candidates of ORDER BY RANK
// FullTextScore(...) from the full-text index's best-first walk
// (fulltext.Index.Top), instead of every item holding a keyword: the
// walk scores the holders from the postings, with the statistics the
// execution ranks by, highest first, and hands each to a filter that reads
// the item from r and keeps it when it is in the query's scope (and among
// narrowed's candidates), live, and passes the WHERE clause; it stops once
// need items passed and no holder left can score as much as the need-th.
// The candidates are those items, every one tied with the need-th included,
// so the execution's ranking of them (ties in creation order) is its
// ranking of every holder. On a shared store the stale items are left out
// of the walk and the stale holders are candidates besides.
//
// The filter reads the items the walk hands it together (storage.GetMany),
// and the items it kept are read once: the returned reader serves them to
// the execution from memory. ok false when the walk cannot answer (the
// statistics are counted by the execution, a posting beyond its bound, the
// state a rebuild replaces, more items read than budget counts when it is
// not nil): the caller takes every holder.
func (s *searchIndexes) rankTop(ctx context.Context, c *Container, r storage.Reader, src source, narrowed *textCandidates, x *query.Execution,
	ti *searchindex.TextIndex, view *searchindex.View, ts *query.TextSearch, need int, budget *rangeCount, m *QueryMetrics) (tc *textCandidates, rd storage.Reader, ok bool, err error) {
	if rankTopOff {
		return nil, nil, false, nil
	}
	stats, ok := x.FullTextStats(ts.Path, ts.Keywords)
	if !ok || stats.Documents <= 0 || len(stats.Hits) != len(ts.Keywords) {
		return nil, nil, false, nil
	}
	var in map[string]bool
	if narrowed != nil {
		in = make(map[string]bool, len(narrowed.keys))
		for _, k := range narrowed.keys {
			in[string(k)] = true
		}
	}
	inScope := func(key []byte) bool {
		return bytes.HasPrefix(key, src.scope) && c.inBounds(src.bounds, key) && (in == nil || in[string(key)])
	}
	now := s.now().Unix()
	kept := map[string][]byte{}
	read := 0
	admit := func(suffixes [][]byte) ([]bool, error) {
		ok := make([]bool, len(suffixes))
		var itemKeys [][]byte
		var at []int
		for i, suffix := range suffixes {
			if view.IsStale(suffix) {
				continue
			}
			if key := keys.ItemKeyFromSuffix(c.rid, suffix); inScope(key) {
				itemKeys = append(itemKeys, key)
				at = append(at, i)
			}
		}
		if len(itemKeys) == 0 {
			return ok, nil
		}
		if read += len(itemKeys); budget != nil {
			if more, err := budget.atLeast(ctx, read); err != nil || !more {
				return nil, cmp.Or(err, errOverBudget)
			}
		}
		t0 := time.Now()
		values, err := storage.GetMany(ctx, r, itemKeys)
		m.DocumentLoadTime += time.Since(t0)
		if err != nil {
			return nil, err
		}
		for j, v := range values {
			if v == nil {
				continue // written after the snapshot
			}
			key := itemKeys[j]
			s, err := decodeItem(key, v)
			if err != nil {
				return nil, err
			}
			if !c.expired(s, now) {
				pass, err := x.Admits(s.doc)
				if err != nil {
					return nil, err
				}
				if pass {
					kept[string(key)] = v // counted when the execution reads it
					ok[at[j]] = true
					continue
				}
			}
			m.RetrievedDocumentCount++
			m.RetrievedDocumentSize += int64(len(s.doc))
		}
		return ok, nil
	}
	found, rep, err := ti.Index.Top(ctx, ti.State(r), ts.Keywords, fulltext.TopOptions{
		K: need, Stats: fulltext.Stats{Documents: stats.Documents, Words: stats.Words, Hits: stats.Hits}, Admit: admit})
	m.IndexLookups += int64(rep.Scored)
	if errors.Is(err, errOverBudget) {
		for _, v := range kept { // read, and not to be read again
			m.RetrievedDocumentCount++
			m.RetrievedDocumentSize += int64(len(v))
		}
	}
	if errors.Is(err, fulltext.ErrBound) || errors.Is(err, fulltext.ErrCorrupt) || errors.Is(err, errOverBudget) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, true, queryError(err)
	}
	tc = &textCandidates{keys: make([][]byte, 0, len(found))}
	for _, f := range found {
		tc.keys = append(tc.keys, keys.ItemKeyFromSuffix(c.rid, f.Key))
	}
	stale, err := staleHolding(ctx, view, c, r, ti, ts.Keywords)
	if err != nil {
		return nil, nil, true, queryError(err)
	}
	for _, k := range stale {
		if inScope(k) {
			tc.keys = append(tc.keys, k)
		}
	}
	slices.SortFunc(tc.keys, bytes.Compare)
	return tc, keptReader{Reader: r, kept: kept}, true, nil
}

// errOverBudget stops a walk that has read more items than its budget.
var errOverBudget = errors.New("engine: the best-first walk read more items than its budget")

// rangeCount counts, as far as asked, the items of the scope that a range
// index source lists (its entries' keys; no item is read): what ranking its
// candidates would read. It counts in steps, each from where the last
// stopped with an iterator of its own, so that a walk reading few items
// counts few entries.
type rangeCount struct {
	c     *Container
	r     storage.Reader
	src   source
	m     *QueryMetrics
	rg    int    // the range counting is in
	after []byte // the last entry counted in it; nil: none yet
	n     int
}

// atLeast reports whether the source lists at least k items.
func (rc *rangeCount) atLeast(ctx context.Context, k int) (bool, error) {
	want := max(k, 2*rc.n)
	ranges := rc.src.index.ranges
	for rc.n < want && rc.rg < len(ranges) {
		lower := ranges[rc.rg].lower
		if rc.after != nil {
			lower = append(bytes.Clone(rc.after), 0)
		}
		it, err := rc.r.NewIterator(ctx, lower, ranges[rc.rg].upper, false)
		if err != nil {
			return false, err
		}
		done := true
		for it.Next() {
			rc.m.IndexLookups++
			key := rc.c.indexedItemKey(it.Key(), rc.src.index.base)
			if bytes.HasPrefix(key, rc.src.scope) && rc.c.inBounds(rc.src.bounds, key) {
				rc.n++
			}
			if rc.n >= want {
				rc.after, done = bytes.Clone(it.Key()), false
				break
			}
		}
		err = it.Err()
		it.Close()
		if err != nil {
			return false, err
		}
		if done {
			rc.rg, rc.after = rc.rg+1, nil
		}
	}
	return rc.n >= k, nil
}

// rankTopOff turns the walk off: every holder is a candidate (the
// benchmarks compare the two).
var rankTopOff bool

// keptReader is a snapshot with some of its items already read: it serves
// those from memory.
type keptReader struct {
	storage.Reader
	kept map[string][]byte
}

func (k keptReader) Get(ctx context.Context, key []byte) ([]byte, error) {
	if v, ok := k.kept[string(key)]; ok {
		return bytes.Clone(v), nil
	}
	return k.Reader.Get(ctx, key)
}

// GetMany implements storage.MultiGetter: the kept items from memory, the
// others from the snapshot in one go.
func (k keptReader) GetMany(ctx context.Context, ks [][]byte) ([][]byte, error) {
	out := make([][]byte, len(ks))
	var rest [][]byte
	var at []int
	for i, key := range ks {
		if v, ok := k.kept[string(key)]; ok {
			out[i] = bytes.Clone(v)
		} else {
			rest = append(rest, key)
			at = append(at, i)
		}
	}
	if len(rest) > 0 {
		vs, err := storage.GetMany(ctx, k.Reader, rest)
		if err != nil {
			return nil, err
		}
		for j, v := range vs {
			out[at[j]] = v
		}
	}
	return out, nil
}
