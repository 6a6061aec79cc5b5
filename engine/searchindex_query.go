package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

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
// of other dimensions, a query inside a transaction (a stored procedure), or
// a shared store. When used, the index appears in util.
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
	st, err := e.searchIndexesOf(c)
	if err != nil || st == nil {
		return nil, false, err
	}
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
	filter := func(suffix []byte) bool {
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
	opt := vector.SearchOptions{K: k, Filter: filter, Reader: prefixedReader{e.store, vi.prefix}}
	if vs.SearchListSizeMultiplier > 0 {
		opt.ListSize = vs.SearchListSizeMultiplier * k
	}
	t0 := time.Now()
	found, err := vi.ix.Search(ctx, q, opt)
	m.IndexLookupTime += time.Since(t0)
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
// when the path has no full-text index, the store is shared, or r is a
// transaction (a stored procedure's query, whose own writes may hold the
// index): the caller then counts them over the items. The index counts
// every stored item, those expired but not yet swept too.
func (e *Engine) fullTextIndexStats(ctx context.Context, c *Container, r storage.Reader, path []string, keywords []string) (query.FullTextStats, bool) {
	if _, inTxn := r.(storage.Batch); inTxn || c.Search() == nil {
		return query.FullTextStats{}, false
	}
	st, err := e.searchIndexesOf(c)
	if err != nil || st == nil {
		return query.FullTextStats{}, false
	}
	p := "/" + strings.Join(path, "/")
	for _, t := range st.texts {
		if t.path != p {
			continue
		}
		s, err := t.ix.Stats(ctx, prefixedReader{e.store, t.prefix}, keywords)
		if err != nil {
			return query.FullTextStats{}, false
		}
		return query.FullTextStats{Documents: s.Documents, Words: s.Words, Hits: s.Hits}, true
	}
	return query.FullTextStats{}, false
}
