package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
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
	vi := st.vectorIndexAt(vs.Path)
	cfg, ok := vi.serves(vs)
	if !ok {
		return nil, false, nil
	}
	path := vi.path
	if vs.Explicit && vs.Descending != cfg.Metric.HigherIsCloser() {
		return nil, false, nil // the farthest first: exact
	}
	qcfg := cfg
	qcfg.DataType = vector.Float32
	q, ok := vector.Normalize(qcfg, vs.Vector)
	if !ok {
		return nil, false, nil
	}
	adm := e.newAdmitter(ctx, c, r, src, x)
	m := adm.m
	admits := adm.admit
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
		err = adm.failed
	}
	if err != nil {
		return nil, true, queryError(err)
	}
	m.IndexLookups += int64(len(found))
	results, err = x.Execute(func(yield func([]byte, error) bool) {
		for _, f := range found {
			if !yield(adm.docs[string(f.Key)], nil) {
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

// admitter is the filter of an index search: it admits the items (by key
// after the container's item prefix) of the query's scope, live, that pass
// its WHERE clause, reading each from the query's snapshot once and keeping
// the documents it admits. The first read or evaluation error stops it
// admitting and is kept in failed.
type admitter struct {
	ctx    context.Context
	c      *Container
	r      storage.Reader
	src    source
	x      *query.Execution
	m      *QueryMetrics
	now    int64
	docs   map[string][]byte
	seen   map[string]bool
	failed error
}

func (e *Engine) newAdmitter(ctx context.Context, c *Container, r storage.Reader, src source, x *query.Execution) *admitter {
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	return &admitter{ctx: ctx, c: c, r: r, src: src, x: x, m: m, now: e.now().Unix(), docs: map[string][]byte{}, seen: map[string]bool{}}
}

// admit is the filter (vector.SearchOptions.Filter).
func (a *admitter) admit(suffix []byte) bool {
	if a.failed != nil {
		return false
	}
	if ok, done := a.seen[string(suffix)]; done {
		return ok
	}
	ok, err := a.read(suffix)
	if err != nil {
		a.failed = err
		return false
	}
	a.seen[string(suffix)] = ok
	return ok
}

func (a *admitter) read(suffix []byte) (bool, error) {
	key := keys.ItemKeyFromSuffix(a.c.rid, suffix)
	if !bytes.HasPrefix(key, a.src.scope) || !a.c.inBounds(a.src.bounds, key) {
		return false, nil
	}
	t0 := time.Now()
	v, err := a.r.Get(a.ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil // written after the snapshot
	}
	if err != nil {
		return false, err
	}
	s, err := decodeItem(key, v)
	a.m.DocumentLoadTime += time.Since(t0)
	if err != nil {
		return false, err
	}
	a.m.RetrievedDocumentCount++
	a.m.RetrievedDocumentSize += int64(len(s.doc))
	if a.c.expired(s, a.now) {
		return false, nil
	}
	ok, err := a.x.Admits(s.doc)
	if err != nil || !ok {
		return false, err
	}
	a.docs[string(suffix)] = s.doc
	return true, nil
}

// fullTextIndexStats returns the container-wide BM25 statistics of a
// full-text indexed path for keywords, from its index's counters; ok false
// when the path has no full-text index, the store is over several places,
// or r is a transaction (a stored procedure's query, whose own writes may hold the
// index): the caller then counts them over the items. The index counts
// every stored item: the items expired but not yet swept are taken off
// again (withoutUnswept), as the items' own statistics leave them out. On a
// shared store the items stale in the index (searchView) are counted as
// the query's snapshot has them instead (staleTextStats).
func (e *Engine) fullTextIndexStats(ctx context.Context, c *Container, r storage.Reader, path []string, keywords []string) (query.FullTextStats, bool) {
	if _, inTxn := r.(storage.Batch); inTxn || c.Search() == nil {
		return query.FullTextStats{}, false
	}
	st, view, err := e.searchViewOf(ctx, c, r)
	if err != nil || st == nil {
		return query.FullTextStats{}, false
	}
	defer view.done()
	p := "/" + strings.Join(path, "/")
	for _, t := range st.texts {
		if t.path != p {
			continue
		}
		st, err := e.staleTextStats(ctx, c, r, t, view.staleKeys(), keywords)
		if err != nil {
			return query.FullTextStats{}, false
		}
		if err := e.withoutUnswept(ctx, c, r, t, keywords, &st); err != nil {
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
func (e *Engine) withoutUnswept(ctx context.Context, c *Container, r storage.Reader, t *textIndex, keywords []string, st *query.FullTextStats) error {
	if c.ttl == nil {
		return nil
	}
	// The expiry index is read where the counters were: the store, or on a
	// shared store the query's snapshot r, with which the gateway's
	// in-memory index was caught up (a sweep committed since is in
	// neither).
	from := storage.Reader(e.store)
	if t.mem != nil {
		from = r
	}
	now := e.now().Unix()
	an := t.ix.Analyzer()
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
			if !c.expired(s, now) || json.Unmarshal(rawAt(s.doc, t.segs), &text) != nil {
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
		if bytes.HasPrefix(key, src.scope) && c.inBounds(src.bounds, key) {
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
// and ties keep creation order). RRF of the one FullTextScore ranks alike,
// with a positive weight. The candidates are narrowed further to the best
// holders that pass the query's filter (rankTop: the index's best-first
// walk), every holder when the walk cannot answer. used false means the
// query is to be evaluated over the whole source: no such ORDER BY, no TOP
// or LIMIT, an aggregate, GROUP BY or DISTINCT, no index at the path, or
// too few candidates.
//
// eval evaluates the query over a source (wholeQuery) read from a reader.
func (e *Engine) rankQuery(ctx context.Context, c *Container, r storage.Reader, src source, narrowed *textCandidates, plan *query.Plan, x *query.Execution, eval func(storage.Reader, source) ([]json.RawMessage, error), util *IndexUtilization) (results []json.RawMessage, used bool, err error) {
	if plan.Rank == nil || len(plan.Rank.Components) != 1 || plan.Rank.Components[0].Text == nil ||
		plan.Aggregates || plan.GroupBy || plan.Distinct || src.index != nil {
		return nil, false, nil
	}
	if w := plan.Rank.Weights; w != nil && w[0] <= 0 {
		return nil, false, nil // RRF's reversed (or flat) order: the items scoring 0 first
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
	rd := r
	tc, top, used, err := e.rankTop(ctx, c, r, src, narrowed, x, ti, view, ts, want+max(plan.Offset, 0), m)
	if err != nil {
		return nil, true, err
	}
	if used {
		rd = top
	} else if tc, err = e.rankHolders(ctx, c, r, src, narrowed, ti, view, ts, m); tc == nil || err != nil {
		return nil, err != nil, err
	}
	view.done() // the evaluation may ask the indexes again
	m.IndexLookupTime += time.Since(t0)
	ranked := src
	ranked.narrowed = tc.scanner(c)
	results, err = eval(rd, ranked)
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

// rankHolders gives rankQuery every item in scope holding a keyword (within
// narrowed's candidates) as its candidates; nil when the snapshot holds
// the state a rebuild replaces.
func (e *Engine) rankHolders(ctx context.Context, c *Container, r storage.Reader, src source, narrowed *textCandidates, ti *textIndex, view *searchView, ts *query.TextSearch, m *QueryMetrics) (*textCandidates, error) {
	any := map[string]bool{}
	for _, kw := range ts.Keywords {
		holding, err := ti.ix.Holding(ctx, ti.state(r), kw)
		if errors.Is(err, fulltext.ErrCorrupt) {
			return nil, nil // the state a rebuild replaces: read the items
		}
		if err != nil {
			return nil, queryError(err)
		}
		m.IndexLookups += int64(len(holding))
		for _, k := range holding {
			any[string(keys.ItemKeyFromSuffix(c.rid, k))] = true
		}
	}
	stale, err := view.holding(ctx, c, r, ti, ts.Keywords)
	if err != nil {
		return nil, queryError(err)
	}
	for _, k := range stale {
		any[string(k)] = true
	}
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
			if bytes.HasPrefix(key, src.scope) && c.inBounds(src.bounds, key) {
				tc.keys = append(tc.keys, key)
			}
		}
		slices.SortFunc(tc.keys, bytes.Compare)
	}
	return tc, nil
}

// rrfQuery answers a query ordered by RANK RRF(...) of FullTextScore and
// VectorDistance components, with TOP or LIMIT, from the candidates their
// indexes give, when it can show that the answer is the one over the whole
// source (query.Execution.ExecuteRanked); used false means the query is to
// be evaluated over the whole source.
//
// The candidates are, for a FullTextScore, every item in scope holding one
// of its keywords (the items scoring above 0: the others score 0, or have
// no text); for a VectorDistance, the d closest items in scope that pass
// the WHERE clause, from a search of its vector index with the filter
// applied during the search. RRF ranks each row among all rows, so a
// candidate's rank among the candidates is its true rank only where every
// better row is a candidate, and a row beyond every component's candidates
// may still fuse to as much as the ranks after them give: the execution
// proves the answer exact when the rows it returns all have true ranks and
// the last of them fuses to more than any other row could. When it cannot,
// d grows (4 times, from 4 times the rows asked for) while the vector
// searches can find more, up to maxRRFDepth; then the whole source is read
// (the documents the searches read are read once: the filter keeps them).
// Components whose ranks are far apart (an item first by its text and
// far down by its vector) need deep candidates, or the whole source.
//
// The answer is exact when the vector searches are: a flat index, or
// VectorDistance's bruteForce; a quantizedFlat or diskANN index gives
// the approximate neighbours, as for ORDER BY VectorDistance, and the fused
// answer is exact over what they find. The index scores in float32 while
// the execution scores the items' JSON numbers, so a vector cut is moved
// by a bound on that rounding (vectorCutTolerance). It is not narrowed
// (the whole source is read) for a weight below 0 (the farthest first), a
// dot product (its rounding has no bound from the scores), a data type
// other than float32 (the index keeps rounded or validated vectors), a
// component without an index or with keywords or a vector that are not
// constants, and where rankQuery's conditions are not met (an aggregate,
// GROUP BY, DISTINCT, a transaction, a shared store, a rebuild not
// finished in the snapshot).
func (e *Engine) rrfQuery(ctx context.Context, c *Container, r storage.Reader, src source, narrowed *textCandidates, plan *query.Plan, x *query.Execution, util *IndexUtilization) (results []json.RawMessage, used bool, err error) {
	rk := plan.Rank
	if rk == nil || !rk.Fused || plan.Aggregates || plan.GroupBy || plan.Distinct || src.index != nil {
		return nil, false, nil
	}
	take := plan.Top
	if plan.Limit >= 0 && (take < 0 || plan.Limit < take) {
		take = plan.Limit
	}
	if take <= 0 {
		return nil, false, nil
	}
	st, view, err := e.snapshotSearchIndexes(ctx, c, r)
	if err != nil || st == nil {
		return nil, false, err
	}
	// The view is held until the answer is proven (a reader of the
	// indexes never waits for a catch-up, so the evaluation may ask them
	// again). Items whose index state is not the snapshot's (on a shared
	// store) would break the proof's premise that the indexes rank every
	// item as the snapshot holds it: then the whole source is ranked.
	defer view.done()
	if len(view.staleKeys()) > 0 {
		return nil, false, nil
	}
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	type vectorComp struct {
		i      int
		vi     *vectorIndex
		vs     *query.VectorSearch
		q      []float32
		exact  bool
		higher bool
		qnorm  float64
	}
	cuts := make([]query.RankCut, len(rk.Components))
	holding := map[string]bool{} // item keys
	var vecs []vectorComp
	var uses []IndexUse
	t0 := time.Now()
	for i, comp := range rk.Components {
		w := 1.0
		if rk.Weights != nil {
			w = rk.Weights[i]
		}
		switch {
		case w == 0:
			continue
		case w < 0:
			return nil, false, nil
		case comp.Text != nil:
			ts := comp.Text
			ti := st.textIndexAt(ts.Path)
			if ti == nil {
				return nil, false, nil
			}
			for _, kw := range ts.Keywords {
				found, err := ti.ix.Holding(ctx, ti.state(r), kw)
				if errors.Is(err, fulltext.ErrCorrupt) {
					return nil, false, nil // the state a rebuild replaces: read the items
				}
				if err != nil {
					return nil, true, queryError(err)
				}
				m.IndexLookups += int64(len(found))
				for _, k := range found {
					holding[string(keys.ItemKeyFromSuffix(c.rid, k))] = true
				}
			}
			cuts[i] = query.RankCut{Narrowed: true, Score: 0, Floor: true}
			uses = append(uses, IndexUse{Spec: ti.path + " (full-text index)",
				Filter: "ORDER BY RANK RRF(FullTextScore(ROOT." + strings.Join(ts.Path, ".") + ", …))"})
		case comp.Vector != nil:
			vs := comp.Vector
			vi := st.vectorIndexAt(vs.Path)
			cfg, ok := vi.serves(vs)
			if !ok {
				return nil, false, nil
			}
			if cfg.DataType != vector.Float32 || cfg.Metric == vector.DotProduct {
				return nil, false, nil
			}
			q, ok := vector.Normalize(cfg, vs.Vector)
			if !ok {
				return nil, false, nil
			}
			qnorm := 0.0
			for _, x := range vs.Vector {
				qnorm += x * x
			}
			vecs = append(vecs, vectorComp{i: i, vi: vi, vs: vs, q: q, exact: vs.BruteForce || cfg.Kind == vector.Flat,
				higher: cfg.Metric.HigherIsCloser(), qnorm: math.Sqrt(qnorm)})
			uses = append(uses, IndexUse{Spec: vi.path + " (" + cfg.Kind.String() + " vector index)",
				Filter: "ORDER BY RANK RRF(VectorDistance(ROOT." + strings.Join(vs.Path, ".") + ", …))"})
		default:
			return nil, false, nil
		}
	}
	m.IndexLookupTime += time.Since(t0)
	adm := e.newAdmitter(ctx, c, r, src, x)
	want := max(plan.Offset, 0) + take
	for d := min(max(4*want, 40), maxRRFDepth); ; d = min(4*d, maxRRFDepth) {
		t0 := time.Now()
		cand := maps.Clone(holding)
		more := false
		for _, vc := range vecs {
			opt := vector.SearchOptions{K: d, Filter: adm.admit, Reader: vc.vi.state(e.store), Exact: vc.exact}
			if vc.vs.SearchListSizeMultiplier > 0 {
				opt.ListSize = vc.vs.SearchListSizeMultiplier * d
			}
			found, err := vc.vi.ix.Search(ctx, vc.q, opt)
			if err == nil {
				err = adm.failed
			}
			if err != nil {
				return nil, true, queryError(err)
			}
			m.IndexLookups += int64(len(found))
			for _, f := range found {
				cand[string(keys.ItemKeyFromSuffix(c.rid, f.Key))] = true
			}
			if len(found) < d {
				cuts[vc.i] = query.RankCut{Narrowed: true, All: true}
				continue
			}
			more = true
			s := found[d-1].Score
			tol := vectorCutTolerance(vc.vi.ix.Config(), s, vc.qnorm)
			if vc.higher {
				s += tol
			} else {
				s -= tol
			}
			cuts[vc.i] = query.RankCut{Narrowed: true, Score: s}
		}
		tc := &textCandidates{}
		for k := range cand {
			key := []byte(k)
			if narrowed != nil {
				if _, ok := slices.BinarySearchFunc(narrowed.keys, key, bytes.Compare); !ok {
					continue
				}
			} else if !bytes.HasPrefix(key, src.scope) || !c.inBounds(src.bounds, key) {
				continue
			}
			tc.keys = append(tc.keys, key)
		}
		m.IndexLookupTime += time.Since(t0)
		if len(tc.keys) > maxTextOrdered {
			return nil, false, nil // about as much as the whole source
		}
		slices.SortFunc(tc.keys, bytes.Compare)
		ranked := src
		ranked.narrowed = tc.scanner(c)
		results, exact, err := x.ExecuteRanked(sourceDocs(ctx, c, r, ranked, e.now().Unix(), !e.noCreationOrder), cuts)
		if err != nil {
			return nil, true, queryError(err)
		}
		if exact {
			if util != nil {
				util.UtilizedSingle = append(util.UtilizedSingle, uses...)
			}
			return results, true, nil
		}
		if !more || d >= maxRRFDepth {
			return nil, false, nil
		}
	}
}

// maxRRFDepth is the most candidates rrfQuery asks a vector search for
// before it reads the whole source instead.
const maxRRFDepth = 4096

// vectorCutTolerance bounds how far the index's float32 score of an item
// (s, or any worse) can be from the one the execution computes from the
// item's JSON numbers in float64: the inputs rounded to float32 and a sum
// of dims products, each off by at most about dims units in the last
// place of float32 (2^-24) of the sum of the products' magnitudes: at most
// 1 for cosine (unit vectors), and for the Euclidean distance the distance
// plus twice the query's norm. Twice that, and more, is the margin.
func vectorCutTolerance(cfg vector.Config, s, qnorm float64) float64 {
	unit := 4 * float64(cfg.Dimensions+8) / (1 << 24)
	if cfg.Metric == vector.Euclidean {
		return unit * (math.Abs(s) + 2*qnorm + 1)
	}
	return unit
}

// serves returns vi's configuration when vi (nil: none) can answer the
// vector search vs: the distance function and data type the query names,
// if any, are the index's.
func (vi *vectorIndex) serves(vs *query.VectorSearch) (vector.Config, bool) {
	if vi == nil {
		return vector.Config{}, false
	}
	cfg := vi.ix.Config()
	if vs.DistanceFunction != "" {
		if m, ok := vector.ParseMetric(vs.DistanceFunction); !ok || m != cfg.Metric {
			return cfg, false
		}
	}
	if vs.DataType != "" {
		if t, ok := vector.ParseDataType(vs.DataType); !ok || t != cfg.DataType {
			return cfg, false
		}
	}
	return cfg, true
}

// vectorIndexAt returns st's vector index of a path, nil when none.
func (st *searchState) vectorIndexAt(path []string) *vectorIndex {
	for _, v := range st.vecs {
		if v.path == "/"+strings.Join(path, "/") {
			return v
		}
	}
	return nil
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
