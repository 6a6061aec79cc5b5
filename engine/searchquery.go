package engine

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
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
	e   *Engine
	ctx context.Context
	c   *Container
	r   storage.Reader
	mu  sync.Mutex
	// stats caches the statistics of each path and keyword list asked for.
	stats map[string]query.FullTextStats
}

// searchContext returns the query.SearchContext of a query on c reading r.
func (e *Engine) searchContext(ctx context.Context, c *Container, r storage.Reader) query.SearchContext {
	return &searchContext{e: e, ctx: ctx, c: c, r: r}
}

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
	if st, ok := s.stats[key]; ok {
		return st, true
	}
	st, ok := s.e.fullTextIndexStats(s.ctx, s.c, s.r, path, keywords)
	var err error
	if !ok {
		st, err = s.e.fullTextStats(s.ctx, s.c, s.r, searchPath(path), keywords, s.analyzer(searchPath(path)))
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
func (e *Engine) fullTextStats(ctx context.Context, c *Container, r storage.Reader, path string, keywords []string, an *fulltext.Analyzer) (query.FullTextStats, error) {
	st := query.FullTextStats{Hits: make([]int64, len(keywords))}
	kws := make([][]fulltext.Term, len(keywords))
	for i, k := range keywords {
		kws[i] = an.Analyze(k)
	}
	segs := strings.Split(path[1:], "/")
	for cand, err := range c.scan(ctx, r, source{scope: keys.ItemContainerPrefix(c.rid)}, nil, e.now().Unix()) {
		if err != nil {
			return query.FullTextStats{}, err
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
		obj, err := parseObject(raw)
		if err != nil {
			return "", false
		}
		if raw, ok = obj.get(name); !ok {
			return "", false
		}
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}
