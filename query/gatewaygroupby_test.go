package query

import (
	"reflect"
	"testing"
)

func groupByGateway(t *testing.T, q string) *GatewayPlan {
	t.Helper()
	parsed, err := Parse(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	g, err := parsed.GroupByGateway(nil)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return g
}

// A GROUP BY is planned as the gateway plans it: its expressions, the
// projected aliases with the aggregate each merges (null for a grouped
// value), and a rewritten query whose rows carry the group's key and the
// partial aggregates, MIN and MAX with the count of the values they saw,
// AVG as a sum and a count.
func TestGroupByGatewayPlanCarriesPartialAggregates(t *testing.T) {
	g := groupByGateway(t, `SELECT c.name, COUNT(1) AS n, SUM(c.age) AS s, MIN(c.age) AS lo, MAX(c.age) AS hi, AVG(c.age) AS mean FROM c WHERE c.age > 3 GROUP BY c.name, c.team`)
	if g == nil || g.HybridSearchQueryInfo != nil {
		t.Fatal("no query info")
	}
	got := decode(t, g.QueryInfo)
	want := map[string]any{
		"distinctType": "None", "top": nil, "offset": nil, "limit": nil,
		"orderBy": []any{}, "orderByExpressions": []any{},
		"groupByExpressions": []any{"c.name", "c.team"},
		"groupByAliases":     []any{"name", "n", "s", "lo", "hi", "mean"},
		"aggregates":         []any{},
		"groupByAliasToAggregateType": map[string]any{
			"name": nil, "n": "Count", "s": "Sum", "lo": "Min", "hi": "Max", "mean": "Average",
		},
		"rewrittenQuery": `SELECT [{"item": c.name}, {"item": c.team}] AS groupByItems, {"name": c.name, "n": {"item": COUNT(1)}, "s": {"item": SUM(c.age)}, ` +
			`"lo": {"item": {"min": MIN(c.age), "count": COUNT(c.age)}}, "hi": {"item": {"max": MAX(c.age), "count": COUNT(c.age)}}, ` +
			`"mean": {"item": {"sum": SUM(c.age), "count": COUNT(c.age)}}} AS payload` + "\nFROM c\nWHERE (c.age > 3)\nGROUP BY c.name, c.team",
		"hasSelectValue": false, "dCountInfo": nil, "hasNonStreamingOrderBy": false,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan\n%v\nwant\n%v", got, want)
	}
}

// The rewritten query runs, and a group whose aggregate saw no value says
// so: MIN's partial result has a count of 0 and no min.
func TestGroupByGatewayRewrittenQueryRuns(t *testing.T) {
	g := groupByGateway(t, `SELECT c.team, MIN(c.missing) AS lo, COUNT(1) AS n, COUNTIF(c.id = "a") AS a FROM c GROUP BY c.team`)
	q := decode(t, g.QueryInfo)["rewrittenQuery"].(string)
	rows := run(t, q, []string{`{"id":"a","team":"x"}`, `{"id":"b","team":"x"}`}, Options{})
	want := `{"groupByItems":[{"item":"x"}],"payload":{"team":"x","lo":{"item":{"count":0}},"n":{"item":2},"a":{"item":1}}}`
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("rows %v, want [%s]", rows, want)
	}
}

// Shapes whose rewrite the gateway does differently get no GROUP BY plan:
// the server answers them whole.
func TestGroupByGatewayLeavesOtherShapesToTheServer(t *testing.T) {
	for _, q := range []string{
		`SELECT c.a FROM c`,
		`SELECT VALUE COUNT(1) FROM c GROUP BY c.a`,
		`SELECT DISTINCT c.a FROM c GROUP BY c.a`,
		`SELECT TOP 1 c.a FROM c GROUP BY c.a`,
		`SELECT c.a, COUNT(1) + 1 AS n FROM c GROUP BY c.a`,
		`SELECT c.a FROM c JOIN t IN c.tags GROUP BY c.a`,
	} {
		if g := groupByGateway(t, q); g != nil {
			t.Errorf("%s: got a plan %s", q, g.QueryInfo)
		}
	}
}

// MAKELIST and MAKESET are planned as the gateway plans them: each range's
// list or set in the payload, merged by the SDK's MakeList and MakeSet
// aggregators.
func TestGroupByGatewayPlansListsAndSets(t *testing.T) {
	g := groupByGateway(t, `SELECT c.team, MAKELIST(c.age) AS ages, MAKESET(c.age) AS distinctAges FROM c GROUP BY c.team`)
	if g == nil {
		t.Fatal("no plan for MAKELIST and MAKESET")
	}
	info := decode(t, g.QueryInfo)
	types := info["groupByAliasToAggregateType"].(map[string]any)
	if types["ages"] != "MakeList" || types["distinctAges"] != "MakeSet" || types["team"] != nil {
		t.Fatalf("aggregate types %v", types)
	}
	rows := run(t, info["rewrittenQuery"].(string), []string{`{"id":"a","team":"x","age":3}`, `{"id":"b","team":"x","age":3}`, `{"id":"c","team":"x","age":4}`}, Options{})
	want := `{"groupByItems":[{"item":"x"}],"payload":{"team":"x","ages":{"item":[3,3,4]},"distinctAges":{"item":[3,4]}}}`
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("rows %v, want [%s]", rows, want)
	}
}
