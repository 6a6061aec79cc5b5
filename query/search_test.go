package query

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func run(t *testing.T, q string, docs []string, opts Options) []string {
	t.Helper()
	parsed, err := Parse(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	res, err := parsed.Execute(func(yield func([]byte, error) bool) {
		for _, d := range docs {
			if !yield([]byte(d), nil) {
				return
			}
		}
	}, opts)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = string(r)
	}
	return out
}

func ids(t *testing.T, rows []string) string {
	t.Helper()
	var out []string
	for _, r := range rows {
		var v struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(r), &v); err != nil || v.ID == "" {
			var s string
			if json.Unmarshal([]byte(r), &s) == nil {
				out = append(out, s)
				continue
			}
			t.Fatalf("row %s has no id", r)
		}
		out = append(out, v.ID)
	}
	return strings.Join(out, ",")
}

var vecDocs = []string{
	`{"id":"a","v":[1,0,0]}`,
	`{"id":"b","v":[0.9,0.1,0]}`,
	`{"id":"c","v":[0,1,0]}`,
	`{"id":"d","v":[-1,0,0]}`,
	`{"id":"e","v":[1,2]}`,
	`{"id":"f"}`,
}

// VectorDistance gives the cosine similarity by default, and the dot product
// or the Euclidean distance when the options or the policy say so.
func TestVectorDistanceScoresAsTheService(t *testing.T) {
	got := run(t, `SELECT VALUE VectorDistance(c.v, [1, 1, 0]) FROM c WHERE c.id = "b"`, vecDocs, Options{})
	want := (0.9 + 0.1) / (math.Sqrt(0.82) * math.Sqrt(2))
	if len(got) != 1 || math.Abs(mustFloat(t, got[0])-want) > 1e-12 {
		t.Fatalf("cosine %v, want %v", got, want)
	}
	got = run(t, `SELECT VALUE VectorDistance(c.v, [1, 1, 0], false, {distanceFunction: 'DotProduct'}) FROM c WHERE c.id = "b"`, vecDocs, Options{})
	if mustFloat(t, got[0]) != 1 {
		t.Fatalf("dot %v", got)
	}
	got = run(t, `SELECT VALUE VectorDistance([1, 1, 0], c.v, true, {distanceFunction: 'euclidean'}) FROM c WHERE c.id = "c"`, vecDocs, Options{})
	if mustFloat(t, got[0]) != 1 {
		t.Fatalf("euclidean %v", got)
	}
	// A document whose vector is missing or of another length has none.
	got = run(t, `SELECT c.id, VectorDistance(c.v, [1, 1, 0]) AS s FROM c WHERE c.id IN ("e", "f")`, vecDocs, Options{})
	if strings.Join(got, "") != `{"id":"e"}{"id":"f"}` {
		t.Fatalf("no vector: %v", got)
	}
	// The policy's distance function applies to its path.
	pol := testSearch{emb: map[string]Embedding{"v": {DistanceFunction: "euclidean"}}}
	got = run(t, `SELECT VALUE VectorDistance(c.v, [0, 1, 0]) FROM c WHERE c.id = "a"`, vecDocs, Options{Search: pol})
	if math.Abs(mustFloat(t, got[0])-math.Sqrt2) > 1e-12 {
		t.Fatalf("policy euclidean %v", got)
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		t.Fatalf("%s is not a number", s)
	}
	return f
}

