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
// (ascending order is then best first; unscored rows last). With cuts (a
// narrowed run, ExecuteRanked) it reports whether the best offset+take
// rows, in their order, are those of the whole source (exactTop).
func (rr *rankRun) finish(recs []record, cuts []RankCut, offset, take int) bool {
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
	var ranks [][]int
	if !rr.rrf {
		copy(final, scores[0])
	} else {
		ranks = make([][]int, len(rr.comps))
		for i := range rr.comps {
			w, higher := rr.direction(i)
			ranks[i] = denseRanks(scores[i], higher)
			for j := range final {
				final[j] += w / float64(rrfK+ranks[i][j])
			}
		}
	}
	exact := false
	if cuts != nil && rr.rrf && take > 0 {
		exact = rr.exactTop(recs, scores, ranks, final, cuts, offset+take)
	}
	for j := range recs {
		if math.IsNaN(final[j]) {
			recs[j].keys = []value{numV(math.Inf(1))}
		} else {
			recs[j].keys = []value{numV(-final[j])}
		}
		recs[j].rank = nil
	}
	return exact
}

// direction returns RRF's weight of component i, made positive, and
// whether its higher scores rank first (a negative weight reverses them).
func (rr *rankRun) direction(i int) (w float64, higher bool) {
	rc := rr.comps[i]
	w = 1.0
	if rr.weights != nil {
		w = rr.weights[i]
	}
	higher = rc.fts || rc.metric.higherIsCloser()
	if w < 0 {
		higher, w = !higher, -w
	}
	return w, higher
}

// RankCut is what the documents of a narrowed ORDER BY RANK RRF(...) run
// hold of one component's best (ExecuteRanked).
type RankCut struct {
	// Narrowed is false when they hold nothing known (the component was not
	// narrowed): a component with a weight other than 0 then leaves the
	// answer unproven.
	Narrowed bool
	// Score: every document of the source whose row scores strictly better
	// than Score in the component (higher for FullTextScore and a
	// similarity, lower for a distance) is among them.
	Score float64
	// All: every document of the source with a score in the component is
	// among them (Score does not matter).
	All bool
	// Floor: no document of the source has a score worse than Score (as
	// BM25 has none below 0).
	Floor bool
}

// exactTop reports whether the best m records of a narrowed run, in their
// order, are the best m of the whole source. A component's rank of a row
// is 1 + the number of distinct scores better than its own among all rows
// (denseRanks). When every row scoring better than a cut is among the
// records, a record scoring at least the cut has the same rank among the
// records as among all rows (it is known), and a row that is not a
// record ranks after the distinct scores above the cut: its fused score is
// at most tau. A record's rank among the records is never worse than among
// all rows, so the fused score a narrowed run gives a record is at least
// its true one, and exactly it when every component knows the record. The
// answer is therefore the whole source's when the best m records are all
// known and the m-th is above tau: no record after it can have more than it
// shows, nor a row that is not a record more than tau (and the ties
// between known records fall as over the whole source: by arrival, which
// keeps the source's order).
func (rr *rankRun) exactTop(recs []record, scores [][]float64, ranks [][]int, final []float64, cuts []RankCut, m int) bool {
	n := len(recs)
	if len(cuts) != len(rr.comps) || n < m {
		return false
	}
	known := make([]bool, n)
	for j := range known {
		known[j] = true
	}
	tau := 0.0
	for i, rc := range rr.comps {
		w, higher := rr.direction(i)
		raw := 1.0
		if rr.weights != nil {
			raw = rr.weights[i]
		}
		if raw == 0 {
			continue // the component adds 0 to every row
		}
		cut := cuts[i]
		if raw < 0 || !cut.Narrowed || rc.fts && rc.counting {
			return false
		}
		atOrAbove := func(s float64) bool {
			switch {
			case math.IsNaN(s):
				return false
			case cut.All:
				return true
			case higher:
				return s >= cut.Score
			}
			return s <= cut.Score
		}
		distinct := map[float64]bool{}
		atCut, floor := false, cut.Floor
		for j := range recs {
			s := scores[i][j]
			switch {
			case atOrAbove(s):
				distinct[s] = true
				atCut = atCut || s == cut.Score
			case !math.IsNaN(s):
				floor = false // a score below the floor: it was wrong
			}
		}
		// A row without a score ranks after every distinct score of the
		// source: known when the records hold them all.
		undefKnown := cut.All || floor && atCut
		for j := range recs {
			s := scores[i][j]
			if !atOrAbove(s) && !(math.IsNaN(s) && undefKnown) {
				known[j] = false
			}
		}
		// A row that is not a record may score at the cut (not above it).
		above := len(distinct)
		if atCut && !cut.All {
			above--
		}
		tau += w / float64(rrfK+above+1)
	}
	order := make([]int, n)
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool {
		if final[order[a]] != final[order[b]] {
			return final[order[a]] > final[order[b]]
		}
		return recs[order[a]].seq < recs[order[b]].seq
	})
	for _, j := range order[:m] {
		if !known[j] {
			return false
		}
	}
	return final[order[m-1]] > tau
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
