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
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// vectorQuery answers a top-K query ordered by VectorDistance from the
// container's vector index of the path, when it can: the index searches for
// the K closest items that are in the query's scope and pass its WHERE
// clause (the filter is applied during the search, which looks further
// until it has K of them), and the execution scores and orders those exactly.
// used false means the query is to be evaluated over the whole source
// instead: no vector index at the path, bruteForce asked for, no TOP or
// LIMIT, an aggregate, GROUP BY or DISTINCT, a distance function or data
// type other than the index's, the farthest asked for first, a query vector
// of other dimensions, or a query inside a transaction (a stored procedure).
// On a shared store the items whose state in the index is not the
// snapshot's (searchView) are left out of the search and evaluated from the
// snapshot beside what it finds. When used, the index appears in util.
func (e *Engine) vectorQuery(ctx context.Context, c *Container, r storage.Reader, src source, plan *query.Plan, x *query.Execution, util **IndexUtilization) (results []json.RawMessage, used bool, err error) {
	vs := plan.Vector
	if vs == nil || vs.BruteForce || plan.Aggregates || plan.GroupBy || plan.Distinct || len(plan.OrderBy) != 1 {
		return nil, false, nil
	}
	k := plan.Top
	if k < 0 && plan.Limit >= 0 {
		k = max(plan.Offset, 0) + plan.Limit
	}
	if k <= 0 {
		return nil, false, nil
	}
	if _, inTxn := r.(storage.Batch); inTxn || c.Search() == nil {
		return nil, false, nil
	}
	st, view, err := e.searchViewOf(ctx, c, r)
	if err != nil || st == nil {
		return nil, false, err
	}
	defer view.done()
	path := "/" + strings.Join(vs.Path, "/")
	var vi *vectorIndex
	for _, v := range st.vecs {
		if v.path == path {
			vi = v
		}
	}
	if vi == nil {
		return nil, false, nil
	}
	cfg := vi.ix.Config()
	if vs.DistanceFunction != "" {
		if m, ok := vector.ParseMetric(vs.DistanceFunction); !ok || m != cfg.Metric {
			return nil, false, nil
		}
	}
	if vs.DataType != "" {
		if t, ok := vector.ParseDataType(vs.DataType); !ok || t != cfg.DataType {
			return nil, false, nil
		}
	}
	if vs.Explicit && vs.Descending != cfg.Metric.HigherIsCloser() {
		return nil, false, nil // the farthest first: exact
	}
	qcfg := cfg
	qcfg.DataType = vector.Float32
	q, ok := vector.Normalize(qcfg, vs.Vector)
	if !ok {
		return nil, false, nil
	}
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	now := e.now().Unix()
	docs := map[string][]byte{}
	seen := map[string]bool{}
	var failed error
	admits := func(suffix []byte) bool {
		if failed != nil {
			return false
		}
		if ok, done := seen[string(suffix)]; done {
			return ok
		}
		key := keys.ItemKeyFromSuffix(c.rid, suffix)
		admit := func() bool {
			if !bytes.HasPrefix(key, src.scope) || !src.bounds.containsEPK(c.itemEPK(key)) {
				return false
			}
			t0 := time.Now()
			v, err := r.Get(ctx, key)
			if errors.Is(err, storage.ErrNotFound) {
				return false // written after the snapshot
			}
			if err != nil {
				failed = err
				return false
			}
			s, err := decodeItem(key, v)
			m.DocumentLoadTime += time.Since(t0)
			if err != nil {
				failed = err
				return false
			}
			m.RetrievedDocumentCount++
			m.RetrievedDocumentSize += int64(len(s.doc))
			if c.expired(s, now) {
				return false
			}
			ok, err := x.Admits(s.doc)
			if err != nil {
				failed = err
				return false
			}
			if ok {
				docs[string(suffix)] = s.doc
			}
			return ok
		}()
		seen[string(suffix)] = admit
		return admit
	}
	filter := func(suffix []byte) bool { return !view.isStale(suffix) && admits(suffix) }
	opt := vector.SearchOptions{K: k, Filter: filter, Reader: vi.state(e.store)}
	if vs.SearchListSizeMultiplier > 0 {
		opt.ListSize = vs.SearchListSizeMultiplier * k
	}
	t0 := time.Now()
	found, err := vi.ix.Search(ctx, q, opt)
	m.IndexLookupTime += time.Since(t0)
	for _, suffix := range view.staleKeys() {
		if err == nil && admits(suffix) {
			found = append(found, vector.Result{Key: suffix})
		}
	}
	view.done()
	if err == nil {
		err = failed
	}
	if err != nil {
		return nil, true, queryError(err)
	}
	m.IndexLookups += int64(len(found))
	results, err = x.Execute(func(yield func([]byte, error) bool) {
		for _, f := range found {
			if !yield(docs[string(f.Key)], nil) {
				return
			}
		}
	})
	if err != nil {
		return nil, true, queryError(err)
	}
	if *util != nil {
		(*util).UtilizedSingle = append((*util).UtilizedSingle, IndexUse{
			Spec:   path + " (" + cfg.Kind.String() + " vector index)",
			Filter: "ORDER BY VectorDistance(" + strings.Join(append([]string{"c"}, vs.Path...), ".") + ", …)",
		})
	}
	return results, true, nil
}

