package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/storage/memory"
)

// benchQueryEngine loads n items into an indexed container "ix" and an
// unindexed one "scan" (indexing mode none), with the same data.
func benchQueryEngine(b *testing.B, n int) *Engine {
	ctx := b.Context()
	b.Helper()
	e, err := Open(ctx, memory.New(), Options{ServeCrossPartitionQueries: true})
	if err != nil {
		b.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	e.CreateContainer(ctx, "db", []byte(`{"id":"ix","partitionKey":{"paths":["/pk"]}}`), nil)
	e.CreateContainer(ctx, "db", []byte(`{"id":"scan","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"indexingMode":"none","automatic":false}}`), nil)
	for i := 0; i < n; i++ {
		doc := []byte(fmt.Sprintf(`{"id":"%d","pk":"p%d","customer":"c%d","total":%d,"status":"open","lines":[1,2,3]}`, i, i%100, i%5000, i%1000))
		for _, c := range []string{"ix", "scan"} {
			if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: c, Body: doc}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return e
}

func benchQuery(b *testing.B, e *Engine, container, q string, params map[string]json.RawMessage, want int) {
	b.Helper()
	for i := 0; i < b.N; i++ {
		r := &QueryRequest{Database: "db", Container: container, Query: q, Params: params, MaxItems: 1000}
		got := 0
		for {
			res, err := e.QueryItems(context.Background(), r)
			if err != nil {
				b.Fatal(err)
			}
			got += len(res.Items)
			if res.Continuation == "" {
				break
			}
			r.Continuation = res.Continuation
		}
		if got != want {
			b.Fatalf("%s on %s: %d results, want %d", q, container, got, want)
		}
	}
}

// BenchmarkQueryEquality100k is an equality filter on 100,000 items, served
// by the index and by a full scan of the same data.
func BenchmarkQueryEquality100k(b *testing.B) {
	e := benchQueryEngine(b, 100_000)
	q := "SELECT * FROM c WHERE c.customer = @c"
	params := map[string]json.RawMessage{"@c": json.RawMessage(`"c42"`)}
	b.Run("index", func(b *testing.B) { benchQuery(b, e, "ix", q, params, 20) })
	b.Run("scan", func(b *testing.B) { benchQuery(b, e, "scan", q, params, 20) })
}

// BenchmarkQueryOrderByTop100k is ORDER BY ... TOP 10 on 100,000 items:
// descending (undefined values sort last, so the index's order suffices) and
// ascending over a range filter on the same path, each against a full scan.
func BenchmarkQueryOrderByTop100k(b *testing.B) {
	e := benchQueryEngine(b, 100_000)
	desc := "SELECT TOP 10 c.id, c.total FROM c ORDER BY c.total DESC"
	asc := "SELECT TOP 10 c.id, c.total FROM c WHERE c.total >= 500 ORDER BY c.total"
	b.Run("desc/index", func(b *testing.B) { benchQuery(b, e, "ix", desc, nil, 10) })
	b.Run("desc/scan", func(b *testing.B) { benchQuery(b, e, "scan", desc, nil, 10) })
	b.Run("asc-filtered/index", func(b *testing.B) { benchQuery(b, e, "ix", asc, nil, 10) })
	b.Run("asc-filtered/scan", func(b *testing.B) { benchQuery(b, e, "scan", asc, nil, 10) })
}
