package engine

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// defaultFullText is the full-text policy of a container that declares
// none: text is analyzed in the service's default language.
var defaultFullText = &fulltext.Policy{DefaultLanguage: fulltext.DefaultLanguage}

// searchContext is a query execution's view of its container for vector
// and full-text search (query.SearchContext): the embeddings of the vector
// policy, the analyzers of the full-text policy's languages, and BM25
// statistics over the whole container as the query's snapshot sees it,
// whatever partition or range the query is scoped to.
type searchContext struct {
	s   *searchIndexes
	ctx context.Context
	c   *Container
	r   storage.Reader
	// m, when set, is where the documents the statistics read count:
	// FullTextStats puts it in ctx the first time it is called.
	m  *QueryMetrics
	mu sync.Mutex
	// stats caches the statistics of each path and keyword list asked for.
	stats map[string]query.FullTextStats
}

// searchContextIn returns the query.SearchContext of a query on c reading
// r, held in *sc, which the caller made for this one query and keeps for as
// long as its execution.
func (s *searchIndexes) searchContextIn(sc *searchContext, ctx context.Context, c *Container, r storage.Reader, m *QueryMetrics) query.SearchContext {
	*sc = searchContext{s: s, ctx: ctx, c: c, r: r, m: m}
	return sc
}

// statsMetricsKey carries, in the context of a query's search context, the
// QueryMetrics the documents fullTextStats reads count in.
type statsMetricsKey struct{}

func searchPath(path []string) string { return "/" + strings.Join(path, "/") }

func (s *searchContext) fullText() *fulltext.Policy {
	if sp := s.c.search; sp != nil && sp.FullText != nil {
		return sp.FullText
	}
	return defaultFullText
}

// Embedding implements query.SearchContext.
func (s *searchContext) Embedding(path []string) (query.Embedding, bool) {
	sp := s.c.search
	if sp == nil {
		return query.Embedding{}, false
	}
	emb, ok := sp.Vector.Embedding(searchPath(path))
	if !ok {
		return query.Embedding{}, false
	}
	return query.Embedding{DistanceFunction: emb.Metric.String(), DataType: emb.DataType.String(), Dimensions: emb.Dimensions}, true
}

// analyzer returns the analyzer of the language of text at path.
func (s *searchContext) analyzer(path string) *fulltext.Analyzer {
	a, err := fulltext.AnalyzerFor(s.fullText().Language(path))
	if err != nil {
		// The policy was validated: its languages all have analyzers.
		a, _ = fulltext.AnalyzerFor(fulltext.DefaultLanguage)
	}
	return a
}

// Analyze implements query.SearchContext.
func (s *searchContext) Analyze(path []string, text string) []query.Term {
	return queryTerms(s.analyzer(searchPath(path)).Analyze(text))
}

func queryTerms(ts []fulltext.Term) []query.Term {
	out := make([]query.Term, len(ts))
	for i, t := range ts {
		out[i] = query.Term{Text: t.Text, Pos: t.Pos}
	}
	return out
}

// FullTextStats implements query.SearchContext: the statistics are the
// whole container's, so that a query scoped to one partition ranks as one
// over the container does (as the service's do).
func (s *searchContext) FullTextStats(path []string, keywords []string) (query.FullTextStats, bool) {
	key := searchPath(path) + "\x00" + strings.Join(keywords, "\x00")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m != nil {
		s.ctx, s.m = context.WithValue(s.ctx, statsMetricsKey{}, s.m), nil
	}
	if st, ok := s.stats[key]; ok {
		return st, true
	}
	st, ok := s.s.fullTextIndexStats(s.ctx, s.c, s.r, path, keywords)
	var err error
	if !ok {
		st, err = s.s.fullTextStats(s.ctx, s.c, s.r, searchPath(path), keywords, s.analyzer(searchPath(path)))
	}
	if err != nil {
		// The execution counts them over its own documents instead; a
		// cancelled context stops it right after.
		return query.FullTextStats{}, false
	}
	if s.stats == nil {
		s.stats = map[string]query.FullTextStats{}
	}
	s.stats[key] = st
	return st, true
}