// fullTextIndexStats returns the container-wide BM25 statistics of a
// full-text indexed path for keywords, from its index's counters; ok false
// when the path has no full-text index, the store is over several places,
// or r is a transaction (a stored procedure's query, whose own writes may hold the
// index): the caller then counts them over the items. The index counts
// every stored item, those expired but not yet swept too. On a shared store
// the index answers only when it holds every item as the query's snapshot
// does (no item is stale: searchView).
func (e *Engine) fullTextIndexStats(ctx context.Context, c *Container, r storage.Reader, path []string, keywords []string) (query.FullTextStats, bool) {
	if _, inTxn := r.(storage.Batch); inTxn || c.Search() == nil {
		return query.FullTextStats{}, false
	}
	st, view, err := e.searchViewOf(ctx, c, r)
	if err != nil || st == nil {
		return query.FullTextStats{}, false
	}
	defer view.done()
	if len(view.stale) > 0 {
		return query.FullTextStats{}, false
	}
	p := "/" + strings.Join(path, "/")
	for _, t := range st.texts {
		if t.path != p {
			continue
		}
		s, err := t.ix.Stats(ctx, t.state(e.store), keywords)
		if err != nil {
			return query.FullTextStats{}, false
		}
		return query.FullTextStats{Documents: s.Documents, Words: s.Words, Hits: s.Hits}, true
	}
	return query.FullTextStats{}, false
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
func (e *Engine) fullTextCandidates(ctx context.Context, c *Container, r storage.Reader, src source, plan *query.Plan) (*textCandidates, []IndexUse, error) {
	required := false
	for _, t := range plan.FullText {
		required = required || t.Required
	}
	if !required || src.index != nil {
		return nil, nil, nil
	}
	st, view, err := e.snapshotSearchIndexes(ctx, c, r)
	if err != nil || st == nil {
		return nil, nil, err
	}
	defer view.done()
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
		ti := st.textIndexAt(ts.Path)
		if ti == nil {
			continue
		}
		rd := ti.state(r)
		var found map[string]bool
		for i, kw := range ts.Keywords {
			holding, err := ti.ix.Holding(ctx, rd, kw)
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
			Spec:   ti.path + " (full-text index)",
			Filter: ts.Function + "(ROOT." + strings.Join(ts.Path, ".") + ", …)",
		})
	}
	if set == nil {
		return nil, nil, nil
	}
	for s := range view.stale {
		set[s] = true
	}
	tc := &textCandidates{keys: make([][]byte, 0, len(set))}
	for suffix := range set {
		key := keys.ItemKeyFromSuffix(c.rid, []byte(suffix))
		if bytes.HasPrefix(key, src.scope) && src.bounds.containsEPK(c.itemEPK(key)) {
			tc.keys = append(tc.keys, key)
		}
	}
	slices.SortFunc(tc.keys, bytes.Compare)
	m.IndexLookupTime += time.Since(t0)
	return tc, uses, nil
}

