package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestEveryPageCountsItsOwnMetricsAndCharge holds the page's own state (its
// metrics, search context, costly slot and streaming state with its
// creation-order load, made together for the page):
// queries of different shapes (index, scan, full-text, ORDER BY, aggregate,
// cross-partition, continued pages), run one after the other and then all
// at once, each give the same counts and charge as the first time, and
// no costly slot stays held.
func TestEveryPageCountsItsOwnMetricsAndCharge(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	for i := 0; i < 40; i++ {
		pk := fmt.Sprint("p", i%3)
		body := fmt.Sprintf(`{"id":"i%d","pk":"%s","n":%d,"text":"word%d other words","arr":[1,2,%d]}`, i, pk, i, i%5, i)
		if _, err := e.CreateItem(ctx, req(fmt.Sprint("i", i), pk, body)); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		q     string
		pk    string
		max   int
		pages int // pages to follow
	}
	pages := []page{
		{"SELECT * FROM c WHERE c.n = 7", "p1", 0, 1},
		{"SELECT * FROM c WHERE c.n > 3", "p0", 2, 3},
		{"SELECT VALUE c.id FROM c WHERE CONTAINS(c.text, 'word2')", "p2", 0, 1},
		{"SELECT c.id FROM c ORDER BY c.n DESC", "p1", 4, 2},
		{"SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr", "p0", 0, 1},
		{"SELECT VALUE c.id FROM c WHERE c.n >= 0", "", 5, 3},
		{"SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'other')", "p2", 3, 2},
	}
	type got struct {
		m      QueryMetrics
		charge float64
		n      int
		more   bool // a continuation (a cursor's id differs run to run)
		err    string
	}
	runAll := func(p page) []got {
		var out []got
		cont := ""
		for i := 0; i < p.pages; i++ {
			r := &QueryRequest{Database: "db", Container: "c", Query: p.q, MaxItems: p.max, Continuation: cont}
			if p.pk != "" {
				r.PartitionKey, r.HasPartitionKey = StringKey(p.pk), true
			} else {
				r.SinglePartitionKeyRange = true
			}
			res, err := e.QueryItems(context.Background(), r)
			if err != nil {
				out = append(out, got{err: err.Error()})
				break
			}
			m := *res.Metrics
			m.TotalExecutionTime, m.CompileTime, m.IndexLookupTime, m.DocumentLoadTime, m.VMExecutionTime = 0, 0, 0, 0, 0
			out = append(out, got{m: m, charge: res.Charge, n: len(res.Items), more: res.Continuation != ""})
			if cont = res.Continuation; cont == "" {
				break
			}
		}
		return out
	}
	first := make([][]got, len(pages))
	for i, p := range pages {
		first[i] = runAll(p)
		if len(first[i]) == 0 || first[i][0].err != "" || first[i][0].m.RetrievedDocumentCount == 0 {
			t.Fatalf("%s: %+v: want a page that read documents", p.q, first[i])
		}
	}
	check := func(when string, i int, g []got) {
		if fmt.Sprint(g) != fmt.Sprint(first[i]) {
			t.Errorf("%s, %s: pages %+v, the first time %+v", when, pages[i].q, g, first[i])
		}
	}
	for i, p := range pages {
		check("again", i, runAll(p))
	}
	var wg sync.WaitGroup
	res := make([][][]got, len(pages))
	for i, p := range pages {
		res[i] = make([][]got, 4)
		for k := range res[i] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i][k] = runAll(p)
			}()
		}
	}
	wg.Wait()
	for i := range pages {
		for _, g := range res[i] {
			check("at once", i, g)
		}
	}
	if n := len(e.queries.costlySlots); n != 0 {
		t.Errorf("%d costly slots held after the queries", n)
	}
}