// ORDER BY VectorDistance ranks the closest first whatever the distance
// function (higher similarity, or lower distance), leaves out documents
// without a vector, and ASC or DESC written out order by the value itself.
func TestOrderByVectorDistanceRanksClosestFirst(t *testing.T) {
	q := `SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.v, [1, 0, 0])`
	if got := ids(t, run(t, q, vecDocs, Options{})); got != "a,b,c" {
		t.Errorf("cosine: %s", got)
	}
	pol := testSearch{emb: map[string]Embedding{"v": {DistanceFunction: "euclidean"}}}
	if got := ids(t, run(t, q, vecDocs, Options{Search: pol})); got != "a,b,c" {
		t.Errorf("euclidean: %s", got)
	}
	all := `SELECT c.id FROM c ORDER BY VectorDistance(c.v, [1, 0, 0], false, {distanceFunction: "dotproduct"})`
	if got := ids(t, run(t, all, vecDocs, Options{})); got != "a,b,c,d" {
		t.Errorf("dot, all: %s", got)
	}
	asc := `SELECT c.id FROM c ORDER BY VectorDistance(c.v, [1, 0, 0]) ASC`
	if got := ids(t, run(t, asc, vecDocs, Options{})); got != "d,c,b,a" {
		t.Errorf("explicit ASC: %s", got)
	}
	where := `SELECT TOP 2 c.id FROM c WHERE c.id != "a" ORDER BY VectorDistance(c.v, [1, 0, 0])`
	if got := ids(t, run(t, where, vecDocs, Options{})); got != "b,c" {
		t.Errorf("with a filter: %s", got)
	}
	// The gateway's rewritten query for the SDKs' non-streaming ORDER BY.
	rewritten := `SELECT TOP 2 c._rid, [{"item": VectorDistance(c.v, [1, 0, 0])}] AS orderByItems, {"id": c.id} AS payload FROM c WHERE (true) ORDER BY VectorDistance(c.v, [1, 0, 0])`
	got := run(t, rewritten, vecDocs, Options{})
	if len(got) != 2 || !strings.Contains(got[0], `"payload":{"id":"a"}`) || !strings.Contains(got[0], `"orderByItems":[{"item":1}]`) {
		t.Errorf("rewritten: %v", got)
	}
}

var textDocs = []string{
	`{"id":"1","text":"The red bicycle is parked by the red door."}`,
	`{"id":"2","text":"A blue bicycle."}`,
	`{"id":"3","text":"Red roses and a red, red bicycle in the garden of the house by the lake."}`,
	`{"id":"4","text":"Nothing to see here."}`,
	`{"id":"5","title":"no text"}`,
}

// FullTextContains finds a keyword or a phrase (its words adjacent);
// FullTextContainsAll needs every keyword, FullTextContainsAny one.
func TestFullTextContainsMatchesWordsAndPhrases(t *testing.T) {
	for q, want := range map[string]string{
		`SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, "bicycle")`:                 "1,2,3",
		`SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, "RED bicycle")`:             "1,3",
		`SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, "bicycle red")`:             "",
		`SELECT VALUE c.id FROM c WHERE FullTextContainsAll(c.text, "red", "door")`:          "1",
		`SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, "door", "blue")`:         "1,2",
		`SELECT VALUE c.id FROM c WHERE NOT FullTextContainsAny(c.text, "bicycle", "roses")`: "4",
		`SELECT VALUE COUNTIF(FullTextContains(c.text, "red")) FROM c`:                       "",
	} {
		got := run(t, q, textDocs, Options{})
		if strings.HasPrefix(q, "SELECT VALUE COUNTIF") {
			if len(got) != 1 || got[0] != "2" {
				t.Errorf("%s: %v", q, got)
			}
			continue
		}
		if g := strings.Join(unquote(got), ","); g != want {
			t.Errorf("%s: %s, want %s", q, g, want)
		}
	}
}

func unquote(rows []string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		_ = json.Unmarshal([]byte(r), &out[i])
	}
	return out
}

// bm25Of computes BM25 by hand for one keyword.
func bm25Of(tf, length, docs, words, hits float64) float64 {
	idf := math.Log(1 + (docs-hits+0.5)/(hits+0.5))
	avg := words / docs
	return idf * tf * 2.2 / (tf + 1.2*(0.25+0.75*length/avg))
}

