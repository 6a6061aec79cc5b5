package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/query"
)

// TestQueryStopsWhenCancelled cancels queries over a billion-row cross
// product, one evaluated whole and one streaming whose rows all fail the
// filter, with no time budget to stop them otherwise: each returns 408
// promptly (the bound is generous, for loaded machines; uncancelled they
// run for minutes).
func TestQueryStopsWhenCancelled(t *testing.T) {
	e := newMemEngine(t)
	e.queries.budget = -1
	seedArrayItem(t, e, 1000)
	for _, q := range []string{
		"SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr",
		"SELECT a, b FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr WHERE d < 0",
	} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "c", Query: q,
				PartitionKey: StringKey("a"), HasPartitionKey: true})
			done <- err
		}()
		time.Sleep(100 * time.Millisecond) // let it get going; not a synchronization
		cancel()
		select {
		case err := <-done:
			if statusOf(err) != 408 {
				t.Errorf("%s: %v, want 408", q, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still running 10 s after its cancellation", q)
		}
	}
}

// TestStreamingPageEndsAtItsBudget: with a page budget already spent, a
// streaming page still gets past one row and ends with a continuation;
// following the continuations gives every result once.
func TestStreamingPageEndsAtItsBudget(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	e.queries.budget = time.Nanosecond
	for _, id := range []string{"x", "y"} {
		if _, err := e.CreateItem(ctx, req(id, "a", `{"id":"`+id+`","pk":"a","arr":[1,2,3]}`)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	cont, pages := "", 0
	for {
		res, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c",
			Query: "SELECT VALUE [c.id, a, b] FROM c JOIN a IN c.arr JOIN b IN c.arr WHERE a <= b", MaxItems: 100,
			PartitionKey: StringKey("a"), HasPartitionKey: true, Continuation: cont})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, it := range res.Items {
			got = append(got, string(it))
		}
		if cont = res.Continuation; cont == "" {
			break
		}
	}
	want := `[["x",1,1] ["x",1,2] ["x",1,3] ["x",2,2] ["x",2,3] ["x",3,3] ["y",1,1] ["y",1,2] ["y",1,3] ["y",2,2] ["y",2,3] ["y",3,3]]`
	if fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
	if pages < 12 {
		t.Errorf("%d pages for 18 rows evaluated under a spent budget", pages)
	}
}

// TestCostlyQueriesWaitForASlot holds the only slot for costly queries, as
// a runaway query would: a cheap query is served at once; a costly query
// evaluated whole waits out its page's budget and is answered 429; a costly
// streaming query ends its page at the budget with what it found and a
// continuation; once the slot is free, the costly query is served.
func TestCostlyQueriesWaitForASlot(t *testing.T) {
	e := newMemEngine(t)
	e.queries.budget = 200 * time.Millisecond
	e.queries.costlySlots = make(chan struct{}, 1)
	seedArrayItem(t, e, 1000)
	query := func(q, cont string) (*QueryResult, error) {
		return e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c", Query: q, MaxItems: 1000,
			PartitionKey: StringKey("a"), HasPartitionKey: true, Continuation: cont})
	}
	const costly = "SELECT VALUE COUNT(1) FROM c JOIN a IN c.arr JOIN b IN c.arr"
	e.queries.costlySlots <- struct{}{} // a runaway query holds the slot
	if res, err := query("SELECT VALUE c.id FROM c WHERE c.id = 'x'", ""); err != nil || len(res.Items) != 1 {
		t.Fatalf("cheap query: %v, %v", res, err)
	}
	if _, err := query(costly, ""); statusOf(err) != 429 {
		t.Fatalf("costly query without a slot: %v, want 429", err)
	}
	res, err := query("SELECT VALUE a FROM c JOIN a IN c.arr JOIN b IN c.arr WHERE b = 0", "")
	if err != nil || len(res.Items) == 0 || len(res.Items) == 1000 || res.Continuation == "" {
		t.Fatalf("costly streaming query without a slot: %d items, continuation %q, %v; want a partial page", len(res.Items), res.Continuation, err)
	}
	<-e.queries.costlySlots
	e.queries.budget = time.Minute // for a loaded machine
	got := len(res.Items)
	for cont := res.Continuation; cont != ""; {
		res, err := query("SELECT VALUE a FROM c JOIN a IN c.arr JOIN b IN c.arr WHERE b = 0", cont)
		if err != nil {
			t.Fatal(err)
		}
		got += len(res.Items)
		cont = res.Continuation
	}
	if got != 1000 {
		t.Errorf("%d results in all, want 1000", got)
	}
	if res, err := query(costly, ""); err != nil || string(res.Items[0]) != "1000000" {
		t.Errorf("costly query with the slot free: %v, %v", res, err)
	}
	if len(e.queries.costlySlots) != 0 {
		t.Error("a slot is still held after the queries")
	}
}

// TestQueryMemoryAnswers: a query past its own memory limit is answered 400
// saying so; one that finds the memory all queries share taken, 429.
func TestQueryMemoryAnswers(t *testing.T) {
	e := newMemEngine(t)
	seedArrayItem(t, e, 300)
	run := func() error {
		_, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c",
			Query: "SELECT a, b FROM c JOIN a IN c.arr JOIN b IN c.arr ORDER BY a", PartitionKey: StringKey("a"), HasPartitionKey: true})
		return err
	}
	e.queries.maxMemory = 1 << 20
	if err := run(); statusOf(err) != 400 || !strings.Contains(err.Error(), "Query exceeded the maximum allowed memory usage of 1 MB") {
		t.Errorf("past the query's limit: %v, want 400 with the memory error", err)
	}
	e.queries.maxMemory = -1
	e.queries.pool = query.NewMemoryPool(1 << 20)
	if err := run(); statusOf(err) != 429 {
		t.Errorf("the shared memory taken: %v, want 429", err)
	}
	e.queries.pool = nil
	if err := run(); err != nil {
		t.Errorf("unbounded: %v", err)
	}
}

// seedArrayItem creates the item x in partition a with arr holding the
// numbers 0 to n-1: a JOIN of arr with itself k times yields n^k rows, a
// query as long or as large as a test needs from one item.
func seedArrayItem(t *testing.T, e *Engine, n int) {
	t.Helper()
	nums := make([]string, n)
	for i := range nums {
		nums[i] = fmt.Sprint(i)
	}
	if _, err := e.CreateItem(t.Context(), req("x", "a", `{"id":"x","pk":"a","arr":[`+strings.Join(nums, ",")+`]}`)); err != nil {
		t.Fatal(err)
	}
}
