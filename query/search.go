package query

import (
	"math"
	"strings"
	"unicode"
)

// SearchContext is the container's side of vector and full-text search,
// which the documents alone do not give: the policies (an embedding's
// distance function, a text path's language) and container-wide statistics.
// The engine implements it from the container's policies and indexes; a nil
// SearchContext (Options.Search) means no policy (VectorDistance defaults to
// cosine, text is cut by DefaultAnalyze) and statistics gathered from the
// documents the execution is given.
type SearchContext interface {
	// Embedding returns the vector embedding the container's policy declares
	// at a document path (segments from the document root).
	Embedding(path []string) (Embedding, bool)
	// Analyze cuts text found at a full-text path into its terms, as the
	// path's language analyzes it (tokens, lower case, stop words left out,
	// stems). A term's Pos counts the tokens before it, stop words
	// included, so a phrase matches only where its words are adjacent.
	Analyze(path []string, text string) []Term
	// FullTextStats returns the container's BM25 statistics for the
	// keywords at path: how many documents have text there, their terms in
	// all, and how many of them contain each keyword. ok false lets the
	// execution count them over the documents it is given.
	FullTextStats(path []string, keywords []string) (stats FullTextStats, ok bool)
}

// Embedding is a vector embedding policy's entry for one path.
type Embedding struct {
	// DistanceFunction is "cosine", "dotproduct" or "euclidean".
	DistanceFunction string
	// DataType is "float32", "float16", "int8" or "uint8".
	DataType   string
	Dimensions int
}

// Term is one analyzed term of a text and its position.
type Term struct {
	Text string
	Pos  int
}

// FullTextStats are the corpus statistics BM25 needs for some keywords.
type FullTextStats struct {
	// Documents is how many documents have text at the path.
	Documents int64
	// Words is the number of terms of those texts, in all.
	Words int64
	// Hits[i] is how many of them contain keyword i.
	Hits []int64
}

// BM25's parameters, Lucene's defaults.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// rrfK is the constant of reciprocal rank fusion, the service's.
const rrfK = 60

// DefaultAnalyze cuts text into lower-case words: runs of letters and
// digits. It is the analyzer of an execution without a SearchContext; the
// engine's analyzers add each language's stop words and stemming.
func DefaultAnalyze(text string) []Term {
	var out []Term
	start := -1
	pos := 0
	for i, r := range text {
		word := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			out = append(out, Term{Text: strings.ToLower(text[start:i]), Pos: pos})
			pos++
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, Term{Text: strings.ToLower(text[start:]), Pos: pos})
	}
	return out
}

// phraseCount counts where the keyword's terms occur in the text's terms,
// adjacent and in order (a keyword's own stop words keep their gaps).
func phraseCount(text, kw []Term) int {
	if len(kw) == 0 {
		return 0
	}
	n := 0
	for i, t := range text {
		if t.Text != kw[0].Text {
			continue
		}
		ok := true
		j := i
		for k := 1; k < len(kw) && ok; k++ {
			want := t.Pos + kw[k].Pos - kw[0].Pos
			for j < len(text) && text[j].Pos < want {
				j++
			}
			ok = j < len(text) && text[j].Pos == want && text[j].Text == kw[k].Text
		}
		if ok {
			n++
		}
	}
	return n
}

// bm25 scores one document: tf[i] is how often keyword i occurs in it and
// length its number of terms; the statistics are the corpus's.
func bm25(tf []int, length int, st FullTextStats) float64 {
	if st.Documents <= 0 || st.Words <= 0 {
		return 0
	}
	n := float64(st.Documents)
	avgdl := float64(st.Words) / n
	score := 0.0
	for i, f := range tf {
		if f == 0 || i >= len(st.Hits) {
			continue
		}
		h := float64(st.Hits[i])
		idf := math.Log(1 + (n-h+0.5)/(h+0.5))
		ff := float64(f)
		score += idf * ff * (bm25K1 + 1) / (ff + bm25K1*(1-bm25B+bm25B*float64(length)/avgdl))
	}
	return score
}

// vectorMetric is a distance function.
type vectorMetric uint8

const (
	metricCosine vectorMetric = iota + 1
	metricDot
	metricEuclidean
)

func parseMetric(s string) (vectorMetric, bool) {
	switch strings.ToLower(s) {
	case "cosine":
		return metricCosine, true
	case "dotproduct":
		return metricDot, true
	case "euclidean":
		return metricEuclidean, true
	}
	return 0, false
}

// higherIsCloser reports whether larger scores are more similar.
func (m vectorMetric) higherIsCloser() bool { return m != metricEuclidean }

// vectorScore computes VectorDistance of two number arrays: the cosine
// similarity, the dot product or the Euclidean distance. ok is false when
// either is not an array of numbers or their lengths differ.
func vectorScore(m vectorMetric, a, b value) (float64, bool) {
	if a.k != kArray || b.k != kArray {
		return 0, false
	}
	av, bv := a.array(), b.array()
	if len(av) != len(bv) || len(av) == 0 {
		return 0, false
	}
	var d, na, nb, l float64
	for i := range av {
		if av[i].k != kNumber || bv[i].k != kNumber {
			return 0, false
		}
		x, y := av[i].n, bv[i].n
		d += x * y
		na += x * x
		nb += y * y
		l += (x - y) * (x - y)
	}
	switch m {
	case metricDot:
		return d, true
	case metricEuclidean:
		return math.Sqrt(l), true
	}
	if na == 0 || nb == 0 {
		return 0, true
	}
	return d / (math.Sqrt(na) * math.Sqrt(nb)), true
}
