package query

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestNarrowedRRFProvenExactIsTheWholeAnswer: ExecuteRanked over candidates
// that hold what their cuts say (every document scoring better than the
// cut, some at it, some others) answers exactly as Execute over every
// document whenever it reports its answer exact, for RRF of FullTextScore
// and VectorDistance (cosine and Euclidean, ties, weights, documents
// without text or vector, WHERE, TOP and OFFSET/LIMIT); and it does report
// exact answers, so the check is not vacuous.
func TestNarrowedRRFProvenExactIsTheWholeAnswer(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 4))
	words := strings.Fields("red green blue stone river glass")
	exacts, runs := 0, 0
	for round := range 400 {
		n := 20 + r.IntN(60)
		docs := make([]string, n)
		for i := range docs {
			body := fmt.Sprintf(`{"id":"%d","n":%d`, i, r.IntN(5))
			switch r.IntN(8) {
			case 0: // no text
			case 1:
				body += `,"t":7`
			default:
				ws := make([]string, 1+r.IntN(5))
				for k := range ws {
					ws[k] = words[r.IntN(len(words))]
				}
				body += `,"t":"` + strings.Join(ws, " ") + `"`
			}
			if r.IntN(8) != 0 {
				body += fmt.Sprintf(`,"v":[%d,%d,%d]`, r.IntN(4)-1, r.IntN(4)-1, r.IntN(3))
			}
			docs[i] = body + "}"
		}
		metric := "cosine"
		if r.IntN(2) == 0 {
			metric = "euclidean"
		}
		kw := words[r.IntN(len(words))]
		qv := []int{r.IntN(3) - 1, r.IntN(3), r.IntN(3) - 1}
		weights := ""
		switch r.IntN(4) {
		case 0:
			weights = ", [2, 1]"
		case 1:
			weights = ", [1, 0.5]"
		case 2:
			weights = ", [0, 1]"
		}
		where := ""
		if r.IntN(3) == 0 {
			where = " WHERE c.n > 1"
		}
		page := fmt.Sprintf("OFFSET %d LIMIT %d", r.IntN(4), 1+r.IntN(6))
		if r.IntN(2) == 0 {
			page = ""
		}
		top := ""
		if page == "" {
			top = fmt.Sprintf("TOP %d ", 1+r.IntN(8))
		}
		text := fmt.Sprintf(`SELECT %sc.id FROM c%s ORDER BY RANK RRF(FullTextScore(c.t, %q), VectorDistance(c.v, %v, false, {distanceFunction: %q})%s) %s`,
			top, where, kw, strings.Join(strings.Fields(fmt.Sprint(qv)), ","), metric, weights, page)
		q, err := Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		// The statistics the container would give: counted over every document.
		stats := FullTextStats{Hits: []int64{0}}
		holds := make([]bool, n)
		vs := make([]float64, n) // NaN: no vector score
		qval := value{}
		{
			raw, _ := json.Marshal(qv)
			qval, _ = decodeJSON(raw)
		}
		m := metricCosine
		if metric == "euclidean" {
			m = metricEuclidean
		}
		for i, d := range docs {
			v, _ := decodeJSON([]byte(d))
			if tv := v.object().get("t"); tv.k == kString {
				terms := DefaultAnalyze(tv.str())
				stats.Documents++
				stats.Words += int64(len(terms))
				for _, term := range terms {
					if term.Text == kw {
						holds[i] = true
					}
				}
				if holds[i] {
					stats.Hits[0]++
				}
			}
			vs[i] = math.NaN()
			if s, ok := vectorScore(m, v.object().get("v"), qval); ok {
				vs[i] = s
			}
		}
		opts := Options{Search: testSearch{stats: &stats}}
		x, err := q.Prepare(opts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := x.Execute(docsOf(docs...))
		if err != nil {
			t.Fatal(err)
		}
		// The vector candidates: every document scoring better than the
		// d-th best, some of those at it, and some others.
		var defined []float64
		for _, s := range vs {
			if !math.IsNaN(s) {
				defined = append(defined, s)
			}
		}
		slices.Sort(defined)
		if m.higherIsCloser() {
			slices.Reverse(defined)
		}
		d := 1 + r.IntN(n)
		vcut := RankCut{Narrowed: true}
		if d >= len(defined) {
			vcut.All = true
		} else {
			vcut.Score = defined[d-1]
		}
		in := make([]bool, n)
		for i := range docs {
			better := !math.IsNaN(vs[i]) && (vcut.All || m.higherIsCloser() && vs[i] > vcut.Score || !m.higherIsCloser() && vs[i] < vcut.Score)
			at := !math.IsNaN(vs[i]) && vs[i] == vcut.Score
			in[i] = holds[i] || better || at && r.IntN(2) == 0 || r.IntN(10) == 0
		}
		var given []string
		for i, doc := range docs {
			if in[i] {
				given = append(given, doc)
			}
		}
		cuts := []RankCut{{Narrowed: true, Score: 0, Floor: true}, vcut}
		got, exact, err := x.ExecuteRanked(docsOf(given...), cuts)
		if err != nil {
			t.Fatal(err)
		}
		runs++
		if !exact {
			continue
		}
		exacts++
		if !slices.EqualFunc(got, want, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Fatalf("round %d: %s over %d of %d documents (vector cut %+v): proven exact %s, the whole source gives %s",
				round, text, len(given), n, vcut, got, want)
		}
	}
	if exacts < runs/10 {
		t.Fatalf("only %d of %d narrowed runs proven exact", exacts, runs)
	}
	t.Logf("%d of %d narrowed runs proven exact", exacts, runs)
}

// TestNarrowedRRFUnprovenWithoutCuts: a component not narrowed, a
// negative weight, or statistics counted over the candidates leave the
// answer unproven; so does a plain FullTextScore.
func TestNarrowedRRFUnprovenWithoutCuts(t *testing.T) {
	docs := docsOf(`{"id":"a","t":"red","v":[1,0]}`, `{"id":"b","t":"blue","v":[0,1]}`)
	stats := &FullTextStats{Documents: 2, Words: 2, Hits: []int64{1}}
	all := []RankCut{{Narrowed: true, All: true}, {Narrowed: true, All: true}}
	for text, c := range map[string]struct {
		cuts  []RankCut
		stats *FullTextStats
		exact bool
	}{
		`SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, "red"), VectorDistance(c.v, [1,0]))`:         {all, stats, true},
		`SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, "red"), VectorDistance(c.v, [1,0]), [1,-1])`: {all, stats, false},
		`SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, "red"), VectorDistance(c.v, [1,0]))` + " ":   {[]RankCut{all[0], {}}, stats, false},
		`SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, "red"), VectorDistance(c.v, [1,0]))  `:       {all, nil, false},
		`SELECT TOP 1 c.id FROM c ORDER BY RANK FullTextScore(c.t, "red")`:                                          {all[:1], stats, false},
		`SELECT c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, "red"), VectorDistance(c.v, [1,0]))`:               {all, stats, false},
	} {
		q, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		x, err := q.Prepare(Options{Search: testSearch{stats: c.stats}})
		if err != nil {
			t.Fatal(err)
		}
		_, exact, err := x.ExecuteRanked(docs, c.cuts)
		if err != nil || exact != c.exact {
			t.Errorf("%s with cuts %+v: exact %v (%v), want %v", text, c.cuts, exact, err, c.exact)
		}
	}
}
