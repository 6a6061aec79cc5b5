package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/searchindex"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// fullTextIndexStats returns the container-wide BM25 statistics of a
// full-text indexed path for keywords, from its index's counters; ok false
// when the path has no full-text index, the store is over several places,
// or r is a transaction (a stored procedure's query, whose own writes may hold the
// index): the caller then counts them over the items. The index counts
// every stored item: the items expired but not yet swept are taken off
// again (withoutUnswept), as the items' own statistics leave them out. On a
// shared store the items stale in the index (searchindex.View) are counted
// as the query's snapshot has them instead (staleTextStats).
func (s *searchIndexes) fullTextIndexStats(ctx context.Context, c *Container, r storage.Reader, path []string, keywords []string) (query.FullTextStats, bool) {
	if _, inTxn := r.(storage.Batch); inTxn || c.Search() == nil {
		return query.FullTextStats{}, false
	}
	st, view, err := s.viewOf(ctx, c, r)
	if err != nil || st == nil {
		return query.FullTextStats{}, false
	}
	defer view.Done()
	p := "/" + strings.Join(path, "/")
	for _, t := range st.Texts {
		if t.Path != p {
			continue
		}
		st, err := s.staleTextStats(ctx, c, r, t, view.StaleKeys(), keywords)
		if err != nil {
			return query.FullTextStats{}, false
		}
		if err := s.withoutUnswept(ctx, c, r, t, keywords, &st); err != nil {
			return query.FullTextStats{}, false
		}
		return st, true
	}
	return query.FullTextStats{}, false
}

// withoutUnswept takes off st what the items of c that have expired but
// await the sweeper add to a full-text index's statistics: the index
// counts them until the sweeper deletes them, reads and queries hide them
// from the moment they expire. They are found through the expiry index,
// as the sweeper finds them, so the cost is that of the items expired
// since the last sweep. The counters and the expiry index are read apart
// from each other: a sweep between the two leaves st off by what it swept
// meanwhile.
func (s *searchIndexes) withoutUnswept(ctx context.Context, c *Container, r storage.Reader, t *searchindex.TextIndex, keywords []string, st *query.FullTextStats) error {
	if c.ttl == nil {
		return nil
	}
	// The expiry index is read where the counters were: the store, or on a
	// shared store the query's snapshot r, with which the gateway's
	// in-memory index was caught up (a sweep committed since is in
	// neither).
	from := t.CountedIn(s.store, r)
	now := s.now().Unix()
	an := t.Index.Analyzer()
	var kws [][]fulltext.Term
	for _, k := range keywords {
		kws = append(kws, an.Analyze(k))
	}
	seen := map[string]bool{}
	var expired [][]byte // item keys
	for _, span := range c.expiredSpans(now) {
		it, err := from.NewIterator(ctx, span[0], span[1], false)
		if err != nil {
			return err
		}
		for it.Next() {
			if k := it.Value(); !seen[string(k)] {
				seen[string(k)] = true
				expired = append(expired, bytes.Clone(k))
			}
		}
		err = it.Err()
		it.Close()
		if err != nil {
			return err
		}
	}
	for len(expired) > 0 {
		ks := expired[:min(len(expired), textChunk)]
		expired = expired[len(ks):]
		values, err := storage.GetMany(ctx, from, ks)
		if err != nil {
			return err
		}
		for i, v := range values {
			if v == nil {
				continue
			}
			s, err := decodeItem(ks[i], v)
			if err != nil {
				return err
			}
			var text string
			if !c.expired(s, now) || json.Unmarshal(searchindex.RawAt(s.doc, t.Segments()), &text) != nil {
				continue
			}
			terms := an.Analyze(text)
			st.Documents--
			st.Words -= int64(len(terms))
			for j, kw := range kws {
				if len(kw) > 0 && fulltext.Occurrences(terms, kw) > 0 {
					st.Hits[j]--
				}
			}
		}
	}
	return nil
}

