package query

import (
	"math"
	"sort"
)

// rankRun computes ORDER BY RANK for one run: FullTextScore's BM25, whose
// statistics are the container's (from the SearchContext, or counted over
// every document the run is given, before WHERE), or RRF's fusion of the
// ranks each component gives every row.
type rankRun struct {
	comps   []*rankComp
	weights []float64
	rrf     bool
}

// rankComp is one scoring component: a FullTextScore or a VectorDistance.
type rankComp struct {
	call     *callExpr
	sc       *searchCall
	fts      bool
	keywords [][]Term
	stats    FullTextStats
	counting bool // the statistics are counted over the run's documents
	metric   vectorMetric
}

// rankRaw is what a row gives one component: its vector score, or its
// keywords' counts and its number of terms.
type rankRaw struct {
	defined bool
	score   float64
	tf      []int
	length  int
}

// newRankRun prepares the ranking of q, or returns nil when q has no ORDER
// BY RANK.
func (q *selectQuery) newRankRun(c *evalCtx) *rankRun {
	if len(q.orderBy) != 1 || !q.orderBy[0].rank {
		return nil
	}
	call := q.orderBy[0].x.(*callExpr)
	rr := &rankRun{}
	calls := []*callExpr{call}
	if call.search.kind == skRRF {
		rr.rrf = true
		calls = call.search.components
		rr.weights = call.search.weights
	}
	for _, k := range calls {
		rc := &rankComp{call: k, sc: k.search, fts: k.search.kind == skScore}
		if rc.fts {
			var words []string
			for _, a := range k.args[1:] {
				v := a.eval(c, nil)
				var list []value
				if v.k == kArray {
					list = v.array()
				} else {
					list = []value{v}
				}
				for _, w := range list {
					if w.k == kString {
						words = append(words, w.str())
						rc.keywords = append(rc.keywords, rc.sc.analyze(c, w.str()))
					}
				}
			}
			if c.search != nil {
				rc.stats, rc.counting = c.search.FullTextStats(rc.sc.path, words)
				rc.counting = !rc.counting
			} else {
				rc.counting = true
			}
			if rc.counting {
				rc.stats = FullTextStats{Hits: make([]int64, len(rc.keywords))}
			}
		} else {
			rc.metric = rc.sc.metricFor(c)
		}
		rr.comps = append(rr.comps, rc)
	}
	return rr
}

// count adds a document of the run to the statistics being counted.
func (rr *rankRun) count(c *evalCtx, root value) {
	for _, rc := range rr.comps {
		if !rc.fts || !rc.counting {
			continue
		}
		v := root
		for _, name := range rc.sc.path {
			if v.k != kObject {
				v = undef
				break
			}
			v = v.object().get(name)
		}
		if v.k != kString {
			continue
		}
		terms := rc.sc.analyze(c, v.str())
		rc.stats.Documents++
		rc.stats.Words += int64(len(terms))
		for i, kw := range rc.keywords {
			if phraseCount(terms, kw) > 0 {
				rc.stats.Hits[i]++
			}
		}
	}
}

// raw evaluates the components on the current row.
func (rr *rankRun) raw(c *evalCtx, e *env) []rankRaw {
	out := make([]rankRaw, len(rr.comps))
	for i, rc := range rr.comps {
		if rc.fts {
			v := rc.call.args[0].eval(c, e)
			if v.k != kString {
				continue
			}
			terms := rc.sc.analyze(c, v.str())
			tf := make([]int, len(rc.keywords))
			for j, kw := range rc.keywords {
				tf[j] = phraseCount(terms, kw)
			}
			out[i] = rankRaw{defined: true, tf: tf, length: len(terms)}
			continue
		}
		a, b := rc.call.args[0].eval(c, e), rc.call.args[1].eval(c, e)
		if s, ok := vectorScore(rc.metric, a, b); ok {
			out[i] = rankRaw{defined: true, score: s}
		}
	}
	return out
}

// finish scores every record and stores the negated score as its sort key
// (ascending order is then best first; unscored rows last).
func (rr *rankRun) finish(recs []record) {
	n := len(recs)
	scores := make([][]float64, len(rr.comps)) // NaN: undefined
	for i, rc := range rr.comps {
		scores[i] = make([]float64, n)
		for j := range recs {
			raw := recs[j].rank[i]
			switch {
			case !raw.defined:
				scores[i][j] = math.NaN()
			case rc.fts:
				scores[i][j] = bm25(raw.tf, raw.length, rc.stats)
			default:
				scores[i][j] = raw.score
			}
		}
	}
	final := make([]float64, n)
	if !rr.rrf {
		copy(final, scores[0])
	} else {
		for i, rc := range rr.comps {
			w := 1.0
			if rr.weights != nil {
				w = rr.weights[i]
			}
			higher := rc.fts || rc.metric.higherIsCloser()
			if w < 0 {
				higher, w = !higher, -w
			}
			ranks := denseRanks(scores[i], higher)
			for j := range final {
				final[j] += w / float64(rrfK+ranks[j])
			}
		}
	}
	for j := range recs {
		if math.IsNaN(final[j]) {
			recs[j].keys = []value{numV(math.Inf(1))}
		} else {
			recs[j].keys = []value{numV(-final[j])}
		}
		recs[j].rank = nil
	}
}

// denseRanks ranks the scores from 1, best first (higher or lower), equal
// scores sharing a rank and the next score taking the next rank, as the
// SDKs' hybrid search ranks; undefined (NaN) scores rank after all.
func denseRanks(scores []float64, higher bool) []int {
	idx := make([]int, 0, len(scores))
	for j, s := range scores {
		if !math.IsNaN(s) {
			idx = append(idx, j)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		if higher {
			return scores[idx[a]] > scores[idx[b]]
		}
		return scores[idx[a]] < scores[idx[b]]
	})
	ranks := make([]int, len(scores))
	rank := 0
	for k, j := range idx {
		if k == 0 || scores[j] != scores[idx[k-1]] {
			rank++
		}
		ranks[j] = rank
	}
	for j, s := range scores {
		if math.IsNaN(s) {
			ranks[j] = rank + 1
		}
	}
	return ranks
}
