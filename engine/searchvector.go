package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/searchindex"
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
// snapshot's (searchindex.View) are left out of the search and evaluated from the
// snapshot beside what it finds. When used, the index appears in util.
func (s *searchIndexes) vectorQuery(ctx context.Context, c *Container, r storage.Reader, src source, plan *query.Plan, x *query.Execution, util **IndexUtilization) (results []json.RawMessage, used bool, err error) {
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
	st, view, err := s.viewOf(ctx, c, r)
	if err != nil || st == nil {
		return nil, false, err
	}
	defer view.Done()
	vi := st.VectorAt(vs.Path)
	cfg, ok := vectorServes(vi, vs)
	if !ok {
		return nil, false, nil
	}
	path := vi.Path
	if vs.Explicit && vs.Descending != cfg.Metric.HigherIsCloser() {
		return nil, false, nil // the farthest first: exact
	}
	qcfg := cfg
	qcfg.DataType = vector.Float32
	q, ok := vector.Normalize(qcfg, vs.Vector)
	if !ok {
		return nil, false, nil
	}
	adm := s.newAdmitter(ctx, c, r, src, x)
	m := adm.m
	admits := adm.admit
	filter := func(suffix []byte) bool { return !view.IsStale(suffix) && admits(suffix) }
	opt := vector.SearchOptions{K: k, Filter: filter}
	if vs.SearchListSizeMultiplier > 0 {
		opt.ListSize = vs.SearchListSizeMultiplier * k
	}
	t0 := time.Now()
	found, err := vi.Search(ctx, q, opt, s.store, shardValues(vi, plan))
	m.IndexLookupTime += time.Since(t0)
	for _, suffix := range view.StaleKeys() {
		if err == nil && admits(suffix) {
			found = append(found, vector.Result{Key: suffix})
		}
	}
	view.Done()
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

func (s *searchIndexes) newAdmitter(ctx context.Context, c *Container, r storage.Reader, src source, x *query.Execution) *admitter {
	m := src.stats
	if m == nil {
		m = &QueryMetrics{}
	}
	return &admitter{ctx: ctx, c: c, r: r, src: src, x: x, m: m, now: s.now().Unix(), docs: map[string][]byte{}, seen: map[string]bool{}}
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

// shardValues returns the values of vi's shard key a query's WHERE clause
// allows (an equality or IN on the shard key's path), nil when vi has no
// shard key or the query pins none: then every shard is searched.
func shardValues(vi *searchindex.VectorIndex, plan *query.Plan) []json.RawMessage {
	key := vi.ShardKey()
	if key == nil {
		return nil
	}
	for _, f := range plan.Filters {
		if (f.Op == query.FilterEq || f.Op == query.FilterIn) && slices.Equal(f.Path, key) {
			return f.Values
		}
	}
	return nil
}

// vectorServes returns vi's configuration when vi (nil: none) can answer the
// vector search vs: the distance function and data type the query names,
// if any, are the index's.
func vectorServes(vi *searchindex.VectorIndex, vs *query.VectorSearch) (vector.Config, bool) {
	if vi == nil {
		return vector.Config{}, false
	}
	cfg := vi.Config()
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