// textCandidates is what a query's required full-text conjuncts leave of
// its scope: the keys of the items that can pass them, in key order.
type textCandidates struct {
	keys [][]byte
}

// fullTextCandidates narrows a query's candidates through the full-text
// indexes of the paths of its required full-text conjuncts
// (query.TextSearch.Required): FullTextContains takes the items holding its
// keyword, FullTextContainsAll those holding all of its, FullTextContainsAny
// those holding any, and several conjuncts the items all of them take. The
// postings and the item keys are read from r, the query's snapshot, so the
// candidates are the items of that snapshot that hold the keywords as the
// execution matches them (the index analyzes as the execution does, and
// keeps each term's positions: a phrase matches where its terms are adjacent
// and in order); the execution still evaluates the whole query on each.
//
// On a shared store the postings are the gateway's indexes' (caught up with
// the snapshot) and the items stale in them are candidates too.
//
// nil when no conjunct has an index, in a transaction (a stored
// procedure's query), or when the snapshot does not hold
// the indexes whole for the container's policy (a rebuild not yet
// finished when it was taken). The uses name the indexes for the index
// metrics.
func (s *searchIndexes) fullTextCandidates(ctx context.Context, c *Container, r storage.Reader, src source, plan *query.Plan) (*textCandidates, []IndexUse, error) {
	required := false
	for _, t := range plan.FullText {
		required = required || t.Required
	}
	if !required || src.index != nil {
		return nil, nil, nil
	}
	st, view, err := s.snapshotIndexes(ctx, c, r)
	if err != nil || st == nil {
		return nil, nil, err
	}
	defer view.Done()
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	t0 := time.Now()
	var set map[string]bool // nil: not narrowed yet
	var uses []IndexUse
	for _, ts := range plan.FullText {
		if !ts.Required {
			continue
		}
		ti := st.TextAt(ts.Path)
		if ti == nil {
			continue
		}
		rd := ti.State(r)
		var found map[string]bool
		for i, kw := range ts.Keywords {
			holding, err := ti.Index.Holding(ctx, rd, kw)
			if errors.Is(err, fulltext.ErrCorrupt) {
				return nil, nil, nil // the state a rebuild replaces: read the items
			}
			if err != nil {
				return nil, nil, queryError(err)
			}
			m.IndexLookups += int64(len(holding))
			these := make(map[string]bool, len(holding))
			for _, k := range holding {
				if ts.Function != "FullTextContainsAll" || i == 0 || found[string(k)] {
					these[string(k)] = true
				}
			}
			if i > 0 && ts.Function == "FullTextContainsAny" {
				for k := range found {
					these[k] = true
				}
			}
			found = these
		}
		if set == nil {
			set = found
		} else {
			for k := range set {
				if !found[k] {
					delete(set, k)
				}
			}
		}
		uses = append(uses, IndexUse{
			Spec:   ti.Path + " (full-text index)",
			Filter: ts.Function + "(ROOT." + strings.Join(ts.Path, ".") + ", …)",
		})
	}
	if set == nil {
		return nil, nil, nil
	}
	for _, k := range view.StaleKeys() {
		set[string(k)] = true
	}
	tc := &textCandidates{keys: make([][]byte, 0, len(set))}
	for suffix := range set {
		key := keys.ItemKeyFromSuffix(c.rid, []byte(suffix))
		if bytes.HasPrefix(key, src.scope) && c.inBounds(src.bounds, key) {
			tc.keys = append(tc.keys, key)
		}
	}
	slices.SortFunc(tc.keys, bytes.Compare)
	m.IndexLookupTime += time.Since(t0)
	return tc, uses, nil
}

// textChunk is how many candidates scanText reads at a time.
const textChunk = 256

// maxTextOrdered is the most candidates scanText sorts into creation order
// in memory (as creationOrdered does, maxOrderedCandidates).
const maxTextOrdered = 5000

