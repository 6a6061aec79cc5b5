package query_test

import (
	"encoding/json"
	"fmt"

	"github.com/orrery-db/orrery/query"
)

func docs(items ...string) query.Docs {
	return func(yield func([]byte, error) bool) {
		for _, it := range items {
			if !yield([]byte(it), nil) {
				return
			}
		}
	}
}

func Example() {
	q, err := query.Parse("SELECT c.id, c.qty * 2 AS double FROM c WHERE c.qty > @min ORDER BY c.qty DESC")
	if err != nil {
		panic(err)
	}
	res, err := q.Execute(docs(`{"id":"a","qty":1}`, `{"id":"b","qty":5}`, `{"id":"c","qty":3}`),
		query.Options{Params: map[string]json.RawMessage{"@min": json.RawMessage("2")}})
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Println(string(r))
	}
	// Output:
	// {"id":"b","double":10}
	// {"id":"c","double":6}
}

func ExampleQuery_Plan() {
	q, _ := query.Parse("SELECT * FROM c WHERE c.pk = @pk AND c.id IN ('a', 'b') ORDER BY c._ts DESC OFFSET 0 LIMIT 10")
	p, _ := q.Plan(map[string]json.RawMessage{"@pk": json.RawMessage(`"tenant-1"`)})
	fmt.Println("streaming:", p.Streaming, "needs query plan:", p.NeedsQueryPlan)
	fmt.Println("order by:", p.OrderBy[0].Path, "desc:", p.OrderBy[0].Descending)
	fmt.Println("offset/limit:", p.Offset, p.Limit)
	for _, f := range p.Filters {
		fmt.Println("filter:", f)
	}
	// Output:
	// streaming: false needs query plan: true
	// order by: [_ts] desc: true
	// offset/limit: 0 10
	// filter: pk = "tenant-1"
	// filter: id IN "a","b"
}

func ExampleExecution_Rows() {
	q, _ := query.Parse("SELECT VALUE t FROM c JOIN t IN c.tags WHERE t != 'x'")
	x, _ := q.Prepare(query.Options{})
	rows, _ := x.Rows([]byte(`{"tags":["x","y","z"]}`))
	for _, r := range rows {
		fmt.Println(string(r))
	}
	// Output:
	// "y"
	// "z"
}

func ExampleParseCondition() {
	cond, err := query.ParseCondition("FROM c WHERE c.status = 'open' AND c.version < 3")
	if err != nil {
		panic(err)
	}
	ok, _ := cond.Matches([]byte(`{"status":"open","version":2}`), nil)
	fmt.Println(ok)
	// Output: true
}