// fullTextStats computes BM25's statistics for keywords over the text at
// path of every item of c that r sees: how many items have text there, how
// many terms they hold in all, and how many contain each keyword (as a
// phrase, as FullTextContains matches). It reads every item: the full-text
// index's maintained counters would answer without.
//
// The documents it reads count as documents the query retrieved (in the
// QueryMetrics ctx carries, see searchContext): they are what its request
// charge pays for.
func (s *searchIndexes) fullTextStats(ctx context.Context, c *Container, r storage.Reader, path string, keywords []string, an *fulltext.Analyzer) (query.FullTextStats, error) {
	m, _ := ctx.Value(statsMetricsKey{}).(*QueryMetrics)
	st := query.FullTextStats{Hits: make([]int64, len(keywords))}
	kws := make([][]fulltext.Term, len(keywords))
	for i, k := range keywords {
		kws[i] = an.Analyze(k)
	}
	segs := strings.Split(path[1:], "/")
	for cand, err := range c.scan(ctx, r, source{scope: keys.ItemContainerPrefix(c.rid)}, nil, s.now().Unix()) {
		if err != nil {
			return query.FullTextStats{}, err
		}
		if m != nil {
			m.RetrievedDocumentCount++
			m.RetrievedDocumentSize += int64(len(cand.item.doc))
		}
		text, ok := stringAt(cand.item.doc, segs)
		if !ok {
			continue
		}
		terms := an.Analyze(text)
		st.Documents++
		st.Words += int64(len(terms))
		for i, kw := range kws {
			if fulltext.Occurrences(terms, kw) > 0 {
				st.Hits[i]++
			}
		}
	}
	return st, nil
}

// stringAt returns the string at a property path of a JSON document.
func stringAt(doc []byte, segs []string) (string, bool) {
	raw := json.RawMessage(doc)
	var ok bool
	for _, name := range segs {
		obj, err := jsondoc.Parse(raw)
		if err != nil {
			return "", false
		}
		if raw, ok = obj.Get(name); !ok {
			return "", false
		}
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// GatewayPlan returns the gateway's query plan for a vector or hybrid
// search query on c (query.Query.Gateway: the non-streaming ORDER BY of
// VectorDistance, or ORDER BY RANK's component queries), or nil when the
// query is neither or cannot be parsed (the execution then answers its
// error). skipOrderByRewrite gives the hybrid plan's newer form, for
// clients that list the HybridSearchSkipOrderByRewrite query feature.
func (c *Container) GatewayPlan(text string, params map[string]json.RawMessage, skipOrderByRewrite bool) *query.GatewayPlan {
	q, err := c.parseQuery(text)
	if err != nil {
		return nil
	}
	sc := &searchContext{c: c}
	gp, err := q.Gateway(params, query.GatewayOptions{Embedding: sc.Embedding, SkipOrderByRewrite: skipOrderByRewrite})
	if err != nil {
		return nil
	}
	return gp
}

// GroupByPlan returns the gateway's query plan for a GROUP BY query on c
// (query.Query.GroupByGateway), or nil when the query is no GROUP BY the
// SDKs' pipelines can merge, or cannot be parsed.
func (c *Container) GroupByPlan(text string, params map[string]json.RawMessage) *query.GatewayPlan {
	q, err := c.parseQuery(text)
	if err != nil {
		return nil
	}
	gp, err := q.GroupByGateway(params)
	if err != nil {
		return nil
	}
	return gp
}

// searchUtilization adds to u the vector and full-text searches of plan
// whose path has no index of their kind (no vector index, no full-text
// index) as potential indexes, the function named in the filter text. An
// index a search does use is named where it is used.
func (c *Container) searchUtilization(plan *query.Plan, u *IndexUtilization) {
	if u == nil {
		return
	}
	sp := c.search
	potential := func(path []string, function string) {
		u.PotentialSingle = append(u.PotentialSingle, IndexUse{Spec: searchPath(path) + "/*", Filter: function + "(ROOT." + strings.Join(path, ".") + ")"})
	}
	vectorUse := func(v *query.VectorSearch) {
		if v == nil {
			return
		}
		if _, ok := sp.vectorIndex(searchPath(v.Path)); !ok {
			potential(v.Path, "VectorDistance")
		}
	}
	vectorUse(plan.Vector)
	for _, t := range plan.FullText {
		if x, ok := sp.fullTextPath(searchPath(t.Path)); !ok || !x.Indexed {
			potential(t.Path, t.Function)
		}
	}
	if plan.Rank != nil {
		for _, rc := range plan.Rank.Components {
			vectorUse(rc.Vector)
		}
	}
}

func (p *SearchPolicy) vectorIndex(path string) (vector.IndexPolicy, bool) {
	if p == nil {
		return vector.IndexPolicy{}, false
	}
	return p.Vector.Index(path)
}

func (p *SearchPolicy) fullTextPath(path string) (fulltext.Path, bool) {
	if p == nil {
		return fulltext.Path{}, false
	}
	return p.FullText.Path(path)
}