// snapshotSearchIndexes returns c's search indexes when the snapshot r
// holds their state whole for c's current policy, so that reading their
// postings from r answers for r's items, with the view the query takes of
// them (searchViewOf: on a shared store, the indexes are the gateway's,
// caught up with r); nil in a transaction (a stored procedure's query),
// when c has none, or when r was taken before a rebuild finished.
func (e *Engine) snapshotSearchIndexes(ctx context.Context, c *Container, r storage.Reader) (*searchState, *searchView, error) {
	if _, inTxn := r.(storage.Batch); inTxn || c.Search() == nil {
		return nil, nil, nil
	}
	st, view, err := e.searchViewOf(ctx, c, r)
	if err != nil || st == nil {
		return nil, nil, err
	}
	if st.shared != nil {
		return st, view, nil
	}
	built, err := r.Get(ctx, keys.SearchMetaKey(c.rid))
	if errors.Is(err, storage.ErrNotFound) || err == nil && string(built) != st.fp {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return st, view, nil
}

// textIndexAt returns st's full-text index of a path, nil when none.
func (st *searchState) textIndexAt(path []string) *textIndex {
	for _, t := range st.texts {
		if t.path == "/"+strings.Join(path, "/") {
			return t
		}
	}
	return nil
}

// rankQuery answers a query ordered by RANK FullTextScore(path, keywords)
// with TOP or LIMIT from the candidates the path's full-text index gives:
// the items holding any of the keywords (within those of the required
// full-text conjuncts, when src is narrowed by them). Those are exactly the
// items that score above 0; the others score 0 and rank after them, so
// when the candidates fill the page TOP/OFFSET/LIMIT ask for, the answer is
// the one over every item (the statistics are the container's either way,
// and ties keep creation order). used false means the query is to be
// evaluated over the whole source: no such ORDER BY, RRF, no TOP or LIMIT,
// an aggregate, GROUP BY or DISTINCT, no index at the path, or too few
// candidates.
//
// eval evaluates the query over a source (wholeQuery).
func (e *Engine) rankQuery(ctx context.Context, c *Container, r storage.Reader, src source, narrowed *textCandidates, plan *query.Plan, eval func(source) ([]json.RawMessage, error), util *IndexUtilization) (results []json.RawMessage, used bool, err error) {
	if plan.Rank == nil || len(plan.Rank.Components) != 1 || plan.Rank.Components[0].Text == nil ||
		plan.Aggregates || plan.GroupBy || plan.Distinct || src.index != nil {
		return nil, false, nil
	}
	want := plan.Top
	if plan.Limit >= 0 && (want < 0 || plan.Limit < want) {
		want = plan.Limit
	}
	if want <= 0 {
		return nil, false, nil
	}
	ts := plan.Rank.Components[0].Text
	st, view, err := e.snapshotSearchIndexes(ctx, c, r)
	if err != nil || st == nil {
		return nil, false, err
	}
	defer view.done()
	ti := st.textIndexAt(ts.Path)
	if ti == nil {
		return nil, false, nil
	}
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	t0 := time.Now()
	any := map[string]bool{}
	for _, kw := range ts.Keywords {
		holding, err := ti.ix.Holding(ctx, ti.state(r), kw)
		if errors.Is(err, fulltext.ErrCorrupt) {
			return nil, false, nil // the state a rebuild replaces: read the items
		}
		if err != nil {
			return nil, true, queryError(err)
		}
		m.IndexLookups += int64(len(holding))
		for _, k := range holding {
			any[string(keys.ItemKeyFromSuffix(c.rid, k))] = true
		}
	}
	stale, err := view.holding(ctx, c, r, ti, ts.Keywords)
	if err != nil {
		return nil, true, queryError(err)
	}
	for _, k := range stale {
		any[string(k)] = true
	}
	view.done() // the evaluation may ask the indexes again
	tc := &textCandidates{}
	if narrowed != nil {
		for _, k := range narrowed.keys {
			if any[string(k)] {
				tc.keys = append(tc.keys, k)
			}
		}
	} else {
		for k := range any {
			key := []byte(k)
			if bytes.HasPrefix(key, src.scope) && src.bounds.containsEPK(c.itemEPK(key)) {
				tc.keys = append(tc.keys, key)
			}
		}
		slices.SortFunc(tc.keys, bytes.Compare)
	}
	m.IndexLookupTime += time.Since(t0)
	ranked := src
	ranked.narrowed = tc.scanner(c)
	results, err = eval(ranked)
	if err != nil {
		return nil, true, err
	}
	if len(results) < want {
		return nil, false, nil
	}
	if util != nil {
		util.UtilizedSingle = append(util.UtilizedSingle, IndexUse{
			Spec:   ti.path + " (full-text index)",
			Filter: "ORDER BY RANK FullTextScore(ROOT." + strings.Join(ts.Path, ".") + ", …)",
		})
	}
	return results, true, nil
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
		for len(ks) > 0 {
			n := min(len(ks), textChunk)
			t0 := time.Now()
			values, err := storage.GetMany(ctx, r, ks[:n])
			if err != nil {
				yield(candidate{}, err)
				return
			}
			for i, v := range values {
				if v == nil {
					continue
				}
				if !c.yieldItem(m, t0, ks[i], ks[i], v, now, yield) {
					return
				}
				t0 = time.Now()
			}
			ks = ks[n:]
		}
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
	for len(ks) > 0 {
		n := min(len(ks), textChunk)
		t0 := time.Now()
		values, err := storage.GetMany(ctx, r, ks[:n])
		if err != nil {
			yield(candidate{}, err)
			return
		}
		for i, v := range values {
			if v == nil {
				continue
			}
			s, err := decodeItem(ks[i], v)
			if err != nil {
				yield(candidate{}, err)
				return
			}
			m.DocumentLoadTime += time.Since(t0)
			t0 = time.Now()
			m.RetrievedDocumentCount++
			m.RetrievedDocumentSize += int64(len(s.doc))
			if c.expired(s, now) {
				continue
			}
			var pos []byte
			if wholeContainer {
				pos = keys.RIDKey(c.rid, binary.BigEndian.AppendUint64(nil, s.rid))
			} else {
				id, _, ok := c.splitItemKey(ks[i])
				if !ok {
					yield(candidate{}, fmt.Errorf("engine: malformed item key %x", ks[i]))
					return
				}
				pos = keys.OrderKey(ks[i][:len(ks[i])-len(id)], s.rid)
			}
			if !bytes.HasPrefix(pos, src.order) || start != nil && bytes.Compare(pos, start) < 0 {
				continue
			}
			cands = append(cands, candidate{pos: pos, item: s})
		}
		ks = ks[n:]
	}
	slices.SortFunc(cands, func(a, b candidate) int { return bytes.Compare(a.pos, b.pos) })
	for _, cand := range cands {
		if !yield(cand, nil) {
			return
		}
	}
}

// narrowByFullText restricts src to the candidates of the query's required
// full-text conjuncts when an index serves them (fullTextCandidates), and
// names the indexes in util.
func (e *Engine) narrowByFullText(ctx context.Context, c *Container, r storage.Reader, src *source, plan *query.Plan, util *IndexUtilization) (*textCandidates, error) {
	tc, uses, err := e.fullTextCandidates(ctx, c, r, *src, plan)
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

// withQuerySnapshot marks ctx as a query's over a snapshot taken at
// watermark w, for the search indexes of a shared store.
func (e *Engine) withQuerySnapshot(ctx context.Context, w uint64) context.Context {
	if !e.sharedSearchOn() {
		return ctx
	}
	return context.WithValue(ctx, sharedSearchQueryKey{}, &sharedSearchQuery{watermark: w, caught: map[*searchState]bool{}})
}