// ORDER BY RANK FullTextScore ranks by BM25 over the statistics of every
// document (not only those the filter keeps); _FullTextScore, the
// gateway's rewrite, gives the same score from statistics it is handed.
func TestFullTextScoreRanksByBM25(t *testing.T) {
	// Statistics: 4 documents with text, of 9+3+16+4 = 32 terms; "red" is
	// in 2. Document 1 (twice in 9 terms) edges out 3 (three times in 16).
	s1, s3 := bm25Of(2, 9, 4, 32, 2), bm25Of(3, 16, 4, 32, 2)
	if s1 <= s3 {
		t.Fatalf("hand BM25: %v <= %v", s1, s3)
	}
	got := ids(t, run(t, `SELECT c.id FROM c ORDER BY RANK FullTextScore(c.text, "red")`, textDocs, Options{}))
	if !strings.HasPrefix(got, "1,3,") {
		t.Fatalf("rank: %s", got)
	}
	filtered := ids(t, run(t, `SELECT TOP 1 c.id FROM c WHERE c.id != "3" ORDER BY RANK FullTextScore(c.text, "red")`, textDocs, Options{}))
	if filtered != "1" {
		t.Fatalf("filtered rank: %s", filtered)
	}
	want := s1
	q := `SELECT VALUE _FullTextScore(c.text, ["red"], 4, 32, [2]) FROM c WHERE c.id = "1"`
	if g := mustFloat(t, run(t, q, textDocs, Options{})[0]); math.Abs(g-want) > 1e-12 {
		t.Fatalf("_FullTextScore %v, want %v", g, want)
	}
	stats := `SELECT COUNT(1) AS documentCount, [{"totalWordCount": SUM(_FullTextWordCount(c.text)), "hitCounts": [COUNTIF(FullTextContains(c.text, "red"))]}] AS fullTextStatistics FROM c`
	if g := run(t, stats, textDocs, Options{}); len(g) != 1 || g[0] != `{"documentCount":5,"fullTextStatistics":[{"totalWordCount":32,"hitCounts":[2]}]}` {
		t.Fatalf("global statistics: %v", g)
	}
	// Statistics the engine supplies replace the counted ones: with an
	// average of 20 terms, 3's third "red" outweighs its length.
	ctx := testSearch{stats: &FullTextStats{Documents: 1000, Words: 20000, Hits: []int64{3}}}
	if bm25Of(3, 16, 1000, 20000, 3) <= bm25Of(2, 9, 1000, 20000, 3) {
		t.Fatal("hand BM25 with the engine's statistics")
	}
	got = ids(t, run(t, `SELECT c.id FROM c ORDER BY RANK FullTextScore(c.text, "red")`, textDocs, Options{Search: ctx}))
	if !strings.HasPrefix(got, "3,1,") {
		t.Fatalf("with the engine's statistics: %s", got)
	}
}

// RRF fuses the ranks its components give, with weights; a negative weight
// turns its component's order around.
func TestRRFFusesRanks(t *testing.T) {
	docs := []string{
		`{"id":"a","text":"red red red","v":[0,1]}`,
		`{"id":"b","text":"red","v":[1,0]}`,
		`{"id":"c","text":"blue","v":[0.9,0.1]}`,
	}
	q := `SELECT c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, "red"), VectorDistance(c.v, [1, 0]))`
	// text: a=1 b=2 c=3; vector: b=1 c=2 a=3 → a: 1/61+1/63, b: 1/62+1/61, c: 1/63+1/62.
	if got := ids(t, run(t, q, docs, Options{})); got != "b,a,c" {
		t.Fatalf("rrf: %s", got)
	}
	weighted := `SELECT c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, "red"), VectorDistance(c.v, [1, 0]), [3, 1])`
	if got := ids(t, run(t, weighted, docs, Options{})); got != "a,b,c" {
		t.Fatalf("weighted: %s", got)
	}
	inverted := `SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(VectorDistance(c.v, [1, 0]), [-1])`
	if got := ids(t, run(t, inverted, docs, Options{})); got != "a" {
		t.Fatalf("negative weight: %s", got)
	}
}

// FullTextScore and RRF belong to ORDER BY RANK; elsewhere they are refused,
// as are bad options of VectorDistance.
func TestSearchFunctionsRefusedOutOfPlace(t *testing.T) {
	for q, msg := range map[string]string{
		`SELECT VALUE FullTextScore(c.text, "a") FROM c`:                                 "only allowed in an ORDER BY RANK clause",
		`SELECT * FROM c WHERE RRF(FullTextScore(c.text, "a")) > 1`:                      "only allowed in an ORDER BY RANK clause",
		`SELECT * FROM c ORDER BY RANK c.x`:                                              "Syntax error",
		`SELECT * FROM c ORDER BY RANK VectorDistance(c.v, [1])`:                         "must be followed by a call of FullTextScore or RRF",
		`SELECT * FROM c ORDER BY RANK RRF(FullTextScore(c.t, "a"), c.x)`:                "must be FullTextScore or VectorDistance calls",
		`SELECT * FROM c ORDER BY RANK RRF(FullTextScore(c.t, "a"), [1, 2])`:             "1 scoring arguments but 2 weights",
		`SELECT * FROM c ORDER BY RANK FullTextScore(c.t, "a"), c.id`:                    "cannot be combined",
		`SELECT * FROM c ORDER BY RANK FullTextScore(c.t, "a") DESC`:                     "Syntax error",
		`SELECT VectorDistance(c.v, [1], false, {distanceFunction: "manhattan"}) FROM c`: "must be 'cosine', 'dotproduct' or 'euclidean'",
		`SELECT VectorDistance(c.v, [1], false, {dataType: "float64"}) FROM c`:           "must be 'float32', 'float16', 'int8' or 'uint8'",
		`SELECT VectorDistance(c.v, [1], "yes") FROM c`:                                  "must be a boolean constant",
		`SELECT VectorDistance(c.v, [1], false, {searchListSizeMultiplier: 0}) FROM c`:   "between 1 and 100",
		`SELECT VectorDistance(c.v, [1], false, {k: 1}) FROM c`:                          "is not an option of VectorDistance",
		`SELECT FullTextContains(c.text) FROM c`:                                         "requires 2 argument(s)",
	} {
		_, err := Parse(q)
		var qe *Error
		if !errors.As(err, &qe) || !strings.Contains(qe.Message, msg) {
			t.Errorf("%s: %v, want %q", q, err, msg)
		}
	}
}

