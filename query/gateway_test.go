package query

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func gateway(t *testing.T, q string, opt GatewayOptions) *GatewayPlan {
	t.Helper()
	parsed, err := Parse(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	g, err := parsed.Gateway(nil, opt)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return g
}

func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

// An ORDER BY VectorDistance is planned as the gateway plans it: a
// non-streaming ORDER BY whose direction is the distance function's
// (descending for similarities, ascending for the Euclidean distance, the
// options' function before the policy's), rewritten to return each item's
// _rid, its score as orderByItems and its projection as payload; OFFSET and
// LIMIT become OFFSET 0 LIMIT offset+limit.
func TestGatewayPlansVectorSearchAsANonStreamingOrderBy(t *testing.T) {
	v := `VectorDistance([0.66178012, -0.37191326, 0.97474534], c.vector1, true, {dataType:'Float32', distanceFunction:'DotProduct'})`
	canon := `VectorDistance([0.66178012, -0.37191326, 0.97474534], c.vector1, true, {"dataType": "Float32", "distanceFunction": "DotProduct"})`
	g := gateway(t, `SELECT c._ts FROM c ORDER BY `+v+` OFFSET 5 LIMIT 7`, GatewayOptions{})
	if g == nil || g.HybridSearchQueryInfo != nil {
		t.Fatal("no query info")
	}
	got := decode(t, g.QueryInfo)
	want := map[string]any{
		"distinctType": "None", "top": nil, "offset": 5.0, "limit": 7.0,
		"orderBy": []any{"Descending"}, "orderByExpressions": []any{canon},
		"groupByExpressions": []any{}, "groupByAliases": []any{}, "aggregates": []any{}, "groupByAliasToAggregateType": map[string]any{},
		"rewrittenQuery": "SELECT c._rid, [{\"item\": " + canon + "}] AS orderByItems, {\"_ts\": c._ts} AS payload\nFROM c\nWHERE ({documentdb-formattableorderbyquery-filter})\nORDER BY " + canon + "\nOFFSET 0 LIMIT 12",
		"hasSelectValue": false, "dCountInfo": nil, "hasNonStreamingOrderBy": true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan\n%v\nwant\n%v", got, want)
	}
	// The direction follows the distance function: the policy's for the
	// path when the options name none.
	for _, tc := range []struct {
		fn, policy, dir string
	}{
		{"", "", "Descending"},
		{"", "euclidean", "Ascending"},
		{"", "dotproduct", "Descending"},
		{"Euclidean", "cosine", "Ascending"},
		{"Cosine", "euclidean", "Descending"},
	} {
		opts := ""
		if tc.fn != "" {
			opts = `, false, {distanceFunction: '` + tc.fn + `'}`
		}
		emb := func(path []string) (Embedding, bool) {
			return Embedding{DistanceFunction: tc.policy}, tc.policy != "" && len(path) == 1 && path[0] == "v"
		}
		g := gateway(t, `SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, [1, 2]`+opts+`)`, GatewayOptions{Embedding: emb})
		info := decode(t, g.QueryInfo)
		if dir := info["orderBy"].([]any)[0]; dir != tc.dir {
			t.Errorf("%+v: %v", tc, dir)
		}
		if info["top"] != 10.0 {
			t.Errorf("top %v", info["top"])
		}
	}
	// Queries that are not vector or hybrid searches have no such plan.
	for _, q := range []string{`SELECT * FROM c ORDER BY c.id`, `SELECT * FROM c WHERE FullTextContains(c.t, "a")`, `SELECT VALUE VectorDistance(c.v, [1]) FROM c`} {
		if g := gateway(t, q, GatewayOptions{}); g != nil {
			t.Errorf("%s: a search plan", q)
		}
	}
}

// ORDER BY RANK is planned as the gateway plans hybrid search: a global
// statistics query, one component query per scoring function with the
// placeholders the SDKs fill in from the statistics, 12 times TOP candidates
// each, the absolute weights, and a negative weight turning its
// component's order around.
func TestGatewayPlansHybridSearch(t *testing.T) {
	g := gateway(t, `SELECT TOP 10 * FROM c ORDER BY RANK RRF(FullTextScore(c.text, "swim", "run"), VectorDistance(c.image, [1, 2, 3]))`, GatewayOptions{})
	if g == nil || g.QueryInfo != nil {
		t.Fatal("no hybrid info")
	}
	h := decode(t, g.HybridSearchQueryInfo)
	fts := `_FullTextScore(c.text, ["swim", "run"], {documentdb-formattablehybridsearchquery-totaldocumentcount}, {documentdb-formattablehybridsearchquery-totalwordcount-0}, {documentdb-formattablehybridsearchquery-hitcountsarray-0})`
	vec := `_VectorScore(c.image, [1, 2, 3])`
	scores := `[(` + fts + ` ?? -1), (` + vec + ` ?? -1.79769e+308)]`
	if s := h["globalStatisticsQuery"]; s != "SELECT COUNT(1) AS documentCount, [{\"totalWordCount\": SUM(_FullTextWordCount(c.text)), \"hitCounts\": [COUNTIF(FullTextContains(c.text, \"swim\")), COUNTIF(FullTextContains(c.text, \"run\"))]}] AS fullTextStatistics\nFROM c" {
		t.Errorf("statistics query %q", s)
	}
	comps := h["componentQueryInfos"].([]any)
	if len(comps) != 2 {
		t.Fatalf("%d components", len(comps))
	}
	c0, c1 := comps[0].(map[string]any), comps[1].(map[string]any)
	if c0["rewrittenQuery"] != "SELECT TOP 120 c._rid, [{\"item\": "+fts+"}] AS orderByItems, {\"payload\": c, \"componentScores\": "+scores+"} AS payload\nFROM c\nWHERE ({documentdb-formattableorderbyquery-filter})\nORDER BY "+fts+" DESC" {
		t.Errorf("component 0: %q", c0["rewrittenQuery"])
	}
	if c1["rewrittenQuery"] != "SELECT TOP 120 c._rid, [{\"item\": "+vec+"}] AS orderByItems, {\"payload\": c, \"componentScores\": "+scores+"} AS payload\nFROM c\nWHERE ({documentdb-formattableorderbyquery-filter})\nORDER BY "+vec {
		t.Errorf("component 1: %q", c1["rewrittenQuery"])
	}
	if c0["top"] != 120.0 || c0["orderBy"].([]any)[0] != "Descending" || c0["hasNonStreamingOrderBy"] != true {
		t.Errorf("component 0 info %v", c0)
	}
	if h["take"] != 10.0 || h["skip"] != nil || h["requiresGlobalStatistics"] != true || len(h["componentWeights"].([]any)) != 0 {
		t.Errorf("hybrid info %v", h)
	}

	// Weights, one negative; the newer form (HybridSearchSkipOrderByRewrite)
	// projects the scores, the negated one multiplied by -1.
	g = gateway(t, `SELECT TOP 10 * FROM c ORDER BY RANK RRF(VectorDistance(c.backup_image, [0.5, 0.2, 0.33]), VectorDistance(c.image, [1, 2, 3]), [1, -0.3])`, GatewayOptions{SkipOrderByRewrite: true})
	h = decode(t, g.HybridSearchQueryInfo)
	if !reflect.DeepEqual(h["componentWeights"], []any{1.0, 0.3}) || h["requiresGlobalStatistics"] != false {
		t.Errorf("weights %v", h)
	}
	if s := h["globalStatisticsQuery"]; s != "SELECT COUNT(1) AS documentCount, [] AS fullTextStatistics\nFROM c" {
		t.Errorf("statistics %q", s)
	}
	c1 = h["componentQueryInfos"].([]any)[1].(map[string]any)
	want := "SELECT TOP 120 c._rid, c AS payload, [(_VectorScore(c.backup_image, [0.5, 0.2, 0.33]) ?? -1.79769e+308), (-1 * (_VectorScore(c.image, [1, 2, 3]) ?? 1.79769e+308))] AS componentScores\nFROM c\nORDER BY _VectorScore(c.image, [1, 2, 3]) ASC"
	if c1["rewrittenQuery"] != want || c1["hasNonStreamingOrderBy"] != false || len(c1["orderBy"].([]any)) != 0 {
		t.Errorf("newer form component 1: %v", c1)
	}
}

// The queries the plans hand the SDKs parse and run here: the statistics
// query, and the component queries once the SDK has put the statistics in.
func TestGatewayRewrittenQueriesRun(t *testing.T) {
	g := gateway(t, `SELECT TOP 2 * FROM c ORDER BY RANK RRF(FullTextScore(c.text, "red"), VectorDistance(c.v, [1, 0]))`, GatewayOptions{})
	h := decode(t, g.HybridSearchQueryInfo)
	docs := []string{
		`{"id":"a","_rid":"r1","text":"red red red","v":[0,1]}`,
		`{"id":"b","_rid":"r2","text":"red","v":[1,0]}`,
		`{"id":"c","_rid":"r3","text":"blue","v":[0.9,0.1]}`,
	}
	stats := run(t, h["globalStatisticsQuery"].(string), docs, Options{})
	if len(stats) != 1 || stats[0] != `{"documentCount":3,"fullTextStatistics":[{"totalWordCount":5,"hitCounts":[2]}]}` {
		t.Fatalf("statistics %v", stats)
	}
	for _, c := range h["componentQueryInfos"].([]any) {
		q := c.(map[string]any)["rewrittenQuery"].(string)
		for from, to := range map[string]string{
			"{documentdb-formattableorderbyquery-filter}":                  "true",
			"{documentdb-formattablehybridsearchquery-totaldocumentcount}": "3",
			"{documentdb-formattablehybridsearchquery-totalwordcount-0}":   "5",
			"{documentdb-formattablehybridsearchquery-hitcountsarray-0}":   "[2]",
		} {
			q = strings.ReplaceAll(q, from, to)
		}
		if rows := run(t, q, docs, Options{}); len(rows) != 3 {
			t.Fatalf("%s: %v", q, rows)
		}
	}
}

// The newer hybrid form's clients rank every projected score highest
// first: a Euclidean component is projected negated (closest first), and
// one with a negative weight as it is. A single component keeps the older
// form, whose ORDER BY lets the client merge the ranges' answers.
func TestGatewayNewerHybridFormProjectsScoresHighestFirst(t *testing.T) {
	emb := func(path []string) (Embedding, bool) {
		return Embedding{DistanceFunction: "euclidean", DataType: "float32", Dimensions: 2}, true
	}
	g := gateway(t, `SELECT TOP 5 c.id FROM c ORDER BY RANK RRF(VectorDistance(c.a, [1, 0]), VectorDistance(c.b, [0, 1]), [1, -1])`, GatewayOptions{SkipOrderByRewrite: true, Embedding: emb})
	h := decode(t, g.HybridSearchQueryInfo)
	q := h["componentQueryInfos"].([]any)[0].(map[string]any)["rewrittenQuery"].(string)
	if want := `[(-1 * (_VectorScore(c.a, [1, 0]) ?? 1.79769e+308)), (_VectorScore(c.b, [0, 1]) ?? -1.79769e+308)] AS componentScores`; !strings.Contains(q, want) {
		t.Errorf("component scores: %q, want %q", q, want)
	}
	g = gateway(t, `SELECT TOP 5 c.id FROM c ORDER BY RANK FullTextScore(c.text, "red")`, GatewayOptions{SkipOrderByRewrite: true})
	c0 := decode(t, g.HybridSearchQueryInfo)["componentQueryInfos"].([]any)[0].(map[string]any)
	if c0["hasNonStreamingOrderBy"] != true || !strings.Contains(c0["rewrittenQuery"].(string), "orderByItems") {
		t.Errorf("a single component: %v", c0)
	}
}
