package server

import (
	"encoding/json"
	"testing"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/memory"
)

// TestCrossPartitionQueryRefusalCarriesThePlan checks the service's answer to
// a cross-partition query that needs a query plan: 400, substatus 1004, and
// the plan in additionalErrorInfo, which the JavaScript SDK needs before it
// switches to its pipeline; the pipeline's query to range 0 is then served.
func TestCrossPartitionQueryRefusalCarriesThePlan(t *testing.T) {
	c := newTestServer(t)
	for _, d := range []string{`{"id":"1","pk":"a","n":1}`, `{"id":"2","pk":"b","n":2}`} {
		var doc struct{ PK string }
		json.Unmarshal([]byte(d), &doc)
		c.must("POST", "/dbs/db/colls/c/docs", d, pk(`["`+doc.PK+`"]`), 201)
	}
	query := map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true", "x-ms-documentdb-query-enablecrosspartition": "true"}
	cases := []struct {
		name        string
		query       string
		rangeID     string
		status      int
		wantPlan    bool
		wantResults string
	}{
		{"ORDER BY across partitions", "SELECT VALUE c.n FROM c ORDER BY c.n DESC", "", 400, true, ""},
		{"aggregate across partitions", "SELECT VALUE COUNT(1) FROM c", "", 400, true, ""},
		{"ORDER BY on range 0", "SELECT VALUE c.n FROM c ORDER BY c.n DESC", "0", 200, false, "[2,1]"},
		{"aggregate on range 0", "SELECT VALUE COUNT(1) FROM c", "0", 200, false, "[2]"},
		{"syntax error", "SELECT VALUE FROM c", "", 400, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"x-ms-documentdb-partitionkeyrangeid": tc.rangeID}
			for k, v := range query {
				h[k] = v
			}
			body, _ := json.Marshal(map[string]string{"query": tc.query})
			r := c.must("POST", "/dbs/db/colls/c/docs", string(body), h, tc.status)
			if tc.status == 200 {
				var feed struct{ Documents json.RawMessage }
				if err := json.Unmarshal(r.body, &feed); err != nil || string(feed.Documents) != tc.wantResults {
					t.Fatalf("results %s, want %s (%v)", feed.Documents, tc.wantResults, err)
				}
				return
			}
			var eb errorBody
			if err := json.Unmarshal(r.body, &eb); err != nil {
				t.Fatalf("error body %s: %v", r.body, err)
			}
			sub := r.header.Get("x-ms-substatus")
			if !tc.wantPlan {
				if eb.AdditionalErrorInfo != "" || sub == "1004" {
					t.Fatalf("a plain 400 carries a plan: substatus %q, %s", sub, r.body)
				}
				return
			}
			if sub != "1004" {
				t.Fatalf("substatus %q, want 1004", sub)
			}
			var plan struct {
				Version     int             `json:"partitionedQueryExecutionInfoVersion"`
				QueryInfo   json.RawMessage `json:"queryInfo"`
				QueryRanges []struct {
					Min string `json:"min"`
					Max string `json:"max"`
				} `json:"queryRanges"`
			}
			if err := json.Unmarshal([]byte(eb.AdditionalErrorInfo), &plan); err != nil {
				t.Fatalf("additionalErrorInfo %q is not a query plan: %v", eb.AdditionalErrorInfo, err)
			}
			if plan.Version != 2 || len(plan.QueryInfo) == 0 || len(plan.QueryRanges) != 1 || plan.QueryRanges[0].Min != "" || plan.QueryRanges[0].Max != "FF" {
				t.Fatalf("plan %s", eb.AdditionalErrorInfo)
			}
		})
	}
}

// A GROUP BY with MAKELIST or MAKESET gets the gateway's GROUP BY plan only
// for an SDK that lists ListAndSetAggregate among its query features: one
// without would have no aggregator to merge the lists with.
func TestGroupByPlanWithListsNeedsTheListAndSetFeature(t *testing.T) {
	eng, err := engine.Open(t.Context(), memory.New(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if _, err := eng.CreateDatabase(t.Context(), []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateContainer(t.Context(), "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), &engine.Throughput{Manual: 40000}); err != nil {
		t.Fatal(err)
	}
	c, err := eng.Container(t.Context(), "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	const q = "SELECT c.team, MAKELIST(c.age) AS ages FROM c GROUP BY c.team"
	if _, ok := groupByPlan(c, q, nil, "Aggregate,GroupBy,ListAndSetAggregate"); !ok {
		t.Error("no GROUP BY plan for an SDK that merges lists")
	}
	if plan, ok := groupByPlan(c, q, nil, "Aggregate,GroupBy"); ok {
		t.Errorf("a GROUP BY plan with MakeList for an SDK without ListAndSetAggregate: %s", plan)
	}
	if _, ok := groupByPlan(c, "SELECT c.team, COUNT(1) AS n FROM c GROUP BY c.team", nil, "Aggregate,GroupBy"); !ok {
		t.Error("no GROUP BY plan for COUNT")
	}
}