// testSearch is a SearchContext with a fixed policy and statistics.
type testSearch struct {
	emb   map[string]Embedding
	stats *FullTextStats
}

func (s testSearch) Embedding(path []string) (Embedding, bool) {
	e, ok := s.emb[strings.Join(path, "/")]
	return e, ok
}

func (s testSearch) Analyze(_ []string, text string) []Term { return DefaultAnalyze(text) }

func (s testSearch) FullTextStats(_ []string, _ []string) (FullTextStats, bool) {
	if s.stats == nil {
		return FullTextStats{}, false
	}
	return *s.stats, true
}

// The plan tells the engine what a vector or full-text index could serve:
// the ORDER BY VectorDistance, the full-text functions of WHERE, and ORDER
// BY RANK's components.
func TestPlanDescribesSearches(t *testing.T) {
	q, err := Parse(`SELECT TOP 5 c.id FROM c WHERE FullTextContainsAny(c.text, "a", @kw) AND c.x = 1 ORDER BY VectorDistance(@v, c.emb, false, {distanceFunction: "euclidean", searchListSizeMultiplier: 20})`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Plan(map[string]json.RawMessage{"@v": json.RawMessage(`[1,2,3]`), "@kw": json.RawMessage(`"b"`)})
	if err != nil {
		t.Fatal(err)
	}
	v := p.Vector
	if v == nil || strings.Join(v.Path, "/") != "emb" || len(v.Vector) != 3 || v.DistanceFunction != "euclidean" || v.SearchListSizeMultiplier != 20 || v.Explicit {
		t.Fatalf("vector %+v", v)
	}
	if len(p.FullText) != 1 || p.FullText[0].Function != "FullTextContainsAny" || strings.Join(p.FullText[0].Keywords, ",") != "a,b" {
		t.Fatalf("full text %+v", p.FullText)
	}
	if !p.NeedsQueryPlan || p.Streaming || p.Top != 5 {
		t.Fatalf("plan %+v", p)
	}
	q, _ = Parse(`SELECT TOP 5 * FROM c ORDER BY RANK RRF(FullTextScore(c.t, ["x", "y"]), VectorDistance(c.e, [1]), [2, 1])`)
	p, _ = q.Plan(nil)
	if p.Rank == nil || len(p.Rank.Components) != 2 || p.Rank.Components[0].Text == nil || p.Rank.Components[1].Vector == nil || len(p.Rank.Weights) != 2 {
		t.Fatalf("rank %+v", p.Rank)
	}
	if strings.Join(p.Rank.Components[0].Text.Keywords, ",") != "x,y" {
		t.Fatalf("keywords %+v", p.Rank.Components[0].Text)
	}
}

// The options of VectorDistance may come in a parameter.
func TestVectorDistanceOptionsFromAParameter(t *testing.T) {
	q, err := Parse(`SELECT TOP 2 c.id FROM c ORDER BY VectorDistance(c.v, [1, 0, 0], false, @opts)`)
	if err != nil {
		t.Fatal(err)
	}
	docs := func(yield func([]byte, error) bool) {
		for _, d := range vecDocs {
			if !yield([]byte(d), nil) {
				return
			}
		}
	}
	res, err := q.Execute(docs, Options{Params: map[string]json.RawMessage{"@opts": json.RawMessage(`{"distanceFunction":"euclidean"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || string(res[0]) != `{"id":"a"}` || string(res[1]) != `{"id":"b"}` {
		t.Fatalf("%s", res)
	}
}
