package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// shardedSearchBody is a container whose vector index at /v (of kind) has
// the shard key /tenant when sharded.
func shardedSearchBody(kind string, sharded bool) []byte {
	shard := ""
	if sharded {
		shard = `,"vectorIndexShardKey":["/tenant"]`
	}
	return []byte(fmt.Sprintf(`{"id":"c","partitionKey":{"paths":["/pk"]},
		"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","dimensions":%d,"distanceFunction":"euclidean"}]},
		"indexingPolicy":{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/v/*"}],
			"vectorIndexes":[{"path":"/v","type":%q%s}]}}`, searchDims, kind, shard))
}

// TestVectorSearchFilteredOnTheShardKeySearchesOnlyItsShard: a vector
// index with vectorIndexShardKey keeps one index per value of the shard
// key. A TOP N by VectorDistance whose WHERE clause pins the shard key
// reads only the items of that value's index (a tenant of 5 items far
// from the query vector among 200 close ones: at most its 5 items are
// read, where one index for the container reads the close ones first),
// and every query (pinned, pinned to values by IN, or over every shard)
// answers what the exact evaluation (bruteForce) answers, also after items
// move from one tenant to another and are deleted.
func TestVectorSearchFilteredOnTheShardKeySearchesOnlyItsShard(t *testing.T) {
	for _, sharded := range []bool{true, false} {
		t.Run(fmt.Sprint("sharded=", sharded), func(t *testing.T) {
			ctx := t.Context()
			e := openSeededSearch(t, Options{}, shardedSearchBody("quantizedFlat", sharded))
			r := rand.New(rand.NewPCG(41, 42))
			q := make([]float64, searchDims)
			for i := range q {
				q[i] = 10
			}
			near := func(sign float64) []float64 {
				v := make([]float64, searchDims)
				for i := range v {
					v[i] = sign*10 + r.NormFloat64()
				}
				return v
			}
			put := func(id, tenant string, v []float64) {
				t.Helper()
				vb, _ := json.Marshal(v)
				body := fmt.Sprintf(`{"id":%q,"pk":%q,"tenant":%q,"v":%s}`, id, id, tenant, vb)
				if _, err := e.UpsertItem(ctx, req("", id, body)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 200 {
				put(fmt.Sprint("y", i), []string{"y", "z"}[i%2], near(1))
			}
			for i := range 5 {
				put(fmt.Sprint("x", i), "x", near(-1))
			}
			c, err := e.Container(ctx, "db", "c")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.search.of(c); err != nil { // built, however long it takes
				t.Fatal(err)
			}
			qb, _ := json.Marshal(q)
			run := func(where string, brute bool) ([]string, *QueryMetrics) {
				t.Helper()
				bf := ""
				if brute {
					bf = ", true"
				}
				text := fmt.Sprintf("SELECT TOP 3 c.id FROM c %s ORDER BY VectorDistance(c.v, %s%s)", where, qb, bf)
				res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "c", Query: text, SinglePartitionKeyRange: true, MaxItems: 100})
				if err != nil {
					t.Fatalf("%s: %v", text, err)
				}
				return rowIDs(t, res.Items), res.Metrics
			}
			ids, m := run(`WHERE c.tenant = "x"`, false)
			if want, _ := run(`WHERE c.tenant = "x"`, true); !slices.Equal(ids, want) {
				t.Fatalf("pinned to tenant x: %v, exact %v", ids, want)
			}
			if e.search.kept() && sharded && m.RetrievedDocumentCount > 5 {
				t.Fatalf("pinned to tenant x the search read %d items: more than the tenant's 5", m.RetrievedDocumentCount)
			}
			if e.search.kept() && !sharded && m.RetrievedDocumentCount <= 5 {
				t.Fatalf("one index for the container read only %d items: the test shows nothing", m.RetrievedDocumentCount)
			}
			// Items move between tenants, and go.
			for i := range 40 {
				switch i % 4 {
				case 0:
					put(fmt.Sprint("y", i), "x", near(-1))
				case 1:
					put(fmt.Sprint("y", i), "w", near(1))
				case 2:
					if _, err := e.DeleteItem(ctx, req(fmt.Sprint("y", i), fmt.Sprint("y", i), "")); err != nil {
						t.Fatal(err)
					}
				}
			}
			put("x1", "z", near(1))
			for _, where := range []string{`WHERE c.tenant = "x"`, `WHERE c.tenant = "z"`, `WHERE c.tenant IN ("w", "x")`, `WHERE c.tenant = "none"`, ``} {
				ids, _ := run(where, false)
				if want, _ := run(where, true); !slices.Equal(ids, want) {
					t.Fatalf("%s: %v, exact %v", where, ids, want)
				}
			}
			if st, err := e.search.of(c); err != nil {
				t.Fatal(err)
			} else if st != nil {
				// 205 items, 10 of them deleted.
				if got := st.Vectors[0].Len(); got != 195 {
					t.Fatalf("the vector index holds %d items, the container 195", got)
				}
			}
		})
	}
}