// scanText is scan for a source narrowed by full-text candidates: it
// yields the live candidates at the positions, and in the order, the
// source's own scan would (item keys, or creation order keys when the
// source has an order), from position start on. More candidates than
// creation order sorts in memory (maxTextOrdered) are read by
// scanning the order instead.
func (c *Container) scanText(ctx context.Context, r storage.Reader, src source, tc *textCandidates, start []byte, now int64, yield func(candidate, error) bool) {
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	ks := tc.keys
	if src.order == nil {
		if start != nil {
			i, _ := slices.BinarySearchFunc(ks, start, bytes.Compare)
			ks = ks[i:]
		}
		c.readItems(ctx, r, ks, m, now, yield)
		return
	}
	if len(ks) > maxTextOrdered {
		whole := src
		whole.narrowed = nil
		for cand, err := range c.scan(ctx, r, whole, start, now) {
			if !yield(cand, err) || err != nil {
				return
			}
		}
		return
	}
	wholeContainer := bytes.Equal(src.order, keys.RIDPrefix(c.rid))
	var cands []candidate
	failed := false
	c.readItems(ctx, r, ks, m, now, func(cand candidate, err error) bool {
		if err != nil {
			failed = true
			return yield(candidate{}, err) && false
		}
		var pos []byte
		if wholeContainer {
			pos = keys.RIDKey(c.rid, binary.BigEndian.AppendUint64(nil, cand.item.rid))
		} else {
			key := cand.item.key
			id, _, ok := c.splitItemKey(key)
			if !ok {
				failed = true
				return yield(candidate{}, fmt.Errorf("engine: malformed item key %x", key)) && false
			}
			pos = keys.OrderKey(key[:len(key)-len(id)], cand.item.rid)
		}
		if bytes.HasPrefix(pos, src.order) && (start == nil || bytes.Compare(pos, start) >= 0) {
			cands = append(cands, candidate{pos: pos, item: cand.item})
		}
		return true
	})
	if failed {
		return
	}
	slices.SortFunc(cands, func(a, b candidate) int { return bytes.Compare(a.pos, b.pos) })
	for _, cand := range cands {
		if !yield(cand, nil) {
			return
		}
	}
}

// readItems yields the live items of the keys ks (as yieldItem does, the
// position the item key), reading textChunk of them at a time; false means
// yield stopped it.
func (c *Container) readItems(ctx context.Context, r storage.Reader, ks [][]byte, m *QueryMetrics, now int64, yield func(candidate, error) bool) bool {
	for len(ks) > 0 {
		n := min(len(ks), textChunk)
		t0 := time.Now()
		values, err := storage.GetMany(ctx, r, ks[:n])
		if err != nil {
			yield(candidate{}, err)
			return false
		}
		for i, v := range values {
			if v == nil {
				continue
			}
			if !c.yieldItem(m, t0, ks[i], ks[i], v, now, yield) {
				return false
			}
			t0 = time.Now()
		}
		ks = ks[n:]
	}
	return true
}

// narrowByFullText restricts src to the candidates of the query's required
// full-text conjuncts when an index serves them (fullTextCandidates), and
// names the indexes in util.
func (s *searchIndexes) narrowByFullText(ctx context.Context, c *Container, r storage.Reader, src *source, plan *query.Plan, util *IndexUtilization) (*textCandidates, error) {
	tc, uses, err := s.fullTextCandidates(ctx, c, r, *src, plan)
	if err != nil || tc == nil {
		return nil, err
	}
	src.narrowed = tc.scanner(c)
	if util != nil {
		util.UtilizedSingle = append(util.UtilizedSingle, uses...)
	}
	return tc, nil
}

// scanner returns the scan of a source narrowed to tc (source.narrowed).
func (tc *textCandidates) scanner(c *Container) func(context.Context, storage.Reader, source, []byte, int64, func(candidate, error) bool) {
	return func(ctx context.Context, r storage.Reader, src source, start []byte, now int64, yield func(candidate, error) bool) {
		c.scanText(ctx, r, src, tc, start, now, yield)
	}
}
