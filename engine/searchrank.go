package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/searchindex"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

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
// A source a range index serves (src.index: the WHERE clause has a filter
// the index answers) is ranked by the walk too, when the walk reads fewer
// items than the range index's candidates: the walk's filter evaluates
// the whole WHERE clause on each holder, so the range index's entries are
// only counted (rangeCount, as far as the walk reads), and the walk gives
// up once it has read more items than they list; then, or when the walk
// cannot answer, the range index's candidates are ranked (used false).
// ordered tells whether ties keep creation order (the source's order when
// no index serves it).
//
// eval evaluates the query over a source (wholeQuery) read from a reader.
func (s *searchIndexes) rankQuery(ctx context.Context, c *Container, r storage.Reader, src source, narrowed *textCandidates, plan *query.Plan, x *query.Execution, eval func(storage.Reader, source) ([]json.RawMessage, error), util *IndexUtilization, ordered bool) (results []json.RawMessage, used bool, err error) {
	if plan.Rank == nil || len(plan.Rank.Components) != 1 || plan.Rank.Components[0].Text == nil ||
		plan.Aggregates || plan.GroupBy || plan.Distinct {
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
	st, view, err := s.snapshotIndexes(ctx, c, r)
	if err != nil || st == nil {
		return nil, false, err
	}
	defer view.Done()
	ti := st.TextAt(ts.Path)
	if ti == nil {
		return nil, false, nil
	}
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	t0 := time.Now()
	need := want + max(plan.Offset, 0)
	var budget *rangeCount // what the walk may read; nil: no bound
	if src.index != nil {
		budget = &rangeCount{c: c, r: r, src: src, m: m}
		if more, err := budget.atLeast(ctx, need+1); err != nil || !more {
			return nil, err != nil, err // the range index's candidates are as few
		}
	}
	rd := r
	tc, top, used, err := s.rankTop(ctx, c, r, src, narrowed, x, ti, view, ts, need, budget, m)
	if err != nil {
		return nil, true, err
	}
	if used {
		rd = top
	} else if src.index != nil {
		return nil, false, nil
	} else if tc, err = rankHolders(ctx, c, r, src, narrowed, ti, view, ts, m); tc == nil || err != nil {
		return nil, err != nil, err
	}
	view.Done() // the evaluation may ask the indexes again
	m.IndexLookupTime += time.Since(t0)
	ranked := src
	if src.index != nil {
		// The candidates replace the range index's: read in creation order,
		// as the source's own scan would read the scope.
		ranked.index = nil
		if ordered {
			ranked.order = c.orderScope(src.scope)
		}
	}
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
			Spec:   ti.Path + " (full-text index)",
			Filter: "ORDER BY RANK FullTextScore(ROOT." + strings.Join(ts.Path, ".") + ", …)",
		})
	}
	return results, true, nil
}

// rankHolders gives rankQuery every item in scope holding a keyword (within
// narrowed's candidates) as its candidates; nil when the snapshot holds
// the state a rebuild replaces.
func rankHolders(ctx context.Context, c *Container, r storage.Reader, src source, narrowed *textCandidates, ti *searchindex.TextIndex, view *searchindex.View, ts *query.TextSearch, m *QueryMetrics) (*textCandidates, error) {
	any := map[string]bool{}
	for _, kw := range ts.Keywords {
		holding, err := ti.Index.Holding(ctx, ti.State(r), kw)
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
	stale, err := staleHolding(ctx, view, c, r, ti, ts.Keywords)
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
func (s *searchIndexes) rrfQuery(ctx context.Context, c *Container, r storage.Reader, src source, narrowed *textCandidates, plan *query.Plan, x *query.Execution, util *IndexUtilization, ordered bool) (results []json.RawMessage, used bool, err error) {
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
	st, view, err := s.snapshotIndexes(ctx, c, r)
	if err != nil || st == nil {
		return nil, false, err
	}
	// The view is held until the answer is proven (a reader of the
	// indexes never waits for a catch-up, so the evaluation may ask them
	// again). Items whose index state is not the snapshot's (on a shared
	// store) would break the proof's premise that the indexes rank every
	// item as the snapshot holds it: then the whole source is ranked.
	defer view.Done()
	if len(view.StaleKeys()) > 0 {
		return nil, false, nil
	}
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	type vectorComp struct {
		i      int
		vi     *searchindex.VectorIndex
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
			ti := st.TextAt(ts.Path)
			if ti == nil {
				return nil, false, nil
			}
			for _, kw := range ts.Keywords {
				found, err := ti.Index.Holding(ctx, ti.State(r), kw)
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
			uses = append(uses, IndexUse{Spec: ti.Path + " (full-text index)",
				Filter: "ORDER BY RANK RRF(FullTextScore(ROOT." + strings.Join(ts.Path, ".") + ", …))"})
		case comp.Vector != nil:
			vs := comp.Vector
			vi := st.VectorAt(vs.Path)
			cfg, ok := vectorServes(vi, vs)
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
			uses = append(uses, IndexUse{Spec: vi.Path + " (" + cfg.Kind.String() + " vector index)",
				Filter: "ORDER BY RANK RRF(VectorDistance(ROOT." + strings.Join(vs.Path, ".") + ", …))"})
		default:
			return nil, false, nil
		}
	}
	m.IndexLookupTime += time.Since(t0)
	adm := s.newAdmitter(ctx, c, r, src, x)
	want := max(plan.Offset, 0) + take
	for d := min(max(4*want, 40), maxRRFDepth); ; d = min(4*d, maxRRFDepth) {
		t0 := time.Now()
		cand := maps.Clone(holding)
		more := false
		for _, vc := range vecs {
			opt := vector.SearchOptions{K: d, Filter: adm.admit, Exact: vc.exact}
			if vc.vs.SearchListSizeMultiplier > 0 {
				opt.ListSize = vc.vs.SearchListSizeMultiplier * d
			}
			found, err := vc.vi.Search(ctx, vc.q, opt, s.store, shardValues(vc.vi, plan))
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
			tol := vectorCutTolerance(vc.vi.Config(), s, vc.qnorm)
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
		results, exact, err := x.ExecuteRanked(sourceDocs(ctx, c, r, ranked, s.now().Unix(), ordered), cuts)
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