// TestShardedVectorIndexFollowsConcurrentMoves: writers in partitions of
// their own move items between tenants, replace and delete them at once;
// afterwards, and in an engine opened again on the store, every tenant's
// TOP 10 from its shard is the exact one, and the shards hold every item
// with a vector once.
func TestShardedVectorIndexFollowsConcurrentMoves(t *testing.T) {
	ctx := t.Context()
	store := newTestStore(t)
	e, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateContainer(ctx, "db", shardedSearchBody("diskANN", true), nil); err != nil {
		t.Fatal(err)
	}
	tenants := []string{"a", "b", "c"}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			pk := fmt.Sprint("p", w)
			for n := range 120 {
				id := fmt.Sprint("w", w, "-", r.IntN(15))
				if n%6 == 5 {
					if _, err := e.DeleteItem(ctx, req(id, pk, "")); err != nil && statusOf(err) != 404 {
						t.Error(err)
						return
					}
					continue
				}
				vb, _ := json.Marshal(randomVector(r))
				body := fmt.Sprintf(`{"id":%q,"pk":%q,"tenant":%q,"v":%s}`, id, pk, tenants[r.IntN(len(tenants))], vb)
				if _, err := e.UpsertItem(ctx, req("", pk, body)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	check := func(e *Engine) {
		t.Helper()
		c, err := e.Container(ctx, "db", "c")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.search.of(c); err != nil { // built, however long it takes
			t.Fatal(err)
		}
		q, _ := json.Marshal(randomVector(rand.New(rand.NewPCG(1, 2))))
		total := 0
		for _, tenant := range tenants {
			text := fmt.Sprintf(`SELECT TOP 10 c.id FROM c WHERE c.tenant = %q ORDER BY VectorDistance(c.v, %s%%s)`, tenant, q)
			var got [2][]string
			for i, bf := range []string{"", ", true"} {
				res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "c", Query: fmt.Sprintf(text, bf), SinglePartitionKeyRange: true, MaxItems: 100})
				if err != nil {
					t.Fatal(err)
				}
				got[i] = rowIDs(t, res.Items)
			}
			if !slices.Equal(got[0], got[1]) {
				t.Fatalf("tenant %s: %v from its shard, %v exact", tenant, got[0], got[1])
			}
			res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "c", Query: fmt.Sprintf(`SELECT VALUE COUNT(1) FROM c WHERE c.tenant = %q`, tenant), SinglePartitionKeyRange: true})
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := json.Unmarshal(res.Items[0], &n); err != nil {
				t.Fatal(err)
			}
			total += n
		}
		// On a shared store the gateway's indexes catch up with a query.
		if st, err := e.search.of(c); err != nil {
			t.Fatal(err)
		} else if st != nil && st.Vectors[0].Len() != total {
			t.Fatalf("the shards hold %d items, the container %d", st.Vectors[0].Len(), total)
		}
	}
	check(e)
	e.Close()
	again, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	check(again)
}
